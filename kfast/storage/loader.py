"""Opening a partition directory: cleanup, segment loading and recovery (Kafka's LogLoader).

1. Leftovers of interrupted operations: ``*.deleted`` and ``*.cleaned`` files
   and ``*.tmp`` files are removed; ``*.swap`` files (a finished compaction
   whose rename did not happen) replace their originals.
2. Every ``<offset>.log`` becomes a segment; an index file without its .log is
   removed. A missing or corrupt index (failed sanity check: torn size,
   entries out of order, e.g. zero-filled after a crash) is rebuilt from the .log.
3. Without a clean shutdown, each segment from the one holding the recovery
   point onwards is re-read batch by batch (``LogSegment.recover``); at the
   first invalid batch the segment is truncated and all later segments are
   deleted. With a clean shutdown nothing is scanned.
4. The log end offset comes from the last segment (a scan from its last index
   entry); producer state is loaded from the newest snapshot and the log
   after it is replayed.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kfast.protocol.errors import CorruptRecordException
from kfast.storage.atomic_file import TEMP_FILE_SUFFIX
from kfast.storage.file_records import FileRecords
from kfast.storage.index import CorruptIndexException
from kfast.storage.producer_state import ORIGIN_REPLICATION
from kfast.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
)
from kfast.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kfast.storage.file_records import BatchHeader
    from kfast.storage.log import Log


def _offset_prefix(name: str) -> int | None:
    prefix = name.split(".", 1)[0]
    return int(prefix) if prefix.isdigit() and len(prefix) == 20 else None


def remove_temp_files(directory: str) -> None:
    """Finish or undo what a crash interrupted (see the module docstring)."""
    swaps = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, TEMP_FILE_SUFFIX)):
            os.unlink(path)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(path)
    for path in swaps:
        if path.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
            # A cleaned segment replaces every old segment its offsets cover.
            base = _offset_prefix(os.path.basename(path))
            if base is None:
                continue  # not a segment's name: no cleaner wrote it, leave it be
            records = FileRecords(path, create=False)
            try:
                end = max((h.next_offset for _, h, _ in records.batches_from(0)), default=base)
            finally:
                records.close()
            for name in os.listdir(directory):
                other = _offset_prefix(name)
                if (
                    other is not None
                    and base < other < end
                    and name.endswith(
                        (
                            LOG_FILE_SUFFIX,
                            INDEX_FILE_SUFFIX,
                            TIME_INDEX_FILE_SUFFIX,
                            TXN_INDEX_FILE_SUFFIX,
                        )
                    )
                ):
                    os.unlink(os.path.join(directory, name))
        os.replace(path, path[: -len(SWAP_FILE_SUFFIX)])


def load_log(log: Log, had_clean_shutdown: bool) -> None:
    """Populate ``log`` (a kfast.storage.log.Log under construction) from its dir."""
    directory = log.dir
    config = log.config
    remove_temp_files(directory)
    names = set(os.listdir(directory))
    bases = sorted(
        b
        for b in (_offset_prefix(n) for n in names if n.endswith(LOG_FILE_SUFFIX))
        if b is not None
    )
    for name in names:
        base = _offset_prefix(name)
        if (
            base is not None
            and name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))
            and base not in bases
        ):
            os.unlink(os.path.join(directory, name))  # an index whose .log is gone

    # After a crash every segment from the one holding the recovery point is
    # re-read and its indexes rebuilt (Kafka's LogLoader.recoverLog): their
    # index files are not checked first (Kafka's LogSegment.sanityCheck
    # skips them for the same reason), which matters because an active
    # segment's index is still at its preallocated size, all of it counted
    # as entries. The indexes of the segments below are checked: a cheap
    # scan of a trimmed file, and one rebuilt from its .log if it fails.
    recover_from = None
    if not had_clean_shutdown and bases:
        below = [b for b in bases if b <= log.recovery_point]
        recover_from = below[-1] if below else bases[0]
    needs_recovery = []
    for base in bases:
        prefix = f"{base:020d}"
        indexes_exist = (
            prefix + INDEX_FILE_SUFFIX in names and prefix + TIME_INDEX_FILE_SUFFIX in names
        )
        to_recover = recover_from is not None and base >= recover_from
        segment = LogSegment.open(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.max_index_size,
            to_recover=to_recover,
        )
        log._add_segment(segment)
        if to_recover:
            continue
        if not indexes_exist and segment.size > 0:
            needs_recovery.append(segment)
            continue
        try:
            segment.sanity_check_indexes()
        except CorruptIndexException:
            needs_recovery.append(segment)

    if not bases:
        log._add_segment(log._new_segment(log.log_start_offset))

    first_recovered = None
    recovered = []
    if recover_from is not None:
        unflushed = [s for s in log.segments if s.base_offset >= recover_from]
        for i, segment in enumerate(unflushed):
            truncated = _recover_segment(log, segment)
            recovered.append(segment)
            first_recovered = segment.base_offset if first_recovered is None else first_recovered
            if truncated > 0:
                for later in unflushed[i + 1 :]:
                    log._remove_segment(later.base_offset).delete_files()
                break
    for segment in needs_recovery:
        if (
            segment.base_offset in log._segments
            and segment.log.size >= 0
            and (first_recovered is None or segment.base_offset < first_recovered)
        ):
            _recover_segment(log, segment)
            recovered.append(segment)
    # Recovery leaves indexes buffered at full size, as the active segment
    # keeps them; the others are cut to their entries, as at a roll.
    for segment in recovered:
        if segment is not log.active_segment:
            segment.offset_index.trim_to_valid_size()
            segment.time_index.trim_to_valid_size()

    # The active segment gets its preallocated index size back (they were
    # trimmed at close) and buffers its index writes.
    active = log.active_segment
    active.resize_indexes(config.max_index_size)
    log.log_end_offset = active.read_next_offset()
    if log.log_end_offset < active.base_offset:
        log.log_end_offset = active.base_offset
    log.log_start_offset = max(log.log_start_offset, log.segments[0].base_offset)
    if log.log_start_offset > log.log_end_offset:
        # Kafka's deleteSegmentsIfLogStartGreaterThanLogEnd: every record is
        # below the log start (DeleteRecords inside a batch, then a truncation
        # that took that whole batch): the log restarts empty at its start,
        # which never moves back.
        for base in list(log._base_offsets):
            log._remove_segment(base).delete_files()
        log._add_segment(log._new_segment(log.log_start_offset))
        log.log_end_offset = log.log_start_offset
        log.leader_epoch_cache.clear()
        first_recovered = None
    if first_recovered is not None:
        log.recovery_point = log.log_end_offset
    else:
        log.recovery_point = min(log.recovery_point, log.log_end_offset)
    log.leader_epoch_cache.truncate_from_end(log.log_end_offset, flush=False)
    log.leader_epoch_cache.truncate_from_start(log.log_start_offset, flush=False)
    # What recovery changed in the epoch cache is not written here (an fsync
    # per partition): it was derived from the log, so another crash derives
    # it again, and the next flush or close writes it (flush_if_dirty), as
    # Kafka moved that write off the recovery path (KAFKA-15046).
    rebuild_producer_state(log, log.log_end_offset, rebuild_txn_index_from=first_recovered)


def _recover_segment(log: Log, segment: LogSegment) -> int:
    cache = log.leader_epoch_cache

    def on_batch(header: BatchHeader, view: memoryview) -> None:
        cache.assign_recovered(header.partition_leader_epoch, header.base_offset)

    truncated = segment.recover(on_batch)
    cache.truncate_from_end(
        segment.read_next_offset() if segment.size else segment.base_offset, flush=False
    )
    return truncated


def rebuild_producer_state(
    log: Log, end_offset: int, rebuild_txn_index_from: int | None = None
) -> None:
    """Load the newest producer snapshot at or below ``end_offset`` and replay
    the log from it to ``end_offset``. Aborted transactions met in segments
    at or after ``rebuild_txn_index_from`` are written to their .txnindex
    (those indexes were reset by recovery). A snapshot newer than the
    recovered part is not trusted."""
    state = log.producer_state
    upper = end_offset
    if rebuild_txn_index_from is not None:
        upper = min(upper, rebuild_txn_index_from)
    start = state.truncate_and_reload(log.log_start_offset, upper)
    replay_from = log.log_start_offset if start is None else start
    if rebuild_txn_index_from is not None:
        # Snapshots above the replay point describe data that was just recovered.
        for offset in state.snapshot_offsets():
            if offset > replay_from:
                os.unlink(state.snapshot_path(offset))
    if replay_from >= end_offset:
        state.update_map_end_offset(end_offset)
        return
    for segment in log._segments_from(replay_from):
        if segment.base_offset >= end_offset:
            break
        start = 0
        if segment.base_offset <= replay_from:
            found = segment.translate_offset(replay_from)
            if found is None:
                continue
            start = found.position
        for _, header, view in segment.log.batches_from(start, full=True):
            if header.base_offset >= end_offset:
                break
            if header.last_offset < replay_from or not header.has_producer_id:
                continue
            info = state.prepare_update(header.producer_id, ORIGIN_REPLICATION)
            try:
                done = info.append(header, view if header.is_control else None)
            except CorruptRecordException:
                continue
            state.update(info)
            if done is not None:
                if (
                    done.is_aborted
                    and rebuild_txn_index_from is not None
                    and segment.base_offset >= rebuild_txn_index_from
                ):
                    segment.txn_index.append(
                        AbortedTxn(
                            done.producer_id,
                            done.first_offset,
                            done.last_offset,
                            state.last_stable_offset(done),
                        )
                    )
                state.complete_txn(done)
    state.update_map_end_offset(end_offset)
