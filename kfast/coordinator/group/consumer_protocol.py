"""The embedded "consumer" protocol of classic groups (Kafka's
ConsumerProtocolSubscription / ConsumerProtocolAssignment). The coordinator
reads it only to know which topics a group subscribes to (OffsetDelete,
describe); members and their leader own the bytes.

    Subscription := version int16, topics []string (int32 count),
                    userData nullable bytes, (v1+) ownedPartitions, ...
    Assignment   := version int16, assignedPartitions [] of
                    (topic string, partitions []int32), userData nullable bytes

Only the leading fields are read; later versions append fields, so any
version parses.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0 or pos + n > len(data):
        raise ValueError("bad string")
    return data[pos : pos + n].decode("utf-8"), pos + n


def subscribed_topics(subscription: bytes) -> set[str]:
    """Topics of a subscription; an unparsable one subscribes to nothing."""
    try:
        data = bytes(subscription)
        (count,) = struct.unpack_from(">i", data, 2)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            topic, pos = _string(data, pos)
            topics.add(topic)
        return topics
    except (struct.error, ValueError, UnicodeDecodeError):
        return set()


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """(topic, partition) pairs of an assignment; [] if empty or unparsable."""
    try:
        data = bytes(assignment)
        if not data:
            return []
        (count,) = struct.unpack_from(">i", data, 2)
        pos, out = 6, []
        for _ in range(max(count, 0)):
            topic, pos = _string(data, pos)
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for partition in struct.unpack_from(f">{max(n, 0)}i", data, pos):
                out.append((topic, partition))
            pos += 4 * max(n, 0)
        return out
    except (struct.error, ValueError, UnicodeDecodeError):
        return []


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A v0 subscription (tests and tools)."""
    parts = [struct.pack(">hi", version, len(topics))]
    for topic in topics:
        data = topic.encode()
        parts.append(struct.pack(">h", len(data)) + data)
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """A v0 assignment (tests and tools)."""
    parts = [struct.pack(">hi", version, len(partitions))]
    for topic, indexes in partitions.items():
        data = topic.encode()
        parts.append(
            struct.pack(">h", len(data))
            + data
            + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes)
        )
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)
