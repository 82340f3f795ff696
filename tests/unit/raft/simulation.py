"""A deterministic simulator for the Raft core (after Kafka's RaftEventSimulationTest).

Real RaftClients run on a simulated clock and network: every message is
delivered after a random delay or dropped, links can be cut (partitions),
nodes crash and restart with what they had persisted (their log and
quorum-state). The log's fsync is asynchronous, as RaftManager's I/O thread
runs it: a flush the core begins completes after a random delay (up to
``max_flush_delay_ms``), and a crash loses every append not flushed by then
(a machine losing power). Everything random comes from one seeded
generator, so a failing seed replays exactly.

After every event the invariants are checked:
- election safety: at most one leader per epoch, ever;
- committed data is never lost or changed: every replica's log below its
  high watermark, and every batch a state machine applied, matches the one
  committed sequence;
- a leader's log holds every committed batch (leader completeness);
- a replica's high watermark never moves back while it runs;
- what is committed is durable (flushed) on a majority of the voters, and
  no Fetch claims (by its fetch offset) records its sender has not flushed
  (a broker-only observer excepted: Kafka's followersAlwaysFlush);
- nothing truncates a log while a flush of it runs;
- dynamic quorums (``dynamic=True``, KIP-853): at most one voter change is
  uncommitted in any log, and a leader's high watermark moves only when a
  majority of the voter set in force holds it.

With ``dynamic=True`` the first ``voters`` nodes start from a bootstrap
checkpoint naming them (kafka-storage.sh --initial-controllers); the others
start with no voters and find the leader through them (their
controller.quorum.bootstrap.servers); ``add_voter``/``remove_voter`` send
AddRaftVoter / RemoveRaftVoter to the leader as an administrator would.

    sim = Simulation(seed=7, voters=3)        # logs=...: where nodes keep their logs
    sim.run_for(5_000)
    sim.propose("x")
"""

from __future__ import annotations

import heapq
import json
import random
import uuid
from typing import NamedTuple

from kfast.raft.election_state import MemoryQuorumStateStore
from kfast.raft.log import MemoryReplicatedLog, OffsetAndEpoch
from kfast.raft.messages import (
    AddRaftVoterRequest,
    FetchRequest,
    RaftRequest,
    RemoveRaftVoterRequest,
)
from kfast.raft.quorum_state import QuorumConfig
from kfast.raft.raft_client import NotLeaderException, RaftClient
from kfast.raft.voter_set import (
    KRAFT_VERSION_1,
    Endpoint,
    KRaftVersionRecord,
    VoterNode,
    VoterSet,
    VotersRecord,
)

ADMIN_ID = 0  # the administrator's address in the simulated network


class InvariantViolation(AssertionError):
    pass


class FlushDone(NamedTuple):
    """The simulated I/O thread finished the flush node ``node_id`` (in its
    ``incarnation``) began at ``offset``."""

    node_id: int
    incarnation: int
    offset: int


class MemoryLogs:
    """Where a node keeps its log: the default, MemoryReplicatedLog. A crash
    loses what was appended since the last flush (the log object outlives
    the node), and a snapshot is the state machine's state as JSON. Another
    implementation (a log on disk) provides the same five methods."""

    def create(self, node_id: int):
        return MemoryReplicatedLog()

    def after_crash(self, node_id: int, log):
        """The log a node restarted after a crash finds."""
        log.lose_unflushed()
        return log

    def durable_end(self, log) -> int:
        """The log is durable below this offset."""
        return max(log.flushed_offset, log.start_offset)

    def snapshot_data(self, applied: list, epoch: int) -> bytes:
        return json.dumps({"applied": applied}).encode()

    def snapshot_applied(self, data: bytes) -> list:
        return json.loads(data)["applied"]


class StateMachine:
    """The listener: applies committed records, checks them against the
    simulation's one committed sequence, and can snapshot itself."""

    def __init__(self, sim: Simulation, node_id: int):
        self.sim = sim
        self.node_id = node_id
        self.applied: list = []  # (offset, record) of data records
        self.next_offset = 0
        self.last_epoch = 0
        self.leader = (-1, 0)

    def handle_commit(self, batch) -> None:
        if batch.base_offset != self.next_offset:
            raise InvariantViolation(
                f"node {self.node_id} applied batch {batch.base_offset} "
                f"after offset {self.next_offset}"
            )
        self.sim.check_committed_batch(self.node_id, batch)
        if not batch.is_control:
            for index, record in enumerate(batch.records):
                self.applied.append((batch.base_offset + index, record))
        self.next_offset = batch.next_offset
        self.last_epoch = batch.epoch

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.applied = [tuple(x) for x in self.sim.logs.snapshot_applied(data)]
        self.next_offset = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        committed = self.sim.committed_records_below(snapshot_id.offset)
        if committed is not None and committed != self.applied:
            raise InvariantViolation(
                f"node {self.node_id}: snapshot {snapshot_id} differs from the committed records"
            )

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leader = (leader_id, epoch)

    def snapshot(self) -> tuple[OffsetAndEpoch, bytes]:
        return (
            OffsetAndEpoch(self.next_offset, self.last_epoch),
            self.sim.logs.snapshot_data(self.applied, self.last_epoch),
        )


class SimNode:
    def __init__(
        self,
        sim: Simulation,
        node_id: int,
        voters,
        directory_id=None,
        bootstrap_ids=(),
        always_flush: bool = True,
    ):
        self.sim = sim
        # False: a broker-only observer (followers_always_flush), whose
        # appends are never fsynced before it fetches on.
        self.always_flush = always_flush
        self.node_id = node_id
        self.voters = voters
        self.directory_id = directory_id or uuid.UUID(int=0)
        self.bootstrap_ids = tuple(bootstrap_ids)
        self.port = 9093  # its controller listener (a restart may move it)
        self.log = sim.logs.create(node_id)
        self.store = MemoryQuorumStateStore()
        self.alive = False
        self.client: RaftClient | None = None
        self.machine: StateMachine | None = None
        self.last_high_watermark = -1
        self.incarnation = 0  # a flush begun before a crash never completes
        self.flushing: int | None = None  # the offset of the flush running

    def start(self, now_ms: int) -> None:
        self.machine = StateMachine(self.sim, self.node_id)
        self.client = RaftClient(
            self.node_id,
            self.voters,
            self.log,
            self.store,
            self.sim.config,
            random.Random(self.sim.rng.random()),
            self.machine,
            directory_id=self.directory_id,
            endpoints=self.endpoints,
            bootstrap_ids=self.bootstrap_ids,
            followers_always_flush=self.always_flush,
        )
        self.client.start(now_ms)
        self.alive = True
        self.last_high_watermark = -1
        self.incarnation += 1
        self.flushing = None

    @property
    def endpoints(self) -> tuple:
        return (Endpoint("CONTROLLER", f"node-{self.node_id}", self.port),)

    def voter_node(self) -> VoterNode:
        return VoterNode(self.node_id, self.directory_id, self.endpoints, 0, 1)

    def crash(self) -> None:
        self.alive = False
        self.client = None
        self.machine = None
        self.flushing = None
        self.log = self.sim.logs.after_crash(self.node_id, self.log)


class Simulation:
    def __init__(
        self,
        seed: int,
        voters: int = 3,
        observers: int = 0,
        drop_rate: float = 0.0,
        min_delay_ms: int = 1,
        max_delay_ms: int = 10,
        snapshot_every: int = 0,
        config: QuorumConfig | None = None,
        logs=None,
        dynamic: bool = False,
        max_flush_delay_ms: int = 3,
    ):
        self.rng = random.Random(seed)
        self.max_flush_delay_ms = max_flush_delay_ms
        self.logs = logs or MemoryLogs()
        self.config = config or QuorumConfig(fetch_max_batches=4, fetch_snapshot_max_bytes=256)
        voter_ids = tuple(range(1, voters + 1))
        ids = voter_ids + tuple(range(voters + 1, voters + observers + 1))
        self.dynamic = dynamic
        if dynamic:
            self.nodes = {
                i: SimNode(
                    self, i, (), uuid.UUID(int=self.rng.getrandbits(128)), bootstrap_ids=voter_ids
                )
                for i in ids
            }
            bootstrap = VoterSet.of(self.nodes[i].voter_node() for i in voter_ids)
            for i in voter_ids:
                # kafka-storage.sh format --initial-controllers: the checkpoint 0-0.
                self.nodes[i].log.create_snapshot(
                    OffsetAndEpoch(0, 0),
                    self.logs.snapshot_data([], 0),
                    (KRaftVersionRecord(KRAFT_VERSION_1), VotersRecord(bootstrap)),
                )
        else:
            # Every other observer is a broker-only node's (no flush before
            # it fetches on); chosen by id so the seed's draws stay as they were.
            self.nodes = {
                i: SimNode(self, i, voter_ids, always_flush=i in voter_ids or i % 2 == 1)
                for i in ids
            }
        self.voter_ids = voter_ids
        self.admin_responses: dict[int, object] = {}
        self._admin_correlation = 0
        self._leader_high_watermarks: dict[tuple[int, int], int] = {}
        self.drop_rate = drop_rate
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.snapshot_every = snapshot_every
        self.now = 0
        self._queue: list = []
        self._seq = 0
        self.cut: set[frozenset] = set()  # links that drop everything
        self.leaders_by_epoch: dict[int, int] = {}
        # The one committed sequence: base offset -> (epoch, records, is_control).
        self.committed: dict[int, tuple] = {}
        self.committed_end = 0
        self.committed_epoch = 0
        self._checked_end: dict[int, int] = {}
        self.proposals = 0
        self.events = 0
        for node in self.nodes.values():
            node.start(self.now)

    # -- faults ------------------------------------------------------------------------
    def crash(self, node_id: int) -> None:
        """kill -9: the process and what it held in memory are gone; its
        peers' connections to it close, so they learn of it at once."""
        self.nodes[node_id].crash()
        for node in self.nodes.values():
            if node.alive and node.client.requests.is_in_flight(node_id):
                node.client.on_disconnect(self.now, node_id)
                self._after(node, node.client.poll(self.now))

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.alive:
            node.start(self.now)
            self._after(node, [])

    def partition(self, side: set[int]) -> None:
        """Cut every link between ``side`` and the other nodes."""
        for a in side:
            for b in self.nodes:
                if b not in side:
                    self.cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cut.clear()

    # -- driving ----------------------------------------------------------------------------
    # -- voter changes -------------------------------------------------------------------
    def current_voters(self) -> tuple[int, ...]:
        """The voter set in force on the node whose log is longest (the
        leader's, once elected)."""
        if not self.dynamic:
            return self.voter_ids
        live = [n for n in self.nodes.values() if n.alive] or list(self.nodes.values())
        newest = max(live, key=lambda n: (n.log.last_fetched_epoch, n.log.end_offset))
        if newest.client is None:
            return self.voter_ids
        return newest.client.quorum.voters

    def admin_request(self, body) -> int | None:
        """Send ``body`` to the current leader from the administrator; the
        correlation id its answer will have in ``admin_responses``."""
        node = self.leader()
        if node is None:
            return None
        self._admin_correlation += 1
        request = RaftRequest(self._admin_correlation, ADMIN_ID, node.node_id, body)
        self._after(node, node.client.handle(self.now, request))
        return self._admin_correlation

    def add_voter(self, node_id: int, timeout_ms: int = 5000) -> int | None:
        node = self.nodes[node_id]
        return self.admin_request(
            AddRaftVoterRequest(node_id, node.directory_id, node.endpoints, timeout_ms)
        )

    def remove_voter(self, node_id: int) -> int | None:
        return self.admin_request(RemoveRaftVoterRequest(node_id, self.nodes[node_id].directory_id))

    def leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.alive and n.client.is_leader]
        return max(leaders, key=lambda n: n.client.epoch) if leaders else None

    def propose(self, value) -> int | None:
        node = self.leader()
        if node is None:
            return None
        try:
            offset = node.client.propose(self.now, [value])
        except NotLeaderException:
            return None
        self.proposals += 1
        # The append wakes held fetches: their answers go out with the poll.
        self._after(node, node.client.poll(self.now))
        return offset

    def run_for(self, duration_ms: int) -> None:
        self.run_until(self.now + duration_ms)

    def run_until(self, end_ms: int, predicate=None) -> bool:
        """Process events until ``end_ms`` (or until ``predicate()`` holds)."""
        spins = 0
        while True:
            if predicate is not None and predicate():
                return True
            next_time = self._next_event_time()
            if next_time > end_ms:
                self.now = end_ms
                return predicate() if predicate is not None else True
            if next_time <= self.now:
                spins += 1
                if spins > 10_000:
                    raise InvariantViolation(
                        f"livelock at {self.now} ms: a replica keeps "
                        f"asking to be polled without progress"
                    )
            else:
                spins = 0
            self.now = max(self.now, next_time)
            self._step()

    def _next_event_time(self) -> int:
        times = [self._queue[0][0]] if self._queue else []
        times += [n.client.next_poll_ms() for n in self.nodes.values() if n.alive]
        return min(times) if times else 2**62

    def _step(self) -> None:
        while self._queue and self._queue[0][0] <= self.now:
            _, _, item = heapq.heappop(self._queue)
            if isinstance(item, FlushDone):
                self._flush_done(item)
                continue
            node = self.nodes[item.destination]
            if not node.alive:
                continue
            out = node.client.handle(self.now, item)
            self._after(node, out)
        for node in self.nodes.values():
            if node.alive and node.client.next_poll_ms() <= self.now:
                self._after(node, node.client.poll(self.now))

    def _after(self, node: SimNode, out: list) -> None:
        self.events += 1
        for message in out:
            self._transmit(node, message)
        self._maybe_snapshot(node)
        self._maybe_begin_flush(node)
        self.check_invariants()

    def _maybe_begin_flush(self, node: SimNode) -> None:
        """As RaftManager does after every core call: start the flush the
        core asks for; it completes after a random delay."""
        if not node.alive:
            return
        offset = node.client.begin_flush()
        if offset is None:
            return
        node.flushing = offset
        self._seq += 1
        done = FlushDone(node.node_id, node.incarnation, offset)
        delay = self.rng.randint(0, self.max_flush_delay_ms)
        heapq.heappush(self._queue, (self.now + delay, self._seq, done))

    def _flush_done(self, done: FlushDone) -> None:
        node = self.nodes[done.node_id]
        if not node.alive or node.incarnation != done.incarnation:
            return  # the crash took the flush with it
        # Durable when the fsync returns, not before: a crash until now
        # lost the records.
        node.log.flush(done.offset)
        node.flushing = None
        self._after(node, node.client.on_flushed(self.now, done.offset))

    def _transmit(self, node: SimNode, message) -> None:
        if message.destination == ADMIN_ID:
            self.admin_responses[message.correlation_id] = message.body
            return
        if (
            isinstance(message, RaftRequest)
            and isinstance(message.body, FetchRequest)
            and (node.always_flush or node.client.quorum.is_voter)
        ):
            durable = self.logs.durable_end(node.log)
            if message.body.fetch_offset > durable:
                raise InvariantViolation(
                    f"node {node.node_id} fetches from {message.body.fetch_offset} "
                    f"with its log durable only below {durable}"
                )
        if isinstance(message, RaftRequest) and not self.nodes[message.destination].alive:
            # Connection refused: the sender learns at once.
            node.client.on_send_failed(self.now, message)
            return
        link = frozenset((message.source, message.destination))
        if link in self.cut or self.rng.random() < self.drop_rate:
            # Lost: the sender notices only when its request times out,
            # as with a real connection that stops answering.
            return
        delay = self.rng.randint(self.min_delay_ms, self.max_delay_ms)
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay, self._seq, message))

    def _maybe_snapshot(self, node: SimNode) -> None:
        if not self.snapshot_every or not node.alive:
            return
        machine = node.machine
        snapshot_id = node.log.latest_snapshot_id()
        since = machine.next_offset - (snapshot_id.offset if snapshot_id else 0)
        if since >= self.snapshot_every and machine.next_offset <= node.client.high_watermark:
            snapshot_id, data = machine.snapshot()
            node.client.create_snapshot(snapshot_id, data)

    # -- invariants -------------------------------------------------------------------------
    def check_committed_batch(self, node_id: int, batch) -> None:
        entry = (batch.epoch, batch.records, batch.is_control)
        known = self.committed.get(batch.base_offset)
        if known is None:
            if batch.base_offset != self.committed_end:
                if batch.base_offset > self.committed_end:
                    raise InvariantViolation(
                        f"node {node_id} committed batch {batch.base_offset} past the "
                        f"committed end {self.committed_end}"
                    )
                raise InvariantViolation(
                    f"node {node_id}: batch at {batch.base_offset} is "
                    f"not on a committed batch boundary"
                )
            self.committed[batch.base_offset] = entry
            self.committed_end = batch.next_offset
            self.committed_epoch = max(self.committed_epoch, batch.epoch)
        elif known != entry:
            raise InvariantViolation(
                f"node {node_id}: committed batch at {batch.base_offset} "
                f"changed from {known} to {entry}"
            )

    def committed_records_below(self, offset: int) -> list | None:
        if offset > self.committed_end:
            return None
        records = []
        for base in sorted(self.committed):
            epoch, batch_records, is_control = self.committed[base]
            if base >= offset:
                break
            if not is_control:
                records += [(base + i, r) for i, r in enumerate(batch_records)]
        return records

    def check_invariants(self) -> None:
        for node in self.nodes.values():
            if not node.alive:
                continue
            client = node.client
            if client.is_leader:
                first = self.leaders_by_epoch.setdefault(client.epoch, node.node_id)
                if first != node.node_id:
                    raise InvariantViolation(
                        f"epoch {client.epoch} has two leaders: {first} and {node.node_id}"
                    )
            high_watermark = client.high_watermark
            if high_watermark < node.last_high_watermark:
                raise InvariantViolation(
                    f"node {node.node_id}: high watermark went back from "
                    f"{node.last_high_watermark} to {high_watermark}"
                )
            node.last_high_watermark = high_watermark
            self._check_log_prefix(node, high_watermark)
            if client.is_leader and client.epoch >= self.committed_epoch:
                # Leaders elected after a commit hold it (a stale leader of
                # an older epoch, cut off, does not and cannot commit).
                self._check_leader_completeness(node)
            if self.dynamic and client.is_leader:
                self._check_majority_of_voters(node)
            if node.flushing is not None and node.log.end_offset < node.flushing:
                raise InvariantViolation(
                    f"node {node.node_id} truncated its log to {node.log.end_offset} "
                    f"while a flush to {node.flushing} ran"
                )
        if self.dynamic:
            self._check_one_voter_change_in_flight()
        else:
            self._check_committed_is_durable()

    def _check_committed_is_durable(self) -> None:
        """A majority of the voters has every committed record on disk, so a
        crash of all of them (unflushed appends lost) loses none."""
        if not self.committed_end:
            return
        holders = [
            v
            for v in self.voter_ids
            if self.logs.durable_end(self.nodes[v].log) >= self.committed_end
        ]
        if len(holders) < len(self.voter_ids) // 2 + 1:
            raise InvariantViolation(
                f"records below {self.committed_end} are committed but durable "
                f"only on voters {holders} of {self.voter_ids}"
            )

    def _check_majority_of_voters(self, leader: SimNode) -> None:
        """A leader's high watermark moves only when a majority of the voter
        set in force (the one in its log) holds the records below it."""
        high_watermark = leader.client.high_watermark
        # Only moves this leader made in this epoch: the high watermark it
        # starts with was established by earlier leaders and voter sets.
        key = (leader.node_id, leader.client.epoch)
        before = self._leader_high_watermarks.get(key)
        self._leader_high_watermarks[key] = high_watermark
        if before is None or high_watermark <= before or high_watermark <= 0:
            return
        last = max((b for b in self.committed if b < high_watermark), default=None)
        if last is None:
            return
        holders = 0
        for voter in leader.client.quorum.voters:
            log = self.nodes[voter].log
            if log.end_offset < high_watermark:
                continue
            if last < log.start_offset:
                holders += 1  # below its snapshot: committed there
                continue
            batch = log.read(last, 1)
            if (
                batch
                and (batch[0].epoch, batch[0].records, batch[0].is_control) == self.committed[last]
            ):
                holders += 1
        voters = leader.client.quorum.voters
        if holders < len(voters) // 2 + 1:
            raise InvariantViolation(
                f"leader {leader.node_id} moved its high watermark to "
                f"{high_watermark} with {holders} of voters {voters}"
            )

    def _check_one_voter_change_in_flight(self) -> None:
        for node in self.nodes.values():
            if not node.alive:
                continue
            history = node.client.kraft.voters
            pending = [o for o in history.offsets() if o >= self.committed_end]
            if len(pending) > 1:
                raise InvariantViolation(
                    f"node {node.node_id} has voter changes at {pending}, "
                    f"all above the committed end {self.committed_end}"
                )

    def _check_log_prefix(self, node: SimNode, high_watermark: int) -> None:
        """The replica's log below its high watermark is committed data."""
        start = max(self._checked_end.get(node.node_id, 0), node.log.start_offset)
        while start < high_watermark:
            batches = node.log.read(start, 64)
            if not batches:
                break
            for batch in batches:
                if batch.next_offset > high_watermark:
                    return
                self.check_committed_batch(node.node_id, batch)
                start = batch.next_offset
                self._checked_end[node.node_id] = start

    def _check_leader_completeness(self, node: SimNode) -> None:
        log = node.log
        if log.end_offset < self.committed_end:
            raise InvariantViolation(
                f"leader {node.node_id} (epoch {node.client.epoch}) ends at "
                f"{log.end_offset}, before the committed end "
                f"{self.committed_end}"
            )
        last_base = max(self.committed) if self.committed else None
        if last_base is not None and last_base >= log.start_offset:
            batch = log.read(last_base, 1)
            if (
                not batch
                or (batch[0].epoch, batch[0].records, batch[0].is_control)
                != self.committed[last_base]
            ):
                raise InvariantViolation(
                    f"leader {node.node_id} lacks the committed batch at {last_base}"
                )

    # -- liveness helpers --------------------------------------------------------------------
    def alive_voters(self) -> list[SimNode]:
        return [self.nodes[v] for v in self.current_voters() if self.nodes[v].alive]

    def all_applied_value(self, value) -> bool:
        """Every live replica's state machine has applied ``value``."""
        return all(
            any(r == value for _, r in n.machine.applied[-50:])
            for n in self.nodes.values()
            if n.alive
        )

    def all_applied(self, offset: int) -> bool:
        """Every live replica's state machine has applied up to ``offset``."""
        return all(n.machine.next_offset > offset for n in self.nodes.values() if n.alive)
