"""__consumer_offsets record codecs and group placement (docs/formats.md)."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash_code,
    partition_for,
)


@pytest.mark.parametrize(
    "group, partition", [("my-group", 12), ("console-consumer-12345", 6), ("é😀", 12)]
)
def test_partition_vectors(group, partition):
    assert partition_for(group, 50) == partition


def test_java_hash_code_matches_java():
    # Values of "".hashCode(), "a".hashCode(), "hello".hashCode() in Java.
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("a") == 97
    assert java_string_hash_code("hello") == 99162322
    # Surrogate pairs count as two UTF-16 units: "😀" = \ud83d\ude00.
    assert java_string_hash_code("😀") == 0xD83D * 31 + 0xDE00


def test_offset_commit_key_bytes():
    assert (
        encode_key(OffsetCommitKey("g", "t", 3))
        == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    )


def test_group_metadata_key_bytes():
    assert encode_key(GroupMetadataKey("grp")) == b"\x00\x02\x00\x03grp"


def test_offset_commit_value_v3_bytes():
    value = OffsetCommitValue(42, 7, "md", 1000)
    assert encode_value(value) == (
        struct.pack(">hqi", 3, 42, 7) + b"\x00\x02md" + struct.pack(">q", 1000)
    )
    key = OffsetCommitKey("g", "t", 0)
    assert decode_value(key, encode_value(value)) == value


def test_offset_commit_value_v1_with_expiry():
    value = OffsetCommitValue(5, -1, "", 1000, 2000)
    data = encode_value(value)
    assert data[:2] == b"\x00\x01"
    assert data == struct.pack(">hq", 1, 5) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == value


def test_group_metadata_value_v3_bytes():
    member = MemberMetadata("m1", None, "c", "/h", 300, 100, b"S", b"A")
    value = GroupMetadataValue("consumer", 2, "range", "m1", 99, (member,))
    expected = (
        b"\x00\x03"
        + b"\x00\x08consumer"
        + struct.pack(">i", 2)
        + b"\x00\x05range"
        + b"\x00\x02m1"
        + struct.pack(">qi", 99, 1)
        + b"\x00\x02m1"
        + b"\xff\xff"
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + struct.pack(">ii", 300, 100)
        + b"\x00\x00\x00\x01S"
        + b"\x00\x00\x00\x01A"
    )
    assert encode_value(value) == expected
    assert decode_value(GroupMetadataKey("g"), expected) == value


def test_group_metadata_value_v0_has_no_rebalance_timeout():
    data = (
        b"\x00\x00"
        + b"\x00\x08consumer"
        + struct.pack(">i", 1)
        + b"\xff\xff\xff\xff"
        + struct.pack(">i", 1)
        + b"\x00\x02m1"
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + struct.pack(">i", 100)
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x00"
    )
    value = decode_value(GroupMetadataKey("g"), data)
    assert value.members[0].session_timeout_ms == 100
    assert value.members[0].rebalance_timeout_ms == 100
    assert value.protocol is None and value.leader is None


def test_tombstone_and_errors():
    assert decode_value(GroupMetadataKey("g"), None) is None
    with pytest.raises(ValueError):
        decode_key(b"\x00\x09\x00\x00")
    with pytest.raises(ValueError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x03\x00")


texts = st.text(max_size=20)


@given(
    texts,
    texts,
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**31 - 1),
    texts,
    st.integers(0, 2**62),
)
def test_offset_commit_round_trip(group, topic, partition, offset, epoch, metadata, ts):
    key = OffsetCommitKey(group, topic, partition)
    value = OffsetCommitValue(offset, epoch, metadata, ts)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value


@given(
    st.lists(
        st.tuples(texts, st.none() | texts, st.binary(max_size=30), st.binary(max_size=30)),
        max_size=5,
    ),
    st.none() | texts,
)
def test_group_metadata_round_trip(members, protocol):
    value = GroupMetadataValue(
        "consumer",
        3,
        protocol,
        None,
        5,
        tuple(MemberMetadata(m, i, "cid", "/h", 1, 2, s, a) for m, i, s, a in members),
    )
    assert decode_value(GroupMetadataKey("g"), encode_value(value)) == value


@given(st.text(max_size=30), st.integers(1, 200))
def test_partition_in_range(group, n):
    assert 0 <= partition_for(group, n) < n
