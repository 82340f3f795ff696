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

Output follows kafka-dump-log.sh: the key as
``{"type":"1","data":{...}}`` and the value as ``{"version":"3","data":{...}}``
(compact JSON, bytes fields base64 as Jackson writes them).
"""
from __future__ import annotations

import base64
import json
import struct

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
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

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else self._take(n)


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def decode_key(key: bytes) -> tuple[int, dict]:
    r = _Reader(key)
    key_type = r.int16()
    if key_type in OFFSET_COMMIT_KEY_TYPES:
        return key_type, {"group": r.string(), "topic": r.string(), "partition": r.int32()}
    if key_type == GROUP_METADATA_KEY_TYPE:
        return key_type, {"group": r.string()}
    raise LookupError(key_type)


def decode_offset_commit_value(value: bytes) -> tuple[int, dict]:
    r = _Reader(value)
    version = r.int16()
    data = {"offset": r.int64()}
    if version >= 3:
        data["leaderEpoch"] = r.int32()
    data["metadata"] = r.string()
    data["commitTimestamp"] = r.int64()
    if version == 1:
        data["expireTimestamp"] = r.int64()
    return version, data


def decode_group_metadata_value(value: bytes) -> tuple[int, dict]:
    r = _Reader(value)
    version = r.int16()
    data = {"protocolType": r.string(), "generation": r.int32(),
            "protocol": r.nullable_string(), "leader": r.nullable_string()}
    if version >= 2:
        data["currentStateTimestamp"] = r.int64()
    members = []
    for _ in range(r.int32()):
        member = {"memberId": r.string()}
        if version >= 3:
            member["groupInstanceId"] = r.nullable_string()
        member["clientId"] = r.string()
        member["clientHost"] = r.string()
        if version >= 1:
            member["rebalanceTimeout"] = r.int32()
        member["sessionTimeout"] = r.int32()
        member["subscription"] = base64.b64encode(r.bytes_()).decode()
        member["assignment"] = base64.b64encode(r.bytes_()).decode()
        members.append(member)
    data["members"] = members
    return version, data


def format_offsets_record(offset: int, key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
    """(key text, payload text) for one __consumer_offsets record."""
    if key is None:
        raise ValueError(f"Failed to decode message at offset {offset} using the specified "
                         f"decoder (message had a missing key)")
    try:
        key_type, key_data = decode_key(key)
    except LookupError as exc:
        return f"Unknown record type {exc.args[0]} at offset {offset}, skipping.", None
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    key_text = _json({"type": str(1 if key_type in OFFSET_COMMIT_KEY_TYPES else key_type),
                      "data": key_data})
    if value is None:
        return key_text, "<DELETE>"
    try:
        if key_type in OFFSET_COMMIT_KEY_TYPES:
            version, data = decode_offset_commit_value(value)
        else:
            version, data = decode_group_metadata_value(value)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    return key_text, _json({"version": str(version), "data": data})
