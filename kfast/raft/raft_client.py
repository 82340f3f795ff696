"""RaftClient: KRaft's protocol as a pure state machine (Kafka's KafkaRaftClient).

Nothing here does I/O, reads a clock or sleeps. The driver passes the time
into every call and sends the messages each call returns:

    client = RaftClient(node_id=1, voters=(1, 2, 3), log=..., store=...,
                        config=QuorumConfig(), rng=random.Random(seed),
                        listener=controller)
    client.start(now_ms)
    out = client.poll(now_ms)              # timers: elections, fetches, retries
    out = client.handle(now_ms, message)   # a RaftRequest or RaftResponse arrived
    offset = client.propose(now_ms, records)    # leader only; then poll() to send
    client.on_send_failed(now_ms, request)  # the driver could not deliver it
    offset = client.begin_flush()           # the driver fsyncs the log up to it...
    out = client.on_flushed(now_ms, offset)  # ...off the loop, then says so

``client.next_poll_ms()`` is when ``poll`` next has work. The listener gets
``handle_commit(batch)`` for each committed batch in order,
``handle_load_snapshot(snapshot_id, data)`` when its state must be replaced
by a snapshot, and ``handle_leader_change(leader_id, epoch)``.

The rules that keep the log safe (each checked by the simulation tests):
- a voter grants one vote per epoch, only to a replica whose log is at
  least as up to date as its own (last epoch, then end offset);
- the leader commits (high watermark) an offset only once a majority of
  voters has it and a batch of its own epoch is among them;
- a follower appends only after the leader confirmed that their logs agree
  up to the fetch offset (fetch offset + last fetched epoch), and on a
  divergence truncates to the last offset they agree on - never below its
  high watermark.

The log's fsync is the driver's, off the event loop: appends leave the
log unflushed, ``begin_flush()`` names the offset to make durable (one
flush at a time, each covering what was appended before it began) and
``on_flushed`` reports it done. (Kafka's Raft thread counts the leader's
new end offset and then fsyncs, in one step of its poll, before any commit
is handed on -- KafkaRaftClient.flushLeaderLog; with the fsync on another
thread, only what it has flushed may count.) What is unflushed counts for
nothing a crash could take back:
- the leader's own end offset toward the high watermark is its flushed
  one, so a record is committed only once durable on a majority of
  voters, the leader among them when it counts (a quorum of one);
- a replica sends no Fetch (its fetch offset is the leader's proof that it
  holds the records below) until what it appended is flushed; and as a
  response to a fetch is the only thing that truncates or replaces the
  log, no flush is ever running while it does.
The quorum-state file (votes, epochs) is written synchronously, as before.

Dynamic quorums (KIP-853): the voter set is the one the log holds
(``self.kraft``), in force once appended. The leader changes it one voter
at a time (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter), only once a
batch of its own epoch and the previous change are committed, and adds a
voter only once it has caught up with the log as an observer. A leader that
removes itself leads until the change commits, then resigns.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Protocol

from kfast.protocol.constants import ZERO_UUID
from kfast.protocol.errors import (
    CorruptRecordException,
    DuplicateVoterException,
    FencedLeaderEpochException,
    InvalidRequestException,
    InvalidVoterKeyException,
    NotLeaderOrFollowerException,
    TimeoutException,
    UnknownLeaderEpochException,
    UnsupportedVersionException,
    VoterNotFoundException,
)
from kfast.raft.control_records import KRaftControlRecord
from kfast.raft.election_state import QuorumStateStore
from kfast.raft.kraft_control import KRaftControlRecordStateMachine
from kfast.raft.log import (
    DIVERGING,
    SNAPSHOT,
    Batch,
    LeaderChangeMessage,
    OffsetAndEpoch,
    ReplicatedLog,
    truncation_offset,
    validate_offset_and_epoch,
)
from kfast.raft.messages import (
    AddRaftVoterRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    RaftRequest,
    RaftResponse,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from kfast.raft.quorum_state import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    QuorumConfig,
    QuorumState,
    ResignedState,
    UnattachedState,
    VoterChange,
)
from kfast.raft.request_manager import RequestManager
from kfast.raft.voter_set import (
    KRAFT_VERSION_0,
    SUPPORTED_KRAFT_VERSIONS,
    Endpoint,
    KRaftVersionRecord,
    VoterNode,
    VoterSet,
    VotersRecord,
)

NONE = 0
FENCED_LEADER_EPOCH = FencedLeaderEpochException.code
UNKNOWN_LEADER_EPOCH = UnknownLeaderEpochException.code
NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollowerException.code
INVALID_REQUEST = InvalidRequestException.code
INVALID_VOTER_KEY = InvalidVoterKeyException.code
REQUEST_TIMED_OUT = TimeoutException.code
UNSUPPORTED_VERSION = UnsupportedVersionException.code
DUPLICATE_VOTER = DuplicateVoterException.code
VOTER_NOT_FOUND = VoterNotFoundException.code
NEVER_MS = 2**62
# A replica that fetched within this long and was caught up at some point
# may join the voters (Kafka's LeaderState.isReplicaCaughtUp: an hour).
CAUGHT_UP_FETCH_WINDOW_MS = 3600 * 1000


class NotLeaderException(Exception):
    """propose() on a replica that is not the leader."""


class RaftListener(Protocol):
    def handle_commit(self, batch: Batch) -> None: ...

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...

    def handle_leader_change(self, leader_id: int, epoch: int) -> None: ...


class RaftClient:
    """``voters``: the static voter set (controller.quorum.voters, ids or a
    VoterSet), in force until the log holds one; empty for a dynamic
    quorum. ``directory_id`` and ``endpoints``: this replica's key and
    controller listeners, as a voter set names them. ``bootstrap_ids``:
    destinations (the driver's controller.quorum.bootstrap.servers) an
    observer asks for the leader when it knows no voter to ask."""

    def __init__(
        self,
        node_id: int,
        voters,
        log: ReplicatedLog,
        store: QuorumStateStore,
        config: QuorumConfig | None = None,
        rng: random.Random | None = None,
        listener: RaftListener | None = None,
        directory_id: uuid.UUID = ZERO_UUID,
        endpoints: Sequence[Endpoint] = (),
        bootstrap_ids: Sequence[int] = (),
        followers_always_flush: bool = True,
    ):
        self.node_id = node_id
        # False on a broker-only node (Kafka's RaftManager passes
        # process.roles contains controller): it never becomes a voter, so
        # what it appends as an observer need not be durable before it
        # fetches on -- no leader counts it. A controller's observer may be
        # made a voter (KIP-853) and flushes as voters do.
        self.followers_always_flush = followers_always_flush
        self.directory_id = directory_id
        self.endpoints = tuple(endpoints)
        self.bootstrap_ids = tuple(bootstrap_ids)
        self.log = log
        self.config = config or QuorumConfig()
        static = voters if isinstance(voters, VoterSet) else VoterSet.static(tuple(voters))
        self.kraft = KRaftControlRecordStateMachine(static, log)
        self.quorum = QuorumState(
            node_id, self.kraft, store, self.config, rng or random.Random(), directory_id
        )
        self.requests = RequestManager(
            self.config.request_timeout_ms,
            self.config.retry_backoff_ms,
            self.config.election_backoff_max_ms,
        )
        self.listener = listener
        self._outbox: list[RaftMessage] = []
        # Fetches the leader holds until new records or the high watermark
        # move, or max_wait passes: replica id -> (request, deadline).
        self._parked_fetches: dict[int, tuple[RaftRequest, int]] = {}
        self._high_watermark = -1
        self._listener_offset = 0  # next offset the listener needs
        self._delivery_pending = False  # the last delivery stopped at its budget
        self._listener_leader: tuple[int, int] | None = None
        self._bootstrap_index = 0
        self._lost_elections = 0
        # The log is durable below _flushed_offset; _flush_target is the
        # offset the driver's running flush began at (None: none running).
        self._flushed_offset = 0
        self._flush_target: int | None = None

    # -- public API ----------------------------------------------------------------------
    def start(self, now_ms: int) -> None:
        # What a restart finds in the log counts as durable only once
        # fsynced (a crash may have left it in the page cache only).
        self.log.flush()
        self._flushed_offset = self.log.end_offset
        self.kraft.update_state()
        self.quorum.initialize(now_ms, self.log.end_offset, self.log.last_fetched_epoch)
        if not self.quorum.is_voter and not isinstance(
            self.quorum.state, (FollowerState, ResignedState)
        ):
            self.quorum.state = UnattachedState(self.quorum.epoch, -1, now_ms)
        if (
            self.quorum.voters == (self.node_id,)
            and self.quorum.is_voter
            and not isinstance(self.quorum.state, LeaderState)
        ):
            # A quorum of one elects itself at once: its own vote is the
            # majority, so the candidate's quorum-state write would be
            # followed at once by the leader's, which records the same vote.
            self._leave_role()
            candidate = self.quorum.transition_to_candidate(now_ms, persist=False)
            self._maybe_win_election(now_ms, candidate)

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, LeaderState)

    @property
    def state_name(self) -> str:
        return self.quorum.state.name

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark: what it knows to be committed. It
        outlives role changes (a new leader may not yet know one) and never
        moves back while the replica runs."""
        self._remember_high_watermark()
        return self._high_watermark

    def _remember_high_watermark(self) -> None:
        role_high_watermark = getattr(self.quorum.state, "high_watermark", -1)
        if role_high_watermark > self._high_watermark:
            self._high_watermark = role_high_watermark

    def leader_replica_states(self, now_ms: int | None = None) -> dict:
        """On the leader, {node id: ReplicaState} for voters and observers
        (DescribeQuorum); {} elsewhere. Given the time, observers that
        stopped fetching OBSERVER_SESSION_TIMEOUT_MS ago are dropped first."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return {}
        if now_ms is not None:
            state.clear_inactive_observers(now_ms, self.quorum.voter_set)
        return dict(state.replicas)

    def poll(self, now_ms: int) -> list[RaftMessage]:
        self._poll_state(now_ms)
        return self._drain()

    def _poll_state(self, now_ms: int) -> None:
        self.requests.expire(now_ms)
        state = self.quorum.state
        if isinstance(state, LeaderState):
            self._poll_leader(now_ms, state)
        elif isinstance(state, CandidateState):
            self._poll_candidate(now_ms, state)
        elif isinstance(state, ProspectiveState):
            self._poll_prospective(now_ms, state)
        elif isinstance(state, FollowerState):
            self._poll_follower(now_ms, state)
        elif isinstance(state, ResignedState):
            self._poll_resigned(now_ms, state)
        else:
            self._poll_unattached(now_ms, state)

    def next_poll_ms(self) -> int:
        """The earliest time ``poll`` has something to do."""
        state = self.quorum.state
        deadlines: list[int | None] = [self.requests.next_deadline()]
        if self.quorum.is_voter or not isinstance(state, UnattachedState):
            for attr in (
                "election_deadline_ms",
                "fetch_deadline_ms",
                "check_quorum_deadline_ms",
                "begin_epoch_resend_ms",
            ):
                deadlines.append(getattr(state, attr, None))
        elif not self._awaiting_flush() and not any(
            self.requests.is_in_flight(v) for v in self._leader_finders()
        ):
            # An observer looking for the leader asks the first voter it may.
            ready = (self.requests.ready_ms(v) for v in self._leader_finders())
            deadlines.append(min((r for r in ready if r is not None), default=None))
        deadlines += [deadline for _, deadline in self._parked_fetches.values()]
        if self._delivery_pending:
            deadlines.append(0)  # committed records still to hand over
        known = [d for d in deadlines if d is not None]
        return min(known) if known else NEVER_MS

    def handle(self, now_ms: int, message: RaftMessage) -> list[RaftMessage]:
        if isinstance(message, RaftRequest):
            self._handle_request(now_ms, message)
        else:
            self._handle_response(now_ms, message)
        # What the message changed may have work to send at once (votes
        # after a won pre-vote, the next fetch after a fetch answer).
        self._poll_state(now_ms)
        return self._drain()

    def on_send_failed(self, now_ms: int, request: RaftRequest) -> None:
        """The driver could not deliver ``request``: no connection to its
        destination (refused, reset)."""
        self._on_unreachable(now_ms, request.destination, request.correlation_id)

    def on_disconnect(self, now_ms: int, node_id: int) -> None:
        """The connection to ``node_id`` closed: a request in flight to it
        will get no answer."""
        self._on_unreachable(now_ms, node_id, None)

    def _on_unreachable(self, now_ms: int, node_id: int, correlation_id: int | None) -> None:
        self.requests.on_failure(node_id, now_ms, correlation_id)
        state = self.quorum.state
        if (
            isinstance(state, FollowerState)
            and node_id == state.leader_id
            and self.quorum.is_voter
            and state.has_fetched
        ):
            # The leader's process is gone (a live one would accept the
            # connection). Stand for election now rather than after the
            # fetch timeout: pre-vote makes this safe, since voters that
            # still hear from a leader refuse. The jitter keeps the other
            # followers, which saw the same thing, from splitting the vote.
            state.has_fetched = False
            jitter = self.quorum.rng.randrange(max(1, self.config.election_backoff_max_ms // 4))
            state.fetch_deadline_ms = min(
                state.fetch_deadline_ms, now_ms + self.config.retry_backoff_ms + jitter
            )

    def propose(self, now_ms: int, records: Sequence) -> int:
        """Append ``records`` as one batch in the leader's epoch; returns the
        offset of the last record. Committed once the high watermark passes it."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderException(f"node {self.node_id} is not the leader")
        batch = self.log.append_as_leader(records, state.epoch)
        self.kraft.observe(batch)
        self._on_leader_append(now_ms, state)
        return batch.next_offset - 1

    # -- the log's fsync ---------------------------------------------------------------
    @property
    def flushed_offset(self) -> int:
        """The log is durable below this offset."""
        return self._flushed_offset

    def begin_flush(self) -> int | None:
        """The offset the driver is to make the log durable up to now
        (``log.flush(offset)``, off the loop), then report with
        ``on_flushed``; None if nothing is unflushed or a flush is running."""
        if (
            self._flush_target is not None
            or self.log.end_offset <= self._flushed_offset
            or not self._flushes_appends()
        ):
            return None
        self._flush_target = self.log.end_offset
        return self._flush_target

    def on_flushed(self, now_ms: int, offset: int) -> list[RaftMessage]:
        """The flush ``begin_flush`` returned ``offset`` for is done: the
        leader may count the records toward the high watermark, a follower
        may fetch past them."""
        if offset != self._flush_target:
            raise ValueError(f"flush to {offset} was not begun ({self._flush_target} is)")
        self._flush_target = None
        self._flushed_offset = max(self._flushed_offset, min(offset, self.log.end_offset))
        state = self.quorum.state
        if isinstance(state, LeaderState) and self._update_local_state(now_ms, state):
            self._complete_parked_fetches(now_ms)
        self._poll_state(now_ms)
        return self._drain()

    def _awaiting_flush(self) -> bool:
        """Records are appended but not yet durable: no Fetch may say so."""
        return self.log.end_offset > self._flushed_offset and self._flushes_appends()

    def _flushes_appends(self) -> bool:
        """Whether this replica's appends are fsynced before it fetches on
        (Kafka's appendAsFollower: voters, and followersAlwaysFlush)."""
        return self.quorum.is_voter or self.followers_always_flush

    def _log_replaced(self) -> None:
        """The log was truncated or replaced by a snapshot: what was durable
        above its new end is gone. Never while a flush runs: only a fetch
        answer does this, and no fetch goes out before the flush is done."""
        if self._flush_target is not None:
            raise AssertionError(
                f"node {self.node_id}: log replaced while a flush to {self._flush_target} runs"
            )
        self._flushed_offset = min(self._flushed_offset, self.log.end_offset)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Record the state machine's snapshot at a committed offset and drop
        the log records it covers."""
        if snapshot_id.offset > max(self.high_watermark, 0):
            raise ValueError(f"snapshot {snapshot_id} is above the high watermark")
        # The snapshot carries the voter set in force at its end (KIP-853),
        # so a replica that starts from it knows the quorum.
        self.log.create_snapshot(
            snapshot_id, data, self.kraft.kraft_records_at(snapshot_id.offset - 1)
        )
        self.log.delete_before_snapshot(snapshot_id)
        self.kraft.truncate_old_entries(self.log.start_offset)
        # What a snapshot covers is durable in it (a follower may snapshot
        # records it has not yet flushed: they are committed).
        self._flushed_offset = max(self._flushed_offset, self.log.start_offset)

    def resign(self, now_ms: int) -> None:
        """A leader steps down (a controller shutting down): the voters hear
        EndQuorumEpoch and elect a successor without waiting for timeouts."""
        state = self.quorum.state
        if isinstance(state, LeaderState):
            self._resign(now_ms, state)

    # -- sending -------------------------------------------------------------------------
    def _drain(self) -> list[RaftMessage]:
        self._deliver_to_listener()
        out, self._outbox = self._outbox, []
        return out

    def _send(self, now_ms: int, destination: int, body) -> None:
        correlation_id = self.requests.on_send(destination, now_ms)
        self._outbox.append(RaftRequest(correlation_id, self.node_id, destination, body))

    def _respond(self, request: RaftRequest, body) -> None:
        self._outbox.append(
            RaftResponse(request.correlation_id, self.node_id, request.source, body)
        )

    def _other_voters(self) -> list[int]:
        return [v for v in self.quorum.voters if v != self.node_id]

    def _leader_finders(self) -> tuple[int, ...]:
        """Whom an observer asks for the leader: its bootstrap servers, then
        the voters its log names (so one whose bootstrap servers were all
        removed from the quorum still finds the leader), never itself."""
        finders = dict.fromkeys(self.bootstrap_ids + self.quorum.voters)
        finders.pop(self.node_id, None)
        return tuple(finders)

    def voter_directory(self, voter_id: int) -> uuid.UUID:
        node = self.quorum.voter_set.get(voter_id)
        return node.directory_id if node is not None else ZERO_UUID

    # -- role changes ------------------------------------------------------------------------
    def _become_unattached(self, now_ms: int, epoch: int, voted_id: int = -1) -> UnattachedState:
        self._leave_role()
        state = self.quorum.transition_to_unattached(now_ms, epoch, voted_id)
        if not self.quorum.is_voter:
            state.election_deadline_ms = now_ms
        return state

    def _become_follower(self, now_ms: int, epoch: int, leader_id: int) -> FollowerState:
        self._leave_role()
        state = self.quorum.transition_to_follower(now_ms, epoch, leader_id)
        state.high_watermark = self._high_watermark
        return state

    def _become_prospective(self, now_ms: int) -> None:
        self._leave_role()
        self._maybe_win_pre_vote(now_ms, self.quorum.transition_to_prospective(now_ms))

    def _become_candidate(self, now_ms: int) -> None:
        self._leave_role()
        self._maybe_win_election(now_ms, self.quorum.transition_to_candidate(now_ms))

    def _leave_role(self) -> None:
        self._remember_high_watermark()
        if self._parked_fetches:
            self._complete_parked_fetches(now_ms=None)
        state = self.quorum.state
        if isinstance(state, LeaderState) and state.voter_change is not None:
            self._finish_voter_change(
                state,
                NOT_LEADER_OR_FOLLOWER,
                "The leader changed before the voter change committed",
            )
        self.requests.reset()

    def _votes(self, state) -> int:
        """Grants from the voter set in force (a candidate that removed
        itself does not count its own)."""
        return len(state.granted & set(self.quorum.voters))

    def _maybe_win_pre_vote(self, now_ms: int, state: ProspectiveState) -> None:
        if self._votes(state) >= self.quorum.majority:
            self._become_candidate(now_ms)
        else:
            self._maybe_lost(now_ms, state)

    def _maybe_lost(self, now_ms: int, state) -> None:
        """Enough voters refused that this election cannot be won: try again
        after a random, growing backoff instead of the whole election
        timeout (Kafka's binary exponential election backoff)."""
        if len(state.rejected) <= len(self.quorum.voters) - self.quorum.majority:
            return
        self._lost_elections += 1
        ceiling = min(
            self.config.election_backoff_max_ms,
            self.config.retry_backoff_ms << min(self._lost_elections, 20),
        )
        state.election_deadline_ms = min(
            state.election_deadline_ms, now_ms + self.quorum.rng.randrange(max(1, ceiling))
        )

    def _maybe_win_election(self, now_ms: int, state: CandidateState) -> None:
        if self._votes(state) < self.quorum.majority:
            self._maybe_lost(now_ms, state)
            return
        self._lost_elections = 0
        self._leave_role()
        leader = self.quorum.transition_to_leader(now_ms, self.log.end_offset)
        # The leader's first batch in its epoch; once it commits, every
        # record before it is committed too.
        batch = self.log.append_as_leader(
            self._start_of_epoch_records(), leader.epoch, is_control=True
        )
        self.kraft.observe(batch)
        self._on_leader_append(now_ms, leader)
        for voter in self._other_voters():
            self._send(
                now_ms,
                voter,
                BeginQuorumEpochRequest(self.node_id, leader.epoch, self.voter_directory(voter)),
            )

    def _start_of_epoch_records(self) -> tuple:
        """LeaderChangeMessage; and at kraft.version 1, KRaftVersionRecord and
        VotersRecord when the voter set is only in the bootstrap checkpoint
        (not yet in the log) or lists this leader with other endpoints
        (Kafka's LeaderState.appendStartOfEpochControlRecords)."""
        records: list[KRaftControlRecord] = [LeaderChangeMessage(self.node_id, self.quorum.voters)]
        kraft_version = self.kraft.last_kraft_version()
        if kraft_version == KRAFT_VERSION_0:
            return tuple(records)
        voters = self.quorum.voter_set
        own = voters.get(self.node_id)
        updated = voters
        if self.endpoints and own is not None and own.endpoints != self.endpoints:
            updated = voters.update_voter(own._replace(endpoints=self.endpoints)) or voters
        if self.kraft.last_voter_set_offset() in (None, -1) or updated != voters:
            records += [KRaftVersionRecord(kraft_version), VotersRecord(updated)]
        return tuple(records)

    def _resign(self, now_ms: int, state: LeaderState) -> None:
        others = self._other_voters()
        successors = tuple(sorted(others, key=lambda v: -state.replica(v).end_offset))
        self._leave_role()
        self.quorum.transition_to_resigned(now_ms, successors)

    def _observe_epoch(self, now_ms: int, epoch: int, leader_id: int) -> None:
        """Move to a newer epoch, or learn the current epoch's leader."""
        state = self.quorum.state
        if epoch > state.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(now_ms, epoch, leader_id)
            else:
                self._become_unattached(now_ms, epoch)
        elif epoch == state.epoch and leader_id >= 0 and leader_id != self.node_id:
            if state.leader_id == leader_id:
                return
            if (
                isinstance(state, (UnattachedState, ProspectiveState, CandidateState))
                and state.leader_id < 0
            ):
                self._become_follower(now_ms, epoch, leader_id)
            else:
                raise AssertionError(
                    f"node {self.node_id}: two leaders in epoch {epoch}: "
                    f"{state.leader_id} and {leader_id}"
                )

    # -- polling per role ----------------------------------------------------------------------
    def _poll_unattached(self, now_ms: int, state: UnattachedState) -> None:
        if self.quorum.is_voter:
            if now_ms >= state.election_deadline_ms:
                self._become_prospective(now_ms)
                self._poll_prospective(now_ms, self.quorum.state)
            return
        # An observer finds the leader by fetching from any voter (or
        # bootstrap server): one that is not the leader answers with who is.
        voters = self._leader_finders()
        if self._awaiting_flush():
            return  # its next fetch once the flush is done (on_flushed polls)
        if voters and not any(self.requests.is_in_flight(v) for v in voters):
            for _ in range(len(voters)):
                voter = voters[self._bootstrap_index % len(voters)]
                self._bootstrap_index += 1
                if self.requests.is_ready(voter, now_ms):
                    self._send(now_ms, voter, self._fetch_request(state.epoch))
                    break

    def _poll_prospective(self, now_ms: int, state) -> None:
        if not isinstance(state, ProspectiveState):
            return
        if now_ms >= state.election_deadline_ms:
            if state.leader_id >= 0:
                follower = self._become_follower(now_ms, state.epoch, state.leader_id)
                self._poll_follower(now_ms, follower)
                return
            self._become_prospective(now_ms)
            state = self.quorum.state
            if not isinstance(state, ProspectiveState):
                return
        self._request_votes(now_ms, state, pre_vote=True)

    def _poll_candidate(self, now_ms: int, state: CandidateState) -> None:
        if now_ms >= state.election_deadline_ms:
            self._become_prospective(now_ms)
            self._poll_prospective(now_ms, self.quorum.state)
            return
        self._request_votes(now_ms, state, pre_vote=False)

    def _request_votes(self, now_ms: int, state, pre_vote: bool) -> None:
        for voter in self._other_voters():
            if (
                voter not in state.granted
                and voter not in state.rejected
                and self.requests.is_ready(voter, now_ms)
            ):
                self._send(
                    now_ms,
                    voter,
                    VoteRequest(
                        state.epoch,
                        self.node_id,
                        self.log.last_fetched_epoch,
                        self.log.end_offset,
                        pre_vote,
                        self.directory_id,
                        self.voter_directory(voter),
                    ),
                )

    def _poll_leader(self, now_ms: int, state: LeaderState) -> None:
        change = state.voter_change
        if change is not None and state.high_watermark > change.last_offset >= 0:
            self._finish_voter_change(state, NONE, None)
        elif change is not None and now_ms >= change.deadline_ms:
            self._finish_voter_change(
                state, REQUEST_TIMED_OUT, "Timed out waiting for the voter change to commit"
            )
        voters_offset = self.kraft.last_voter_set_offset()
        if (
            not self.quorum.is_voter
            and voters_offset is not None
            and voters_offset < state.high_watermark
        ):
            # This leader is not in the committed voter set (it removed
            # itself): the voters elect a leader among themselves.
            self._resign(now_ms, state)
            return
        if now_ms >= state.update_check_quorum_deadline(
            self.quorum.check_quorum_timeout(), self.quorum.majority
        ):
            # No majority has fetched within the timeout: this leader may be
            # cut off, and a new one elected on the other side.
            self._resign(now_ms, state)
            return
        if now_ms >= state.begin_epoch_resend_ms:
            # Without this heartbeat a leader that removed itself would never
            # learn that the last voter, having the change but a lost fetch,
            # elected itself: that voter sends nothing to non-voters, and the
            # old leader would serve its observers a dead epoch forever.
            state.begin_epoch_acked.clear()
            state.begin_epoch_resend_ms = now_ms + self.config.fetch_timeout_ms // 2
        for voter in self._other_voters():
            if voter not in state.begin_epoch_acked and self.requests.is_ready(voter, now_ms):
                self._send(
                    now_ms,
                    voter,
                    BeginQuorumEpochRequest(self.node_id, state.epoch, self.voter_directory(voter)),
                )
        expired = [
            replica for replica, (_, deadline) in self._parked_fetches.items() if now_ms >= deadline
        ]
        for replica in expired:
            request, _ = self._parked_fetches.pop(replica)
            self._answer_fetch(request, state)

    def _poll_follower(self, now_ms: int, state: FollowerState) -> None:
        if now_ms >= state.fetch_deadline_ms:
            if self.quorum.is_voter:
                self._become_prospective(now_ms)
                self._poll_prospective(now_ms, self.quorum.state)
            else:
                self._poll_unattached(now_ms, self._become_unattached(now_ms, state.epoch))
            return
        if not self.requests.is_ready(state.leader_id, now_ms) or self._awaiting_flush():
            # The next fetch waits for the flush of what this replica
            # appended: its fetch offset tells the leader those records are
            # durable here (on_flushed polls again).
            return
        update = self._voter_update(state)
        if update is not None:
            # In place of one fetch: one request at a time per destination.
            self._send(now_ms, state.leader_id, update)
            return
        if state.snapshot_id is not None:
            self._send(
                now_ms,
                state.leader_id,
                FetchSnapshotRequest(
                    self.node_id,
                    state.epoch,
                    state.snapshot_id,
                    len(state.snapshot_data),
                    self.config.fetch_snapshot_max_bytes,
                    self.directory_id,
                ),
            )
        else:
            self._send(now_ms, state.leader_id, self._fetch_request(state.epoch))

    def _voter_update(self, state: FollowerState) -> UpdateRaftVoterRequest | None:
        """UpdateRaftVoter for the leader when the voter set lists this voter
        with other endpoints or kraft.version range than it has (it moved,
        or the set came from a bootstrap checkpoint); once per epoch, after
        the leader has answered a fetch (Kafka's shouldSendUpdateVoteRequest)."""
        if (
            state.voter_updated
            or not state.has_fetched
            or not self.endpoints
            or state.snapshot_id is not None
            or self.kraft.last_kraft_version() == KRAFT_VERSION_0
        ):
            return None
        own = self.quorum.voter_set.get(self.node_id)
        if own is None or not own.is_voter(self.node_id, self.directory_id):
            return None
        wanted = own._replace(
            endpoints=self.endpoints,
            min_kraft_version=SUPPORTED_KRAFT_VERSIONS[0],
            max_kraft_version=SUPPORTED_KRAFT_VERSIONS[-1],
        )
        if wanted == own:
            return None
        return UpdateRaftVoterRequest(
            state.epoch,
            self.node_id,
            self.directory_id,
            self.endpoints,
            wanted.min_kraft_version,
            wanted.max_kraft_version,
        )

    def _fetch_request(self, epoch: int) -> FetchRequest:
        return FetchRequest(
            self.node_id,
            epoch,
            self.log.end_offset,
            self.log.last_fetched_epoch,
            self.config.fetch_max_wait_ms,
            self.high_watermark,
            self.directory_id,
        )

    def _removed_itself_uncommitted(self) -> bool:
        """This former leader's log ends with a voter set that removed it,
        not known to be committed. Such a leader stands for election among
        the new voters (Raft's rule for a server outside its latest
        configuration; Kafka has it become an observer instead): otherwise a
        crash before the removal commits can leave the remaining voters
        unable to elect anyone -- the last voter of two needs this replica's
        vote, and this replica's log is ahead of its own."""
        offset = self.kraft.last_voter_set_offset()
        if offset is None or offset < max(self.high_watermark, 0):
            return False
        before = self.kraft.voter_set_at(offset - 1)
        return before is not None and before.is_voter(self.node_id, self.directory_id)

    def _poll_resigned(self, now_ms: int, state: ResignedState) -> None:
        if now_ms >= state.election_deadline_ms:
            if not self.quorum.is_voter and not self._removed_itself_uncommitted():
                # A leader that removed itself: an observer from now on, in
                # a new epoch so that no fetch answer names it leader of
                # the old one (Kafka's pollResigned).
                self._leave_role()
                unattached = self.quorum.transition_to_unattached(now_ms, state.epoch + 1)
                unattached.election_deadline_ms = now_ms
                self._poll_unattached(now_ms, unattached)
                return
            self._become_prospective(now_ms)
            self._poll_prospective(now_ms, self.quorum.state)
            return
        request = EndQuorumEpochRequest(self.node_id, state.epoch, state.preferred_successors)
        for voter in self._other_voters():
            if voter not in state.end_epoch_acked and self.requests.is_ready(voter, now_ms):
                self._send(now_ms, voter, request)

    # -- requests --------------------------------------------------------------------------
    def _handle_request(self, now_ms: int, request: RaftRequest) -> None:
        body = request.body
        if isinstance(body, VoteRequest):
            self._handle_vote(now_ms, request, body)
        elif isinstance(body, BeginQuorumEpochRequest):
            self._handle_begin_quorum_epoch(now_ms, request, body)
        elif isinstance(body, EndQuorumEpochRequest):
            self._handle_end_quorum_epoch(now_ms, request, body)
        elif isinstance(body, FetchRequest):
            self._handle_fetch(now_ms, request, body)
        elif isinstance(body, FetchSnapshotRequest):
            self._handle_fetch_snapshot(request, body)
        elif isinstance(body, AddRaftVoterRequest):
            self._handle_add_voter(now_ms, request, body)
        elif isinstance(body, RemoveRaftVoterRequest):
            self._handle_remove_voter(now_ms, request, body)
        elif isinstance(body, UpdateRaftVoterRequest):
            self._handle_update_voter(now_ms, request, body)
        else:
            raise TypeError(f"unknown Raft request {type(body).__name__}")

    def _log_is_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_fetched_epoch, self.log.end_offset)

    def _is_local_key(self, directory_id: uuid.UUID) -> bool:
        """Is a request meant for this replica? (A sender that names a
        directory must name this one; Kafka's INVALID_VOTER_KEY.)"""
        return directory_id in (ZERO_UUID, self.directory_id) or self.directory_id == ZERO_UUID

    def _handle_vote(self, now_ms: int, request: RaftRequest, body: VoteRequest) -> None:
        if not self._is_local_key(body.voter_directory_id):
            self._respond(
                request,
                VoteResponse(INVALID_VOTER_KEY, self.quorum.leader_id, self.quorum.epoch, False),
            )
            return
        if body.replica_epoch < self.quorum.epoch:
            self._respond(
                request,
                VoteResponse(FENCED_LEADER_EPOCH, self.quorum.leader_id, self.quorum.epoch, False),
            )
            return
        if body.replica_epoch > self.quorum.epoch:
            # A pre-vote at a newer epoch moves this replica to that epoch
            # too: a leader there has not been elected by this vote.
            self._become_unattached(now_ms, body.replica_epoch)
        state = self.quorum.state
        up_to_date = self._log_is_up_to_date(body.last_offset_epoch, body.last_offset)
        if body.pre_vote:
            granted = (
                up_to_date
                and not isinstance(state, LeaderState)
                and not (isinstance(state, FollowerState) and state.has_fetched)
            )
        else:
            voted_id = getattr(state, "voted_id", -1)
            granted = (
                up_to_date
                and isinstance(state, (UnattachedState, ProspectiveState))
                and voted_id in (-1, body.replica_id)
            )
            if granted and voted_id == -1:
                self._leave_role()
                self.quorum.transition_to_unattached(now_ms, state.epoch, body.replica_id)
            elif granted and isinstance(state, (UnattachedState, ProspectiveState)):
                state.election_deadline_ms = now_ms + self.quorum.random_election_timeout()
        self._respond(
            request, VoteResponse(NONE, self.quorum.leader_id, self.quorum.epoch, granted)
        )

    def _handle_begin_quorum_epoch(
        self, now_ms: int, request: RaftRequest, body: BeginQuorumEpochRequest
    ) -> None:
        if not self._is_local_key(body.voter_directory_id):
            self._respond(
                request,
                BeginQuorumEpochResponse(
                    INVALID_VOTER_KEY, self.quorum.leader_id, self.quorum.epoch
                ),
            )
            return
        if body.leader_epoch < self.quorum.epoch:
            self._respond(
                request,
                BeginQuorumEpochResponse(
                    FENCED_LEADER_EPOCH, self.quorum.leader_id, self.quorum.epoch
                ),
            )
            return
        self._observe_epoch(now_ms, body.leader_epoch, body.leader_id)
        self._respond(
            request, BeginQuorumEpochResponse(NONE, self.quorum.leader_id, self.quorum.epoch)
        )

    def _handle_end_quorum_epoch(
        self, now_ms: int, request: RaftRequest, body: EndQuorumEpochRequest
    ) -> None:
        if body.leader_epoch < self.quorum.epoch:
            self._respond(
                request,
                EndQuorumEpochResponse(
                    FENCED_LEADER_EPOCH, self.quorum.leader_id, self.quorum.epoch
                ),
            )
            return
        self._observe_epoch(now_ms, body.leader_epoch, body.leader_id)
        state = self.quorum.state
        if isinstance(state, FollowerState) and state.leader_id == body.leader_id:
            # The leader has gone: stop trusting it (grant pre-votes) and
            # stand for election after a backoff that lets the most caught
            # up successor go first.
            state.has_fetched = False
            successors = body.preferred_successors
            position = (
                successors.index(self.node_id) if self.node_id in successors else len(successors)
            )
            state.fetch_deadline_ms = min(
                state.fetch_deadline_ms, now_ms + self._end_epoch_backoff(position)
            )
        self._respond(
            request, EndQuorumEpochResponse(NONE, self.quorum.leader_id, self.quorum.epoch)
        )

    def _end_epoch_backoff(self, position: int) -> int:
        """Kafka's strict exponential backoff by rank among the preferred
        successors: the first stands at once, the next after 1, 2, 4...
        retry backoffs, capped at controller.quorum.election.backoff.max.ms."""
        if position == 0:
            return 0
        return min(
            self.config.election_backoff_max_ms,
            self.config.retry_backoff_ms << min(position - 1, 20),
        )

    def _fetch_error(self, error_code: int) -> FetchResponse:
        return FetchResponse(
            error_code, self.quorum.leader_id, self.quorum.epoch, high_watermark=self.high_watermark
        )

    def _handle_fetch(self, now_ms: int, request: RaftRequest, body: FetchRequest) -> None:
        state = self.quorum.state
        if body.current_leader_epoch < state.epoch:
            self._respond(request, self._fetch_error(FENCED_LEADER_EPOCH))
            return
        if body.current_leader_epoch > state.epoch:
            self._respond(request, self._fetch_error(UNKNOWN_LEADER_EPOCH))
            return
        if not isinstance(state, LeaderState):
            self._respond(request, self._fetch_error(NOT_LEADER_OR_FOLLOWER))
            return
        if body.fetch_offset < 0 or body.last_fetched_epoch > state.epoch:
            self._respond(request, self._fetch_error(INVALID_REQUEST))
            return
        validation = validate_offset_and_epoch(self.log, body.fetch_offset, body.last_fetched_epoch)
        if validation.kind == DIVERGING:
            self._respond(
                request,
                FetchResponse(
                    NONE,
                    self.node_id,
                    state.epoch,
                    state.high_watermark,
                    self.log.start_offset,
                    diverging_epoch=validation.offset_and_epoch,
                ),
            )
            return
        if validation.kind == SNAPSHOT:
            self._respond(
                request,
                FetchResponse(
                    NONE,
                    self.node_id,
                    state.epoch,
                    state.high_watermark,
                    self.log.start_offset,
                    snapshot_id=validation.offset_and_epoch,
                ),
            )
            return
        # The fetch offset is now known to be on the leader's log: it is the
        # replica's log end offset.
        replica = state.replica(body.replica_id)
        replica.update_fetch(
            now_ms, body.fetch_offset, self.log.end_offset, body.replica_directory_id
        )
        if self.quorum.voter_set.is_voter(body.replica_id, body.replica_directory_id):
            state.begin_epoch_acked.add(body.replica_id)
            if state.update_high_watermark():
                self._complete_parked_fetches(now_ms)
        # Held only while the replica has nothing to learn: no records past
        # its end and the high watermark it reported is current.
        if (
            body.fetch_offset >= self.log.end_offset
            and body.max_wait_ms > 0
            and body.high_watermark >= state.high_watermark
        ):
            previous = self._parked_fetches.pop(body.replica_id, None)
            if previous is not None:
                self._answer_fetch(previous[0], state)
            self._parked_fetches[body.replica_id] = (request, now_ms + body.max_wait_ms)
            return
        self._answer_fetch(request, state)

    def _answer_fetch(self, request: RaftRequest, state: LeaderState) -> None:
        body = request.body
        if not isinstance(body, FetchRequest):  # only fetches are answered or parked here
            raise TypeError(f"not a Fetch: {type(body).__name__}")
        batches = self.log.read(body.fetch_offset, self.config.fetch_max_batches)
        self._respond(
            request,
            FetchResponse(
                NONE,
                self.node_id,
                state.epoch,
                state.high_watermark,
                self.log.start_offset,
                batches=batches,
            ),
        )

    def _complete_parked_fetches(self, now_ms: int | None) -> None:
        """Answer every held fetch now (new records, a new high watermark, or
        this replica is leaving the leader role)."""
        parked, self._parked_fetches = self._parked_fetches, {}
        state = self.quorum.state
        for request, _ in parked.values():
            if isinstance(state, LeaderState):
                self._answer_fetch(request, state)
            else:
                self._respond(request, self._fetch_error(NOT_LEADER_OR_FOLLOWER))

    def _on_leader_append(self, now_ms: int, state: LeaderState) -> None:
        # An appended VotersRecord is in force at once: the majority is the
        # new set's from here on.
        voter_set = self.quorum.voter_set
        state.voters = voter_set.ids
        state.voter_directories = {n.voter_id: n.directory_id for n in voter_set.nodes}
        self._update_local_state(now_ms, state)
        self._complete_parked_fetches(now_ms)  # the new records, flushed or not

    def _update_local_state(self, now_ms: int, state: LeaderState) -> bool:
        """The leader's own end offset toward the high watermark is its
        flushed one (what Kafka passes LeaderState.updateLocalState, flushed
        before its poll hands on a commit); True if the high watermark moved."""
        own = state.replica(self.node_id)
        own.end_offset = min(self._flushed_offset, self.log.end_offset)
        own.last_fetch_ms = now_ms
        own.directory_id = self.directory_id
        return state.update_high_watermark()

    def _handle_fetch_snapshot(self, request: RaftRequest, body: FetchSnapshotRequest) -> None:
        state = self.quorum.state
        if body.current_leader_epoch != state.epoch or not isinstance(state, LeaderState):
            code = (
                FENCED_LEADER_EPOCH
                if body.current_leader_epoch < state.epoch
                else (
                    UNKNOWN_LEADER_EPOCH
                    if body.current_leader_epoch > state.epoch
                    else NOT_LEADER_OR_FOLLOWER
                )
            )
            self._respond(request, FetchSnapshotResponse(code, self.quorum.leader_id, state.epoch))
            return
        data = self.log.read_snapshot(body.snapshot_id)
        if data is None:
            # The snapshot was replaced by a newer one: fetch again from the log.
            self._respond(
                request,
                FetchSnapshotResponse(
                    NOT_LEADER_OR_FOLLOWER, self.node_id, state.epoch, body.snapshot_id
                ),
            )
            return
        chunk = data[body.position : body.position + body.max_bytes]
        self._respond(
            request,
            FetchSnapshotResponse(
                NONE,
                self.node_id,
                state.epoch,
                body.snapshot_id,
                len(data),
                body.position,
                bytes(chunk),
            ),
        )

    # -- voter changes (KIP-853) ---------------------------------------------------------
    def _voter_change_leader(self, now_ms: int) -> LeaderState | tuple[int, str]:
        """The leader's state if it can start a voter change now, else why
        not: (error code, message), Kafka's checks in Kafka's order."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return NOT_LEADER_OR_FOLLOWER, f"Node {self.node_id} is not the leader"
        if state.voter_change is not None:
            return REQUEST_TIMED_OUT, (
                "Request timed out waiting for leader to handle previous voter change request"
            )
        if state.high_watermark < 0:
            return REQUEST_TIMED_OUT, (
                "Request timed out waiting for leader to establish HWM "
                "and fence previous voter changes"
            )
        kraft_version = self.kraft.last_kraft_version()
        if kraft_version == KRAFT_VERSION_0:
            return UNSUPPORTED_VERSION, (
                "Cluster doesn't support changing voters because the "
                f"kraft.version feature is {kraft_version}"
            )
        offset = self.kraft.last_voter_set_offset()
        if offset is None or offset >= state.high_watermark:
            return REQUEST_TIMED_OUT, (
                "Request timed out waiting for voters to commit the "
                f"latest voter change at {offset} with HWM "
                f"{state.high_watermark}"
            )
        return state

    def _respond_voter_change(
        self, request: RaftRequest, error_code: int, message: str | None
    ) -> None:
        self._respond(
            request,
            VoterChangeResponse(error_code, message, self.quorum.leader_id, self.quorum.epoch),
        )

    def _append_voters(self, now_ms: int, state: LeaderState, voters: VoterSet) -> int:
        batch = self.log.append_as_leader((VotersRecord(voters),), state.epoch, is_control=True)
        self.kraft.observe(batch)
        self._on_leader_append(now_ms, state)
        return batch.next_offset - 1

    def _finish_voter_change(
        self, state: LeaderState, error_code: int, message: str | None
    ) -> None:
        change, state.voter_change = state.voter_change, None
        if change is not None:
            self._respond_voter_change(change.request, error_code, message)

    def _handle_add_voter(
        self, now_ms: int, request: RaftRequest, body: AddRaftVoterRequest
    ) -> None:
        state = self._voter_change_leader(now_ms)
        if not isinstance(state, LeaderState):
            self._respond_voter_change(request, *state)
            return
        voters = self.quorum.voter_set
        if body.voter_id in voters:
            self._respond_voter_change(
                request,
                DUPLICATE_VOTER,
                (
                    f"The voter id for ReplicaKey(id={body.voter_id}) is already part of the set "
                    f"of voters {sorted(voters.ids)}."
                ),
            )
            return
        if not body.endpoints:
            self._respond_voter_change(
                request, INVALID_REQUEST, "The new voter has no listener endpoints"
            )
            return
        # The new voter must already follow the log as an observer and have
        # caught up, or the high watermark would stall behind it once it
        # counts toward the majority.
        replica = state.replicas.get(body.voter_id)
        if (
            replica is None
            or replica.directory_id != body.voter_directory_id
            or replica.last_caught_up_ms < 0
            or replica.last_fetch_ms < now_ms - CAUGHT_UP_FETCH_WINDOW_MS
        ):
            self._respond_voter_change(
                request,
                REQUEST_TIMED_OUT,
                (
                    f"Aborted add voter operation for ReplicaKey(id={body.voter_id}) since it is "
                    f"lagging behind"
                ),
            )
            return
        # kfast replicas support kraft.version 0 and 1; Kafka learns the
        # range from the new voter's ApiVersions answer.
        node = VoterNode(
            body.voter_id, body.voter_directory_id, tuple(body.endpoints), *SUPPORTED_KRAFT_VERSIONS
        )
        added = voters.add_voter(node)
        if added is None:  # refused above as DUPLICATE_VOTER
            raise AssertionError(f"voter {body.voter_id} is already in {sorted(voters.ids)}")
        last_offset = self._append_voters(now_ms, state, added)
        state.voter_change = VoterChange(request, last_offset, now_ms + body.timeout_ms)

    def _handle_remove_voter(
        self, now_ms: int, request: RaftRequest, body: RemoveRaftVoterRequest
    ) -> None:
        state = self._voter_change_leader(now_ms)
        if not isinstance(state, LeaderState):
            self._respond_voter_change(request, *state)
            return
        voters = self.quorum.voter_set
        removed = voters.remove_voter(body.voter_id, body.voter_directory_id)
        if removed is None:
            self._respond_voter_change(
                request,
                VOTER_NOT_FOUND,
                (
                    f"Cannot remove voter ReplicaKey(id={body.voter_id}, directoryId="
                    f"{body.voter_directory_id}) from the set of voters {sorted(voters.ids)}"
                ),
            )
            return
        last_offset = self._append_voters(now_ms, state, removed)
        state.voter_change = VoterChange(
            request, last_offset, now_ms + self.config.request_timeout_ms
        )

    def _handle_update_voter(
        self, now_ms: int, request: RaftRequest, body: UpdateRaftVoterRequest
    ) -> None:
        if body.current_leader_epoch != self.quorum.epoch and isinstance(
            self.quorum.state, LeaderState
        ):
            code = (
                FENCED_LEADER_EPOCH
                if body.current_leader_epoch < self.quorum.epoch
                else UNKNOWN_LEADER_EPOCH
            )
            self._respond_voter_change(request, code, None)
            return
        state = self._voter_change_leader(now_ms)
        if not isinstance(state, LeaderState):
            self._respond_voter_change(request, *state)
            return
        kraft_version = self.kraft.last_kraft_version()
        if (
            not body.min_kraft_version <= kraft_version <= body.max_kraft_version
            or not body.endpoints
        ):
            self._respond_voter_change(request, INVALID_REQUEST, None)
            return
        updated = self.quorum.voter_set.update_voter(
            VoterNode(
                body.voter_id,
                body.voter_directory_id,
                tuple(body.endpoints),
                body.min_kraft_version,
                body.max_kraft_version,
            )
        )
        if updated is None:
            self._respond_voter_change(request, VOTER_NOT_FOUND, None)
            return
        if updated != self.quorum.voter_set:
            self._append_voters(now_ms, state, updated)
        # Answered at once: nothing waits for an endpoint change to commit.
        self._respond_voter_change(request, NONE, None)

    # -- responses -------------------------------------------------------------------------
    def _handle_response(self, now_ms: int, response: RaftResponse) -> None:
        current = self.requests.on_response(response.source, response.correlation_id)
        body = response.body
        if body.leader_epoch > self.quorum.epoch or (
            body.leader_epoch == self.quorum.epoch and body.leader_id >= 0
        ):
            self._observe_epoch(now_ms, body.leader_epoch, body.leader_id)
        if not current:
            return
        state = self.quorum.state
        if isinstance(body, VoteResponse):
            if (
                isinstance(state, (ProspectiveState, CandidateState))
                and body.error_code == NONE
                and body.leader_epoch == state.epoch
            ):
                (state.granted if body.vote_granted else state.rejected).add(response.source)
                if isinstance(state, ProspectiveState):
                    self._maybe_win_pre_vote(now_ms, state)
                else:
                    self._maybe_win_election(now_ms, state)
        elif isinstance(body, BeginQuorumEpochResponse):
            if (
                isinstance(state, LeaderState)
                and body.error_code == NONE
                and body.leader_epoch == state.epoch
            ):
                state.begin_epoch_acked.add(response.source)
        elif isinstance(body, EndQuorumEpochResponse):
            if isinstance(state, ResignedState) and body.leader_epoch == state.epoch:
                state.end_epoch_acked.add(response.source)
        elif isinstance(body, FetchResponse):
            self._handle_fetch_response(now_ms, response, body, state)
        elif isinstance(body, FetchSnapshotResponse):
            self._handle_fetch_snapshot_response(now_ms, response, body, state)
        elif isinstance(body, VoterChangeResponse):
            # This voter's UpdateRaftVoter: done for the epoch, or try again
            # after a backoff.
            if (
                isinstance(state, FollowerState)
                and body.leader_epoch == state.epoch
                and body.error_code == NONE
            ):
                state.voter_updated = True
            elif body.error_code != NONE:
                self.requests.back_off(response.source, now_ms)

    def _handle_fetch_response(
        self, now_ms: int, response: RaftResponse, body: FetchResponse, state
    ) -> None:
        if (
            not isinstance(state, FollowerState)
            or response.source != state.leader_id
            or body.error_code != NONE
            or body.leader_epoch != state.epoch
        ):
            if body.error_code != NONE:
                # Not the leader (or not yet): ask again after a backoff.
                self.requests.back_off(response.source, now_ms)
            return
        state.has_fetched = True
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        if body.diverging_epoch is not None:
            offset = truncation_offset(self.log, body.diverging_epoch)
            if offset < self.high_watermark:
                raise AssertionError(
                    f"node {self.node_id}: leader {state.leader_id} asked to "
                    f"truncate to {offset}, below the high watermark "
                    f"{self.high_watermark}"
                )
            self.log.truncate_to(offset)
            self._log_replaced()
            # Voter changes above the truncation never happened here.
            self.kraft.truncate_new_entries(offset)
        elif body.snapshot_id is not None:
            state.snapshot_id = body.snapshot_id
            state.snapshot_data = bytearray()
        else:
            if body.batches:
                self.log.append_as_follower(body.batches)
                for batch in body.batches:
                    self.kraft.observe(batch)
            self._update_follower_high_watermark(state, body.high_watermark)

    def _update_follower_high_watermark(self, state: FollowerState, leader_hw: int) -> None:
        high_watermark = min(leader_hw, self.log.end_offset)
        if high_watermark > state.high_watermark:
            state.high_watermark = high_watermark

    def _handle_fetch_snapshot_response(
        self, now_ms: int, response: RaftResponse, body: FetchSnapshotResponse, state
    ) -> None:
        if (
            not isinstance(state, FollowerState)
            or state.snapshot_id is None
            or response.source != state.leader_id
        ):
            return
        if (
            body.error_code != NONE
            or body.snapshot_id != state.snapshot_id
            or body.position != len(state.snapshot_data)
        ):
            # Start over from the log: the leader may have a newer snapshot.
            state.snapshot_id = None
            state.snapshot_data = bytearray()
            return
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        state.snapshot_data += body.unaligned_records
        if len(state.snapshot_data) < body.size:
            return
        snapshot_id, data = state.snapshot_id, bytes(state.snapshot_data)
        state.snapshot_id = None
        state.snapshot_data = bytearray()
        self.log.install_snapshot(snapshot_id, data)
        self._log_replaced()
        self._flushed_offset = snapshot_id.offset  # the snapshot file is durable
        self.kraft.reset()
        state.high_watermark = max(state.high_watermark, snapshot_id.offset)

    # -- the listener ----------------------------------------------------------------------------
    def _deliver_to_listener(self) -> None:
        listener = self.listener
        if listener is None:
            return
        leader = (self.quorum.leader_id, self.quorum.epoch)
        if leader != self._listener_leader:
            self._listener_leader = leader
            listener.handle_leader_change(*leader)
        high_watermark = self.high_watermark
        if self._listener_offset < self.log.start_offset:
            # The records it needs are gone behind a snapshot (a restart, or
            # a snapshot fetched from the leader): its state starts over there.
            snapshot_id = self.log.latest_snapshot_id()
            data = None if snapshot_id is None else self.log.read_snapshot(snapshot_id)
            if snapshot_id is None or data is None:
                raise CorruptRecordException(
                    f"the log starts at {self.log.start_offset} without its snapshot"
                )
            listener.handle_load_snapshot(snapshot_id, data)
            self._listener_offset = snapshot_id.offset
        self._delivery_pending = False
        budget = self.config.max_records_per_delivery
        while self._listener_offset < high_watermark and budget > 0:
            batches = self.log.read(self._listener_offset, self.config.fetch_max_batches)
            if not batches:
                break
            for batch in batches:
                if batch.next_offset > high_watermark:
                    return
                listener.handle_commit(batch)
                self._listener_offset = batch.next_offset
                budget -= len(batch)
                if budget <= 0:
                    # The rest at the next poll, which next_poll_ms makes at once.
                    self._delivery_pending = self._listener_offset < high_watermark
                    return
