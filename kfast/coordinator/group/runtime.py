"""GroupCoordinatorRuntime: runs the GroupCoordinator inside a broker (the
part of Kafka's CoordinatorRuntime kfast needs).

It knows the broker only through narrow interfaces: a PartitionWriter for
__consumer_offsets (kfast.coordinator.partition_writer), a Timer and the
config, so it can run on whichever broker leads the partitions.

* Ownership: a group belongs to partition ``partition_for(group_id)`` of
  __consumer_offsets; this broker coordinates it while it leads that
  partition. Otherwise requests get NOT_COORDINATOR (the client looks the
  coordinator up again), or COORDINATOR_NOT_AVAILABLE while the partition
  does not exist or has no leader.
* Loading: the first request for a partition this broker leads (or the
  broker's start, or the first request after the leader epoch changed)
  replays the partition's log up to its log end offset
  (latest record per key wins, tombstones delete, so an uncompacted log
  gives the same state), then gives the loaded members a session timeout to
  heartbeat in. The replay runs on the loop in slices of LOAD_SLICE_MS, a
  batch at a time: a small partition loads within the request that asked
  for it; a large one goes on in later loop iterations (call_soon), so the
  loop keeps serving, and its groups are answered
  COORDINATOR_LOAD_IN_PROGRESS (which clients retry) until it is loaded, as
  Kafka answers while its loader thread replays.
* Writing: the coordinator's records go out as one record batch per call,
  appended as leader with acks=-1; the coordinator hears back only when the
  high watermark covers the batch, with append errors mapped to what Kafka's
  coordinator answers (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...).
* Retention: every offsets.retention.check.interval.ms the coordinator
  expires the offsets of empty groups (on the timer it is given).
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time

from kfast.config import KafkaConfig
from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.coordinator.group.coordinator import GroupCoordinator
from kfast.coordinator.group.records import UnknownRecordTypeError, partition_for
from kfast.coordinator.partition_writer import CoordinatorReplica, PartitionWriter
from kfast.protocol import errors as E
from kfast.records import CONTROL_TYPE_COMMIT, RecordBatchBuilder, iter_batches
from kfast.server_common.purgatory import Timer

logger = logging.getLogger(__name__)

# How long one slice of a partition load may hold the event loop.
LOAD_SLICE_MS = 20.0

# Append errors -> what the coordinator answers (Kafka's
# CoordinatorRuntime / GroupMetadataManager mapping).
_APPEND_ERRORS = {
    E.UnknownTopicOrPartitionException.code: E.CoordinatorNotAvailableException.code,
    E.NotEnoughReplicasException.code: E.CoordinatorNotAvailableException.code,
    E.NotEnoughReplicasAfterAppendException.code: E.CoordinatorNotAvailableException.code,
    E.TimeoutException.code: E.CoordinatorNotAvailableException.code,
    E.NotLeaderOrFollowerException.code: E.NotCoordinatorException.code,
    E.KafkaStorageException.code: E.NotCoordinatorException.code,
    E.RecordTooLargeException.code: E.InvalidCommitOffsetSizeException.code,
    E.RecordBatchTooLargeException.code: E.InvalidCommitOffsetSizeException.code,
    E.InvalidFetchSizeException.code: E.InvalidCommitOffsetSizeException.code,
}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class _PartitionLoad:
    """A partition being replayed: where the next slice starts."""

    __slots__ = ("index", "partition", "offset", "end_offset", "leader_epoch", "records",
                 "began", "handle", "markers")

    def __init__(self, index: int, partition: CoordinatorReplica):
        self.index = index
        self.partition = partition
        self.offset = partition.log.log_start_offset
        # To the log end, not the high watermark (Kafka's CoordinatorLoader):
        # a new leader's high watermark waits for its followers' first
        # fetches, but everything in its log was in sync and is what the
        # partition holds from now on.
        self.end_offset = partition.log.log_end_offset
        self.leader_epoch = getattr(partition, "leader_epoch", -1)
        self.records = 0
        self.began = time.perf_counter()
        self.handle = None
        # (producer id, committed) of markers written while loading.
        self.markers: list[tuple[int, bool]] = []


class GroupCoordinatorRuntime:
    """``partitions``: __consumer_offsets on the hosting broker; ``timer``:
    the broker's timer (session and rebalance timeouts, offset retention);
    ``config``: the broker's static configuration (offsets.*, group.*)."""

    def __init__(self, config: KafkaConfig, timer: Timer, partitions: PartitionWriter):
        self.partitions = partitions
        self.timer = timer
        self.num_partitions = config["offsets.topic.num.partitions"]
        self.commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self.load_buffer_size = config["offsets.load.buffer.size"]
        self.coordinator = GroupCoordinator(config, timer, self._write, _wall_clock_ms)
        self.loaded: set[int] = set()
        # The leader epoch each loaded partition was loaded in: leadership
        # lost and regained in between (another broker wrote meanwhile)
        # means loading again.
        self._loaded_epochs: dict[int, int] = {}
        self.loading: dict[int, _PartitionLoad] = {}
        self._retention_interval_ms = config["offsets.retention.check.interval.ms"]
        self._retention_entry = None
        self._stopped = False
        self._schedule_retention()

    # -- ownership ---------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def check_coordinator(self, group_id: str) -> int:
        """0 when this broker coordinates ``group_id`` (its partition loaded),
        else the error code for the request."""
        return self.check_coordinator_partition(self.partition_for(group_id))

    def check_coordinator_partition(self, index: int) -> int:
        if self._stopped:
            return E.CoordinatorNotAvailableException.code
        partition = self.partitions.replica(index)
        if partition is None:
            leader = self.partitions.metadata_leader(index)
            if leader is None:
                return E.CoordinatorNotAvailableException.code
            if leader != self.partitions.node_id:
                return E.NotCoordinatorException.code
            # Ours in the metadata, its log not created yet: Kafka's
            # "loading" answer, which clients retry.
            return E.CoordinatorLoadInProgressException.code
        if not partition.is_leader:
            if index in self.loaded or index in self.loading:
                self._unload(index)
            return E.NotCoordinatorException.code
        if index in self.loading:
            return E.CoordinatorLoadInProgressException.code
        if index in self.loaded and \
                self._loaded_epochs.get(index) != getattr(partition, "leader_epoch", -1):
            self._unload(index)
        if index not in self.loaded and not self._load(index, partition):
            return E.CoordinatorLoadInProgressException.code
        return 0

    def load_all(self) -> None:
        """Load every partition this broker leads (ListGroups lists them all)."""
        for index in range(self.num_partitions):
            if index not in self.loaded and self.partitions.replica(index) is not None:
                self.check_coordinator_partition(index)

    def _load(self, index: int, partition: CoordinatorReplica) -> bool:
        """Start replaying a partition: True if it is loaded already (its
        first slice covered it), False while it goes on in later slices."""
        load = self.loading[index] = _PartitionLoad(index, partition)
        return self._load_slice(load)

    def _load_slice(self, load: _PartitionLoad) -> bool:
        load.handle = None
        if self._stopped or self.loading.get(load.index) is not load:
            return False
        if not load.partition.is_leader:
            self._unload(load.index)
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None     # no loop to come back on (a caller outside the broker)
        deadline = time.perf_counter() + LOAD_SLICE_MS / 1000 if loop is not None \
            else float("inf")
        try:
            finished = self._replay_until(load, deadline)
        except Exception:
            logger.exception("loading %s-%d failed", GROUP_METADATA_TOPIC_NAME, load.index)
            # What it replayed goes; the next request starts over.
            self._unload(load.index)
            return False
        if not finished:
            load.handle = loop.call_soon(self._load_slice, load)
            return False
        del self.loading[load.index]
        self.loaded.add(load.index)
        for producer_id, committed in load.markers:
            self._end_transaction(load.index, producer_id, committed)
        self._loaded_epochs[load.index] = load.leader_epoch
        self.coordinator.on_loaded(g for g in (*self.coordinator.groups,
                                               *self.coordinator.consumer_groups)
                                   if self.partition_for(g) == load.index)
        logger.info("loaded %d records of %s-%d in %.1f ms", load.records,
                    GROUP_METADATA_TOPIC_NAME, load.index,
                    (time.perf_counter() - load.began) * 1000)
        return True

    def _replay_until(self, load: _PartitionLoad, deadline: float) -> bool:
        """Replay whole batches from ``load.offset`` until the high watermark
        (True) or, after at least one batch, the deadline (False)."""
        log = load.partition.log
        while load.offset < load.end_offset:
            info = log.read(load.offset, self.load_buffer_size, load.end_offset, True)
            if info.records is None:
                return True
            data = info.records.read()
            start = load.offset
            for batch in iter_batches(data, allow_partial=True):
                if batch.is_control:
                    self._replay_marker(load.index, batch)
                else:
                    # A TxnOffsetCommit's offsets stay pending until the marker.
                    producer_id = batch.producer_id if batch.is_transactional else -1
                    for record in batch:
                        if record.key is None:
                            continue
                        try:
                            self.coordinator.replay(
                                bytes(record.key),
                                None if record.value is None else bytes(record.value),
                                producer_id)
                        except UnknownRecordTypeError as exc:
                            logger.debug("skipping offset %d of %s-%d: %s", record.offset,
                                         GROUP_METADATA_TOPIC_NAME, load.index, exc)
                            continue
                        load.records += 1
                load.offset = batch.last_offset + 1
                if time.perf_counter() >= deadline and load.offset < load.end_offset:
                    return False
            if load.offset <= start:
                return True
        return True

    def _replay_marker(self, index: int, batch) -> None:
        """A transaction marker in the log: the producer's pending offsets
        of this partition's groups are committed or dropped."""
        if not batch.is_transactional:
            return
        for record in batch:
            if record.key is not None and len(record.key) >= 4:
                control_type = struct.unpack_from(">h", bytes(record.key), 2)[0]
                self._end_transaction(index, batch.producer_id,
                                      control_type == CONTROL_TYPE_COMMIT)
            break

    def complete_transaction(self, index: int, producer_id: int, producer_epoch: int,
                             committed: bool) -> None:
        """The producer's transaction marker was appended to partition
        ``index`` of __consumer_offsets (WriteTxnMarkers): its pending
        offsets of that partition's groups become committed or go. While
        the partition is being loaded the marker is past the part being
        replayed, so it is applied once the load is done."""
        load = self.loading.get(index)
        if load is not None:
            load.markers.append((producer_id, committed))
        elif index in self.loaded:
            self._end_transaction(index, producer_id, committed)

    def _end_transaction(self, index: int, producer_id: int, committed: bool) -> None:
        self.coordinator.complete_transaction(
            producer_id, committed, lambda group_id: self.partition_for(group_id) == index)

    def _unload(self, index: int) -> None:
        self.loaded.discard(index)
        self._loaded_epochs.pop(index, None)
        load = self.loading.pop(index, None)
        if load is not None and load.handle is not None:
            load.handle.cancel()
        self.coordinator.unload([g for g in (*self.coordinator.groups,
                                             *self.coordinator.consumer_groups)
                                 if self.partition_for(g) == index])

    # -- writing -----------------------------------------------------------------------
    def _write(self, group_id: str, records: list, done,
               transaction: tuple[int, int] | None = None) -> None:
        """``transaction``: (producer id, producer epoch) of a TxnOffsetCommit,
        whose offsets go in a transactional batch of that producer (the
        transaction's COMMIT/ABORT marker on this partition settles them)."""
        index = self.partition_for(group_id)
        now = _wall_clock_ms()
        if transaction is None:
            builder = RecordBatchBuilder(0)
        else:
            producer_id, producer_epoch = transaction
            # Sequence 0 as Kafka's coordinator writes them: a coordinator
            # append is not sequence-checked, only epoch-checked.
            builder = RecordBatchBuilder(0, producer_id=producer_id,
                                         producer_epoch=producer_epoch, base_sequence=0,
                                         is_transactional=True)
        for key, value in records:
            builder.append(now, key, value)

        def committed(append_error: int) -> None:
            if not append_error:
                return done(0)
            logger.warning("appending to %s-%d failed: %s", GROUP_METADATA_TOPIC_NAME, index,
                           E.for_code(append_error).__name__)
            done(_APPEND_ERRORS.get(append_error, E.UnknownServerException.code))

        self.partitions.append(index, builder.build(), self.commit_timeout_ms, committed)

    # -- retention ---------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        if not self._stopped and self._retention_interval_ms < 2**31:
            self._retention_entry = self.timer.schedule(self._retention_interval_ms,
                                                        self._expire_offsets)

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
        self._stopped = True
        if self._retention_entry is not None:
            self._retention_entry.cancel()
        for load in self.loading.values():
            if load.handle is not None:
                load.handle.cancel()
        self.loading.clear()
        self.coordinator.unload([*self.coordinator.groups, *self.coordinator.consumer_groups])
        self.coordinator.shutdown()
