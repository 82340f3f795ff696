"""Records of the group coordinator on ``__consumer_offsets`` (Kafka's
OffsetCommitKey/Value and GroupMetadataKey/Value, non-flexible versions), and
the placement of a group on that topic's partitions.

    key   := type int16, fields        (strings: int16 length + UTF-8)
      type 0/1 OffsetCommitKey:   group string, topic string, partition int32
      type 2   GroupMetadataKey:  group string
    value := version int16, fields     (null value = tombstone)
      OffsetCommitValue  v0: offset i64, metadata string, commitTimestamp i64
                         v1: offset i64, metadata string, commitTimestamp i64,
                             expireTimestamp i64
                         v2: as v0
                         v3: offset i64, leaderEpoch i32, metadata string,
                             commitTimestamp i64
      GroupMetadataValue v0..v3: protocolType string, generation i32,
                         protocol nullable string, leader nullable string,
                         currentStateTimestamp i64 (v2+), members int32 count of:
                           memberId string, groupInstanceId nullable string (v3+),
                           clientId string, clientHost string,
                           rebalanceTimeout i32 (v1+), sessionTimeout i32,
                           subscription bytes (int32 length), assignment bytes

kfast writes OffsetCommitValue v3 (v1 when the commit carries an explicit
retention, as Kafka does) and GroupMetadataValue v3. This module is the one
definition of these layouts; ``kfast dump-log --offsets-decoder`` should
decode through it.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "OFFSET_COMMIT_KEY_TYPES", "GROUP_METADATA_KEY_TYPE",
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
    "MemberMetadata", "java_string_hash_code", "partition_for",
    "encode_key", "encode_value", "decode_key", "decode_value",
]

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_KEY_TYPE = 1          # what Kafka writes today
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
NO_EXPIRE_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP


class MemberMetadata(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# -- placement -----------------------------------------------------------------------
def java_string_hash_code(text: str) -> int:
    """java.lang.String.hashCode: 31*h + c over UTF-16 code units, int32."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition whose leader coordinates the group
    (Kafka's Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash_code(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# -- writing -------------------------------------------------------------------------
def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _nullable_string(value: str | None) -> bytes:
    return b"\xff\xff" if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + bytes(value)


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (struct.pack(">h", OFFSET_COMMIT_KEY_TYPE) + _string(key.group)
                + _string(key.topic) + struct.pack(">i", key.partition))
    return struct.pack(">h", GROUP_METADATA_KEY_TYPE) + _string(key.group)


def encode_value(value: OffsetCommitValue | GroupMetadataValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != NO_EXPIRE_TIMESTAMP:
            return (struct.pack(">hq", OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY, value.offset)
                    + _string(value.metadata)
                    + struct.pack(">qq", value.commit_timestamp, value.expire_timestamp))
        return (struct.pack(">hqi", OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
                + _string(value.metadata) + struct.pack(">q", value.commit_timestamp))
    parts = [struct.pack(">h", GROUP_METADATA_VALUE_VERSION), _string(value.protocol_type),
             struct.pack(">i", value.generation), _nullable_string(value.protocol),
             _nullable_string(value.leader), struct.pack(">qi", value.current_state_timestamp,
                                                          len(value.members))]
    for member in value.members:
        parts += [_string(member.member_id), _nullable_string(member.group_instance_id),
                  _string(member.client_id), _string(member.client_host),
                  struct.pack(">ii", member.rebalance_timeout_ms, member.session_timeout_ms),
                  _bytes(member.subscription), _bytes(member.assignment)]
    return b"".join(parts)


# -- reading -------------------------------------------------------------------------
class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"field of {n} bytes runs past the end at {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("non-nullable string is null")
        return self._take(n).decode("utf-8")

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def bytes(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else self._take(n)


def decode_key(data) -> OffsetCommitKey | GroupMetadataKey:
    """ValueError for an unknown key type or a malformed key."""
    reader = _Reader(data)
    key_type = reader.int16()
    if key_type in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if key_type == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(reader.string())
    raise ValueError(f"unknown __consumer_offsets key type {key_type}")


def decode_value(key: OffsetCommitKey | GroupMetadataKey, data):
    """The value for ``key``'s type; None for a tombstone (null value)."""
    if data is None:
        return None
    reader = _Reader(data)
    version = reader.int16()
    if isinstance(key, OffsetCommitKey):
        if version not in (0, 1, 2, 3):
            raise ValueError(f"unknown OffsetCommitValue version {version}")
        offset = reader.int64()
        epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
        metadata = reader.string()
        commit_timestamp = reader.int64()
        expire = reader.int64() if version == 1 else NO_EXPIRE_TIMESTAMP
        return OffsetCommitValue(offset, epoch, metadata, commit_timestamp, expire)
    if version not in (0, 1, 2, 3):
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.int32()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        session_timeout = reader.int32()
        rebalance_timeout = session_timeout
        if version >= 1:
            # v1+ put the rebalance timeout first.
            rebalance_timeout, session_timeout = session_timeout, reader.int32()
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host,
                                      rebalance_timeout, session_timeout, reader.bytes(),
                                      reader.bytes()))
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp,
                              tuple(members))
