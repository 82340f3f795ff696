"""Partition: one topic-partition replica hosted by this broker (Kafka's
kafka.cluster.Partition).

It owns the partition's leadership state (leader epoch, replicas, ISR from
the metadata image) in front of the storage Log, and is where the leader's
rules live: epoch fencing of requests, the high watermark as the minimum log
end offset over the ISR, min.insync.replicas for acks=all, and the read
bound (high watermark, or last stable offset for read_committed).

Single-node KRaft: this broker is the only replica a partition can have on
it, so the ISR is {this broker} and the high watermark follows the log end
offset after each append. The rule is still written for an ISR, so the
follower path only has to feed follower log end offsets.
"""
from __future__ import annotations

import base64
import uuid

from kfast.controller.metadata.image import PartitionRegistration
from kfast.protocol.constants import NO_LEADER
from kfast.protocol.errors import (
    FencedLeaderEpochException,
    NotEnoughReplicasException,
    NotLeaderOrFollowerException,
    UnknownLeaderEpochException,
)
from kfast.storage.log import Log
from kfast.storage.segment import FetchDataInfo

# Fetch and ListOffsets isolation levels.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

NO_EPOCH = -1


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid (URL-safe base64 without padding), as
    written to partition.metadata."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


class Partition:
    __slots__ = ("topic", "partition", "topic_id", "log", "node_id", "leader_id",
                 "leader_epoch", "partition_epoch", "replicas", "isr",
                 "follower_end_offsets", "key")

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
        # Log end offsets reported by followers' fetches (none on one node).
        self.follower_end_offsets: dict[int, int] = {}
        # The purgatory key of this partition.
        self.key = (topic, partition)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, hw={self.log.high_watermark})")

    # -- leadership ---------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def apply_registration(self, registration: PartitionRegistration) -> bool:
        """Take leadership/ISR from the metadata image; returns whether the
        high watermark moved (a new leader recomputes it)."""
        self.replicas = tuple(registration.replicas)
        self.isr = tuple(registration.isr)
        self.partition_epoch = registration.partition_epoch
        became_leader = registration.leader == self.node_id and (
            not self.is_leader or registration.leader_epoch != self.leader_epoch)
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        if became_leader:
            # A new leader epoch starts at the current log end offset. Not
            # fsynced here (this runs on the loop, once per partition of a
            # new topic); the log's next flush (off the loop) or its close
            # writes the file, and recovery re-derives epochs from the
            # batches (as KAFKA-15046).
            self.log.leader_epoch_cache.assign(self.leader_epoch, self.log.log_end_offset,
                                               flush=False)
            return self.maybe_increment_high_watermark()
        return False

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fence requests from clients with a stale or future view (KIP-320);
        -1 means the client does not know the epoch."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochException(
                f"The leader epoch in the request {current_leader_epoch} is older than the "
                f"current leader epoch {self.leader_epoch} of {self.topic}-{self.partition}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochException(
                f"The leader epoch in the request {current_leader_epoch} is newer than the "
                f"current leader epoch {self.leader_epoch} of {self.topic}-{self.partition}")

    def leader_log_or_raise(self, current_leader_epoch: int = NO_EPOCH) -> Log:
        if not self.is_leader:
            raise NotLeaderOrFollowerException(
                f"Leader not local for partition {self.topic}-{self.partition} on broker "
                f"{self.node_id}")
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    # -- high watermark ---------------------------------------------------------------
    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR (this leader's included)."""
        log = self.log
        new_hw = log.log_end_offset
        for replica in self.isr:
            if replica != self.node_id:
                new_hw = min(new_hw, self.follower_end_offsets.get(replica, 0))
        if new_hw > log.high_watermark:
            log.update_high_watermark(new_hw)
            return True
        return False

    # -- append / read ----------------------------------------------------------------
    def append_records_to_leader(self, records, origin: str, required_acks: int):
        """Append as leader; returns (LogAppendInfo, high_watermark_moved)."""
        log = self.leader_log_or_raise()
        # Item access: LogConfig's attribute form goes through __getattr__
        # after a failed slot lookup (~1.4 us, most of what acks=-1 cost over
        # acks=1 per append).
        if required_acks == -1 and len(self.isr) < log.config["min.insync.replicas"]:
            min_isr = log.config["min.insync.replicas"]
            raise NotEnoughReplicasException(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.partition}")
        info = log.append_as_leader(records, self.leader_epoch, origin)
        return info, self.maybe_increment_high_watermark()

    def fetch_upper_bound(self, isolation_level: int) -> int:
        log = self.log
        if isolation_level == READ_COMMITTED:
            return log.last_stable_offset
        return log.high_watermark

    def read_records(self, fetch_offset: int, max_bytes: int, isolation_level: int,
                     min_one_message: bool, current_leader_epoch: int = NO_EPOCH) -> FetchDataInfo:
        log = self.leader_log_or_raise(current_leader_epoch)
        upper = self.fetch_upper_bound(isolation_level)
        info = log.read(fetch_offset, max_bytes, upper, min_one_message)
        if isolation_level == READ_COMMITTED and info.records is not None:
            aborted = log.collect_aborted_transactions(fetch_offset, upper)
            info = info._replace(aborted_transactions=aborted)
        return info

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int):
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <=
        ``leader_epoch`` and the start offset of the epoch after it (or the
        log end offset for the latest)."""
        log = self.leader_log_or_raise(current_leader_epoch)
        return log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
