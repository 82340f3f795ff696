"""Decode __consumer_offsets records for ``dump-log --offsets-decoder``.

    key   := type int16, fields        (non-flexible strings: int16 length + UTF-8)
      type 0/1 OffsetCommitKey:   group string, topic string, partition int32
      type 2   GroupMetadataKey:  group string
    value := version int16, fields     (null value = tombstone, printed <DELETE>)
      OffsetCommitValue  v0: offset i64, metadata string, commitTimestamp i64
                         v1: + expireTimestamp i64 after commitTimestamp
                         v2: as v0;  v3: offset, leaderEpoch i32, metadata, commitTimestamp
      GroupMetadataValue v0..v3: protocolType string, generation i32,
                         protocol nullable string, leader nullable string,
                         currentStateTimestamp i64 (v2+), members int32 count of:
                         memberId, groupInstanceId nullable (v3+), clientId,
                         clientHost, rebalanceTimeout i32 (v1+), sessionTimeout i32,
                         subscription bytes (int32 length), assignment bytes
      types 3-8 ConsumerGroup*Key (KIP-848): group string (+ memberId
                         string for 5, 7, 8); their values are flexible v0
                         messages (see kfast.coordinator.group.records)

The layouts are decoded by kfast.coordinator.group.records (their single
definition); this module only formats them. Output follows kafka-dump-log.sh: the key as
``{"type":"1","data":{...}}`` and the value as ``{"version":"3","data":{...}}``
(compact JSON, bytes fields base64 as Jackson writes them). KIP-848 records
print as Kafka's generated JsonConverters write them: camelCase field names,
topic ids in Kafka's base64 Uuid form, tagged fields only when not default.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid

from kfast.coordinator.group import records
from kfast.coordinator.group.records import (
    CONSUMER_GROUP_KEY_TYPES,
    GROUP_METADATA_KEY_TYPE,
    OFFSET_COMMIT_KEY_TYPES,
)

_KNOWN_KEY_TYPES = (*OFFSET_COMMIT_KEY_TYPES, GROUP_METADATA_KEY_TYPE, *CONSUMER_GROUP_KEY_TYPES)
_DECODE_ERRORS = (ValueError, struct.error, UnicodeDecodeError)


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _offset_commit_json(version: int, value: records.OffsetCommitValue) -> dict:
    # Only the fields the value's version has, in Kafka's order and names.
    data: dict[str, object] = {"offset": value.offset}
    if version >= 3:
        data["leaderEpoch"] = value.leader_epoch
    data["metadata"] = value.metadata
    data["commitTimestamp"] = value.commit_timestamp
    if version == 1:
        data["expireTimestamp"] = value.expire_timestamp
    return data


def _group_metadata_json(version: int, value: records.GroupMetadataValue) -> dict:
    data: dict[str, object] = {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
    }
    if version >= 2:
        data["currentStateTimestamp"] = value.current_state_timestamp
    members = []
    for m in value.members:
        member: dict[str, object] = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member["clientId"] = m.client_id
        member["clientHost"] = m.client_host
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout_ms
        member["sessionTimeout"] = m.session_timeout_ms
        # Jackson writes byte arrays as base64.
        member["subscription"] = base64.b64encode(m.subscription).decode()
        member["assignment"] = base64.b64encode(m.assignment).decode()
        members.append(member)
    data["members"] = members
    return data


def _json_name(name: str) -> str:
    """Kafka's JSON field name of a snake_case field: ``topic_id`` -> ``topicId``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _kafka_uuid(value: uuid.UUID) -> str:
    # Kafka's Uuid.toString: URL-safe base64 without padding.
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _message_json(message, specs) -> dict:
    """One KIP-848 value (or struct in it) as Kafka's JsonConverter writes it."""
    data = {}
    for spec in specs:
        value = getattr(message, spec.name)
        if spec.tag is not None:
            default = spec.default if spec.has_default else 0
            if value is None or (spec.fields is None and value == default):
                continue  # a tagged field at its default is not written
        data[_json_name(spec.name)] = _field_json(value, spec)
    return data


def _field_json(value, spec):
    if value is None:
        return None
    if spec.fields is not None:
        if spec.is_array:
            return [_message_json(v, spec.fields) for v in value]
        return _message_json(value, spec.fields)
    if spec.is_array:
        return [_scalar_json(v) for v in value]
    return _scalar_json(value)


def _scalar_json(value):
    if isinstance(value, uuid.UUID):
        return _kafka_uuid(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    return value


def format_offsets_record(
    offset: int, key: bytes | None, value: bytes | None
) -> tuple[str, str | None]:
    """(key text, payload text) for one __consumer_offsets record."""
    if key is None:
        raise ValueError(
            f"Failed to decode message at offset {offset} using the specified "
            f"decoder (message had a missing key)"
        )
    try:
        (key_type,) = struct.unpack_from(">h", key)
        if key_type not in _KNOWN_KEY_TYPES:
            return f"Unknown record type {key_type} at offset {offset}, skipping.", None
        decoded_key = records.decode_key(key)
    except _DECODE_ERRORS as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    key_data = decoded_key._asdict()
    if key_type in CONSUMER_GROUP_KEY_TYPES:
        key_data = {_json_name(k): v for k, v in key_data.items()}
    key_text = _json(
        {"type": str(1 if key_type in OFFSET_COMMIT_KEY_TYPES else key_type), "data": key_data}
    )
    if value is None:
        return key_text, "<DELETE>"
    try:
        (version,) = struct.unpack_from(">h", value)
        decoded = records.decode_value(decoded_key, value)
    except _DECODE_ERRORS as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    # The value's class follows from the key's type (decode_value).
    if isinstance(decoded, records.OffsetCommitValue):
        data = _offset_commit_json(version, decoded)
    elif isinstance(decoded, records.GroupMetadataValue):
        data = _group_metadata_json(version, decoded)
    else:
        data = _message_json(decoded, records.consumer_group_value_fields(key_type))
    return key_text, _json({"version": str(version), "data": data})
