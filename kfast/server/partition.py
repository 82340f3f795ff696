"""Partition: one topic-partition replica hosted by this broker (Kafka's
kafka.cluster.Partition).

It owns the partition's leadership state (leader epoch, replicas, ISR from
the metadata image) in front of the storage Log, and is where the leader's
rules live: epoch fencing of requests, the high watermark as the minimum log
end offset over the ISR, min.insync.replicas for acks=all, and the read
bound (high watermark, or last stable offset for read_committed).

As leader it keeps a ReplicaState per follower, fed by the followers'
fetches: the fetch offset is the follower's log end offset, and a fetch
that reached the leader's log end (or the end the leader had at the
follower's previous fetch) makes it caught up as of then. From those it
proposes ISR changes (``isr_to_expand`` / ``isr_to_shrink``); while one is
in flight to the controller the partition is in a pending state whose
"maximal ISR" (the larger of the two) bounds the high watermark, so a
shrink cannot move the high watermark before the controller committed it
and an expansion counts the joining replica at once (KIP-497).

On one node the ISR is {this broker} and the high watermark follows the
log end offset after each append.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable

from kfast.controller.metadata.image import PartitionRegistration
from kfast.protocol.constants import NO_LEADER
from kfast.protocol.errors import (
    FencedLeaderEpochException,
    NotEnoughReplicasException,
    NotLeaderOrFollowerException,
    UnknownLeaderEpochException,
)
from kfast.storage.log import Log, LogAppendInfo
from kfast.storage.segment import FetchDataInfo

# The records of an append: a produce request's slice of its frame, a
# follower's fetched bytes, a batch built by a coordinator.
RecordsBuffer = bytes | bytearray | memoryview

# Fetch and ListOffsets isolation levels.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

NO_EPOCH = -1
# A follower whose log end offset the leader has not heard yet.
UNKNOWN_OFFSET = -1


class ReplicaState:
    """What the leader knows of one follower (Kafka's ReplicaState)."""

    __slots__ = (
        "log_end_offset",
        "log_start_offset",
        "last_caught_up_time_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_time_ms",
    )

    def __init__(self, last_caught_up_time_ms: int = 0):
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = last_caught_up_time_ms
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0

    def update(
        self, fetch_offset: int, log_start_offset: int, now_ms: int, leader_end_offset: int
    ) -> None:
        """A fetch at ``fetch_offset`` when the leader's log ended at
        ``leader_end_offset``. Caught up now if the fetch reached the end;
        caught up as of the previous fetch if it reached what the end was
        then (the follower is keeping pace with a moving end)."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        return (
            self.log_end_offset >= leader_end_offset
            or now_ms - self.last_caught_up_time_ms <= lag_max_ms
        )


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid (URL-safe base64 without padding), as
    written to partition.metadata."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


class Partition:
    __slots__ = (
        "topic",
        "partition",
        "topic_id",
        "log",
        "node_id",
        "leader_id",
        "leader_epoch",
        "partition_epoch",
        "replicas",
        "isr",
        "replica_states",
        "pending_isr",
        "maximal_isr",
        "leader_epoch_start_offset",
        "key",
    )

    def __init__(self, topic: str, partition: int, topic_id: uuid.UUID, log: Log, node_id: int):
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.leader_id = NO_LEADER
        self.leader_epoch = NO_EPOCH
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # As leader: each follower's state from its fetches (none on one node).
        self.replica_states: dict[int, ReplicaState] = {}
        # As leader, while an AlterPartition is in flight: the ISR proposed;
        # ``maximal_isr`` is the larger of it and the committed one.
        self.pending_isr: tuple[int, ...] | None = None
        self.maximal_isr: tuple[int, ...] = ()
        # Where this leader's epoch began in the log (followers below it are
        # not admitted to the ISR: they lack this leader's first batch).
        self.leader_epoch_start_offset = 0
        # The purgatory key of this partition.
        self.key = (topic, partition)

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
            f"epoch={self.leader_epoch}, hw={self.log.high_watermark})"
        )

    # -- leadership ---------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def apply_registration(self, registration: PartitionRegistration, now_ms: int = 0) -> bool:
        """Take leadership/ISR from the metadata image; returns whether the
        high watermark moved (a new leader or a smaller ISR can move it).

        A registration older than the partition epoch this replica has is
        skipped (Kafka's makeLeader/makeFollower): an AlterPartition
        response brings the new epoch before the metadata log does, and
        the publisher re-applies every partition of a changed topic from
        the image, which may still hold an earlier one -- taking it would
        put back an ISR the controller has replaced and drop a pending
        proposal, so the high watermark could pass a replica the
        controller counts in the ISR."""
        if registration.partition_epoch < self.partition_epoch:
            return False
        was_leader = self.is_leader
        became_leader = registration.leader == self.node_id and (
            not was_leader or registration.leader_epoch != self.leader_epoch
        )
        if registration.partition_epoch != self.partition_epoch or became_leader:
            # A committed change supersedes any AlterPartition in flight
            # (which the controller either applied or will refuse).
            self.pending_isr = None
        self.replicas = tuple(registration.replicas)
        self.isr = tuple(registration.isr)
        self.maximal_isr = (
            self.isr
            if self.pending_isr is None
            else tuple(dict.fromkeys(self.isr + self.pending_isr))
        )
        self.partition_epoch = registration.partition_epoch
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        if became_leader:
            # A new leader epoch starts at the current log end offset. Not
            # fsynced here (this runs on the loop, once per partition of a
            # new topic); the log's next flush (off the loop) or its close
            # writes the file, and recovery re-derives epochs from the
            # batches (as KAFKA-15046).
            log = self.log
            self.leader_epoch_start_offset = log.log_end_offset
            log.leader_epoch_cache.assign(self.leader_epoch, log.log_end_offset, flush=False)
            # Followers start unknown: the high watermark waits for their
            # first fetch. ISR members count as caught up now, so a new
            # leader does not shrink them before they could fetch.
            self.replica_states = {
                replica: ReplicaState(now_ms if replica in self.isr else 0)
                for replica in self.replicas
                if replica != self.node_id
            }
        elif self.is_leader:
            for replica in self.replicas:  # reassignment added replicas
                if replica != self.node_id and replica not in self.replica_states:
                    self.replica_states[replica] = ReplicaState()
        else:
            self.replica_states = {}
            return False
        return self.maybe_increment_high_watermark()

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fence requests from clients with a stale or future view (KIP-320);
        -1 means the client does not know the epoch."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochException(
                f"The leader epoch in the request {current_leader_epoch} is older than the "
                f"current leader epoch {self.leader_epoch} of {self.topic}-{self.partition}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochException(
                f"The leader epoch in the request {current_leader_epoch} is newer than the "
                f"current leader epoch {self.leader_epoch} of {self.topic}-{self.partition}"
            )

    def leader_log_or_raise(self, current_leader_epoch: int = NO_EPOCH) -> Log:
        if not self.is_leader:
            raise NotLeaderOrFollowerException(
                f"Leader not local for partition {self.topic}-{self.partition} on broker "
                f"{self.node_id}"
            )
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    # -- followers and the ISR (leader) -------------------------------------------------
    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: int
    ) -> bool:
        """A follower fetched at ``fetch_offset`` (its log end offset);
        returns whether the high watermark moved."""
        state = self.replica_states.get(replica_id)
        if state is None:
            raise NotLeaderOrFollowerException(
                f"Replica {replica_id} is not in the replica assignment {list(self.replicas)} "
                f"of {self.topic}-{self.partition}"
            )
        state.update(fetch_offset, log_start_offset, now_ms, self.log.log_end_offset)
        return self.maybe_increment_high_watermark()

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with ``replica_id`` added, if it has caught up: its log
        reaches the high watermark and this leader's epoch (Kafka's
        isFollowerInSync); None when no change is due or one is in flight."""
        if self.pending_isr is not None or replica_id in self.isr or not self.is_leader:
            return None
        state = self.replica_states.get(replica_id)
        if state is None:
            return None
        end = state.log_end_offset
        if end >= self.log.high_watermark and end >= self.leader_epoch_start_offset:
            return self.isr + (replica_id,)
        return None

    def isr_to_shrink(self, now_ms: int, lag_max_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up within
        replica.lag.time.max.ms; None when all keep up or a change is in
        flight."""
        if self.pending_isr is not None or not self.is_leader:
            return None
        leader_end = self.log.log_end_offset
        lagging = [
            r
            for r in self.isr
            if r != self.node_id
            and not (
                r in self.replica_states
                and self.replica_states[r].is_caught_up(leader_end, now_ms, lag_max_ms)
            )
        ]
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def begin_isr_change(self, proposed: tuple[int, ...]) -> None:
        """An AlterPartition for ``proposed`` is on its way."""
        self.pending_isr = proposed
        self.maximal_isr = tuple(dict.fromkeys(self.isr + proposed))

    def abort_isr_change(self) -> bool:
        """The controller refused the change (or could not be reached): back
        to the committed ISR; returns whether the high watermark moved."""
        self.pending_isr = None
        self.maximal_isr = self.isr
        return self.maybe_increment_high_watermark()

    def on_isr_committed(
        self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int
    ) -> bool:
        """The controller accepted an ISR change (AlterPartition response);
        returns whether the high watermark moved. Ignored if the metadata
        already brought this state or a newer one."""
        if leader_epoch != self.leader_epoch or partition_epoch <= self.partition_epoch:
            return False
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.maximal_isr = isr
        return self.maybe_increment_high_watermark()

    # -- high watermark ---------------------------------------------------------------
    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the maximal ISR (this leader's
        included)."""
        log = self.log
        new_hw = log.log_end_offset
        states = self.replica_states
        for replica in self.maximal_isr:
            if replica != self.node_id:
                state = states.get(replica)
                new_hw = min(new_hw, UNKNOWN_OFFSET if state is None else state.log_end_offset)
        if new_hw > log.high_watermark:
            log.update_high_watermark(new_hw)
            return True
        return False

    # -- append / read ----------------------------------------------------------------
    def append_records_to_leader(
        self, records: RecordsBuffer, origin: str, required_acks: int
    ) -> tuple[LogAppendInfo, bool]:
        """Append as leader; returns (LogAppendInfo, high_watermark_moved)."""
        # A client's append names no leader epoch: leadership is the only check.
        log = self.log if self.is_leader else self.leader_log_or_raise()
        # The log's copy of the setting: LogConfig's item access is a Python
        # call, and this is what acks=-1 costs over acks=1 per append.
        if required_acks == -1 and len(self.isr) < log.min_insync_replicas:
            min_isr = log.min_insync_replicas
            raise NotEnoughReplicasException(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.partition}"
            )
        info = log.append_as_leader(records, self.leader_epoch, origin)
        return info, self.maybe_increment_high_watermark()

    def fetch_upper_bound(self, isolation_level: int) -> int:
        log = self.log
        if isolation_level == READ_COMMITTED:
            return log.last_stable_offset
        return log.high_watermark

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        min_one_message: bool,
        current_leader_epoch: int = NO_EPOCH,
        follower_read: bool = False,
    ) -> FetchDataInfo:
        """A consumer's read, up to the high watermark (or last stable
        offset). ``follower_read``: a follower may serve it too (KIP-392:
        the leader sent the consumer here), bounded by its own high
        watermark, which trails the leader's by at most one fetch."""
        if follower_read and not self.is_leader and self.leader_id != NO_LEADER:
            self.check_leader_epoch(current_leader_epoch)
            log = self.log
        else:
            log = self.leader_log_or_raise(current_leader_epoch)
        upper = self.fetch_upper_bound(isolation_level)
        info = log.read(fetch_offset, max_bytes, upper, min_one_message)
        if isolation_level == READ_COMMITTED and info.records is not None:
            aborted = log.collect_aborted_transactions(fetch_offset, upper)
            info = info._replace(aborted_transactions=aborted)
        return info

    def preferred_read_replica(
        self,
        fetch_offset: int,
        client_rack: str,
        rack_of: Callable[[int], str | None],
        now_ms: int,
        lag_max_ms: int,
    ) -> int:
        """Kafka's RackAwareReplicaSelector: among the leader and the
        followers that are caught up and hold ``fetch_offset``, one in the
        consumer's rack -- the leader if it is there, else the follower with
        the most data; -1 (fetch from the leader) when none is."""
        if not client_rack or rack_of(self.node_id) == client_rack:
            return -1
        leader_end = self.log.log_end_offset
        best, best_end = -1, -1
        for replica, state in self.replica_states.items():
            if (
                replica in self.isr
                and rack_of(replica) == client_rack
                and state.log_start_offset <= fetch_offset <= state.log_end_offset
                and state.is_caught_up(leader_end, now_ms, lag_max_ms)
                and state.log_end_offset > best_end
            ):
                best, best_end = replica, state.log_end_offset
        return best

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <=
        ``leader_epoch`` and the start offset of the epoch after it (or the
        log end offset for the latest)."""
        log = self.leader_log_or_raise(current_leader_epoch)
        return log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
