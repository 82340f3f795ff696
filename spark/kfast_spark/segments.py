"""Reading partitions straight from a broker's log directory (no broker).

Read-only by design: kfast.storage's Log would recover (truncate, rebuild
indexes) a directory it opens, which a forensic read must never do; the file
names and formats come from kfast.storage all the same.

Layout (Kafka's, which kfast writes too; see docs/formats.md "A log directory")::

    <log dir>/<topic>-<partition>/<base offset %020d>.log    record batches
                                  <base offset %020d>.index  sparse offset index
    <log dir>/log-start-offset-checkpoint                    after DeleteRecords

Partition directories renamed for deletion (``...-delete``), being moved
between log dirs (``...-future``) or left behind (``...-stray``) are not
partitions of the log; neither are
segment files with a temporary suffix (``.deleted``, ``.cleaned``, ``.swap``):
only names that are exactly 20 digits + ``.log`` are segments.

A partition's offsets here are its log start offset (the first segment's base
offset, or the checkpointed log start offset if higher) up to its log end
offset (one past the last complete batch). That is everything on disk,
including records beyond the high watermark a live broker would not yet
serve, and records of aborted transactions (as a ``read_uncommitted``
consumer sees them).

Segments hold record batches v2 and, in logs older than Kafka 0.11's message
format (or upgraded in place), legacy magic 0/1 messages: both are read.

The last batch of the last segment may be torn by an unclean shutdown: it is
ignored, as Kafka's log recovery truncates it. A bad batch anywhere else is
corruption and raises.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa

from kfast._ext.layout import (
    BASE_TIMESTAMP_OFFSET,
    CURRENT_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    OFFSET_INDEX_ENTRY,
    PRODUCER_ID_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
)
from kfast.protocol.errors import CorruptRecordException
from kfast.records import decode_columnar, decode_message_set
from kfast.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kfast.storage.log import parse_topic_partition
from kfast.storage.manager import (
    CLUSTER_METADATA_TOPIC_NAME,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
)
from kfast.storage.segment import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX
from kfast_spark.decoding import message_set_to_arrow, records_to_arrow
from kfast_spark.options import TopicPartition
from kfast_spark.planning import report_data_loss

# Segment names: the base offset in exactly 20 digits, then ".log" (a name
# with a temporary suffix after it, e.g. ".log.deleted", is not a segment).
_SEGMENT_FILE = re.compile(r"^(\d{20})" + re.escape(LOG_FILE_SUFFIX) + "$")

# Log entry headers, as far as needed to walk a segment without decoding
# (offsets and sizes from kfast._ext.layout, the layouts' one home):
#   record batch v2 (Kafka 0.11+): baseOffset int64, batchLength int32,
#       magic int8 = 2, lastOffsetDelta int32, maxTimestamp int64
#   legacy message (magic 0/1, older logs): offset int64 (for a compressed
#       wrapper, the offset of its LAST inner message), messageSize int32,
#       crc uint32, magic int8 (at the v2 magic's offset)
# Either way an entry takes LOG_OVERHEAD + length bytes.
_HEADER_READ_SIZE = BASE_TIMESTAMP_OFFSET  # through lastOffsetDelta
_HEADER_READ_SIZE_WITH_TIMESTAMP = PRODUCER_ID_OFFSET  # through maxTimestamp
_MAGIC_READ_SIZE = MAGIC_OFFSET + 1
#: Smallest length of an entry by magic: v0 crc+magic+attributes+key and
#: value lengths; v1 adds a timestamp; v2 is its fixed batch header.
_MIN_LENGTH_BY_MAGIC = {
    0: RECORD_OVERHEAD_V0,
    1: RECORD_OVERHEAD_V1,
    CURRENT_MAGIC: MIN_BATCH_LENGTH,
}
# baseOffset and batchLength (legacy: offset and messageSize) start every entry.
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INDEX_ENTRY = OFFSET_INDEX_ENTRY
_INDEX_READ_SIZE = 64 * 1024  # a multiple of the entry size

#: Bytes read from a segment per decoded chunk: bounds executor memory while
#: keeping Arrow batches large.
DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class LogSegmentFile:
    base_offset: int
    log_path: str

    @property
    def index_path(self) -> str:
        return self.log_path[: -len(LOG_FILE_SUFFIX)] + INDEX_FILE_SUFFIX


def check_log_dir(log_dir: str) -> None:
    if not os.path.isdir(log_dir):
        raise ValueError(
            f"Log directory '{log_dir}' (option 'path') does not exist or is not a directory"
        )


def list_partition_dirs(log_dir: str) -> dict[TopicPartition, str]:
    """The partitions stored in ``log_dir``, with their directories."""
    check_log_dir(log_dir)
    partitions = {}
    for entry in os.scandir(log_dir):
        if not entry.is_dir() or entry.name.endswith(
            (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
        ):
            continue
        try:
            topic, partition = parse_topic_partition(entry.path)
        except ValueError:
            continue  # not a partition directory
        # The KRaft metadata log lives in a log dir but is no topic consumers see.
        if topic != CLUSTER_METADATA_TOPIC_NAME:
            partitions[TopicPartition(topic, partition)] = entry.path
    return partitions


def list_segments(partition_dir: str) -> list[LogSegmentFile]:
    """The segments of a partition, by base offset."""
    segments = []
    for entry in os.scandir(partition_dir):
        match = _SEGMENT_FILE.match(entry.name)
        if match and entry.is_file():
            segments.append(LogSegmentFile(int(match.group(1)), entry.path))
    return sorted(segments, key=lambda s: s.base_offset)


def read_log_start_offsets(log_dir: str) -> dict[TopicPartition, int]:
    """The log dir's ``log-start-offset-checkpoint`` (empty if absent)."""
    entries = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)).read()
    return {
        TopicPartition(topic, partition): offset for (topic, partition), offset in entries.items()
    }


def log_offsets(partition_dir: str, checkpointed_log_start: int | None = None) -> tuple[int, int]:
    """(log start offset, log end offset) of a partition."""
    segments = list_segments(partition_dir)
    if not segments:
        start = checkpointed_log_start or 0
        return start, start
    log_start = segments[0].base_offset
    if checkpointed_log_start is not None:
        log_start = max(log_start, checkpointed_log_start)
    # The end: one past the last complete batch of the last non-empty segment.
    for position, segment in enumerate(reversed(segments)):
        end = _segment_end_offset(segment, is_last=position == 0)
        if end is not None:
            return log_start, max(end, log_start)
    return log_start, max(segments[-1].base_offset, log_start)


def read_range(
    partition_dir: str,
    topic_partition: TopicPartition,
    start: int,
    end: int,
    include_headers: bool,
    *,
    fail_on_data_loss: bool = True,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Rows of the records with offsets in ``[start, end)``, as Arrow batches
    of Spark's Kafka schema, read from the partition's segment files."""
    if start >= end:
        return
    segments = list_segments(partition_dir)
    if not segments or segments[0].base_offset > start:
        # Retention removed segments after the read was planned.
        report_data_loss(
            fail_on_data_loss,
            "COULD_NOT_READ_OFFSET_RANGE",
            f"Could not read records in offset [{start}, {end}) for topic partition "
            f"{topic_partition}: the first segment of {partition_dir} starts at "
            f"{segments[0].base_offset if segments else 'no segment'}.",
        )
    first = max((i for i, s in enumerate(segments) if s.base_offset <= start), default=0)
    for i in range(first, len(segments)):
        segment = segments[i]
        if segment.base_offset >= end:
            break
        is_last = i == len(segments) - 1
        for chunk, legacy in _read_chunks(segment, start, end, is_last, chunk_bytes):
            decode = message_set_to_arrow if legacy else records_to_arrow
            batch = decode(
                chunk, topic_partition.topic, topic_partition.partition, start, end, include_headers
            )
            if batch is not None:
                yield batch


def _read_chunks(
    segment: LogSegmentFile, start: int, end: int, is_last: bool, chunk_bytes: int
) -> Iterator[tuple[memoryview, bool]]:
    """Runs of whole entries of ``segment`` that hold offsets in ``[start,
    end)``, each about ``chunk_bytes`` long (or one entry if larger), and
    whether the run is legacy messages (else v2 batches)."""
    chunk_bytes = max(chunk_bytes, 4 * _HEADER_READ_SIZE)
    with open(segment.log_path, "rb") as f:
        fd = f.fileno()
        file_size = os.fstat(fd).st_size
        position = _start_position(segment, fd, file_size, start)
        while position < file_size:
            block = os.pread(fd, min(chunk_bytes, file_size - position), position)
            walked, needed, done = _walk_entries(
                block, segment, position, file_size, start, end, is_last
            )
            view = memoryview(block)
            # Offsets grow through the log, so wanted entries are contiguous;
            # a run ends where the format changes (a log upgraded in place).
            run = None
            for begin, stop, wanted, legacy in walked:
                if not wanted:
                    continue
                if run and run[2] == legacy:
                    run[1] = stop
                    continue
                if run:
                    yield view[run[0] : run[1]], run[2]
                run = [begin, stop, legacy]
            if run:
                yield view[run[0] : run[1]], run[2]
            if walked:
                position += walked[-1][1]
            elif needed:
                # One entry larger than a block (its bytes are all in the file).
                size, legacy = needed
                yield memoryview(os.pread(fd, size, position)), legacy
                position += size
            if done or not (walked or needed):
                return


def _walk_entries(
    block: bytes,
    segment: LogSegmentFile,
    block_position: int,
    file_size: int,
    start: int,
    end: int,
    is_last: bool,
):
    """Walk the whole entries at the start of ``block``.

    Returns ``(entries, needed, done)``: ``entries`` lists ``(begin, end,
    wanted, legacy)`` byte ranges in ``block``; ``needed`` is ``(size,
    legacy)`` of an entry that starts in the block but does not fit it;
    ``done`` says the segment has nothing more for this range (past ``end``,
    or its torn tail)."""
    entries: list[tuple[int, int, bool, bool]] = []
    i = 0
    size = len(block)
    reaches_file_end = block_position + size >= file_size
    while True:
        if size - i < _MAGIC_READ_SIZE:
            if size - i and reaches_file_end:
                return entries, None, _torn_tail(segment, block_position + i, is_last)
            return entries, None, reaches_file_end and i == size
        offset, length = _OFFSET_AND_LENGTH.unpack_from(block, i)
        magic = block[i + MAGIC_OFFSET]
        if magic not in _MIN_LENGTH_BY_MAGIC or length < _MIN_LENGTH_BY_MAGIC[magic]:
            return entries, None, _torn_tail(segment, block_position + i, is_last)
        total = LOG_OVERHEAD + length
        if block_position + i + total > file_size:
            return entries, None, _torn_tail(segment, block_position + i, is_last)
        legacy = magic < CURRENT_MAGIC
        if not legacy and offset >= end:
            return entries, None, True
        if i + total > size:
            return entries, (total, legacy), False
        last_offset = (
            offset
            if legacy
            else offset + _INT32.unpack_from(block, i + LAST_OFFSET_DELTA_OFFSET)[0]
        )
        entries.append((i, i + total, last_offset >= start, legacy))
        i += total
        if last_offset >= end - 1:
            return entries, None, True


def _torn_tail(segment: LogSegmentFile, position: int, is_last: bool) -> bool:
    if is_last:
        return True  # an unclean shutdown's partial write: recovery would truncate it
    raise CorruptRecordException(
        f"Incomplete or invalid batch at position {position} of {segment.log_path}, "
        "which is not the last segment of its partition"
    )


class _EntryHeader(NamedTuple):
    position: int
    size: int
    magic: int
    offset: int  # v2: base offset; legacy: the entry's (last) offset
    last_offset: int
    max_timestamp: int  # v2 only (legacy: -1; decode to learn it)


def _entry_headers(
    segment: LogSegmentFile, fd: int, file_size: int, position: int, is_last: bool
) -> Iterator[_EntryHeader]:
    """The headers of the complete entries from ``position`` on, one small
    read each: how a segment is walked without decoding it."""
    while position < file_size:
        header = os.pread(fd, _HEADER_READ_SIZE_WITH_TIMESTAMP, position)
        if len(header) < _MAGIC_READ_SIZE:
            _torn_tail(segment, position, is_last)
            return
        offset, length = _OFFSET_AND_LENGTH.unpack_from(header)
        magic = header[MAGIC_OFFSET]
        total = LOG_OVERHEAD + length
        if (
            magic not in _MIN_LENGTH_BY_MAGIC
            or length < _MIN_LENGTH_BY_MAGIC[magic]
            or position + total > file_size
        ):
            _torn_tail(segment, position, is_last)
            return
        if magic < CURRENT_MAGIC:
            yield _EntryHeader(position, total, magic, offset, offset, -1)
        else:
            delta = _INT32.unpack_from(header, LAST_OFFSET_DELTA_OFFSET)[0]
            max_timestamp = _INT64.unpack_from(header, MAX_TIMESTAMP_OFFSET)[0]
            yield _EntryHeader(position, total, magic, offset, offset + delta, max_timestamp)
        position += total


def _segment_end_offset(segment: LogSegmentFile, is_last: bool) -> int | None:
    """One past the last offset of the segment's last complete entry, or
    None for an empty segment."""
    with open(segment.log_path, "rb") as f:
        fd = f.fileno()
        file_size = os.fstat(fd).st_size
        last_offset = None
        for header in _entry_headers(
            segment, fd, file_size, _last_indexed_position(segment, file_size), is_last
        ):
            last_offset = header.last_offset
    return None if last_offset is None else last_offset + 1


def offset_for_timestamp(
    partition_dir: str, timestamp: int, log_start_offset: int = 0
) -> int | None:
    """The offset of the first record at or after ``log_start_offset``, in
    log order, whose timestamp is at or after ``timestamp`` (ms), or None if
    there is none: what Kafka's ListOffsets answers for a timestamp. Batches
    whose maxTimestamp is below it are skipped by their header; only the
    batch holding the answer is decoded. Control records count, as they do
    for Kafka (a consumer seeking there skips the marker)."""
    segments = list_segments(partition_dir)
    for i, segment in enumerate(segments):
        with open(segment.log_path, "rb") as f:
            fd = f.fileno()
            file_size = os.fstat(fd).st_size
            for header in _entry_headers(segment, fd, file_size, 0, i == len(segments) - 1):
                if header.last_offset < log_start_offset or (
                    header.magic == CURRENT_MAGIC and header.max_timestamp < timestamp
                ):
                    continue
                data = os.pread(fd, header.size, header.position)
                found: Iterable[tuple[int, int]]
                if header.magic < CURRENT_MAGIC:
                    found = [(r.offset, r.timestamp) for r in decode_message_set(data)]
                else:
                    batch = decode_columnar(data, arrow=True, include_control_batches=True)
                    # Arrow holds microseconds; Kafka's timestamps are milliseconds.
                    found = zip(
                        batch.column("offset").to_pylist(),
                        (t // 1000 for t in batch.column("timestamp").cast(pa.int64()).to_pylist()),
                    )
                for offset, record_timestamp in found:
                    if record_timestamp >= timestamp and offset >= log_start_offset:
                        return offset
    return None


# --- the sparse offset index ----------------------------------------------------


def _index_entries(segment: LogSegmentFile, file_size: int) -> list[tuple[int, int]]:
    """Valid ``(offset, position)`` entries of the segment's offset index.

    An index still open by a broker (or left by a crash) is preallocated
    (10 MiB by default) and ends in zeros; entries are valid while offsets and
    positions grow and positions fall inside the log, so reading stops at the
    first that does not. The index only speeds reading up: a missing or
    damaged one just means reading from the segment's start."""
    entries: list[tuple[int, int]] = []
    # The first batch of a segment is never indexed: a valid entry's
    # position is above 0, which also stops at an all-zero index.
    last_offset, last_position = -1, 0
    try:
        with open(segment.index_path, "rb") as f:
            while True:
                data = f.read(_INDEX_READ_SIZE)
                for relative_offset, position in _INDEX_ENTRY.iter_unpack(
                    data[: len(data) // _INDEX_ENTRY.size * _INDEX_ENTRY.size]
                ):
                    if (
                        relative_offset <= last_offset
                        or position <= last_position
                        or position >= file_size
                    ):
                        return entries
                    entries.append((segment.base_offset + relative_offset, position))
                    last_offset, last_position = relative_offset, position
                if len(data) < _INDEX_READ_SIZE:
                    return entries
    except OSError:
        return entries


def _start_position(segment: LogSegmentFile, fd: int, file_size: int, start: int) -> int:
    """Where to begin reading for ``start``: the batch of the last index entry
    at or below it (an entry names a batch's last offset and its position), if
    that batch checks out; else the segment's start."""
    position = 0
    for offset, entry_position in _index_entries(segment, file_size):
        if offset > start:
            break
        position = entry_position
    if position:
        # A v2 batch states its first offset; a legacy entry only its last,
        # which must then be at or below the start (else, being unsure, read
        # the whole segment).
        header = os.pread(fd, _MAGIC_READ_SIZE, position)
        if (
            len(header) < _MAGIC_READ_SIZE
            or header[MAGIC_OFFSET] not in _MIN_LENGTH_BY_MAGIC
            or _OFFSET_AND_LENGTH.unpack_from(header)[0] > start
        ):
            return 0
    return position


def _last_indexed_position(segment: LogSegmentFile, file_size: int) -> int:
    entries = _index_entries(segment, file_size)
    return entries[-1][1] if entries else 0
