"""GroupCoordinatorRuntime: runs the GroupCoordinator inside a broker, on
the CoordinatorRuntime it shares with the transaction coordinator
(kfast.coordinator.runtime: ownership by leadership of the partition, sliced
loading by replay to the log end, reload on a new leader epoch, one batch
per write with acks=-1).

* Ownership: a group belongs to partition ``partition_for(group_id)`` of
  __consumer_offsets; this broker coordinates it while it leads that
  partition (the first request for it, or the broker's start, loads it).
* Loading: transactional batches (TxnOffsetCommit) replay as pending offsets
  of their producer, and the transaction markers in the log commit or drop
  them; once a partition is replayed its loaded members get a session
  timeout to heartbeat in. Losing the partition unloads its groups.
* Writing: append errors are answered as Kafka's group coordinator answers
  them (a batch too large is INVALID_COMMIT_OFFSET_SIZE, anything
  unexpected UNKNOWN_SERVER_ERROR).
* Retention: every offsets.retention.check.interval.ms the coordinator
  expires the offsets of empty groups (on the timer it is given).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kfast._ext.layout import CONTROL_RECORD_KEY
from kfast.config import KafkaConfig
from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.coordinator.group.coordinator import GroupCoordinator
from kfast.coordinator.group.records import UnknownRecordTypeError, partition_for
from kfast.coordinator.partition_writer import PartitionWriter
from kfast.coordinator.runtime import (
    CoordinatorRuntime,
    coordinator_error,
    keyed_records,
    wall_clock_ms,
)
from kfast.protocol import errors as E
from kfast.records import CONTROL_TYPE_COMMIT, RecordBatch, RecordBatchBuilder
from kfast.server_common.purgatory import Timer, TimerHandle

logger = logging.getLogger(__name__)


class GroupCoordinatorRuntime(CoordinatorRuntime):
    """``partitions``: __consumer_offsets on the hosting broker; ``timer``:
    the broker's timer (session and rebalance timeouts, offset retention);
    ``config``: the broker's static configuration (offsets.*, group.*)."""

    def __init__(self, config: KafkaConfig, timer: Timer, partitions: PartitionWriter):
        super().__init__(
            GROUP_METADATA_TOPIC_NAME,
            config["offsets.topic.num.partitions"],
            config["offsets.load.buffer.size"],
            partitions,
        )
        self.timer = timer
        self.commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self.coordinator = GroupCoordinator(config, timer, self._write, wall_clock_ms)
        # Per loading partition: (producer id, committed) of the markers
        # WriteTxnMarkers appended while it loads (past the replayed part).
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._retention_interval_ms = config["offsets.retention.check.interval.ms"]
        self._retention_entry: TimerHandle | None = None
        self._schedule_retention()

    # -- ownership ---------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def check_coordinator(self, group_id: str) -> int:
        """0 when this broker coordinates ``group_id`` (its partition loaded),
        else the error code for the request."""
        return self.check_coordinator_partition(self.partition_for(group_id))

    def _groups_of(self, index: int) -> list[str]:
        return [
            g
            for g in (*self.coordinator.groups, *self.coordinator.consumer_groups)
            if self.partition_for(g) == index
        ]

    # -- loading -----------------------------------------------------------------------
    def _begin_load(self, index: int, leader_epoch: int) -> None:
        self._markers_while_loading[index] = []

    def _replay_batch(self, index: int, batch: RecordBatch) -> int:
        if batch.is_control:
            self._replay_marker(index, batch)
            return 0
        # A TxnOffsetCommit's offsets stay pending until the marker.
        producer_id = batch.producer_id if batch.is_transactional else -1
        applied = 0
        for offset, key, value in keyed_records(batch):
            try:
                self.coordinator.replay(key, value, producer_id)
            except UnknownRecordTypeError as exc:
                logger.debug("skipping offset %d of %s-%d: %s", offset, self.topic, index, exc)
                continue
            applied += 1
        return applied

    def _replay_marker(self, index: int, batch: RecordBatch) -> None:
        """A transaction marker in the log: the producer's pending offsets
        of this partition's groups are committed or dropped."""
        if not batch.is_transactional:
            return
        for record in batch:
            if record.key is not None and len(record.key) >= CONTROL_RECORD_KEY.size:
                control_type = CONTROL_RECORD_KEY.unpack_from(bytes(record.key))[1]
                self._end_transaction(index, batch.producer_id, control_type == CONTROL_TYPE_COMMIT)
            break

    def _complete_load(self, index: int, leader_epoch: int) -> None:
        for producer_id, committed in self._markers_while_loading.pop(index, ()):
            self._end_transaction(index, producer_id, committed)
        self.coordinator.on_loaded(self._groups_of(index))

    def _unload_partition(self, index: int) -> None:
        self._markers_while_loading.pop(index, None)
        self.coordinator.unload(self._groups_of(index))

    # -- transactions ------------------------------------------------------------------
    def complete_transaction(
        self, index: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        """The producer's transaction marker was appended to partition
        ``index`` of __consumer_offsets (WriteTxnMarkers): its pending
        offsets of that partition's groups become committed or go. While
        the partition is being loaded the marker is past the part being
        replayed, so it is applied once the load is done."""
        if index in self.loading:
            self._markers_while_loading.setdefault(index, []).append((producer_id, committed))
        elif index in self.loaded:
            self._end_transaction(index, producer_id, committed)

    def _end_transaction(self, index: int, producer_id: int, committed: bool) -> None:
        self.coordinator.complete_transaction(
            producer_id, committed, lambda group_id: self.partition_for(group_id) == index
        )

    # -- writing -----------------------------------------------------------------------
    def _write(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        done: Callable[[int], None],
        transaction: tuple[int, int] | None = None,
    ) -> None:
        """``transaction``: (producer id, producer epoch) of a TxnOffsetCommit,
        whose offsets go in a transactional batch of that producer (the
        transaction's COMMIT/ABORT marker on this partition settles them)."""
        builder = None
        if transaction is not None:
            producer_id, producer_epoch = transaction
            # Sequence 0 as Kafka's coordinator writes them: a coordinator
            # append is not sequence-checked, only epoch-checked.
            builder = RecordBatchBuilder(
                0,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=0,
                is_transactional=True,
            )
        self.append(
            self.partition_for(group_id),
            records,
            self.commit_timeout_ms,
            lambda append_error: done(
                coordinator_error(
                    append_error,
                    too_large=E.InvalidCommitOffsetSizeException.code,
                    other=E.UnknownServerException.code,
                )
            ),
            builder,
        )

    # -- retention ---------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        if not self._stopped and self._retention_interval_ms < 2**31:
            self._retention_entry = self.timer.schedule(
                self._retention_interval_ms, self._expire_offsets
            )

    def _expire_offsets(self) -> None:
        if self.loading:
            # Half-replayed groups would look memberless; check next time.
            return self._schedule_retention()
        try:
            expired = self.coordinator.cleanup_expired_offsets()
            if expired:
                logger.info("expired %d offsets", expired)
        except Exception:
            logger.exception("offset expiration failed")
        self._schedule_retention()

    # -- life cycle --------------------------------------------------------------------
    def shutdown(self) -> None:
        """Answer every waiting JoinGroup/SyncGroup (members find the next
        coordinator) and stop the timers."""
        self._stop_loading()
        if self._retention_entry is not None:
            self._retention_entry.cancel()
        self.coordinator.unload([*self.coordinator.groups, *self.coordinator.consumer_groups])
        self.coordinator.shutdown()
