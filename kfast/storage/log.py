"""Log: one partition's segments, offsets and append/read paths (Kafka's UnifiedLog).

State a Kafka engineer expects, as attributes:
  log_start_offset   first offset a consumer may read (DeleteRecords/retention
                     move it forward; segments below it are deleted whole)
  log_end_offset     offset the next appended record gets (LEO)
  high_watermark     offsets below it are committed; set by the replica manager
  last_stable_offset min(first offset of an undecided transaction, HW)
  recovery_point     everything below it has been fsynced

Storage is synchronous: the broker calls ``append_*``/``read`` on its event
loop (they do one write / no data reads) and runs ``flush`` and the periodic
jobs in an executor. A per-log lock orders structural changes against those
background jobs.
"""

from __future__ import annotations

import bisect
import os
import random
import re
import shutil
import threading
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, NamedTuple

from kfast._ext import log_append as scan_status
from kfast._ext.layout import RECORD_BATCH_OVERHEAD
from kfast._ext.log_append import BatchScan, FileState, LogState, now_ms
from kfast.config import LogConfig
from kfast.metrics.broker_stats import LOG_FLUSH_STATS
from kfast.protocol.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kfast.protocol.errors import (
    CorruptRecordException,
    InvalidRecordException,
    InvalidTimestampException,
    KafkaStorageException,
    OffsetOutOfRangeException,
    RecordTooLargeException,
)
from kfast.records import LegacyRecordFormatError, RecordBatch, iter_batches
from kfast.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochFileCache,
    PartitionMetadataFile,
)
from kfast.storage.file_records import FileRecords
from kfast.storage.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from kfast.storage.producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_REPLICATION,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
)
from kfast.storage.segment import (
    DELETED_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
)
from kfast.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from typing_extensions import Buffer

# A future replica's directory (JBOD moves): <topic>-<partition>.<uuid>-future
# (Kafka's LocalLog.FutureDirPattern).
_FUTURE_DIR = re.compile(r"(.+)\.[0-9a-f]{32}-future")


def parse_topic_partition(directory: str) -> tuple[str, int]:
    """``<topic>-<partition>`` (the partition after the last dash), also
    as a future replica's ``<topic>-<partition>.<uuid>-future``."""
    name = os.path.basename(os.path.normpath(directory))
    future = _FUTURE_DIR.fullmatch(name)
    if future is not None:
        name = future.group(1)
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(
            f"Found directory {directory}, '{name}' is not in the form of topic-partition"
        )
    return topic, int(partition)


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    records_count: int
    valid_bytes: int
    # True when the batch was a retry of one already in the log (idempotence):
    # the offsets are the original ones and nothing was written.
    duplicate: bool = False


class RecordValidationException(InvalidRecordException):
    """Kafka's RecordValidationException: a batch rejected because of some of
    its records. ``record_errors``: (batch_index, message) per rejected
    record, batch_index being its position in the batch (ProduceResponse
    record_errors, KIP-467)."""

    def __init__(self, record_errors: list[tuple[int, str]]):
        self.record_errors = record_errors
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in record_errors[:3]
        )
        super().__init__(
            f"One or more records have been rejected due to {len(record_errors)} record errors "
            f"in total, and only showing the first three errors at most: [{shown}]"
        )


# LogAppendInfo(...) goes through the NamedTuple's Python __new__; the append
# path builds one per request, all fields given.
_new_tuple = tuple.__new__


class Log(LogState):
    # What this log keeps in LogState's C fields (Any to the kernel's stub).
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager
    time_ms: Callable[[], int]

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        topic_id: str | None = None,
        producer_id_expiration_ms: int = 86400000,
        time_ms: Callable[[], int] = now_ms,
        flush_requester: Callable[[Log], None] | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        segment_fallocate_step: int = 0,
    ):
        """``segment_fallocate_step``: the most bytes the active segment
        reserves on disk ahead of its writes (FileState.reserve; the broker's
        kfast.log.segment.fallocate.step.bytes), 0 for none."""
        from kfast.storage.loader import load_log  # loader builds on this module's types

        self.dir = directory
        self.topic, self.partition = parse_topic_partition(directory)
        self.segment_fallocate_step = segment_fallocate_step
        self._scan = BatchScan(FileRecords, LogAppendInfo)
        self._fast_append = True
        self._apply_config(config)
        self.time_ms = time_ms
        self.flush_requester = flush_requester
        # The LogDirFailureChannel an I/O error of this log is reported to
        # (None: the error only fails the call).
        self.failure_channel = failure_channel
        self._lock = threading.RLock()
        self._segments: dict[int, LogSegment] = {}
        self._base_offsets: list[int] = []
        self._active_segment: LogSegment | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.offline = False
        self.leader_epoch_cache = LeaderEpochFileCache(
            os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        )
        self.producer_state = ProducerStateManager(
            directory, f"{self.topic}-{self.partition}", producer_id_expiration_ms, self
        )
        self.partition_metadata = PartitionMetadataFile(directory)
        self.topic_id = topic_id
        os.makedirs(directory, exist_ok=True)
        if topic_id is not None:
            self.partition_metadata.write(topic_id)
        else:
            self.topic_id = self.partition_metadata.read()
        self.log_start_offset = log_start_offset
        self.log_end_offset = 0
        self.recovery_point = recovery_point
        self.high_watermark = 0
        self._unflushed_messages = 0
        self.last_flush_ms = time_ms()
        self._hw_metadata: LogOffsetMetadata | None = None
        load_log(self, had_clean_shutdown)
        self.high_watermark = self.log_start_offset

    def _apply_config(self, config: LogConfig) -> None:
        # The append path reads these per batch: plain attributes, not lookups.
        self.config = config
        self._max_message_bytes = config.max_message_bytes
        self._log_append_time = config.log_append_time
        self._timestamp_before_max_ms = config.message_timestamp_before_max_ms
        self._timestamp_after_max_ms = config.message_timestamp_after_max_ms
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        # The C fast path reads batch headers only; a compacted topic needs
        # every record's key checked, so its appends take the general path.
        self._compacted = config.compact
        self._fast_append = not config.compact
        self._flush_messages = config.flush_messages
        # Asked by every acks=-1 append (Partition.append_records_to_leader).
        self.min_insync_replicas: int = config["min.insync.replicas"]
        self._scan.configure(
            self._max_message_bytes,
            self._log_append_time,
            self._timestamp_before_max_ms,
            self._timestamp_after_max_ms,
            self._segment_bytes,
            self._segment_ms,
        )

    # -- segments ---------------------------------------------------------------
    def _add_segment(self, segment: LogSegment) -> None:
        if segment.base_offset not in self._segments:
            bisect.insort(self._base_offsets, segment.base_offset)
        self._segments[segment.base_offset] = segment
        active = self._segments[self._base_offsets[-1]]
        if active is not self._active_segment and isinstance(active.log, FileState):
            # Only the active segment is written, so only it reserves blocks
            # ahead (given back when it rolls: LogSegment.on_become_inactive).
            active.log._allocate_step = self.segment_fallocate_step
        self._active_segment = active

    def _remove_segment(self, base_offset: int) -> LogSegment:
        segment = self._segments.pop(base_offset)
        del self._base_offsets[bisect.bisect_left(self._base_offsets, base_offset)]
        self._active_segment = (
            self._segments[self._base_offsets[-1]] if self._base_offsets else None
        )
        return segment

    @property
    def segments(self) -> list[LogSegment]:
        return [self._segments[b] for b in self._base_offsets]

    @property
    def active_segment(self) -> LogSegment:
        # Kept by _add_segment/_remove_segment: every append reads it.
        active = self._active_segment
        if active is None:
            raise IndexError("the log has no segments")
        return active

    @property
    def num_segments(self) -> int:
        return len(self._base_offsets)

    def floor_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._base_offsets, offset)
        return self._segments[self._base_offsets[i - 1]] if i else None

    def _segments_from(self, offset: int) -> list[LogSegment]:
        i = max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)
        return [self._segments[b] for b in self._base_offsets[i:]]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments.values())

    # last_stable_offset -> min(first unstable offset, HW), at least the log
    # start offset, is LogState's (log_append.pyx): the Fetch fast path's
    # caught-up check reads it as C.

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch()

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageException(
                f"The log for partition {self.topic}-{self.partition} is offline after a disk error"
            )

    @property
    def parent_dir(self) -> str:
        """The log dir holding this partition's directory."""
        return os.path.dirname(self.dir)

    def _storage_error(self, exc: OSError, what: str) -> KafkaStorageException:
        """The KafkaStorageException for ``exc``; a disk failure (not a
        descriptor limit) also takes the log, and through the failure
        channel its whole log dir, offline (Kafka's maybeHandleIOException)."""
        message = f"Error while {what} for {self.topic}-{self.partition} in dir {self.parent_dir}"
        if self.failure_channel is not None and is_log_dir_failure(exc):
            self.offline = True
            self.failure_channel.maybe_add_offline_log_dir(self.parent_dir, message, exc)
        return KafkaStorageException(f"{message}: {exc}")

    # -- validation -------------------------------------------------------------
    def _scan_error(self, status: int, scan: BatchScan, now: int) -> Exception:
        """The Kafka exception for a failed BatchScan (see kfast/_ext/log_append.pxd)."""
        value, other = scan.error_value, scan.error_other
        if status == scan_status.TRUNCATED:
            return CorruptRecordException(
                f"Record batch at position {scan.error_position} is truncated ({value} bytes)"
            )
        if status == scan_status.LEGACY_MAGIC:
            return LegacyRecordFormatError(value)
        if status == scan_status.UNKNOWN_MAGIC:
            return CorruptRecordException(f"Record batch has unknown magic {value}")
        if status == scan_status.BATCH_TOO_SMALL:
            return CorruptRecordException(
                f"Record batch is corrupt (the size {value} is smaller than the minimum allowed "
                f"overhead {RECORD_BATCH_OVERHEAD})"
            )
        if status == scan_status.BATCH_TRUNCATED:
            return CorruptRecordException(
                f"Record batch is truncated: declares {value} bytes, {other} available"
            )
        if status == scan_status.TOO_LARGE:
            return RecordTooLargeException(
                f"The record batch size in the append to {self.topic}-{self.partition} is "
                f"{value} bytes which exceeds the maximum configured value of "
                f"{self._max_message_bytes}."
            )
        if status == scan_status.BAD_CRC:
            return CorruptRecordException(
                f"Record batch at offset {scan.error_base_offset} in the append to "
                f"{self.topic}-{self.partition} is corrupt (stored crc = {value}, "
                f"computed crc = {other})"
            )
        if status == scan_status.CONTROL_FROM_CLIENT:
            return InvalidRecordException("Clients are not allowed to write control records")
        if status == scan_status.BAD_RECORDS_COUNT:
            return InvalidRecordException(
                f"Record batch has {value} records but a last offset delta of {other}"
            )
        if status == scan_status.TRANSACTIONAL_WITHOUT_PRODUCER_ID:
            return InvalidRecordException("Transactional records must have a producer id")
        if status == scan_status.BAD_TIMESTAMP:
            return InvalidTimestampException(
                f"Timestamp {value} of a record in {self.topic}-{self.partition} is out "
                f"of range. The timestamp should be within "
                f"[{now - self._timestamp_before_max_ms}, {now + self._timestamp_after_max_ms}]"
            )
        if status == scan_status.OUT_OF_ORDER:
            return InvalidRecordException(
                f"Out of order offsets in replicated batch: {scan.error_base_offset} is below "
                f"the log end offset {other} of {self.topic}-{self.partition}"
            )
        return CorruptRecordException(f"Record batch scan failed with status {status}")

    # -- append -----------------------------------------------------------------
    # append_as_leader(records, leader_epoch=0, origin=ORIGIN_CLIENT, now=None)
    # is LogState's (kfast/_ext/log_append.pyx): its plain appends never leave
    # C; the rest comes back here.

    def _append_as_leader_general(
        self, records: Buffer, leader_epoch: int | None, origin: str, now: int | None
    ) -> LogAppendInfo:
        """append_as_leader for what its fast path leaves: a read-only buffer
        (copied once, then appended as a writable one), the general path
        forced or no leader epoch, an offline log (raises) or the lock held
        by a background job (waits for it)."""
        now = self.time_ms() if now is None else now
        view = memoryview(records)
        if view.readonly:
            view = memoryview(bytearray(view))
            if self._fast_append and leader_epoch is not None:
                info: LogAppendInfo = self.append_as_leader(view, leader_epoch, origin, now)
                return info
        return self._append(view, origin, leader_epoch, now, True)

    def _append_failed(self, exc: OSError) -> KafkaStorageException:
        """The exception for a write that failed in the append kernel. The
        kernel cut the file back to its previous size, so nothing changed;
        if it could not, the log goes offline."""
        segment = self.active_segment
        if segment.log.size != self._expected_size(segment):
            self.offline = True
        return self._storage_error(exc, "appending records")

    def append_as_follower(self, records: Buffer, now: int | None = None) -> LogAppendInfo:
        """Append batches that already carry offsets (replication)."""
        now = self.time_ms() if now is None else now
        return self._append(memoryview(records), ORIGIN_REPLICATION, None, now, False)

    def _append(
        self,
        view: memoryview,
        origin: str,
        leader_epoch: int | None,
        now: int,
        assign_offsets: bool,
    ) -> LogAppendInfo:
        """The general path: scan, then _append_scanned."""
        from_client = origin == ORIGIN_CLIENT
        log_append_time = now if self._log_append_time else -1
        with self._lock:
            scan = self._scan
            if from_client and log_append_time < 0:
                # The batch's first and largest timestamps must be in this window.
                earliest = now - self._timestamp_before_max_ms
                latest = now + self._timestamp_after_max_ms
                status = scan.scan(
                    view,
                    assign_offsets,
                    self.log_end_offset,
                    leader_epoch or 0,
                    -1,
                    True,
                    self._max_message_bytes,
                    True,
                    earliest,
                    latest,
                )
            else:
                status = scan.scan(
                    view,
                    assign_offsets,
                    self.log_end_offset,
                    leader_epoch or 0,
                    log_append_time if assign_offsets else -1,
                    from_client,
                    self._max_message_bytes,
                    False,
                    0,
                    0,
                )
            if status:
                raise self._scan_error(status, scan, now)
            if self._compacted and assign_offsets:
                self._check_keys(view)
            return self._append_scanned(view, scan, origin, leader_epoch, now)

    def _check_keys(self, view: memoryview) -> None:
        """Kafka's LogValidator.validateKey for a leader append to a compacted
        topic: a record without a key rejects its batch with INVALID_RECORD."""
        for batch in iter_batches(view):
            record_errors = [
                (
                    index,
                    f"Compacted topic cannot accept message without key in topic "
                    f"partition {self.topic}-{self.partition}",
                )
                for index, record in enumerate(batch)
                if record.key is None
            ]
            if record_errors:
                raise RecordValidationException(record_errors)

    def _append_scanned(
        self, view: memoryview, scan: BatchScan, origin: str, leader_epoch: int | None, now: int
    ) -> LogAppendInfo:
        """Everything after a successful scan (under the lock): producer
        state, roll, write, index, epochs, flush policy."""
        log_append_time = now if self._log_append_time else -1
        if self.offline:
            self._check_online()
        if not scan.batch_count:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0)
        first_offset = scan.first_offset
        producer_infos: dict[int, ProducerAppendInfo] | None = None
        completed: list[CompletedTxn] | None = None
        if scan.has_producer_id:
            found = self._prepare_producer_updates(view, scan, origin)
            if isinstance(found, LogAppendInfo):
                return found  # a duplicate: nothing is written
            producer_infos, completed = found
        offset = scan.next_offset
        last_offset = offset - 1
        max_ts = scan.max_timestamp
        size = scan.valid_bytes
        # Never None from load_log (which gives every log a segment) until
        # delete(); the active_segment property's check is left off this path.
        segment: LogSegment = self._active_segment  # type: ignore[assignment]
        if segment.should_roll(
            self._segment_bytes, self._segment_ms, max_ts, last_offset, size, now
        ):
            segment = self.roll(first_offset)
        try:
            segment.append_scanned(view, scan)
        except OSError as exc:
            # The file was rolled back to its previous size: nothing changed.
            if segment.log.size != self._expected_size(segment):
                self.offline = True
            raise self._storage_error(exc, "appending records") from exc
        if leader_epoch is not None:
            if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch():
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
        else:
            for epoch, base_offset in scan.leader_epochs():
                self.leader_epoch_cache.assign(epoch, base_offset)
        if producer_infos is not None:
            for info in producer_infos.values():
                self.producer_state.update(info)
        if completed is not None:
            for txn in completed:
                if txn.is_aborted:
                    segment.txn_index.append(
                        AbortedTxn(
                            txn.producer_id,
                            txn.first_offset,
                            txn.last_offset,
                            self.producer_state.last_stable_offset(txn),
                        )
                    )
                self.producer_state.complete_txn(txn)
        self.log_end_offset = offset
        self.producer_state.map_end_offset = offset
        records_count = scan.records_count
        self._unflushed_messages += records_count
        if self._unflushed_messages >= self._flush_messages:
            self._request_flush()
        return _new_tuple(
            LogAppendInfo,
            (
                first_offset,
                last_offset,
                max_ts,
                scan.offset_of_max_timestamp,
                log_append_time,
                self.log_start_offset,
                records_count,
                size,
                False,
            ),
        )

    def _prepare_producer_updates(
        self, view: memoryview, scan: BatchScan, origin: str
    ) -> LogAppendInfo | tuple[dict[int, ProducerAppendInfo], list[CompletedTxn] | None]:
        """Producer-state updates for the scanned batches that carry a producer
        id: ``(infos by producer id, completed transactions or None)``, or the
        LogAppendInfo of the original append if a client batch is a retry
        already in the log (idempotence)."""
        producer_infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] | None = None
        for position in scan.positions(True):
            batch = RecordBatch(view, position)
            if origin == ORIGIN_CLIENT and not batch.is_control:
                duplicate = self.producer_state.find_duplicate(batch)
                if duplicate is not None:
                    return LogAppendInfo(
                        duplicate.first_offset,
                        duplicate.last_offset,
                        duplicate.timestamp,
                        duplicate.last_offset,
                        -1,
                        self.log_start_offset,
                        batch.records_count,
                        0,
                        True,
                    )
            info = producer_infos.get(batch.producer_id)
            if info is None:
                info = self.producer_state.prepare_update(batch.producer_id, origin)
                producer_infos[batch.producer_id] = info
            done = info.append(
                batch, view[position : position + batch.size_in_bytes] if batch.is_control else None
            )
            if done is not None:
                completed = (completed or []) + [done]
        return producer_infos, completed

    def _expected_size(self, segment: LogSegment) -> int:
        return os.fstat(segment.log.fileno()).st_size

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at the log
        end offset (or ``expected_next_offset`` if later)."""
        with self._lock:
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self.active_segment
            if active.base_offset == new_offset:
                if active.size == 0:
                    return active  # an empty active segment at that offset already
                raise KafkaStorageException(
                    f"Trying to roll a new log segment for {self.topic}-{self.partition} with "
                    f"start offset {new_offset} which already exists"
                )
            try:
                active.on_become_inactive()
                self.producer_state.update_map_end_offset(new_offset)
                self.producer_state.take_snapshot(sync=False)
                segment = self._new_segment(new_offset)
            except OSError as exc:
                raise self._storage_error(exc, "rolling a segment") from exc
            self._add_segment(segment)
            return segment

    def _new_segment(self, base_offset: int) -> LogSegment:
        for stale in (".log", ".index", ".timeindex", ".txnindex"):
            path = os.path.join(self.dir, f"{base_offset:020d}{stale}")
            if os.path.exists(path):
                os.unlink(path)  # left behind by a truncation, as Kafka deletes them too
        jitter = self.config.segment_jitter_ms
        return LogSegment.open(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.max_index_size,
            roll_jitter_ms=random.randrange(jitter) if jitter > 0 else 0,
            created_ms=self.time_ms(),
            preallocate_bytes=self.config.segment_bytes if self.config.preallocate else 0,
        )

    # -- read -------------------------------------------------------------------
    def _offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` is: segment and position of the batch holding it."""
        if offset == self.log_end_offset:
            active = self.active_segment
            return LogOffsetMetadata(offset, active.base_offset, active.size)
        for segment in self._segments_from(offset):
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found.position)
        active = self.active_segment
        return LogOffsetMetadata(offset, active.base_offset, active.size)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Batches from ``start_offset`` as a FileRegion of one segment, at
        most ``max_bytes`` (the first batch whole when ``min_one_message``),
        stopping before the batch holding ``upper_bound`` (the high watermark
        or last stable offset; None = log end). Raises
        OffsetOutOfRangeException outside [log_start_offset, log_end_offset]."""
        with self._lock:
            self._check_online()
            end = self.log_end_offset
            if start_offset < self.log_start_offset or start_offset > end:
                raise OffsetOutOfRangeException(
                    f"Received request for offset {start_offset} for partition "
                    f"{self.topic}-{self.partition}, but we only have log segments from offset "
                    f"{self.log_start_offset} up to {end}."
                )
            bound = end if upper_bound is None else min(upper_bound, end)
            if start_offset >= bound:
                return FetchDataInfo(LogOffsetMetadata(start_offset), None)
            if bound == end:
                bound_meta = LogOffsetMetadata(
                    end, self.active_segment.base_offset, self.active_segment.size
                )
            elif self._hw_metadata is not None and self._hw_metadata.message_offset == bound:
                bound_meta = self._hw_metadata
            else:
                bound_meta = self._offset_metadata(bound)
                if bound == self.high_watermark:
                    self._hw_metadata = bound_meta
            for segment in self._segments_from(start_offset):
                if segment.base_offset > bound_meta.segment_base_offset:
                    break
                bound_segment = segment.base_offset == bound_meta.segment_base_offset
                max_position = (
                    bound_meta.relative_position_in_segment if bound_segment else segment.size
                )
                info = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if bound_segment:
                    # The next fetch of a reader at the tail is for ``bound``.
                    segment.note_offset_position(bound, max_position)
                if info is not None:
                    return info
            return FetchDataInfo(LogOffsetMetadata(start_offset), None)

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound) (read_committed)."""
        found = []
        for segment in self._segments_from(start_offset):
            result = segment.txn_index.collect_aborted_txns(start_offset, upper_bound)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return found

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (timestamp, offset) of the first record at or after
        ``timestamp``; -1 latest, -2 earliest, -3 the max timestamp. None if
        no record is that late."""
        with self._lock:
            if timestamp == EARLIEST_TIMESTAMP:
                return (-1, self.log_start_offset)
            if timestamp == LATEST_TIMESTAMP:
                return (-1, self.log_end_offset)
            if timestamp == MAX_TIMESTAMP:
                # The first segment with the largest timestamp, then the
                # record in it (not its batch's last offset).
                best, best_timestamp = None, -1
                for segment in self.segments:
                    if segment.max_timestamp_so_far > best_timestamp:
                        best, best_timestamp = segment, segment.max_timestamp_so_far
                found = None if best is None else best.find_max_timestamp_record()
                return None if found is None else (found.timestamp, found.offset)
            for segment in self.segments:
                if segment.largest_timestamp() >= timestamp or segment is self.active_segment:
                    found = segment.find_offset_by_timestamp(
                        timestamp, max(self.log_start_offset, segment.base_offset)
                    )
                    if found is not None:
                        return (found.timestamp, found.offset)
            return None

    # -- offsets ------------------------------------------------------------------
    # update_high_watermark(high_watermark) -> the HW set, clamped to
    # [log_start_offset, log_end_offset], is LogState's (log_append.pyx).

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        with self._lock:
            if new_start > self.high_watermark:
                raise OffsetOutOfRangeException(
                    f"Cannot increment the log start offset to {new_start} of partition "
                    f"{self.topic}-{self.partition} since it is larger than the high watermark "
                    f"{self.high_watermark}"
                )
            if new_start <= self.log_start_offset:
                return False
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
            self.producer_state.on_log_start_offset_incremented(new_start)
            return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` and delete
        the segments wholly below it; returns the new log start offset."""
        with self._lock:
            self.maybe_increment_log_start_offset(offset)
            self.delete_segments_below_log_start()
            return self.log_start_offset

    def delete_segments_below_log_start(self) -> int:
        """Delete segments whose successor starts at or below the log start offset."""
        with self._lock:
            doomed = []
            bases = self._base_offsets
            for i, base in enumerate(bases[:-1]):
                if bases[i + 1] <= self.log_start_offset:
                    doomed.append(self._segments[base])
            self.delete_segments(doomed)
            return len(doomed)

    def delete_segments(self, segments: list[LogSegment], keep_log_start: bool = False) -> None:
        """Remove segments from the log (never the active one while it has
        data): rename their files to ``.deleted`` now, remove them after
        file.delete.delay.ms (a reader may still hold them). The cleaner
        passes ``keep_log_start`` as it puts a replacement in right away."""
        if not segments:
            return
        with self._lock:
            if len(segments) == len(self._base_offsets):
                self.roll()
            for segment in segments:
                self._remove_segment(segment.base_offset)
            first_base = self._base_offsets[0]
            if keep_log_start:
                pass
            elif self.log_start_offset < first_base:
                self.log_start_offset = first_base
                self.leader_epoch_cache.truncate_from_start(first_base)
                self.producer_state.on_log_start_offset_incremented(first_base)
            if not keep_log_start:
                self.producer_state.delete_snapshots_before(first_base)
            due = self.time_ms() + self.config.file_delete_delay_ms
            for segment in segments:
                try:
                    segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
                except OSError as exc:
                    raise self._storage_error(exc, "deleting segments") from exc
                self._pending_deletes.append((due, segment))
            self.delete_pending_files(None if self.config.file_delete_delay_ms > 0 else due)

    def delete_pending_files(self, now: int | None = None) -> int:
        """Remove ``.deleted`` segments whose delay has passed; returns the count."""
        now = self.time_ms() if now is None else now
        with self._lock:
            ready = [s for due, s in self._pending_deletes if due <= now]
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for segment in ready:
            segment.delete_files()
        return len(ready)

    # -- truncation -----------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and above ``target_offset`` (replica
        truncation); returns whether anything was removed."""
        if target_offset < 0:
            raise ValueError(
                f"Cannot truncate partition {self.topic}-{self.partition} to a "
                f"negative offset ({target_offset})."
            )
        with self._lock:
            if target_offset >= self.log_end_offset:
                # Nothing to cut from the records, but an epoch this replica
                # began (as leader) and wrote nothing in may end the cache;
                # the leader said it diverges, so it goes (as Kafka's
                # truncateTo always truncates the epoch cache).
                self.leader_epoch_cache.truncate_from_end(target_offset)
                return False
            if target_offset <= self._base_offsets[0]:
                self.truncate_fully_and_start_at(target_offset)
                return True
            for base in list(self._base_offsets):
                if base >= target_offset:
                    self._remove_segment(base).delete_files()
            try:
                self.active_segment.truncate_to(target_offset, self.config.max_index_size)
            except OSError as exc:
                raise self._storage_error(exc, "truncating") from exc
            # A target below the log start (but inside the first segment: a
            # follower whose DeleteRecords or restart put its start beyond the
            # leader's end) brings the start down with the end, as Kafka's
            # truncateTo does; else the end would stay at the start and the
            # follower would fetch past the leader's end forever.
            self.log_start_offset = min(target_offset, self.log_start_offset)
            # The batch holding the target goes whole, so the end may be below
            # the target (replicas truncate at batch boundaries, where both
            # agree) - but never below the log start offset.
            end = min(target_offset, self.active_segment.read_next_offset())
            self._after_truncation(max(end, self.log_start_offset))
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log empty at ``new_offset``."""
        with self._lock:
            for base in list(self._base_offsets):
                self._remove_segment(base).delete_files()
            self._add_segment(self._new_segment(new_offset))
            self.log_start_offset = new_offset
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            self._after_truncation(new_offset)

    def _after_truncation(self, offset: int) -> None:
        self.log_end_offset = offset
        self.leader_epoch_cache.truncate_from_end(offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.high_watermark = min(self.high_watermark, offset)
        self._hw_metadata = None
        if self.producer_state.map_end_offset > offset:
            from kfast.storage.loader import rebuild_producer_state

            rebuild_producer_state(self, offset)

    # -- flush ----------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment with data below ``offset`` (default: the log
        end) not yet flushed, and advance the recovery point. Blocking: the
        broker runs it in an executor."""
        with self._lock:
            target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
            if target <= self.recovery_point:
                return
            segments = [
                s for s in self._segments_from(self.recovery_point) if s.base_offset < target
            ]
            self._unflushed_messages = 0
        started = perf_counter()
        try:
            for segment in segments:
                segment.flush()
            # An epoch assigned on the loop without fsync (Partition.make_leader)
            # becomes durable with the data it covers.
            self.leader_epoch_cache.flush_if_dirty()
        except OSError as exc:
            raise self._storage_error(exc, "flushing") from exc
        LOG_FLUSH_STATS.record((perf_counter() - started) * 1000.0)
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.time_ms()

    def _request_flush(self) -> None:
        """flush.messages reached: fsync now, or hand the flush to
        ``flush_requester`` (the broker passes one that runs ``log.flush``
        in an executor, so the event loop never waits for the disk)."""
        if self.flush_requester is None:
            self.flush()
        else:
            self._unflushed_messages = 0
            self.flush_requester(self)

    def flush_if_due(self, now: int) -> bool:
        """flush.ms policy: flush if the oldest unflushed write is that old."""
        if (
            self.log_end_offset > self.recovery_point
            and now - self.last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            return True
        return False

    # -- config and life cycle -------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs live (retention, segment size/time, ...)."""
        with self._lock:
            self._apply_config(config)
            active = self.active_segment
            active.index_interval_bytes = config.index_interval_bytes
            active.max_index_size = config.max_index_size

    def close(self) -> None:
        """Flush nothing (the caller decides); snapshot producer state, close files."""
        with self._lock:
            try:
                self.producer_state.update_map_end_offset(self.log_end_offset)
                self.producer_state.take_snapshot()
                self.leader_epoch_cache.flush_if_dirty()
                for segment in self.segments:
                    segment.close()
            except OSError as exc:
                raise self._storage_error(exc, "closing") from exc

    def close_handlers(self) -> None:
        """Release file handles without writing anything (offline dir)."""
        for segment in self.segments:
            try:
                segment.offset_index.close_handler()
                segment.time_index.close_handler()
                segment.log.close()
            except OSError:
                pass

    def rename_dir(self, new_dir: str) -> None:
        with self._lock:
            os.rename(self.dir, new_dir)
            self.dir = new_dir
            for segment in self.segments:
                for obj in (
                    segment.log,
                    segment.offset_index,
                    segment.time_index,
                    segment.txn_index,
                ):
                    obj.path = os.path.join(new_dir, os.path.basename(obj.path))
            self.leader_epoch_cache.rename_dir(new_dir)
            self.producer_state.log_dir = new_dir
            self.partition_metadata.path = os.path.join(
                new_dir, os.path.basename(self.partition_metadata.path)
            )

    def delete(self) -> None:
        """Close and remove the partition's directory."""
        with self._lock:
            for segment in self.segments:
                segment.close()
            self._segments.clear()
            self._base_offsets.clear()
            self._active_segment = None
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self.high_watermark}, "
            f"segments={self.num_segments})"
        )
