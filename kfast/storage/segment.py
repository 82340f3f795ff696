"""LogSegment: one .log file with its .index, .timeindex and .txnindex.

File names are the segment's base offset as 20 zero-padded digits plus a
suffix (docs/formats.md). Index entries follow Kafka's rule (LogSegment.append):
while appending batch after batch, once more than index.interval.bytes have
been written since the last entry, add (last offset of the batch, position
where the batch starts) to the offset index and (max timestamp so far, its
offset) to the time index. The first batch of a segment is therefore never
indexed. When the segment stops being active, a final time-index entry is
added and both indexes are trimmed to their valid size.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from kfast._ext.layout import INDEX_RELATIVE_OFFSET_MAX
from kfast._ext.log_append import SegmentState
from kfast.protocol.errors import CorruptRecordException
from kfast.protocol.file_region import FileRegion
from kfast.storage.file_records import BatchHeader, FileRecords, check_batch
from kfast.storage.index import (
    NO_TIMESTAMP,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
)
from kfast.storage.txn_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from kfast._ext.log_append import BatchScan
    from kfast.storage.file_records import BytesLike

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"


def filename_prefix_from_offset(offset: int) -> str:
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    return int(os.path.basename(name).split(".", 1)[0])


def segment_file(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, filename_prefix_from_offset(base_offset) + suffix)


class BatchInfo(NamedTuple):
    """What the segment needs to know about one batch it appends (plain
    ``(size, last_offset, max_timestamp)`` tuples are accepted too)."""

    size: int
    last_offset: int
    max_timestamp: int


class LogOffsetPosition(NamedTuple):
    """The batch holding an offset: its last offset, position and size."""

    offset: int
    position: int
    size: int


class LogOffsetMetadata(NamedTuple):
    """An offset with where it lives (Kafka's LogOffsetMetadata)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class FetchDataInfo(NamedTuple):
    fetch_offset_metadata: LogOffsetMetadata
    records: FileRegion | None
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.length


class LogSegment(SegmentState):
    # log, offset_index, time_index, base_offset, index_interval_bytes,
    # roll_jitter_ms, created_ms and the index and roll state below are
    # SegmentState's C fields: the append kernel reads and updates them.
    __slots__ = ("txn_index", "max_index_size", "_read_hint")
    # What this segment keeps in SegmentState's C fields (Any to the kernel's stub).
    log: FileRecords
    offset_index: OffsetIndex
    time_index: TimeIndex

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int = 0,
        created_ms: int | None = None,
        max_index_size: int = 10 * 1024 * 1024,
    ):
        self.log = log
        self.max_index_size = max_index_size
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self._max_timestamp_so_far: int | None = None  # None: not loaded yet
        self._offset_of_max_timestamp_so_far = base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        # (offset, position) such that every batch before ``position`` ends
        # below ``offset``: where the last read of this segment was bounded
        # (the log end or the high watermark). A consumer at the tail asks
        # for exactly that offset next, and its lookup starts there instead
        # of at the index entry below it (up to index.interval.bytes of batch
        # headers scanned in Python: ~85 us a read of single-record batches).
        self._read_hint: tuple[int, int] = (-1, 0)

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        created_ms: int | None = None,
        preallocate_bytes: int = 0,
        to_recover: bool = False,
    ) -> LogSegment:
        """Open (or create) the segment at ``base_offset`` in ``directory``.
        ``to_recover``: ``recover`` is called next, so the index files are
        not read (AbstractIndex's ``discard_entries``)."""

        def path(suffix: str) -> str:
            return segment_file(directory, base_offset, suffix + file_suffix)

        log = FileRecords(path(LOG_FILE_SUFFIX), preallocate_bytes=preallocate_bytes)
        offset_index = OffsetIndex(
            path(INDEX_FILE_SUFFIX), base_offset, max_index_size, discard_entries=to_recover
        )
        time_index = TimeIndex(
            path(TIME_INDEX_FILE_SUFFIX), base_offset, max_index_size, discard_entries=to_recover
        )
        txn_index = TransactionIndex(base_offset, path(TXN_INDEX_FILE_SUFFIX))
        return cls(
            log,
            offset_index,
            time_index,
            txn_index,
            base_offset,
            index_interval_bytes,
            roll_jitter_ms,
            created_ms,
            max_index_size,
        )

    # -- state ----------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    def _load_max_timestamp(self) -> int:
        """The largest timestamp so far, read from the time index the first time."""
        max_timestamp = self._max_timestamp_so_far
        if max_timestamp is None:
            last = self.time_index.last_entry()
            max_timestamp = self._max_timestamp_so_far = last.timestamp
            self._offset_of_max_timestamp_so_far = last.offset
        return max_timestamp

    @property
    def max_timestamp_so_far(self) -> int:
        return self._load_max_timestamp()

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_timestamp_so_far

    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment (for time-based retention);
        the file's modification time if no batch has a timestamp."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log.path).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    # -- append -------------------------------------------------------------
    def append(self, data: BytesLike, batches: Sequence[tuple[int, int, int]]) -> None:
        """Write ``data`` (the batches, offsets already assigned) with one
        write, then index them. OSError propagates with the file unchanged."""
        if not batches:
            return
        position = self.log.size
        if position == 0:
            self._rolling_based_timestamp = batches[0][2]  # BatchInfo.max_timestamp
        self.log.append(data)
        self._index_batches(position, batches)

    def append_scanned(self, data: BytesLike, scan: BatchScan) -> None:
        """``append`` for a payload the log's BatchScan (kfast._ext.log_append)
        validated and patched: the kernel applies the index rule over the
        headers it remembered and writes the entries into the index buffers,
        so nothing is allocated per batch. BatchScan.append_to_segment does
        all of this in C for a plain leader append (the state it reads and
        writes: log._fd/_size, the indexes' _view/_entries/_max_entries and
        this segment's index and rolling state)."""
        if not scan.batch_count:
            return
        position = self.log.size
        if position == 0:
            self._rolling_based_timestamp = scan.first_max_timestamp
        self.log.append(data)
        max_timestamp = self._max_timestamp_so_far
        if max_timestamp is None:
            max_timestamp = self._load_max_timestamp()
        offset_index, time_index = self.offset_index, self.time_index
        done = scan.index_batches(
            position,
            self._bytes_since_last_index_entry,
            self.index_interval_bytes,
            max_timestamp,
            self._offset_of_max_timestamp_so_far,
            self.base_offset,
            offset_index._view,
            offset_index._entries,
            offset_index._max_entries,
            time_index._view,
            time_index._entries,
            time_index._max_entries,
        )
        if done is None:
            # A buffered index must grow first (amortised: it grows by up to
            # 1 MiB), or an entry is invalid: the per-entry path does both.
            self._index_batches(position, scan.batch_infos())
            return
        since, max_ts, offset_of_max_ts, offset_entries, time_entries = done
        if offset_entries:
            offset_index.entries_written(offset_entries)
            if time_entries:
                time_index.entries_written(time_entries)
        self._bytes_since_last_index_entry = since
        self._max_timestamp_so_far = max_ts
        self._offset_of_max_timestamp_so_far = offset_of_max_ts

    def _index_batches(self, position: int, batches: Sequence[tuple[int, int, int]]) -> None:
        max_ts = self._max_timestamp_so_far
        if max_ts is None:
            max_ts = self._load_max_timestamp()
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        offset_of_max_ts = self._offset_of_max_timestamp_so_far
        for size, last_offset, max_timestamp in batches:
            if max_timestamp > max_ts:
                max_ts, offset_of_max_ts = max_timestamp, last_offset
            # A request with many batches can fill the index mid-append (the
            # roll check runs once per append); the index is sparse, so an
            # entry is simply skipped then.
            if (
                since > interval
                and not self.offset_index.is_full()
                and not self.time_index.is_full()
            ):
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(max_ts, offset_of_max_ts)
                since = 0
            position += size
            since += size
        self._bytes_since_last_index_entry = since
        self._max_timestamp_so_far = max_ts
        self._offset_of_max_timestamp_so_far = offset_of_max_ts

    # -- lookups ------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= ``offset``, found from the
        index entry below it by scanning batch headers; None if past the end."""
        mapping = self.offset_index.lookup(offset)
        start = max(mapping.position, starting_position)
        hint_offset, hint_position = self._read_hint
        if start < hint_position and hint_offset <= offset:
            start = hint_position  # no batch before it holds ``offset``
        for position, header, _ in self.log.batches_from(start):
            if header.last_offset >= offset:
                return LogOffsetPosition(header.last_offset, position, header.size_in_bytes)
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Batches from the one holding ``start_offset``, at most ``max_size``
        bytes and not past ``max_position``; with ``min_one_message`` the
        first batch is returned whole even if larger than ``max_size``. None
        if the offset is beyond this segment.

        Once the first batch fits, the region ends at a batch boundary: Kafka
        slices at max_size and leaves a partial batch at the tail, which every
        client fetches, receives and throws away (a third of a 1 MiB answer
        when producers batch ~0.75 MB); the next fetch starts at that batch
        anyway."""
        if max_size < 0:
            raise ValueError(
                f"Invalid max size {max_size} for log read from segment {self.log.path}"
            )
        if max_position is None:
            max_position = self.log.size
        hint_offset, hint_position = self._read_hint
        if start_offset == hint_offset and hint_position < max_position <= hint_position + max_size:
            # A reader at the tail (a woken fetch) asks for exactly where the
            # last read was bounded: the batch holding that offset starts at
            # the noted position (note_offset_position), and all up to
            # max_position fits -- the region translate_offset's header scan
            # would lead to, without a pread on the event loop.
            return FetchDataInfo(
                LogOffsetMetadata(start_offset, self.base_offset, hint_position),
                FileRegion(self.log.handle, hint_position, max_position - hint_position),
            )
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start.position)
        adjusted = max(max_size, start.size) if min_one_message else max_size
        if adjusted == 0 or max_position <= start.position:
            return FetchDataInfo(metadata, None)
        fetch_size = min(max_position - start.position, adjusted)
        if start.size < fetch_size < max_position - start.position:
            fetch_size = (
                self._whole_batches_end(start.position + start.size, start.position + fetch_size)
                - start.position
            )
        return FetchDataInfo(
            metadata, FileRegion(self.log.handle, start.position, fetch_size), adjusted < start.size
        )

    def note_offset_position(self, offset: int, position: int) -> None:
        """Every batch before ``position`` ends below ``offset`` (a log end
        offset or high watermark and its position): later lookups of
        ``offset`` or beyond start there."""
        if offset > self._read_hint[0]:
            self._read_hint = (offset, position)

    def _whole_batches_end(self, first_end: int, limit: int) -> int:
        """The end of the last batch that ends by ``limit``, at least
        ``first_end`` (a batch boundary): scans headers from the index entry
        below ``limit``, at most index.interval.bytes of them."""
        end = max(first_end, self.offset_index.position_floor(limit))
        for position, header, _ in self.log.batches_from(end, limit):
            batch_end = position + header.size_in_bytes
            if batch_end > limit:
                break
            end = batch_end
        return end

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampOffset | None:
        """(timestamp, offset) of the first record with timestamp >= ``timestamp``
        at or after ``starting_offset``, or None."""
        from kfast.storage.records_access import first_record_at_or_after

        starting_offset = self.base_offset if starting_offset is None else starting_offset
        ts_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_offset.offset, starting_offset)).position
        for _, header, view in self.log.batches_from(position, full=True):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                found = first_record_at_or_after(view, timestamp, starting_offset)
                if found is not None:
                    return TimestampOffset(*found)
        return None

    def find_max_timestamp_record(self) -> TimestampOffset | None:
        """(timestamp, offset) of the first record that holds the segment's
        largest timestamp, or None if no batch has a timestamp (ListOffsets
        MAX_TIMESTAMP, KAFKA-16310). The time index keeps the last offset of
        that record's batch (Kafka's shallow offset), not the record's: find
        the first batch from there whose max timestamp is the segment's, then
        walk its records."""
        from kfast.storage.records_access import first_record_at_or_after

        max_timestamp = self.max_timestamp_so_far
        if max_timestamp < 0:
            return None
        position = self.offset_index.lookup(self.offset_of_max_timestamp_so_far).position
        for _, header, view in self.log.batches_from(position, full=True):
            if header.max_timestamp == max_timestamp:
                found = first_record_at_or_after(view, max_timestamp, header.base_offset)
                if found is not None:
                    return TimestampOffset(*found)
        return None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (scans from the last
        index entry only)."""
        position = self.offset_index.last_entry().position
        next_offset = self.base_offset
        for _, header, _ in self.log.batches_from(position):
            next_offset = header.next_offset
        return next_offset

    def first_batch(self) -> BatchHeader | None:
        for _, header, _ in self.log.batches_from(0):
            return header
        return None

    # -- recovery and truncation --------------------------------------------
    def recover(self, on_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        """Rebuild the indexes by reading every batch; truncate the .log at
        the first invalid batch (bad CRC, bad magic, impossible length) or
        torn tail. The indexes are left buffered at their full size (see
        ``on_become_inactive`` for a segment that is not the active one). ``on_batch(header, view)`` sees each valid batch (producer
        state, leader epochs). Returns the number of bytes truncated."""
        self._read_hint = (-1, 0)
        # Reset = empty and back to full preallocated size (a rolled segment's
        # indexes were trimmed, and the rebuilt ones may need more entries).
        # They stay buffered at that size, as an active segment's are: the
        # caller trims them if the segment is not the active one.
        self.offset_index.reset(self.max_index_size)
        self.time_index.reset(self.max_index_size)
        self.txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_ts, offset_of_max_ts = NO_TIMESTAMP, self.base_offset
        next_offset = self.base_offset
        try:
            for position, header, view in self.log.batches_from(0, full=True):
                check_batch(view, 0, header.size_in_bytes)
                # baseOffset is outside the CRC: offsets must still move forward
                # and fit this segment's relative-offset range.
                if (
                    header.base_offset < next_offset
                    or header.last_offset - self.base_offset > INDEX_RELATIVE_OFFSET_MAX
                ):
                    raise CorruptRecordException(
                        f"Batch at position {position} of {self.log.path} has base offset "
                        f"{header.base_offset}, expected at least {next_offset}"
                    )
                next_offset = header.next_offset
                if header.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = header.max_timestamp, header.last_offset
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid_bytes)
                    self.time_index.maybe_append(max_ts, offset_of_max_ts)
                    last_index_entry = valid_bytes
                valid_bytes += header.size_in_bytes
                if on_batch is not None:
                    on_batch(header, view)
        except CorruptRecordException:
            pass
        truncated = self.log.size - valid_bytes
        self.log.truncate_to(valid_bytes)
        self._max_timestamp_so_far = max_ts
        self._offset_of_max_timestamp_so_far = offset_of_max_ts
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        if max_ts >= 0:
            self.time_index.maybe_append(max_ts, offset_of_max_ts, skip_full_check=True)
        return truncated

    def truncate_to(self, offset: int, max_index_size: int | None = None) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the batch
        holding ``offset`` goes entirely); returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self._read_hint = (-1, 0)  # its batches may be replaced by others
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if max_index_size is not None:
            self.resize_indexes(max_index_size)
        if mapping is None:
            return 0
        removed = self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self.created_ms = int(time.time() * 1000)
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        last = self.time_index.last_entry()
        self._max_timestamp_so_far = last.timestamp
        self._offset_of_max_timestamp_so_far = last.offset
        return removed

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check_indexes(self) -> None:
        self.offset_index.sanity_check(self.log.size)
        self.time_index.sanity_check(self.log.size)

    # -- rolling ------------------------------------------------------------
    def should_roll(
        self,
        segment_bytes: int,
        segment_ms: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rule before appending ``messages_size`` bytes: the
        segment would pass segment.bytes, is older than segment.ms (minus its
        jitter), an index is full, or the last offset would not fit the
        index's relative offsets. Runs on every append: kept flat. The
        leader's fast path (kfast._ext.log_append BatchScan.append_to_segment)
        applies the same rule to the same attributes in C: change both."""
        size = self.log._size
        if size > segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self._rolling_based_timestamp
            if ts is not None and ts >= 0:
                waited = max_timestamp_in_messages - ts
            else:
                waited = self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        return (
            self.offset_index.is_full()
            or self.time_index.is_full()
            or not 0 <= max_offset_in_messages - self.base_offset <= INDEX_RELATIVE_OFFSET_MAX
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's rule: measured by record timestamps (the first batch's max
        timestamp vs the new batch's) when available, else by wall clock since
        the segment was created."""
        if self._rolling_based_timestamp is None and self.size > 0:
            first = self.first_batch()
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """At roll: add the final time-index entry, trim the indexes."""
        max_timestamp = self._load_max_timestamp()
        if max_timestamp >= 0:
            self.time_index.maybe_append(
                max_timestamp,
                self._offset_of_max_timestamp_so_far,
                skip_full_check=True,
            )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    # -- files --------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.log.closed:
            return
        if self._max_timestamp_so_far is not None and self._max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self._max_timestamp_so_far,
                self._offset_of_max_timestamp_so_far,
                skip_full_check=True,
            )
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.trim()
        self.log.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. ``.log`` -> ``.log.deleted``
        (old "" , new ".deleted") or ``.log.swap`` -> ``.log``."""
        for obj in (self.log, self.offset_index, self.time_index, self.txn_index):
            path = obj.path
            if not path.endswith(old_suffix):
                continue
            stem = path[: len(path) - len(old_suffix)] if old_suffix else path
            # The .txnindex exists only once an aborted transaction was written;
            # its rename_to handles a missing file.
            if os.path.exists(path) or obj is self.txn_index:
                obj.rename_to(stem + new_suffix)

    def delete_files(self) -> None:
        """Close and remove every file of the segment."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log.close()
        try:
            os.unlink(self.log.path)
        except FileNotFoundError:
            pass

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log.path).st_mtime * 1000)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
