"""Retention: which whole segments of a log may go (Kafka's deleteOldSegments).

A segment is deletable, oldest first, while a rule holds for it:
- the next segment starts at or below the log start offset (DeleteRecords or
  an earlier deletion moved the start past it);
- with cleanup.policy containing ``delete``:
  - retention.ms >= 0 and now - (the segment's largest record timestamp) >
    retention.ms (time is judged by record timestamps, not file mtimes);
  - retention.bytes >= 0 and the log would still be at least retention.bytes
    without it.
Only segments wholly below the high watermark qualify, and never single
records: retention works in whole segments. The active segment qualifies
only once it holds data and is entirely below the high watermark; the log
then rolls so it always has an active segment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kfast.storage.segment import LogSegment

if TYPE_CHECKING:
    from kfast.storage.log import Log


def _deletable(
    log: Log, predicate: Callable[[LogSegment, LogSegment | None], bool]
) -> list[LogSegment]:
    segments = log.segments
    out: list[LogSegment] = []
    hw = log.high_watermark
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is not None:
            below_hw = following.base_offset <= hw
        else:
            below_hw = hw >= log.log_end_offset and segment.size > 0
        if not below_hw or not predicate(segment, following):
            break
        out.append(segment)
    return out


def log_start_offset_breached(log: Log) -> list[LogSegment]:
    start = log.log_start_offset
    return _deletable(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= start)


def retention_ms_breached(log: Log, now_ms: int) -> list[LogSegment]:
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return []
    return _deletable(log, lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms)


def retention_size_breached(log: Log) -> list[LogSegment]:
    retention_bytes = log.config.retention_bytes
    if retention_bytes < 0:
        return []
    excess = [log.size - retention_bytes]
    if excess[0] < 0:
        return []

    def predicate(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if excess[0] - seg.size >= 0:
            excess[0] -= seg.size
            return True
        return False

    return _deletable(log, predicate)


def delete_old_segments(log: Log, now_ms: int) -> int:
    """Apply the rules above to ``log``; returns the number of segments deleted."""
    deleted = 0
    rules: tuple[Callable[[], list[LogSegment]], ...] = (
        lambda: log_start_offset_breached(log),
        lambda: retention_ms_breached(log, now_ms) if log.config.delete else [],
        lambda: retention_size_breached(log) if log.config.delete else [],
    )
    for rule in rules:
        segments = rule()
        if segments:
            log.delete_segments(segments)
            deleted += len(segments)
    return deleted
