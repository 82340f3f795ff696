"""KRaft's control records: the records Raft itself writes into a log or snapshot.

A control record lives in a v2 control batch (attributes bit 5 set). Its key
says what it is, its value is a flexible Kafka message of that type (Kafka's
ControlRecordType and ControlRecordUtils)::

    key   := version int16 (0) | type int16
    type  := 0 ABORT | 1 COMMIT          transaction markers (kfast.records)
           | 2 LEADER_CHANGE             LeaderChangeMessage, first batch of an epoch
           | 3 SNAPSHOT_HEADER           SnapshotHeaderRecord, first batch of a snapshot
           | 4 SNAPSHOT_FOOTER           SnapshotFooterRecord, last batch of a snapshot
           | 5 KRAFT_VERSION             KRaftVersionRecord (KIP-853)
           | 6 KRAFT_VOTERS              VotersRecord (KIP-853)

The values, version 0 of each, flexible (compact arrays: uvarint N+1;
every struct ends with its tagged fields, here always none: uvarint 0)::

    LeaderChangeMessage   := Version int16 | LeaderId int32
                             | Voters []Voter | GrantingVoters []Voter | tags
    Voter                 := VoterId int32 | tags
    SnapshotHeaderRecord  := Version int16 | LastContainedLogTimestamp int64 | tags
    SnapshotFooterRecord  := Version int16 | tags
    KRaftVersionRecord    := Version int16 | KRaftVersion int16 | tags
    VotersRecord          := Version int16 | Voters []VotersVoter | tags
    VotersVoter           := VoterId int32 | VoterDirectoryId uuid (16 bytes)
                             | Endpoints []Endpoint
                             | KRaftVersionFeature | tags
    Endpoint              := Name string | Host string | Port uint16 | tags
    KRaftVersionFeature   := MinSupportedVersion int16 | MaxSupportedVersion int16 | tags
    string                := uvarint (length + 1) | UTF-8 bytes

(clients/src/main/resources/common/message/LeaderChangeMessage.json,
SnapshotHeaderRecord.json, SnapshotFooterRecord.json, KRaftVersionRecord.json
and VotersRecord.json in apache/kafka; the value is the message alone, as
MemoryRecordsBuilder.appendControlRecord writes it.)
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kfast._ext.layout import CONTROL_RECORD_KEY
from kfast._ext.varint import decode_uvarint, encode_uvarint
from kfast.protocol.errors import CorruptRecordException
from kfast.raft.log import LeaderChangeMessage
from kfast.raft.voter_set import Endpoint, KRaftVersionRecord, VoterNode, VoterSet, VotersRecord
from kfast.records import RecordBatchBuilder

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
# Kafka's ControlRecordType names (ABORT and COMMIT are transaction markers;
# KRAFT_VERSION and KRAFT_VOTERS belong to KIP-853's dynamic quorums).
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    LEADER_CHANGE: "LEADER_CHANGE",
    SNAPSHOT_HEADER: "SNAPSHOT_HEADER",
    SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    KRAFT_VERSION: "KRAFT_VERSION",
    KRAFT_VOTERS: "KRAFT_VOTERS",
}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_HEADER_VALUE = struct.Struct(">hqB")
_FOOTER_VALUE = struct.Struct(">hB")
_KRAFT_VERSION_VALUE = struct.Struct(">hhB")
_UINT16 = struct.Struct(">H")
_VERSION_RANGE = struct.Struct(">hh")
_NO_TAGGED_FIELDS = b"\x00"


def control_key(control_type: int) -> bytes:
    return CONTROL_RECORD_KEY.pack(0, control_type)


def control_type_of(key) -> int:
    """The control type in a control record's key."""
    if key is None or len(key) < CONTROL_RECORD_KEY.size:
        raise CorruptRecordException("control record without a 4-byte key")
    return CONTROL_RECORD_KEY.unpack(bytes(key)[: CONTROL_RECORD_KEY.size])[1]


def control_batch(
    control_type: int, value: bytes, base_offset: int, epoch: int, timestamp: int
) -> bytes:
    """A v2 control batch holding one control record."""
    builder = RecordBatchBuilder(
        base_offset=base_offset, partition_leader_epoch=epoch, is_control=True
    )
    builder.append(timestamp, control_key(control_type), value)
    return builder.build()


def _voters(ids) -> bytes:
    return encode_uvarint(len(ids) + 1) + b"".join(
        _INT32.pack(voter_id) + _NO_TAGGED_FIELDS for voter_id in ids
    )


def encode_leader_change(message: LeaderChangeMessage) -> bytes:
    # kfast's LeaderChangeMessage does not carry who voted for the leader;
    # GrantingVoters is informational in Kafka too (no reader acts on it).
    return (
        _INT16.pack(0)
        + _INT32.pack(message.leader_id)
        + _voters(message.voters)
        + _voters(())
        + _NO_TAGGED_FIELDS
    )


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
        _, position = decode_uvarint(data, position)  # tag
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


# -- KIP-853: kraft.version and the voter set ---------------------------------------------
def encode_kraft_version(record: KRaftVersionRecord) -> bytes:
    return _KRAFT_VERSION_VALUE.pack(0, record.kraft_version, 0)


def decode_kraft_version(value) -> KRaftVersionRecord:
    data = bytes(value) if value is not None else b""
    if len(data) < _KRAFT_VERSION_VALUE.size:
        raise CorruptRecordException("KRaftVersionRecord too short")
    _, kraft_version = struct.unpack_from(">hh", data)
    _skip_tagged_fields(data, 4)
    return KRaftVersionRecord(kraft_version)


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return encode_uvarint(len(raw) + 1) + raw


def encode_voters(record: VotersRecord) -> bytes:
    nodes = record.voters.nodes
    out = [_INT16.pack(0), encode_uvarint(len(nodes) + 1)]
    for node in nodes:
        out.append(_INT32.pack(node.voter_id) + node.directory_id.bytes)
        out.append(encode_uvarint(len(node.endpoints) + 1))
        for endpoint in node.endpoints:
            out.append(
                _compact_string(endpoint.name)
                + _compact_string(endpoint.host)
                + _UINT16.pack(endpoint.port)
                + _NO_TAGGED_FIELDS
            )
        out.append(
            _VERSION_RANGE.pack(node.min_kraft_version, node.max_kraft_version)
            + _NO_TAGGED_FIELDS
            + _NO_TAGGED_FIELDS
        )
    out.append(_NO_TAGGED_FIELDS)
    return b"".join(out)


def _read_compact_string(data: bytes, position: int) -> tuple[str, int]:
    size, position = decode_uvarint(data, position)
    if size == 0 or position + size - 1 > len(data):
        raise CorruptRecordException("VotersRecord string runs past the record value")
    return data[position : position + size - 1].decode(), position + size - 1


def decode_voters(value) -> VotersRecord:
    data = bytes(value) if value is not None else b""
    try:
        position = 2
        count, position = decode_uvarint(data, position)
        if count == 0:
            raise CorruptRecordException("VotersRecord with a null voter array")
        nodes = []
        for _ in range(count - 1):
            voter_id = _INT32.unpack_from(data, position)[0]
            directory = data[position + 4 : position + 20]
            if len(directory) != 16:
                raise CorruptRecordException("VotersRecord directory id cut short")
            position += 20
            endpoint_count, position = decode_uvarint(data, position)
            endpoints = []
            for _ in range(max(endpoint_count - 1, 0)):
                name, position = _read_compact_string(data, position)
                host, position = _read_compact_string(data, position)
                port = _UINT16.unpack_from(data, position)[0]
                position = _skip_tagged_fields(data, position + 2)
                endpoints.append(Endpoint(name, host, port))
            low, high = _VERSION_RANGE.unpack_from(data, position)
            position = _skip_tagged_fields(data, position + 4)
            position = _skip_tagged_fields(data, position)
            nodes.append(
                VoterNode(voter_id, uuid.UUID(bytes=directory), tuple(endpoints), low, high)
            )
        _skip_tagged_fields(data, position)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecordException(f"malformed VotersRecord: {exc}") from exc
    return VotersRecord(VoterSet.of(nodes))


# What a control record of each KRaft type decodes to, and how it is encoded:
# type -> (class, encode, decode).
# control type -> (class, encode, decode); a heterogeneous table, so each
# codec takes and gives Any: encode_control_record picks by the record's class.
KRAFT_CONTROL_CODECS: dict[
    int, tuple[type, Callable[[Any], bytes], Callable[[Any], KRaftControlRecord]]
] = {
    LEADER_CHANGE: (LeaderChangeMessage, encode_leader_change, decode_leader_change),
    KRAFT_VERSION: (KRaftVersionRecord, encode_kraft_version, decode_kraft_version),
    KRAFT_VOTERS: (VotersRecord, encode_voters, decode_voters),
}
CONTROL_TYPE_OF = {cls: control_type for control_type, (cls, _, _) in KRAFT_CONTROL_CODECS.items()}


# The records of KRaft's own control batches (besides snapshot header/footer).
KRaftControlRecord = LeaderChangeMessage | KRaftVersionRecord | VotersRecord


def encode_control_record(record: KRaftControlRecord) -> tuple[int, bytes]:
    """(control type, value) of a KRaft control record object."""
    control_type = CONTROL_TYPE_OF.get(type(record))
    if control_type is None:
        raise ValueError(f"not a KRaft control record: {record!r}")
    return control_type, KRAFT_CONTROL_CODECS[control_type][1](record)


def decode_control_record(control_type: int, value):
    """The object of a LeaderChange, KRaftVersion or Voters control record."""
    codec = KRAFT_CONTROL_CODECS.get(control_type)
    if codec is None:
        raise CorruptRecordException(f"control type {control_type} in the metadata log")
    return codec[2](value)
