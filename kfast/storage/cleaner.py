"""Log compaction for cleanup.policy=compact (a simplified Kafka LogCleaner).

One pass over a log (``clean_log``):
1. The cleanable range ends at the first *uncleanable* offset: the active
   segment's base, the high watermark, the first undecided transaction and
   the first segment younger than min.compaction.lag.ms, whichever is lowest.
   It starts at the log start offset; the *dirty* part starts at the
   cleaner checkpoint (cleaner-offset-checkpoint).
2. An offset map ``key -> last offset`` is built from the dirty part.
3. Every segment of the cleanable range is rewritten, in groups that fit one
   segment: a record survives unless a later record has its key; a tombstone
   (null value) also goes once it has been through a previous pass and its
   segment is older than delete.retention.ms. Batches keep their base offset,
   last offset delta and producer fields (so sequence checks still work);
   a batch left empty survives only as the last batch of its producer.
   Transactional and control batches are kept as they are (no aborted-data
   bookkeeping here, so nothing a consumer must see can be lost).
4. A group is written to ``<base>.log.cleaned``, renamed to ``.swap``, the
   old segments go through the usual ``.deleted`` path and the ``.swap``
   files take their final names. A crash at any point is finished or undone
   by the loader (``.cleaned`` deleted; ``.swap`` completed).
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, NamedTuple

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    INDEX_RELATIVE_OFFSET_MAX,
    LAST_OFFSET_DELTA_OFFSET,
)
from kfast.records import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    RecordBatch,
    RecordBatchBuilder,
)
from kfast.storage.segment import (
    CLEANED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
    segment_file,
)

if TYPE_CHECKING:
    from kfast.records import Record
    from kfast.storage.file_records import BatchHeader
    from kfast.storage.log import Log


class CleanResult(NamedTuple):
    first_dirty_offset: int
    end_offset: int  # new cleaner checkpoint (first uncleanable offset)
    bytes_before: int
    bytes_after: int
    records_removed: int


def first_uncleanable_offset(log: Log, now_ms: int) -> int:
    bound = min(log.active_segment.base_offset, log.high_watermark)
    undecided = log.producer_state.first_undecided_offset()
    if undecided is not None:
        bound = min(bound, undecided)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in log.segments:
            if segment.base_offset >= bound:
                break
            if now_ms - segment.largest_timestamp() < lag:
                bound = min(bound, segment.base_offset)
                break
    return bound


def dirty_ratio(log: Log, first_dirty: int, now_ms: int) -> float:
    end = first_uncleanable_offset(log, now_ms)
    clean = dirty = 0
    for segment in log.segments:
        if segment.base_offset >= end:
            break
        if segment.base_offset >= first_dirty:
            dirty += segment.size
        else:
            clean += segment.size
    total = clean + dirty
    return dirty / total if total else 0.0


def _segments_in(log: Log, end: int) -> list[LogSegment]:
    """Segments wholly below ``end`` (a segment ends where the next begins)."""
    out: list[LogSegment] = []
    segments = log.segments
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= end:
            out.append(segment)
    return out


def _build_offset_map(segments: list[LogSegment], first_dirty: int, end: int) -> dict[bytes, int]:
    offsets: dict[bytes, int] = {}
    for segment in segments:
        for _, header, view in segment.log.batches_from(0, full=True):
            if header.last_offset < first_dirty or header.base_offset >= end:
                continue
            if header.is_control or header.is_transactional:
                continue
            for record in RecordBatch(view, 0):
                if record.key is not None and first_dirty <= record.offset < end:
                    offsets[bytes(record.key)] = record.offset
    return offsets


def _group_segments(segments: list[LogSegment], max_size: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            last_offset_fits = (
                segment.read_next_offset() - group[0].base_offset <= INDEX_RELATIVE_OFFSET_MAX
            )
            if size <= max_size and last_offset_fits:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def _rewrite_batch(
    view: memoryview, header: BatchHeader, keep: list[Record], is_last_of_producer: bool
) -> bytearray | None:
    """The batch with only the ``keep`` records (None: drop the batch)."""
    if not keep and not (header.has_producer_id and is_last_of_producer):
        return None
    builder = RecordBatchBuilder(
        header.compression,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        timestamp_type=TIMESTAMP_LOG_APPEND_TIME
        if header.is_log_append_time
        else TIMESTAMP_CREATE_TIME,
    )
    for record in keep:
        builder.append(
            record.timestamp, record.key, record.value, record.headers, offset=record.offset
        )
    data = bytearray(builder.build())
    # Keep the original last offset (and so the last sequence) of the batch.
    struct.pack_into(">i", data, LAST_OFFSET_DELTA_OFFSET, header.last_offset_delta)
    if header.is_log_append_time:
        RecordBatch(data, 0).set_max_timestamp(TIMESTAMP_LOG_APPEND_TIME, header.max_timestamp)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
    return data


def clean_log(log: Log, first_dirty: int, now_ms: int) -> CleanResult | None:
    """One compaction pass; returns None if there is nothing to clean."""
    first_dirty = max(first_dirty, log.log_start_offset)
    end = first_uncleanable_offset(log, now_ms)
    segments = _segments_in(log, end)
    if first_dirty >= end or not segments:
        return None
    offset_map = _build_offset_map(segments, first_dirty, end)
    delete_horizon = now_ms - log.config.delete_retention_ms
    last_batch_of = {pid: e.last_data_offset for pid, e in log.producer_state.producers.items()}
    before = after = removed = 0
    for group in _group_segments(segments, log.config.segment_bytes):
        chunks = []
        for segment in group:
            before += segment.size
            drop_tombstones = segment.largest_timestamp() < delete_horizon
            for _, header, view in segment.log.batches_from(0, full=True):
                if header.is_control or header.is_transactional:
                    chunks.append(bytes(view))
                    continue
                records = list(RecordBatch(view, 0))
                keep = []
                for record in records:
                    if record.key is not None:
                        key = bytes(record.key)
                        latest = offset_map.get(key, -1)
                        if record.offset < latest:
                            continue
                        if record.value is None and drop_tombstones and record.offset < first_dirty:
                            continue
                    keep.append(record)
                removed += len(records) - len(keep)
                if len(keep) == len(records):
                    chunks.append(bytes(view))
                    continue
                rewritten = _rewrite_batch(
                    view, header, keep, last_batch_of.get(header.producer_id) == header.last_offset
                )
                if rewritten is not None:
                    chunks.append(bytes(rewritten))
        cleaned = _write_cleaned_segment(log, group, chunks)
        after += cleaned.size
        _swap_in(log, group, cleaned)
    return CleanResult(first_dirty, end, before, after, removed)


def _write_cleaned_segment(log: Log, group: list[LogSegment], chunks: list[bytes]) -> LogSegment:
    base = group[0].base_offset
    for suffix in (
        LOG_FILE_SUFFIX,
        INDEX_FILE_SUFFIX,
        TIME_INDEX_FILE_SUFFIX,
        TXN_INDEX_FILE_SUFFIX,
    ):
        stale = segment_file(log.dir, base, suffix + CLEANED_FILE_SUFFIX)
        if os.path.exists(stale):
            os.unlink(stale)
    cleaned = LogSegment.open(
        log.dir,
        base,
        index_interval_bytes=log.config.index_interval_bytes,
        max_index_size=log.config.max_index_size,
        file_suffix=CLEANED_FILE_SUFFIX,
    )
    if chunks:
        cleaned.log.append(b"".join(chunks))
    cleaned.recover()  # builds both indexes by Kafka's rule
    for segment in group:
        for txn in segment.txn_index.entries:
            cleaned.txn_index.append(txn)
    cleaned.flush()
    cleaned.offset_index.trim_to_valid_size()
    cleaned.time_index.trim_to_valid_size()
    return cleaned


def _swap_in(log: Log, group: list[LogSegment], cleaned: LogSegment) -> None:
    """.cleaned -> .swap, old segments out (as .deleted), .swap -> final."""
    cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
    with log._lock:
        log.delete_segments(group, keep_log_start=True)
        cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        log._add_segment(cleaned)
