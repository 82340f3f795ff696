"""Planning reads: resolving offset limits and splitting ranges into input partitions."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast_spark.options import (
    EarliestOffsetRangeLimit,
    GlobalTimestampRangeLimit,
    LatestOffsetRangeLimit,
    SpecificOffsetRangeLimit,
    SpecificTimestampRangeLimit,
    StrategyOnNoMatchStartingOffset,
    TopicPartition,
)
from kfast_spark.planning import (
    KafkaDataLossError,
    KafkaOffsetRange,
    OffsetRangeCalculator,
    rate_limit,
    resolve_offset_ranges,
)

pytestmark = pytest.mark.spark

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def r(tp, start, end):
    return KafkaOffsetRange(tp, start, end)


# --- minPartitions (Spark's KafkaOffsetRangeCalculator) -------------------------


def test_without_min_partitions_one_range_per_partition_and_empty_ones_dropped():
    ranges = [r(A0, 1, 2), r(A1, 5, 5), r(B0, 7, 3)]
    assert OffsetRangeCalculator().get_ranges(ranges) == [r(A0, 1, 2)]


def test_enough_partitions_already_means_no_split():
    ranges = [r(A0, 0, 100), r(B0, 0, 1)]
    assert OffsetRangeCalculator(2).get_ranges(ranges) == ranges


def test_one_partition_split_evenly():
    assert OffsetRangeCalculator(3).get_ranges([r(A0, 1, 4)]) == [
        r(A0, 1, 2),
        r(A0, 2, 3),
        r(A0, 3, 4),
    ]


def test_last_piece_takes_the_rounding_remainder():
    assert OffsetRangeCalculator(3).get_ranges([r(A0, 0, 10)]) == [
        r(A0, 0, 3),
        r(A0, 3, 6),
        r(A0, 6, 10),
    ]


def test_skewed_partitions_small_one_stays_whole():
    # size 4 of 24 gets round(0.5) = 1 part: Java rounds half up, so it stays
    # whole and the big one is split among the remaining 3 - 1 = 2 parts.
    ranges = [r(A0, 1, 5), r(B0, 1, 21)]
    assert OffsetRangeCalculator(3).get_ranges(ranges) == [r(A0, 1, 5), r(B0, 1, 11), r(B0, 11, 21)]


def test_proportions_exclude_unsplit_ranges():
    ranges = [r(A0, 1, 5), r(B0, 0, 1)]
    # total 5: a-0 gets round(3.2) = 3 parts, b-0 round(0.8) = 1 (unsplit);
    # a-0 is then cut into round(4 / 4 * (4 - 1)) = 3 pieces.
    assert OffsetRangeCalculator(4).get_ranges(ranges) == [
        r(A0, 1, 2),
        r(A0, 2, 3),
        r(A0, 3, 5),
        r(B0, 0, 1),
    ]


def test_more_parts_than_offsets_drops_empty_pieces():
    assert OffsetRangeCalculator(10).get_ranges([r(A0, 0, 3)]) == [
        r(A0, 0, 1),
        r(A0, 1, 2),
        r(A0, 2, 3),
    ]


def test_min_partitions_must_be_positive():
    with pytest.raises(ValueError, match="minPartitions must be positive"):
        OffsetRangeCalculator(0)


@given(
    sizes=st.lists(st.tuples(st.integers(0, 1000), st.integers(-5, 5000)), min_size=1, max_size=8),
    min_partitions=st.one_of(st.none(), st.integers(1, 64)),
)
def test_pieces_cover_each_range_exactly(sizes, min_partitions):
    ranges = [
        r(TopicPartition("t", i), start, start + size) for i, (start, size) in enumerate(sizes)
    ]
    pieces = OffsetRangeCalculator(min_partitions).get_ranges(ranges)
    for original in ranges:
        mine = [p for p in pieces if p.topic_partition == original.topic_partition]
        if original.size <= 0:
            assert mine == []
            continue
        assert all(p.size > 0 for p in mine)
        assert mine[0].from_offset == original.from_offset
        assert mine[-1].until_offset == original.until_offset
        assert all(x.until_offset == y.from_offset for x, y in zip(mine, mine[1:]))
    if min_partitions is None:
        assert len(pieces) == sum(1 for x in ranges if x.size > 0)


# --- resolving limits ------------------------------------------------------------

EARLIEST = {A0: 10, A1: 0, B0: 5}
LATEST = {A0: 20, A1: 4, B0: 5}


def resolve(start, end, *, assigned=(A0, A1, B0), fail=True, **kwargs):
    return resolve_offset_ranges(
        list(assigned), start, end, EARLIEST, LATEST, fail_on_data_loss=fail, **kwargs
    )


def test_earliest_to_latest():
    assert resolve(EarliestOffsetRangeLimit(), LatestOffsetRangeLimit()) == [
        r(A0, 10, 20),
        r(A1, 0, 4),
        r(B0, 5, 5),
    ]


def test_specific_offsets_with_sentinels():
    start = SpecificOffsetRangeLimit({A0: 12, A1: -2, B0: -2})
    end = SpecificOffsetRangeLimit({A0: -1, A1: 3, B0: -1})
    assert resolve(start, end) == [r(A0, 12, 20), r(A1, 0, 3), r(B0, 5, 5)]


def test_specific_offsets_must_name_the_assigned_partitions():
    with pytest.raises(
        ValueError,
        match="KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED.*"
        "Specified: \\[a-0\\] Assigned: \\[a-0, a-1, b-0\\]",
    ):
        resolve(SpecificOffsetRangeLimit({A0: 12}), LatestOffsetRangeLimit())


def test_start_below_log_start_is_data_loss():
    start = SpecificOffsetRangeLimit({A0: 3})
    with pytest.raises(
        KafkaDataLossError,
        match="KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE.*\\[3, 20\\) for topic partition a-0",
    ):
        resolve(start, LatestOffsetRangeLimit(), assigned=[A0])
    assert resolve(start, LatestOffsetRangeLimit(), assigned=[A0], fail=False) == [r(A0, 10, 20)]


def test_end_beyond_log_end_is_data_loss():
    end = SpecificOffsetRangeLimit({A1: 9})
    with pytest.raises(KafkaDataLossError, match="\\[0, 9\\) for topic partition a-1"):
        resolve(EarliestOffsetRangeLimit(), end, assigned=[A1])
    assert resolve(EarliestOffsetRangeLimit(), end, assigned=[A1], fail=False) == [r(A1, 0, 4)]


def test_range_entirely_below_log_start_becomes_empty_without_fail_on_data_loss():
    ranges = resolve(
        SpecificOffsetRangeLimit({A0: 1}),
        SpecificOffsetRangeLimit({A0: 5}),
        assigned=[A0],
        fail=False,
    )
    assert ranges == [r(A0, 10, 10)]


def test_deleted_partitions_are_data_loss():
    gone = TopicPartition("a", 7)
    with pytest.raises(
        KafkaDataLossError, match="PARTITIONS_DELETED.*Partitions \\[a-7\\] have been deleted"
    ):
        resolve(EarliestOffsetRangeLimit(), LatestOffsetRangeLimit(), assigned=[A0, gone])
    assert resolve(
        EarliestOffsetRangeLimit(), LatestOffsetRangeLimit(), assigned=[A0, gone], fail=False
    ) == [r(A0, 10, 20)]


def test_resolved_start_after_end_is_refused():
    with pytest.raises(
        ValueError,
        match="RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET.*"
        "start offset 15 is greater than the resolved end "
        "offset 12 for topic a partition 0",
    ):
        resolve(
            SpecificOffsetRangeLimit({A0: 15}), SpecificOffsetRangeLimit({A0: 12}), assigned=[A0]
        )


def fake_offsets_for_times(found):
    calls = []

    def offsets_for_times(timestamps):
        calls.append(dict(timestamps))
        return {tp: found.get(tp) for tp in timestamps}

    return offsets_for_times, calls


def test_timestamps_resolve_through_offsets_for_times():
    lookup, calls = fake_offsets_for_times({A0: 14, A1: None})
    start = GlobalTimestampRangeLimit(1000, StrategyOnNoMatchStartingOffset.LATEST)
    end = SpecificTimestampRangeLimit({A0: 2000, A1: 2000}, StrategyOnNoMatchStartingOffset.ERROR)
    ranges = resolve(start, end, assigned=[A0, A1], offsets_for_times=lookup)
    # a-1 has no record that recent: start -> latest (strategy), end -> latest.
    assert ranges == [r(A0, 14, 14), r(A1, 4, 4)]
    assert calls[0] == {A0: 1000, A1: 1000}


def test_starting_timestamp_without_match_fails_under_error_strategy():
    lookup, _ = fake_offsets_for_times({})
    start = GlobalTimestampRangeLimit(1000, StrategyOnNoMatchStartingOffset.ERROR)
    with pytest.raises(
        ValueError, match="No offset matched from request of topic-partition a-0 and timestamp 1000"
    ):
        resolve(start, LatestOffsetRangeLimit(), assigned=[A0], offsets_for_times=lookup)


# --- maxOffsetsPerTrigger ----------------------------------------------------------


def test_rate_limit_shares_in_proportion_to_backlog():
    assert rate_limit(10, {A0: 0, B0: 0}, {A0: 30, B0: 10}, {}) == {A0: 7, B0: 2}


def test_rate_limit_does_not_starve_small_partitions():
    # b-0's share 10/1001 rounds up to one offset; a-0's rounds down.
    assert rate_limit(10, {A0: 0, B0: 0}, {A0: 1000, B0: 1}, {}) == {A0: 9, B0: 1}


def test_rate_limit_never_passes_the_end_and_new_partitions_start_at_earliest():
    limited = rate_limit(100, {A0: 5}, {A0: 8, B0: 50}, {B0: 40})
    assert limited == {A0: 8, B0: 50}
    assert rate_limit(4, {A0: 5}, {A0: 8, B0: 50}, {B0: 40}) == {A0: 6, B0: 43}


def test_rate_limit_with_nothing_new_returns_the_end():
    assert rate_limit(10, {A0: 8}, {A0: 8}, {}) == {A0: 8}
