"""QuorumState: which role this replica plays in which epoch, one class per role.

The roles and how a voter moves between them (KIP-595 with KIP-996's
pre-vote); an observer (a broker, not a voter) is only ever Unattached or
Follower:

    Unattached   epoch known, leader not; may have voted in this epoch.
                 -> Prospective when its election timeout expires
                 -> Follower when it learns the epoch's leader
    Prospective  asks the voters whether they would vote for it (pre-vote),
                 without changing anyone's epoch: a replica cut off from the
                 quorum cannot force elections on its return.
                 -> Candidate on a majority of pre-votes
                 -> Follower when it learns of a new leader, or at its
                    election timeout if it had one (is it alive after all?)
    Candidate    epoch + 1, votes for itself, asks for votes.
                 -> Leader on a majority
                 -> Prospective when its election timeout expires
    Leader       appends, tracks each voter's log end offset, advances the
                 high watermark on a majority.
                 -> Resigned when it cannot reach a majority (check quorum)
                    or is asked to step down
    Follower     fetches from the leader.
                 -> Prospective when no fetch succeeded for the fetch timeout
    Resigned     an old leader that ended its epoch (EndQuorumEpoch).
                 -> Prospective when its election timeout expires

Any role moves to Unattached (or Follower) on seeing a higher epoch. Every
transition writes the ElectionState first, so a restart never votes twice
in an epoch nor forgets one.

Who is a voter is not fixed: it is the voter set the log holds at its end
(kfast.raft.kraft_control, KIP-853), or the static controller.quorum.voters.
A replica the log adds becomes a voter, one it removes an observer, as soon
as the change is appended; majorities are always of the set in force.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from kfast.protocol.constants import NO_LEADER, ZERO_UUID
from kfast.raft.election_state import ElectionState, QuorumStateStore
from kfast.raft.log import OffsetAndEpoch
from kfast.raft.messages import RaftRequest
from kfast.raft.voter_set import VoterSet


@dataclass(frozen=True)
class QuorumConfig:
    """Kafka's controller.quorum.* timing (kfast.config holds the defaults)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    # The leader holds a Fetch that finds nothing new this long (Kafka's
    # KafkaRaftClient fixes it at 500 ms).
    fetch_max_wait_ms: int = 500
    fetch_max_batches: int = 64
    fetch_snapshot_max_bytes: int = 1 << 20
    # Committed records handed to the state machine per poll: a long
    # catch-up is applied in slices, and the driver's loop serves requests,
    # heartbeats and fetch timers between them (Kafka applies them on a
    # thread of their own).
    max_records_per_delivery: int = 5000

    @classmethod
    def from_config(cls, config) -> QuorumConfig:
        return cls(
            election_timeout_ms=config["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
            election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
            request_timeout_ms=config["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
        )


@dataclass
class UnattachedState:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    name = "Unattached"
    leader_id = NO_LEADER


@dataclass
class ProspectiveState:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    # The leader it followed in this epoch, if any: hearing that this
    # leader leads is no news (or two followers of a dead leader would
    # send each other back to following it, forever); at the election
    # timeout it follows that leader again, to see if it is alive.
    leader_id: int = -1
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    name = "Prospective"


@dataclass
class CandidateState:
    epoch: int
    election_deadline_ms: int
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    name = "Candidate"
    leader_id = NO_LEADER


# How long the leader keeps listing an observer (a replica outside the voter
# set) that has stopped fetching: Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS.
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass
class ReplicaState:
    """What the leader knows of one replica (Kafka's LeaderState.ReplicaState)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    directory_id: uuid.UUID = ZERO_UUID
    # When the replica last had every record the leader had (at this fetch,
    # or at its previous one): what AddRaftVoter calls caught up.
    last_caught_up_ms: int = -1
    last_fetch_leader_end_offset: int = -1

    def update_fetch(
        self, now_ms: int, fetch_offset: int, leader_end_offset: int, directory_id: uuid.UUID
    ) -> None:
        """Kafka's ReplicaState.updateFollowerState."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif (
            self.last_fetch_leader_end_offset > 0
            and fetch_offset >= self.last_fetch_leader_end_offset
        ):
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms
        self.directory_id = directory_id


@dataclass
class VoterChange:
    """The voter change a leader has in flight (one at a time): the
    request to answer, the offset of its VotersRecord once appended, and
    when to give up waiting for the commit."""

    request: RaftRequest
    last_offset: int
    deadline_ms: int


@dataclass
class LeaderState:
    epoch: int
    leader_id: int
    epoch_start_offset: int
    voters: tuple[int, ...]
    check_quorum_deadline_ms: int
    elected_ms: int = 0
    high_watermark: int = -1
    replicas: dict = field(default_factory=dict)  # node id -> ReplicaState
    begin_epoch_acked: set = field(default_factory=set)
    # When BeginQuorumEpoch goes to every other voter again (Kafka's
    # beginQuorumEpochTimer, every fetch timeout / 2): the leader's heartbeat,
    # which also tells a leader that a voter has moved on to a newer epoch.
    begin_epoch_resend_ms: int = 0
    voter_change: VoterChange | None = None
    # The directory each voter votes with (zero: any). A replica fetching
    # under a voter's id from another directory -- the node with a new
    # disk -- is not that voter and counts toward no majority.
    voter_directories: dict = field(default_factory=dict)
    name = "Leader"

    def _voter_replica(self, voter_id: int) -> ReplicaState:
        state = self.replica(voter_id)
        directory = self.voter_directories.get(voter_id, ZERO_UUID)
        if directory == ZERO_UUID or state.directory_id == directory:
            return state
        return ReplicaState()

    def update_check_quorum_deadline(self, timeout_ms: int, majority: int) -> int:
        """When this leader must resign unless more voters fetch: a majority
        (itself included) must have fetched within ``timeout_ms``, so the
        deadline runs from the fetch of the voter that completes the
        majority, most recent first (Kafka's LeaderState check-quorum timer,
        reset as fetches arrive rather than once per window)."""
        others = sorted(
            (
                max(self._voter_replica(v).last_fetch_ms, self.elected_ms)
                for v in self.voters
                if v != self.leader_id
            ),
            reverse=True,
        )
        # The leader counts toward the majority only while it is a voter
        # (it stays leader for a while after removing itself).
        needed = majority - 1 if self.leader_id in self.voters else majority
        if needed <= 0 or len(self.voters) == 1:
            # One voter never expires the leader (Kafka's LeaderState), also
            # when it is another replica: a leader that removed itself from
            # two voters keeps its epoch until the last voter fetches the
            # change -- that voter cannot be elected without it.
            self.check_quorum_deadline_ms = 2**62
        else:
            self.check_quorum_deadline_ms = others[needed - 1] + timeout_ms
        return self.check_quorum_deadline_ms

    def clear_inactive_observers(self, now_ms: int, voters) -> None:
        """Forget observers that have not fetched for
        OBSERVER_SESSION_TIMEOUT_MS (Kafka's LeaderState.clearInactiveObservers):
        a broker that went away, or a removed voter that never came back,
        leaves DescribeQuorum instead of staying listed for the whole epoch.
        Voters and the leader itself are kept whatever their last fetch."""
        stale = [
            node_id
            for node_id, state in self.replicas.items()
            if node_id not in voters
            and node_id != self.leader_id
            and now_ms - state.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]
        for node_id in stale:
            del self.replicas[node_id]

    def replica(self, node_id: int) -> ReplicaState:
        state = self.replicas.get(node_id)
        if state is None:
            state = self.replicas[node_id] = ReplicaState()
        return state

    def update_high_watermark(self) -> bool:
        """The largest offset a majority of voters has reached, once a batch
        of this epoch is committed (Raft commits earlier epochs' records
        only through one of its own). True if it moved."""
        ends = sorted((self._voter_replica(v).end_offset for v in self.voters), reverse=True)
        majority_end = ends[len(self.voters) // 2]
        if majority_end > self.epoch_start_offset and majority_end > self.high_watermark:
            self.high_watermark = majority_end
            return True
        return False


@dataclass
class FollowerState:
    epoch: int
    leader_id: int
    voted_id: int
    fetch_deadline_ms: int
    high_watermark: int = -1
    # A follower that has fetched from its leader refuses pre-votes: the
    # leader is alive. One that has not yet grants them, or two replicas
    # that each learned of a dead leader from the other would ping-pong
    # between Follower and Prospective (KIP-996).
    has_fetched: bool = False
    snapshot_id: OffsetAndEpoch | None = None  # being fetched, if any
    snapshot_data: bytearray = field(default_factory=bytearray)
    # The leader of this epoch took this voter's UpdateRaftVoter (KIP-853):
    # the voter set holds its current endpoints.
    voter_updated: bool = False
    name = "Follower"


@dataclass
class ResignedState:
    epoch: int
    leader_id: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...]
    end_epoch_acked: set = field(default_factory=set)
    name = "Resigned"

    @property
    def voted_id(self) -> int:
        return self.leader_id


# The role of a replica in its current epoch.
EpochState = (
    UnattachedState
    | ProspectiveState
    | CandidateState
    | LeaderState
    | FollowerState
    | ResignedState
)


class QuorumState:
    """The current role of ``node_id`` and the transitions between roles;
    each transition persists the ElectionState before it takes effect.
    ``voter_sets`` answers ``last_voter_set()`` (KRaftControlRecordStateMachine)."""

    state: EpochState  # from initialize(), which the driver calls first

    def __init__(
        self,
        node_id: int,
        voter_sets,
        store: QuorumStateStore,
        config: QuorumConfig,
        rng: random.Random,
        directory_id: uuid.UUID = ZERO_UUID,
    ):
        self.node_id = node_id
        self.directory_id = directory_id
        self.voter_sets = voter_sets
        self.store = store
        self.config = config
        self.rng = rng

    @property
    def voter_set(self) -> VoterSet:
        return self.voter_sets.last_voter_set()

    @property
    def voters(self) -> tuple[int, ...]:
        return self.voter_set.ids

    @property
    def is_voter(self) -> bool:
        return self.voter_set.is_voter(self.node_id, self.directory_id)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    def random_election_timeout(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.rng.randrange(max(1, timeout))

    def initialize(self, now_ms: int, end_offset: int, end_epoch: int = 0) -> None:
        """The role a replica starts in, from its quorum-state file: the
        epoch and vote it had; a leader it knew (not itself) is followed
        until a fetch fails; a replica that led this epoch has resigned.
        A log that ends in a later epoch than the file's (no file, or one
        lost with a disk) starts Unattached in the log's epoch, as Kafka's
        QuorumState.initialize: no record is written again under an
        (offset, epoch) the log already has."""
        stored = self.store.read() or ElectionState(0)
        if stored.epoch < end_epoch:
            self.state = UnattachedState(end_epoch, -1, now_ms + self.random_election_timeout())
        elif stored.leader_id == self.node_id:
            self.state = ResignedState(
                stored.epoch, self.node_id, now_ms + self.random_election_timeout(), ()
            )
        elif stored.has_leader():
            self.state = FollowerState(
                stored.epoch,
                stored.leader_id,
                stored.voted_id,
                now_ms + self.config.fetch_timeout_ms,
            )
        else:
            self.state = UnattachedState(
                stored.epoch, stored.voted_id, now_ms + self.random_election_timeout()
            )

    def _persist(self, epoch: int, leader_id: int = -1, voted_id: int = -1) -> None:
        self.store.write(ElectionState(epoch, leader_id, voted_id))

    def transition_to_unattached(
        self, now_ms: int, epoch: int, voted_id: int = -1
    ) -> UnattachedState:
        # In the same epoch only a replica that has not voted for itself
        # may be Unattached again; an observer also after losing its leader.
        same_epoch_ok = isinstance(self.state, (UnattachedState, ProspectiveState)) or (
            isinstance(self.state, (FollowerState, ResignedState)) and not self.is_voter
        )
        if epoch < self.epoch or (epoch == self.epoch and not same_epoch_ok):
            raise AssertionError(
                f"{self.node_id}: Unattached in epoch {epoch} from "
                f"{self.state.name} in epoch {self.epoch}"
            )
        self._persist(epoch, voted_id=voted_id)
        state = UnattachedState(epoch, voted_id, now_ms + self.random_election_timeout())
        self.state = state
        return state

    def transition_to_prospective(self, now_ms: int) -> ProspectiveState:
        voted_id = getattr(self.state, "voted_id", -1)
        if isinstance(self.state, (CandidateState, LeaderState)):
            voted_id = self.node_id
        leader_id = (
            self.state.leader_id
            if isinstance(self.state, (FollowerState, ProspectiveState))
            else -1
        )
        state = ProspectiveState(
            self.epoch,
            voted_id,
            now_ms + self.random_election_timeout(),
            leader_id,
            granted={self.node_id},
        )
        self.state = state
        return state

    def transition_to_candidate(self, now_ms: int, persist: bool = True) -> CandidateState:
        """``persist=False``: a quorum of one, which becomes leader at once;
        the leader's quorum-state (its epoch, its vote) is the only write."""
        epoch = self.epoch + 1
        if persist:
            self._persist(epoch, voted_id=self.node_id)
        state = CandidateState(
            epoch, now_ms + self.random_election_timeout(), granted={self.node_id}
        )
        self.state = state
        return state

    def transition_to_leader(self, now_ms: int, epoch_start_offset: int) -> LeaderState:
        if not isinstance(self.state, CandidateState):
            raise AssertionError(f"{self.node_id}: Leader from {self.state.name}")
        self._persist(self.epoch, leader_id=self.node_id, voted_id=self.node_id)
        state = LeaderState(
            self.epoch,
            self.node_id,
            epoch_start_offset,
            self.voters,
            now_ms + self.check_quorum_timeout(),
            elected_ms=now_ms,
        )
        self.state = state
        return state

    def check_quorum_timeout(self) -> int:
        # Kafka's leader resigns after 1.5 fetch timeouts without fetches
        # from a majority (KAFKA-15489).
        return self.config.fetch_timeout_ms * 3 // 2

    def transition_to_follower(self, now_ms: int, epoch: int, leader_id: int) -> FollowerState:
        if (
            epoch < self.epoch
            or (
                epoch == self.epoch
                and isinstance(self.state, (LeaderState, ResignedState, FollowerState))
            )
            or (epoch == self.epoch and 0 <= self.state.leader_id != leader_id)
        ):
            raise AssertionError(
                f"{self.node_id}: Follower of {leader_id} in epoch {epoch} "
                f"from {self.state.name} of {self.leader_id} in {self.epoch}"
            )
        voted_id = getattr(self.state, "voted_id", -1) if epoch == self.epoch else -1
        if isinstance(self.state, CandidateState) and epoch == self.epoch:
            voted_id = self.node_id
        self._persist(epoch, leader_id=leader_id, voted_id=voted_id)
        state = FollowerState(epoch, leader_id, voted_id, now_ms + self.config.fetch_timeout_ms)
        self.state = state
        return state

    def transition_to_resigned(
        self, now_ms: int, preferred_successors: tuple[int, ...]
    ) -> ResignedState:
        if not isinstance(self.state, LeaderState):
            raise AssertionError(f"{self.node_id}: Resigned from {self.state.name}")
        state = ResignedState(
            self.epoch, self.node_id, now_ms + self.random_election_timeout(), preferred_successors
        )
        self.state = state
        return state
