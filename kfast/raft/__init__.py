"""KRaft: the Raft protocol that replicates ``__cluster_metadata-0``.

The layer sits between the controller (which appends metadata records and
replays committed ones) and storage (which keeps the log on disk). It is
built the way etcd's raft package and Kafka's KafkaRaftClient are: the
algorithm is a pure state machine with no sockets, clocks or threads.

    RaftClient.handle(now_ms, message)  -> messages to send
    RaftClient.poll(now_ms)             -> messages to send (timers)
    RaftClient.propose(now_ms, records) -> the offset the records will have
    RaftClient.begin_flush()            -> the offset to fsync the log to
    RaftClient.on_flushed(now_ms, offset) -> messages to send

A driver feeds it and runs the log's fsyncs: the deterministic simulator
in the tests (simulated clock, network and disk), and the asyncio driver
that carries the same messages as Kafka's RPCs (Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch, FetchSnapshot, and AddRaftVoter / RemoveRaftVoter /
UpdateRaftVoter) over the controller listener and fsyncs on its own thread.

Modules, in Kafka's names:
    messages       the RPC bodies the core exchanges (one per Kafka RPC)
    log            ReplicatedLog: batches, leader epochs, snapshots; an
                   in-memory implementation for the simulator
    file_log       the ReplicatedLog of __cluster_metadata-0 on disk, in
                   Kafka's format (KafkaMetadataLog)
    control_records  LeaderChange, SnapshotHeader/Footer, KRaftVersion and
                   Voters control records
    voter_set      VoterSet (replica keys, endpoints; KIP-853 dynamic quorums)
    kraft_control  KRaftControlRecordStateMachine: kraft.version and the voter
                   set in force at each offset of the log
    snapshots      snapshot files: names, writer, reader
    election_state ElectionState and the quorum-state file (Kafka's format)
    quorum_state   one class per role (Unattached, Prospective, Candidate,
                   Leader, Follower, Resigned) and the transitions between them
    request_manager  at most one request in flight per destination, timeouts
                   and retry backoff
    raft_client    the protocol: handlers for each request and response,
                   timers, the high watermark, commit delivery to a listener
"""
