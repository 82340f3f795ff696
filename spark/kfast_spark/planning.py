"""From offset limits to Spark input partitions.

A read is planned in two steps, as Spark's Kafka source plans it:

1. :func:`resolve_offset_ranges` turns the starting/ending limits of the
   options (earliest, latest, offsets per partition with -2/-1, timestamps)
   into one half-open range ``[from_offset, until_offset)`` per assigned
   partition, given each partition's earliest and latest offsets
   (KafkaOffsetReader.getOffsetRangesFromUnresolvedOffsets).
2. :class:`OffsetRangeCalculator` turns those ranges into input partitions,
   splitting large ones when ``minPartitions`` asks for more tasks than there
   are Kafka partitions (KafkaOffsetRangeCalculator).

Streaming reads add :func:`rate_limit`, which caps a micro-batch at
``maxOffsetsPerTrigger`` offsets shared among partitions in proportion to
their backlog.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from kfast_spark.options import (
    EARLIEST,
    LATEST,
    EarliestOffsetRangeLimit,
    GlobalTimestampRangeLimit,
    LatestOffsetRangeLimit,
    OffsetRangeLimit,
    SpecificOffsetRangeLimit,
    SpecificTimestampRangeLimit,
    StrategyOnNoMatchStartingOffset,
    TopicPartition,
)

logger = logging.getLogger(__name__)

DATA_LOSS_PREAMBLE = (
    "[KAFKA_DATA_LOSS.{reason}] Some data may have been lost because they are not "
    "available in Kafka any more; either the data was aged out by Kafka or the topic may "
    "have been deleted before all the data in the topic was processed. If you don't want "
    "your query to fail on such cases, set the source option failOnDataLoss to false. "
    "Reason: "
)


class KafkaDataLossError(RuntimeError):
    """Records a query asked for are gone (retention, deleted partitions),
    raised when ``failOnDataLoss`` is true (Spark's KAFKA_DATA_LOSS)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(DATA_LOSS_PREAMBLE.format(reason=reason) + detail)
        self.reason = reason


def report_data_loss(fail_on_data_loss: bool, reason: str, detail: str) -> None:
    """Raise when the query asked to fail on data loss; log otherwise."""
    if fail_on_data_loss:
        raise KafkaDataLossError(reason, detail)
    logger.warning(
        "%s. Some data may have been lost because they are not available any "
        "more; failOnDataLoss is false, so the query goes on.",
        detail,
    )


class KafkaOffsetRange(NamedTuple):
    """Offsets ``[from_offset, until_offset)`` of one partition."""

    topic_partition: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        # An estimate of the record count: compaction and transaction markers
        # leave offsets without records.
        return self.until_offset - self.from_offset


#: ``offsets_for_times({partition: timestamp}) -> {partition: offset or None}``:
#: the first offset whose timestamp is >= the timestamp (Kafka's
#: ListOffsets/offsetsForTimes), None when no record is that recent.
OffsetsForTimes = Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int | None]]


def resolve_offset_ranges(
    assigned: Sequence[TopicPartition],
    starting: OffsetRangeLimit,
    ending: OffsetRangeLimit,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
    offsets_for_times: OffsetsForTimes | None = None,
) -> list[KafkaOffsetRange]:
    """One ``[from, until)`` range per assigned partition, in partition order.

    ``earliest``/``latest`` are each partition's log start and end offsets; a
    partition missing from them no longer exists (data loss). A start below
    the log start offset or an end beyond the log end offset asks for records
    that are not there: with ``fail_on_data_loss`` that raises, otherwise the
    range is clamped to what exists, as Spark's consumer skips ahead.
    """
    missing = [tp for tp in assigned if tp not in earliest or tp not in latest]
    if missing:
        report_data_loss(
            fail_on_data_loss,
            "PARTITIONS_DELETED",
            f"Partitions {_tp_list(missing)} have been deleted.",
        )
    present = [tp for tp in assigned if tp not in missing]
    starts = _resolve(present, starting, earliest, latest, offsets_for_times, "starting")
    ends = _resolve(present, ending, earliest, latest, offsets_for_times, "ending")
    ranges = []
    for tp in present:
        start, end = starts[tp], ends[tp]
        if start > end:
            raise ValueError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset "
                f"{start} is greater than the resolved end offset {end} for topic {tp.topic} "
                f"partition {tp.partition}."
            )
        if start < earliest[tp] or end > latest[tp]:
            report_data_loss(
                fail_on_data_loss,
                "COULD_NOT_READ_OFFSET_RANGE",
                f"Could not read records in offset [{start}, {end}) for topic partition {tp}: "
                f"the log holds [{earliest[tp]}, {latest[tp]}).",
            )
            start = min(max(start, earliest[tp]), latest[tp])
            end = max(min(end, latest[tp]), start)
        ranges.append(KafkaOffsetRange(tp, start, end))
    return ranges


def _resolve(partitions, limit, earliest, latest, offsets_for_times, side) -> dict:
    # side: "starting" or "ending", for messages and the no-match rule.
    if isinstance(limit, EarliestOffsetRangeLimit):
        return {tp: earliest[tp] for tp in partitions}
    if isinstance(limit, LatestOffsetRangeLimit):
        return {tp: latest[tp] for tp in partitions}
    if isinstance(limit, SpecificOffsetRangeLimit):
        specified = limit.partition_offsets
        if set(specified) != set(partitions):
            raise ValueError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka "
                f"{side} offsets don't match what are assigned. Maybe topic partitions "
                "are created or deleted while the query is running. Use -1 for latest, -2 "
                f"for earliest. Specified: {_tp_list(specified)} "
                f"Assigned: {_tp_list(partitions)}"
            )
        sentinels = {EARLIEST: earliest, LATEST: latest}
        return {
            tp: sentinels[specified[tp]][tp] if specified[tp] in sentinels else specified[tp]
            for tp in partitions
        }
    if isinstance(limit, (SpecificTimestampRangeLimit, GlobalTimestampRangeLimit)):
        if offsets_for_times is None:
            raise ValueError("This source cannot resolve offsets by timestamp")
        if isinstance(limit, GlobalTimestampRangeLimit):
            timestamps = {tp: limit.timestamp for tp in partitions}
        else:
            timestamps = dict(limit.topic_timestamps)
            if set(timestamps) != set(partitions):
                raise ValueError(
                    "[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for "
                    f"Kafka timestamp based {side} offsets don't match what are assigned. "
                    "Maybe topic partitions are created or deleted while the query is running, "
                    "or you didn't specify all the partitions. Specified: "
                    f"{_tp_list(timestamps)} Assigned: {_tp_list(partitions)}"
                )
        found = offsets_for_times(timestamps)
        resolved = {}
        for tp in partitions:
            offset = found.get(tp)
            if offset is None:
                # No record that recent. An end then means "everything"; a
                # start follows startingOffsetsByTimestampStrategy.
                if (
                    side == "starting"
                    and limit.strategy_on_no_match is StrategyOnNoMatchStartingOffset.ERROR
                ):
                    raise ValueError(
                        f"No offset matched from request of topic-partition {tp} and timestamp "
                        f"{timestamps[tp]}."
                    )
                offset = latest[tp]
            resolved[tp] = offset
        return resolved
    raise TypeError(f"not an offset range limit: {limit!r}")


class OffsetRangeCalculator:
    """Spark's KafkaOffsetRangeCalculator: one input partition per Kafka
    partition, unless ``min_partitions`` asks for more, in which case large
    ranges are cut into about ``min_partitions`` pieces in proportion to their
    size. Empty ranges are dropped."""

    def __init__(self, min_partitions: int | None = None):
        if min_partitions is not None and min_partitions <= 0:
            raise ValueError("minPartitions must be positive")
        self.min_partitions = min_partitions

    def get_ranges(self, ranges: Iterable[KafkaOffsetRange]) -> list[KafkaOffsetRange]:
        ranges = [r for r in ranges if r.size > 0]
        if self.min_partitions is None or len(ranges) >= self.min_partitions:
            return ranges
        total = sum(r.size for r in ranges)
        # Ranges too small to be split stay whole, and their sizes are left
        # out of the proportions the split ranges are cut by.
        unsplit = {
            r.topic_partition
            for r in ranges
            if _part_count(r.size, total, self.min_partitions) == 1
        }
        unsplit_total = sum(r.size for r in ranges if r.topic_partition in unsplit)
        split_total = total - unsplit_total
        split_min_partitions = max(self.min_partitions - len(unsplit), 1)
        result = []
        for r in ranges:
            parts = (
                1
                if r.topic_partition in unsplit
                else _part_count(r.size, split_total, split_min_partitions)
            )
            result.extend(_divide(r, parts))
        return [r for r in result if r.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Java's Math.round: half rounds up (Python's round() would round half to even).
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _divide(r: KafkaOffsetRange, parts: int) -> list[KafkaOffsetRange]:
    pieces = []
    remaining = r.size
    start = r.from_offset
    for part in range(parts):
        # Integer division; the last piece takes what rounding left over.
        this_piece = remaining // (parts - part)
        remaining -= this_piece
        end = min(start + this_piece, r.until_offset)
        pieces.append(KafkaOffsetRange(r.topic_partition, start, end))
        start = end
    return pieces


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> dict:
    """End offsets of a micro-batch reading at most about ``limit`` offsets
    (``maxOffsetsPerTrigger``), shared among partitions by backlog size.

    ``start`` holds where the previous batch ended; partitions that appeared
    since then start at ``earliest_of_new``. A partition's share is
    ``limit * backlog / total`` rounded down, except that a share below one is
    rounded up so that small partitions are never starved.
    """
    sizes: dict[TopicPartition, int] = {}
    begins: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and until - begin > 0:
            sizes[tp], begins[tp] = until - begin, begin
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    limited = {}
    for tp, until in end.items():
        if tp not in sizes:
            limited[tp] = until
            continue
        share = limit * (sizes[tp] / total)
        rounded = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(until, begins[tp] + rounded)
    return limited


def _tp_list(partitions) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"
