"""Records of the transaction coordinator on ``__transaction_state`` (Kafka's
TransactionLogKey / TransactionLogValue), and the placement of a
transactional id on that topic's partitions.

One record per transactional id; the latest wins (the topic is compacted)
and a null value (tombstone) removes the id, which is how an expired
transactional id leaves the log::

    key   := version int16 (= 0), transactionalId string
             (non-flexible: int16 length + UTF-8)
    value := version int16, TransactionLogValue at that version (null = tombstone)

    TransactionLogValue v0 (non-flexible):
        producerId                        int64
        producerEpoch                     int16
        transactionTimeoutMs              int32
        transactionStatus                 int8    (TransactionState id, metadata.py)
        transactionPartitions             int32 count (-1 = null) of
            topic                         string  (int16 length + UTF-8)
            partitionIds                  int32 count of int32
        transactionLastUpdateTimestampMs  int64
        transactionStartTimestampMs       int64

    TransactionLogValue v1 (flexible): the same fields in the same order, with
        compact strings and arrays (uvarint length + 1, 0 = null), a tagged-field
        section (uvarint count, then per field uvarint tag, uvarint size, data)
        after each PartitionsSchema entry and after the value, holding:
          tag 0  previousProducerId        int64  default -1
          tag 1  nextProducerId            int64  default -1
          tag 2  clientTransactionVersion  int16  default 0
          tag 3  nextProducerEpoch         int16  default -1  (KIP-939)
        A tagged field is written only when it differs from its default, in
        tag order.

Kafka writes v0 while the cluster's ``transaction.version`` feature is 0 and
v1 from level 1 on (TransactionVersion.transactionLogValueVersion); Empty
writes null partitions. kfast writes previousProducerId and nextProducerId
in v1 as Kafka does since KAFKA-20310 (earlier 4.x wrote neither, so a
coordinator failover in the middle of an epoch overflow lost the new
producer id); nextProducerEpoch belongs to the recovery of a prepared
two-phase commit transaction (KIP-939 keepPreparedTxn), which kfast does not
serve: it is read and written back, never set. A two-phase commit
transaction itself needs no field: its timeout is Integer.MAX_VALUE. Tags this
module does not know (a newer Kafka's) are skipped when reading, as Kafka's
generated code skips them.

Placement: the transactional id goes to partition
``abs(javaStringHashCode(id)) % transaction.state.log.num.partitions``, the
rule __consumer_offsets uses for groups, so both share one definition
(kfast.coordinator.group.records.partition_for).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple, overload

from kfast._ext import protocol_codec as _codec
from kfast.coordinator.group.records import UnknownRecordTypeError, partition_for
from kfast.protocol import errors
from kfast.protocol.api_keys import ApiKey
from kfast.protocol.schema import MessageSchema

__all__ = [
    "TRANSACTION_LOG_KEY_VERSION",
    "TransactionLogKey",
    "TransactionLogValue",
    "PartitionsSchema",
    "UnknownRecordTypeError",
    "partition_for",
    "value_version",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
]

TRANSACTION_LOG_KEY_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_VALUE_GRAMMAR = """
    producer_id                           int64               0+
    previous_producer_id                  int64               1+  default=-1 tag=0 tagged=1+
    next_producer_id                      int64               1+  default=-1 tag=1 tagged=1+
    producer_epoch                        int16               0+
    next_producer_epoch                   int16               1+  default=-1 tag=3 tagged=1+
    transaction_timeout_ms                int32               0+
    transaction_status                    int8                0+
    transaction_partitions                []PartitionsSchema  0+  nullable=0+
      topic                               string              0+
      partition_ids                       []int32             0+
    transaction_last_update_timestamp_ms  int64               0+
    transaction_start_timestamp_ms        int64               0+
    client_transaction_version            int16               1+  default=0 tag=2 tagged=1+
"""
_TAGGED_FIELDS = (
    "previous_producer_id",
    "next_producer_id",
    "next_producer_epoch",
    "client_transaction_version",
)


class _ValueSchema(MessageSchema):
    """TransactionLogValue as a one-direction MessageSchema (versions 0-1,
    flexible from 1), compiled by the same codec as the wire protocol."""

    def __init__(self) -> None:
        super().__init__(ApiKey(0, "TransactionLog", 0, 1, 1, False, ()), "Value", _VALUE_GRAMMAR)
        for cls in self.classes.values():
            cls.__module__ = __name__


_SCHEMA = _ValueSchema()
if TYPE_CHECKING:
    # What the classes the schema generates from _VALUE_GRAMMAR hold (the
    # codec builds them at run time; fields take their defaults when left out).
    class PartitionsSchema:
        topic: str
        partition_ids: list[int]

        def __init__(self, *, topic: str = ..., partition_ids: list[int] = ...) -> None: ...

    class TransactionLogValue:
        _field_names: tuple[str, ...]
        producer_id: int
        previous_producer_id: int
        next_producer_id: int
        producer_epoch: int
        next_producer_epoch: int
        transaction_timeout_ms: int
        transaction_status: int
        transaction_partitions: list[PartitionsSchema] | None
        transaction_last_update_timestamp_ms: int
        transaction_start_timestamp_ms: int
        client_transaction_version: int

        def __init__(
            self,
            *,
            producer_id: int = ...,
            previous_producer_id: int = ...,
            next_producer_id: int = ...,
            producer_epoch: int = ...,
            next_producer_epoch: int = ...,
            transaction_timeout_ms: int = ...,
            transaction_status: int = ...,
            transaction_partitions: list[PartitionsSchema] | None = ...,
            transaction_last_update_timestamp_ms: int = ...,
            transaction_start_timestamp_ms: int = ...,
            client_transaction_version: int = ...,
        ) -> None: ...

else:
    TransactionLogValue = _SCHEMA.cls
    PartitionsSchema = _SCHEMA.classes["PartitionsSchema"]


class TransactionLogKey(NamedTuple):
    transactional_id: str


def value_version(transaction_version_level: int) -> int:
    """The TransactionLogValue version Kafka writes at a finalized
    ``transaction.version`` feature level (1 from level 1 on)."""
    return 1 if transaction_version_level >= 1 else 0


# -- keys --------------------------------------------------------------------------------
def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode("utf-8")
    return struct.pack(">hh", TRANSACTION_LOG_KEY_VERSION, len(data)) + data


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id; UnknownRecordTypeError for a key version kfast
    does not know (the loader skips the record, as Kafka's does), ValueError
    for a malformed key."""
    data = bytes(data)
    if len(data) < 2:
        raise ValueError("key shorter than its version")
    (version,) = struct.unpack_from(">h", data)
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise UnknownRecordTypeError(f"unknown __transaction_state key version {version}")
    if len(data) < 4:
        raise ValueError("key shorter than its transactional id length")
    (length,) = struct.unpack_from(">h", data, 2)
    if length < 0:
        raise ValueError("null transactional id")
    if 4 + length != len(data):
        raise ValueError(f"transactional id of {length} bytes in a key of {len(data)} bytes")
    return data[4:].decode("utf-8")


# -- values ------------------------------------------------------------------------------
@overload
def encode_value(value: TransactionLogValue, version: int) -> bytes: ...
@overload
def encode_value(value: None, version: int) -> None: ...
def encode_value(value: TransactionLogValue | None, version: int) -> bytes | None:
    """``value`` (a TransactionLogValue, or None for a tombstone) at
    ``version``. v0 has no tagged fields: their values are left out, as
    Kafka leaves them unset at log version 0."""
    if value is None:
        return None
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    if version == 0 and any(
        getattr(value, name) != getattr(TransactionLogValue, name) for name in _TAGGED_FIELDS
    ):
        value = TransactionLogValue(
            **{
                name: getattr(value, name)
                for name in value._field_names
                if name not in _TAGGED_FIELDS
            }
        )
    return struct.pack(">h", version) + _codec.encode(_SCHEMA.program(version), value)


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """The TransactionLogValue, or None for a tombstone (null value).
    UnknownRecordTypeError for a value version kfast does not know,
    ValueError for a malformed value."""
    if data is None:
        return None
    data = bytes(data)
    if len(data) < 2:
        raise ValueError("value shorter than its version")
    (version,) = struct.unpack_from(">h", data)
    if version not in (0, 1):
        raise UnknownRecordTypeError(f"unknown TransactionLogValue version {version}")
    try:
        decoded: tuple[TransactionLogValue, int] = _codec.decode(_SCHEMA.program(version), data, 2)
        value, end = decoded
    except (errors.MalformedRequestException, errors.UnsupportedVersionException) as exc:
        raise ValueError(f"malformed TransactionLogValue: {exc}") from None
    if end != len(data):
        raise ValueError(f"TransactionLogValue: {len(data) - end} bytes after the value")
    return value
