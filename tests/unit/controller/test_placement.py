"""Replica placement (Kafka's assignReplicasToBrokers), with and without racks."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.controller.placement import place_replicas, rack_alternated_brokers
from kfast.protocol import errors


def test_rack_unaware_matches_kafkas_documented_example():
    # AdminUtils' doc example: 5 brokers, 10 partitions, rf 3, start 0.
    assert place_replicas([0, 1, 2, 3, 4], 10, 3, start=0, shift=0) == [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 4],
        [3, 4, 0],
        [4, 0, 1],
        [0, 2, 3],
        [1, 3, 4],
        [2, 4, 0],
        [3, 0, 1],
        [4, 1, 2],
    ]


def test_brokers_are_sorted_by_id():
    assert place_replicas([3, 1, 2], 3, 1, start=0, shift=0) == [[1], [2], [3]]


def test_rack_alternated_list():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert rack_alternated_brokers(racks) == [0, 2, 4, 1, 3, 5]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b"}) == [0, 3, 1, 2]


def test_rack_aware_example():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    placed = place_replicas(list(racks), 6, 3, racks, start=0, shift=0)
    assert placed[0] == [0, 2, 4]
    for replicas in placed:
        assert len({racks[r] for r in replicas}) == 3


def test_start_partition_continues_the_walk():
    whole = place_replicas([1, 2, 3], 6, 2, start=1, shift=2)
    assert place_replicas([1, 2, 3], 3, 2, start=1, shift=2, start_partition=3) == whole[3:]


@pytest.mark.parametrize(
    "brokers, partitions, rf, error",
    [
        ([1], 1, 2, errors.InvalidReplicationFactorException),
        ([1, 2], 1, 0, errors.InvalidReplicationFactorException),
        ([], 1, 1, errors.InvalidReplicationFactorException),
        ([1], 0, 1, errors.InvalidPartitionsException),
    ],
)
def test_invalid_requests(brokers, partitions, rf, error):
    with pytest.raises(error):
        place_replicas(brokers, partitions, rf)


def test_replication_factor_error_message_names_the_broker_count():
    with pytest.raises(errors.InvalidReplicationFactorException, match="only 1 broker"):
        place_replicas([1], 3, 2)


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 6))
    brokers = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n, unique=True))
    with_racks = draw(st.booleans())
    racks = {b: draw(st.sampled_from("abc")) for b in brokers} if with_racks else None
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 30))
    return brokers, racks, rf, partitions, draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))


@given(clusters())
def test_placement_properties(cluster):
    brokers, racks, rf, partitions, start, shift = cluster
    placed = place_replicas(brokers, partitions, rf, racks, start=start, shift=shift)
    assert len(placed) == partitions
    for replicas in placed:
        assert len(replicas) == rf
        assert len(set(replicas)) == rf  # distinct brokers
        assert set(replicas) <= set(brokers)
        if racks:
            # As many racks as possible hold a replica.
            assert len({racks[r] for r in replicas}) == min(rf, len(set(racks.values())))
    leaders = Counter(replicas[0] for replicas in placed)
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1  # leaders spread evenly


@given(clusters())
def test_random_start_is_still_valid(cluster):
    brokers, racks, rf, partitions, _, _ = cluster
    for replicas in place_replicas(brokers, partitions, rf, racks):
        assert len(set(replicas)) == rf
