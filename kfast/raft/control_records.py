"""KRaft's control records: the records Raft itself writes into a log or snapshot.

A control record lives in a v2 control batch (attributes bit 5 set). Its key
says what it is, its value is a flexible Kafka message of that type (Kafka's
ControlRecordType and ControlRecordUtils)::

    key   := version int16 (0) | type int16
    type  := 0 ABORT | 1 COMMIT          transaction markers (kfast.records)
           | 2 LEADER_CHANGE             LeaderChangeMessage, first batch of an epoch
           | 3 SNAPSHOT_HEADER           SnapshotHeaderRecord, first batch of a snapshot
           | 4 SNAPSHOT_FOOTER           SnapshotFooterRecord, last batch of a snapshot

The values, version 0 of each, flexible (compact arrays: uvarint N+1;
every struct ends with its tagged fields, here always none: uvarint 0)::

    LeaderChangeMessage   := Version int16 | LeaderId int32
                             | Voters []Voter | GrantingVoters []Voter | tags
    Voter                 := VoterId int32 | tags
    SnapshotHeaderRecord  := Version int16 | LastContainedLogTimestamp int64 | tags
    SnapshotFooterRecord  := Version int16 | tags

(clients/src/main/resources/common/message/LeaderChangeMessage.json,
SnapshotHeaderRecord.json and SnapshotFooterRecord.json in apache/kafka.)
"""
from __future__ import annotations

import struct

from kfast._ext.varint import decode_uvarint, encode_uvarint
from kfast.protocol.errors import CorruptRecordException
from kfast.raft.log import LeaderChangeMessage
from kfast.records import RecordBatchBuilder

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
# Kafka's ControlRecordType names (ABORT and COMMIT are transaction markers;
# KRAFT_VERSION and KRAFT_VOTERS belong to KIP-853's dynamic quorums).
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE",
                      SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
                      5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

CONTROL_KEY = struct.Struct(">hh")             # version 0, control type
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_HEADER_VALUE = struct.Struct(">hqB")
_FOOTER_VALUE = struct.Struct(">hB")
_NO_TAGGED_FIELDS = b"\x00"


def control_key(control_type: int) -> bytes:
    return CONTROL_KEY.pack(0, control_type)


def control_type_of(key) -> int:
    """The control type in a control record's key."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordException("control record without a 4-byte key")
    return CONTROL_KEY.unpack(bytes(key)[:CONTROL_KEY.size])[1]


def control_batch(control_type: int, value: bytes, base_offset: int, epoch: int,
                  timestamp: int) -> bytes:
    """A v2 control batch holding one control record."""
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=epoch,
                                 is_control=True)
    builder.append(timestamp, control_key(control_type), value)
    return builder.build()


def _voters(ids) -> bytes:
    return encode_uvarint(len(ids) + 1) + b"".join(
        _INT32.pack(voter_id) + _NO_TAGGED_FIELDS for voter_id in ids)


def encode_leader_change(message: LeaderChangeMessage) -> bytes:
    # kfast's LeaderChangeMessage does not carry who voted for the leader;
    # GrantingVoters is informational in Kafka too (no reader acts on it).
    return (_INT16.pack(0) + _INT32.pack(message.leader_id) + _voters(message.voters)
            + _voters(()) + _NO_TAGGED_FIELDS)


def decode_leader_change(value) -> LeaderChangeMessage:
    data = bytes(value)
    try:
        leader_id = _INT32.unpack_from(data, 2)[0]
        position = 6
        voter_lists = []
        for _ in range(2):
            count, position = decode_uvarint(data, position)
            if count == 0:
                raise CorruptRecordException("LeaderChangeMessage with a null voter array")
            ids = []
            for _ in range(count - 1):
                ids.append(_INT32.unpack_from(data, position)[0])
                position = _skip_tagged_fields(data, position + 4)
            voter_lists.append(tuple(ids))
        _skip_tagged_fields(data, position)
    except (struct.error, ValueError) as exc:
        raise CorruptRecordException(f"malformed LeaderChangeMessage: {exc}") from exc
    return LeaderChangeMessage(leader_id, voter_lists[0])


def _skip_tagged_fields(data: bytes, position: int) -> int:
    count, position = decode_uvarint(data, position)
    for _ in range(count):
        _, position = decode_uvarint(data, position)          # tag
        size, position = decode_uvarint(data, position)
        position += size
    if position > len(data):
        raise CorruptRecordException("tagged field runs past the record value")
    return position


def encode_snapshot_header(last_contained_log_timestamp: int) -> bytes:
    return _HEADER_VALUE.pack(0, last_contained_log_timestamp, 0)


def encode_snapshot_footer() -> bytes:
    return _FOOTER_VALUE.pack(0, 0)


def decode_snapshot_header(value) -> tuple[int, int]:
    """(version, last contained log timestamp) of a SnapshotHeaderRecord."""
    if value is None or len(value) < _HEADER_VALUE.size - 1:
        raise CorruptRecordException("SnapshotHeaderRecord too short")
    version, timestamp = struct.unpack_from(">hq", bytes(value))
    return version, timestamp
