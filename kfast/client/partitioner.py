"""Which partition a record goes to, as Kafka's default partitioner decides.

Keyed records: ``(murmur2(key) & 0x7fffffff) % partition_count``, the rule
of Kafka's Java client (``Utils.murmur2`` / ``BuiltInPartitioner``),
kafka-python's DefaultPartitioner and librdkafka's ``murmur2_random``
partitioner, so a key lands on the same partition whichever of them wrote
it. Records without a key stick to one partition until its batch is sent,
then move to another (KIP-480's sticky partitioner), so small unkeyed
records fill batches instead of spraying one-record batches everywhere.
"""

from __future__ import annotations

import random
import struct

from kfast.protocol.constants import INT32_MAX

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """32-bit murmur2 of ``data`` as Kafka computes it (a signed int32)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for (k,) in _WORDS.iter_unpack(data[:whole]):  # little-endian 32-bit words
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    # The fall-through switch of the reference code: each case adds one byte.
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    return (murmur2(bytes(key)) & INT32_MAX) % partition_count


class StickyPartitioner:
    """The partition for unkeyed records of each topic; ``next_batch`` moves on."""

    def __init__(self, rng: random.Random | None = None):
        self._current: dict[str, int] = {}
        self._rng = rng or random.Random()

    def partition(self, topic: str, partition_count: int) -> int:
        current = self._current.get(topic)
        if current is None or current >= partition_count:
            current = self._rng.randrange(partition_count)
            self._current[topic] = current
        return current

    def next_batch(self, topic: str, partition_count: int, finished: int) -> None:
        """The batch of ``finished`` was closed: pick another partition."""
        if self._current.get(topic) != finished:
            return
        if partition_count > 1:
            choice = self._rng.randrange(partition_count - 1)
            self._current[topic] = choice if choice < finished else choice + 1
        else:
            self._current[topic] = 0
