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
retention, as Kafka does) and GroupMetadataValue v3.

KIP-848 consumer groups (Kafka's ConsumerGroup*Key/Value, as 3.7 to 4.x
write them). The key is non-flexible like the ones above, its type doubling
as the key version; the value is version 0 of a *flexible* message (compact
strings and arrays: uvarint length+1, 0 = null; uuid: 16 bytes; every
struct ends with a tagged-field section: uvarint count, then per field
uvarint tag, uvarint size, data)::

    type 3 ConsumerGroupMetadataKey:               group string
           value: epoch int32, (tag 0, 4.1+) metadataHash int64
    type 4 ConsumerGroupPartitionMetadataKey:      group string
           value: topics [] of (topicId uuid, topicName string,
                  numPartitions int32, partitionMetadata [] of
                  (partition int32, racks []string))
    type 5 ConsumerGroupMemberMetadataKey:         group string, memberId string
           value: instanceId nullable string, rackId nullable string,
                  clientId string, clientHost string,
                  subscribedTopicNames []string,
                  subscribedTopicRegex nullable string,
                  rebalanceTimeoutMs int32, serverAssignor nullable string,
                  (tag 0) classicMemberMetadata nullable struct of
                  (sessionTimeoutMs int32, supportedProtocols [] of
                   (name string, metadata bytes))
    type 6 ConsumerGroupTargetAssignmentMetadataKey: group string
           value: assignmentEpoch int32
    type 7 ConsumerGroupTargetAssignmentMemberKey: group string, memberId string
           value: topicPartitions [] of (topicId uuid, partitions []int32)
    type 8 ConsumerGroupCurrentMemberAssignmentKey: group string, memberId string
           value: memberEpoch int32, previousMemberEpoch int32,
                  state int8 (0 STABLE, 1 UNREVOKED_PARTITIONS,
                  2 UNRELEASED_PARTITIONS), assignedPartitions and
                  partitionsPendingRevocation, each [] of
                  (topicId uuid, partitions []int32)

kfast writes type 4 as Kafka 3.7-4.0 do (4.1 deprecated it in favour of
metadataHash but still reads it), so logs stay readable by every Kafka that
knows KIP-848; it reads metadataHash when a 4.1 log carries one. The
flexible values are encoded by kfast's protocol codec from the grammars
below (the same compiled codec as the wire protocol).

This module is the one definition of these layouts; ``kfast dump-log
--offsets-decoder`` decodes through it.
"""

from __future__ import annotations

import struct
import uuid
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, overload

from kfast._ext import protocol_codec as _codec
from kfast.protocol import errors
from kfast.protocol.api_keys import ApiKey
from kfast.protocol.schema import FieldSpec, Message, MessageSchema

__all__ = [
    "OFFSET_COMMIT_KEY_TYPES",
    "GROUP_METADATA_KEY_TYPE",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "java_string_hash_code",
    "partition_for",
    "CONSUMER_GROUP_KEY_TYPES",
    "CONSUMER_GROUP_KEY_CLASSES",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "MEMBER_STATE_CODES",
    "consumer_group_value_fields",
    "UnknownRecordTypeError",
    "encode_key",
    "encode_value",
    "decode_key",
    "decode_value",
]

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_KEY_TYPE = 1  # what Kafka writes today
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


# -- KIP-848 consumer groups -----------------------------------------------------------
class ConsumerGroupMetadataKey(NamedTuple):
    group_id: str


class ConsumerGroupPartitionMetadataKey(NamedTuple):
    group_id: str


class ConsumerGroupMemberMetadataKey(NamedTuple):
    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    group_id: str


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    group_id: str
    member_id: str


ConsumerGroupKey: TypeAlias = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
# Any __consumer_offsets record key kfast knows.
GroupRecordKey: TypeAlias = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey
# Its value: a KIP-848 value is a message class of _VALUE_GRAMMARS; None is a tombstone.
GroupRecordValue: TypeAlias = OffsetCommitValue | GroupMetadataValue | Message
# One record as a handler returns it (CoordinatorResult) and replay applies it.
GroupRecord: TypeAlias = tuple[GroupRecordKey, GroupRecordValue | None]


_CONSUMER_GROUP_KEYS: dict[int, type[ConsumerGroupKey]] = {
    3: ConsumerGroupMetadataKey,
    4: ConsumerGroupPartitionMetadataKey,
    5: ConsumerGroupMemberMetadataKey,
    6: ConsumerGroupTargetAssignmentMetadataKey,
    7: ConsumerGroupTargetAssignmentMemberKey,
    8: ConsumerGroupCurrentMemberAssignmentKey,
}
_CONSUMER_GROUP_KEY_TYPE: dict[type[GroupRecordKey], int] = {
    cls: t for t, cls in _CONSUMER_GROUP_KEYS.items()
}


def _key_eq(a: tuple[str, ...], b: object) -> bool:
    return type(a) is type(b) and tuple.__eq__(a, b)


def _key_ne(a: tuple[str, ...], b: object) -> bool:
    return not _key_eq(a, b)


def _key_hash(key: ConsumerGroupKey) -> int:
    return hash((_CONSUMER_GROUP_KEY_TYPE[type(key)], *key))


# Keys of different types with the same fields (a member's metadata and its
# target, say) are different records: equality and hash include the type.
for _cls in _CONSUMER_GROUP_KEYS.values():
    # Patched onto the six classes at once, one definition for all (mypy
    # does not allow assigning to a method of a class, nor __ne__ and __hash__
    # taking the union of the key classes).
    _cls.__eq__ = _key_eq  # type: ignore[method-assign]
    _cls.__ne__ = _key_ne  # type: ignore[method-assign,assignment]
    _cls.__hash__ = _key_hash  # type: ignore[method-assign,assignment]
del _cls
CONSUMER_GROUP_KEY_TYPES = tuple(_CONSUMER_GROUP_KEYS)
CONSUMER_GROUP_KEY_CLASSES = tuple(_CONSUMER_GROUP_KEYS.values())

# Kafka's MemberState codes (CurrentMemberAssignmentValue.state), by the
# names kfast.coordinator.group.consumer_group uses.
MEMBER_STATE_CODES = {"STABLE": 0, "UNREVOKED_PARTITIONS": 1, "UNRELEASED_PARTITIONS": 2}

# The value grammars (kfast.protocol.schema), each version 0 and flexible.
_TOPIC_PARTITIONS = """
      topic_id                         uuid                           0+
      partitions                       []int32                        0+
"""
_VALUE_GRAMMARS = {
    3: (
        "ConsumerGroupMetadataValue",
        """
    epoch                              int32                          0+
    metadata_hash                      int64                          0+     tag=0 tagged=0+
""",
    ),
    4: (
        "ConsumerGroupPartitionMetadataValue",
        """
    topics                             []TopicMetadata                0+
      topic_id                         uuid                           0+
      topic_name                       string                         0+
      num_partitions                   int32                          0+
      partition_metadata               []PartitionMetadata            0+
        partition                      int32                          0+
        racks                          []string                       0+
""",
    ),
    5: (
        "ConsumerGroupMemberMetadataValue",
        """
    instance_id                        string                         0+     nullable=0+
    rack_id                            string                         0+     nullable=0+
    client_id                          string                         0+
    client_host                        string                         0+
    subscribed_topic_names             []string                       0+
    subscribed_topic_regex             string                         0+     nullable=0+
    rebalance_timeout_ms               int32                          0+     default=-1
    server_assignor                    string                         0+     nullable=0+
    classic_member_metadata  ClassicMemberMetadata  0+  nullable=0+ default=null tag=0 tagged=0+
      session_timeout_ms               int32                          0+
      supported_protocols              []ClassicProtocol              0+
        name                           string                         0+
        metadata                       bytes                          0+
""",
    ),
    6: (
        "ConsumerGroupTargetAssignmentMetadataValue",
        """
    assignment_epoch                   int32                          0+
""",
    ),
    7: (
        "ConsumerGroupTargetAssignmentMemberValue",
        """
    topic_partitions                   []TopicPartition               0+"""
        + _TOPIC_PARTITIONS,
    ),
    8: (
        "ConsumerGroupCurrentMemberAssignmentValue",
        """
    member_epoch                       int32                          0+
    previous_member_epoch              int32                          0+
    state                              int8                           0+
    assigned_partitions                []TopicPartitions              0+"""
        + _TOPIC_PARTITIONS
        + """
    partitions_pending_revocation      []TopicPartitions              0+
""",
    ),
}
CONSUMER_GROUP_VALUE_VERSION = 0


class _ValueSchema(MessageSchema):
    """A coordinator record value as a one-direction MessageSchema (version
    0, flexible), as kfast.controller.metadata.records does for metadata
    records."""

    def __init__(self, key_type: int, name: str, grammar: str) -> None:
        super().__init__(
            ApiKey(key_type, name[: -len("Value")], 0, 0, 0, False, ()), "Value", grammar
        )
        self.cls.__module__ = __name__
        self.key_type = key_type


_VALUE_SCHEMAS = {
    t: _ValueSchema(t, name, grammar) for t, (name, grammar) in _VALUE_GRAMMARS.items()
}
_VALUE_SCHEMA_BY_CLASS = {schema.cls: schema for schema in _VALUE_SCHEMAS.values()}


def consumer_group_value_fields(key_type: int) -> list[FieldSpec]:
    """The FieldSpec tree of a KIP-848 value (tools format values by it)."""
    return _VALUE_SCHEMAS[key_type].fields


if TYPE_CHECKING:
    # What the classes the schemas build from _VALUE_GRAMMARS hold (fields
    # left out of a constructor take the grammar's defaults);
    # tests/unit/coordinator/test_consumer_group_records.py checks them
    # against the run-time classes.
    class ConsumerGroupMetadataValue(Message):
        epoch: int
        metadata_hash: int

        def __init__(self, *, epoch: int = ..., metadata_hash: int = ...) -> None: ...

    class ConsumerGroupPartitionMetadataValue(Message):
        class PartitionMetadata(Message):
            partition: int
            racks: list[str]

        class TopicMetadata(Message):
            topic_id: uuid.UUID
            topic_name: str
            num_partitions: int
            partition_metadata: list[ConsumerGroupPartitionMetadataValue.PartitionMetadata]

            def __init__(
                self,
                *,
                topic_id: uuid.UUID = ...,
                topic_name: str = ...,
                num_partitions: int = ...,
                partition_metadata: list[
                    ConsumerGroupPartitionMetadataValue.PartitionMetadata
                ] = ...,
            ) -> None: ...

        topics: list[TopicMetadata]

        def __init__(self, *, topics: list[TopicMetadata] = ...) -> None: ...

    class ConsumerGroupMemberMetadataValue(Message):
        class ClassicProtocol(Message):
            name: str
            metadata: bytes

        class ClassicMemberMetadata(Message):
            session_timeout_ms: int
            supported_protocols: list[ConsumerGroupMemberMetadataValue.ClassicProtocol]

        instance_id: str | None
        rack_id: str | None
        client_id: str
        client_host: str
        subscribed_topic_names: list[str]
        subscribed_topic_regex: str | None
        rebalance_timeout_ms: int
        server_assignor: str | None
        classic_member_metadata: ClassicMemberMetadata | None

        def __init__(
            self,
            *,
            instance_id: str | None = ...,
            rack_id: str | None = ...,
            client_id: str = ...,
            client_host: str = ...,
            subscribed_topic_names: list[str] = ...,
            subscribed_topic_regex: str | None = ...,
            rebalance_timeout_ms: int = ...,
            server_assignor: str | None = ...,
            classic_member_metadata: ClassicMemberMetadata | None = ...,
        ) -> None: ...

    class ConsumerGroupTargetAssignmentMetadataValue(Message):
        assignment_epoch: int

        def __init__(self, *, assignment_epoch: int = ...) -> None: ...

    class ConsumerGroupTargetAssignmentMemberValue(Message):
        class TopicPartition(Message):
            topic_id: uuid.UUID
            partitions: list[int]

            def __init__(
                self, *, topic_id: uuid.UUID = ..., partitions: list[int] = ...
            ) -> None: ...

        topic_partitions: list[TopicPartition]

        def __init__(self, *, topic_partitions: list[TopicPartition] = ...) -> None: ...

    class ConsumerGroupCurrentMemberAssignmentValue(Message):
        class TopicPartitions(Message):
            topic_id: uuid.UUID
            partitions: list[int]

            def __init__(
                self, *, topic_id: uuid.UUID = ..., partitions: list[int] = ...
            ) -> None: ...

        member_epoch: int
        previous_member_epoch: int
        state: int
        assigned_partitions: list[TopicPartitions]
        partitions_pending_revocation: list[TopicPartitions]

        def __init__(
            self,
            *,
            member_epoch: int = ...,
            previous_member_epoch: int = ...,
            state: int = ...,
            assigned_partitions: list[TopicPartitions] = ...,
            partitions_pending_revocation: list[TopicPartitions] = ...,
        ) -> None: ...

else:
    ConsumerGroupMetadataValue = _VALUE_SCHEMAS[3].cls
    ConsumerGroupPartitionMetadataValue = _VALUE_SCHEMAS[4].cls
    ConsumerGroupMemberMetadataValue = _VALUE_SCHEMAS[5].cls
    ConsumerGroupTargetAssignmentMetadataValue = _VALUE_SCHEMAS[6].cls
    ConsumerGroupTargetAssignmentMemberValue = _VALUE_SCHEMAS[7].cls
    ConsumerGroupCurrentMemberAssignmentValue = _VALUE_SCHEMAS[8].cls


class UnknownRecordTypeError(ValueError):
    """A key type kfast does not know (share or streams groups, a newer
    Kafka's records): loaders skip the record, as Kafka's loader does."""


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


def encode_key(key: GroupRecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (
            struct.pack(">h", OFFSET_COMMIT_KEY_TYPE)
            + _string(key.group)
            + _string(key.topic)
            + struct.pack(">i", key.partition)
        )
    if isinstance(key, GroupMetadataKey):
        return struct.pack(">h", GROUP_METADATA_KEY_TYPE) + _string(key.group)
    key_type = _CONSUMER_GROUP_KEY_TYPE[type(key)]
    return struct.pack(">h", key_type) + b"".join(_string(field) for field in key)


def encode_value(value: GroupRecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, Message):
        schema = _VALUE_SCHEMA_BY_CLASS[type(value)]
        encoded: bytes = _codec.encode(schema.program(CONSUMER_GROUP_VALUE_VERSION), value)
        return struct.pack(">h", CONSUMER_GROUP_VALUE_VERSION) + encoded
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != NO_EXPIRE_TIMESTAMP:
            return (
                struct.pack(">hq", OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY, value.offset)
                + _string(value.metadata)
                + struct.pack(">qq", value.commit_timestamp, value.expire_timestamp)
            )
        return (
            struct.pack(">hqi", OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
            + _string(value.metadata)
            + struct.pack(">q", value.commit_timestamp)
        )
    parts = [
        struct.pack(">h", GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        struct.pack(">i", value.generation),
        _nullable_string(value.protocol),
        _nullable_string(value.leader),
        struct.pack(">qi", value.current_state_timestamp, len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _nullable_string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            struct.pack(">ii", member.rebalance_timeout_ms, member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


# -- reading -------------------------------------------------------------------------
class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"field of {n} bytes runs past the end at {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        value: int
        (value,) = struct.unpack(">h", self._take(2))
        return value

    def int32(self) -> int:
        value: int
        (value,) = struct.unpack(">i", self._take(4))
        return value

    def int64(self) -> int:
        value: int
        (value,) = struct.unpack(">q", self._take(8))
        return value

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


def decode_key(data: bytes | bytearray | memoryview) -> GroupRecordKey:
    """The key's NamedTuple; ValueError for an unknown key type or a
    malformed key."""
    reader = _Reader(data)
    key_type = reader.int16()
    cls = _CONSUMER_GROUP_KEYS.get(key_type)
    if cls is not None:
        key: ConsumerGroupKey = cls(*(reader.string() for _ in cls._fields))
        if reader.pos != len(reader.data):
            raise ValueError(f"{len(reader.data) - reader.pos} bytes after the key")
        return key
    if key_type in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if key_type == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(reader.string())
    raise UnknownRecordTypeError(f"unknown __consumer_offsets key type {key_type}")


@overload
def decode_value(
    key: OffsetCommitKey, data: bytes | bytearray | memoryview | None
) -> OffsetCommitValue | None: ...
@overload
def decode_value(
    key: GroupMetadataKey, data: bytes | bytearray | memoryview | None
) -> GroupMetadataValue | None: ...
@overload
def decode_value(
    key: ConsumerGroupKey, data: bytes | bytearray | memoryview | None
) -> Message | None: ...
@overload
def decode_value(
    key: GroupRecordKey, data: bytes | bytearray | memoryview | None
) -> GroupRecordValue | None: ...
def decode_value(
    key: GroupRecordKey, data: bytes | bytearray | memoryview | None
) -> GroupRecordValue | None:
    """The value for ``key``'s type; None for a tombstone (null value)."""
    if data is None:
        return None
    key_type = _CONSUMER_GROUP_KEY_TYPE.get(type(key))
    if key_type is not None:
        return _decode_consumer_group_value(key_type, bytes(data))
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
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes(),
                reader.bytes(),
            )
        )
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, state_timestamp, tuple(members)
    )


def _decode_consumer_group_value(key_type: int, data: bytes) -> Message:
    if len(data) < 2:
        raise ValueError("value shorter than its version")
    (version,) = struct.unpack_from(">h", data)
    schema = _VALUE_SCHEMAS[key_type]
    if version != CONSUMER_GROUP_VALUE_VERSION:
        raise ValueError(f"unknown {schema.name} version {version}")
    try:
        decoded: tuple[Message, int] = _codec.decode(schema.program(version), data, 2)
    except (errors.MalformedRequestException, errors.UnsupportedVersionException) as exc:
        raise ValueError(f"malformed {schema.name}: {exc}") from None
    value, end = decoded
    if end != len(data):
        raise ValueError(f"{schema.name}: {len(data) - end} bytes after the value")
    return value
