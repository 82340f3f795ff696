"""The default partitioner agrees with Kafka's Java client and kafka-python."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kfast.client.partitioner import StickyPartitioner, murmur2, partition_for_key


def test_java_client_vectors():
    # Values from Kafka's own UtilsTest (Utils.murmur2 returns a signed int).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key):
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_keyed_partition_matches_kafka_python_default_partitioner(key, count):
    # kafka-python's DefaultPartitioner: (murmur2(key) & 0x7fffffff) % len(partitions)
    assert partition_for_key(key, count) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % count


def test_sticky_partitioner_stays_until_the_batch_closes_then_moves():
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 4)
    assert all(sticky.partition("t", 4) == first for _ in range(10))
    sticky.next_batch("t", 4, first)
    second = sticky.partition("t", 4)
    assert second != first
    sticky.next_batch("t", 4, first)  # not the current partition: no move
    assert sticky.partition("t", 4) == second
    sticky.next_batch("single", 1, sticky.partition("single", 1))
    assert sticky.partition("single", 1) == 0
