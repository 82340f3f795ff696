"""Malformed input raises MalformedRequestException at once, without
allocating what the input claims."""

import struct
import tracemalloc

import pytest

import kfast.protocol as protocol
from kfast._ext import protocol_codec as codec
from kfast.protocol import api_keys, errors
from kfast.protocol.schema import schema

from .protocol_strategies import sample

Malformed = errors.MalformedRequestException

VERSIONS = sorted(
    {
        (api.name, v)
        for api in api_keys.API_KEYS
        for v in {api.min_version, api.max_version, api.flexible_from or api.min_version}
        if api.min_version <= v <= api.max_version
    }
)


@pytest.mark.parametrize("name,version", VERSIONS)
@pytest.mark.parametrize("direction", ["request", "response"])
def test_truncation_at_every_offset_raises(name, version, direction):
    ms = getattr(schema(name), direction)
    program = ms.program(version)
    encoded = codec.encode(program, sample(ms, version))
    decoded, end = codec.decode(program, encoded)
    assert end == len(encoded)
    for cut in range(len(encoded)):
        with pytest.raises(Malformed):
            codec.decode(program, encoded[:cut])


def test_truncated_request_header_raises():
    frame = protocol.encode_request(3, 12, 1, "client", protocol.MetadataRequest())[4:]
    for cut in range(14):
        with pytest.raises(Malformed):
            protocol.decode_request_header(frame[:cut])


def test_unknown_api_key_raises():
    with pytest.raises(Malformed):
        protocol.decode_request_header(struct.pack(">hhih", 9999, 0, 1, -1))


def _no_big_allocation(fn):
    tracemalloc.start()
    try:
        with pytest.raises(Malformed):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def _request(api, version, body_bytes):
    header = struct.pack(">hhih", api, version, 1, -1)
    if api_keys.api_key(api).is_flexible(version):
        header += b"\x00"
    return header + body_bytes


@pytest.mark.parametrize(
    "frame",
    [
        # Metadata v4: topics int32 count 2^31-1 with nothing after it
        _request(3, 4, struct.pack(">i", 0x7FFFFFFF)),
        # Metadata v9: compact topics count 2^32-2 (uvarint ff ff ff ff 0f)
        _request(3, 9, b"\xff\xff\xff\xff\x0f"),
        # Produce v3: records length 2^31-1
        _request(
            0,
            3,
            struct.pack(">hhii", -1, 1, 100, 1)
            + struct.pack(">h", 1)
            + b"t"
            + struct.pack(">iii", 1, 0, 0x7FFFFFFF),
        ),
        # Produce v3: negative array count other than -1
        _request(0, 3, struct.pack(">hhii", -1, 1, 100, -7)),
        # DeleteTopics v0: string length 32767 with 3 bytes left
        _request(20, 0, struct.pack(">ih", 1, 32767) + b"abc"),
        # Heartbeat v0: negative string length
        _request(12, 0, struct.pack(">h", -2)),
        # Metadata v9: overlong unsigned varint
        _request(3, 9, b"\xff\xff\xff\xff\xff\xff\x01"),
    ],
    ids=[
        "int32-count",
        "compact-count",
        "records-length",
        "negative-count",
        "string-length",
        "negative-string",
        "overlong-varint",
    ],
)
def test_oversized_or_negative_lengths_raise_without_allocating(frame):
    _no_big_allocation(lambda: protocol.decode_request(frame))


def test_null_for_non_nullable_raises():
    # Heartbeat v0 group_id is not nullable
    frame = _request(12, 0, struct.pack(">h", -1) + struct.pack(">i", 1) + struct.pack(">h", 0))
    with pytest.raises(Malformed):
        protocol.decode_request(frame)


def _fetch_v12_with_cluster_id():
    body = protocol.FetchRequest(cluster_id="abc", max_wait_ms=1, min_bytes=1)
    frame = protocol.encode_request(1, 12, 1, None, body)[4:]
    return bytearray(frame)


def test_tagged_field_whose_size_disagrees_with_its_value_raises():
    frame = _fetch_v12_with_cluster_id()
    # request body starts after the 11-byte v2 header; its tagged section is
    # at the end: count 1, tag 0, size 4, compact string "abc" (04 61 62 63).
    tail = bytes([1, 0, 4, 4]) + b"abc"
    assert frame.endswith(tail)
    good = protocol.decode_request(bytes(frame))[1]
    assert good.cluster_id == "abc"
    short = frame[: -len(tail)] + bytes([1, 0, 5, 4]) + b"abc" + b"\x00"  # size 5, value takes 4
    with pytest.raises(Malformed):
        protocol.decode_request(bytes(short))
    inside = frame[: -len(tail)] + bytes([1, 0, 2, 4]) + b"abc"  # value overruns its size
    with pytest.raises(Malformed):
        protocol.decode_request(bytes(inside))


def test_unknown_tagged_fields_are_skipped():
    frame = _fetch_v12_with_cluster_id()
    tail = bytes([1, 0, 4, 4]) + b"abc"
    # tags 0 and 9 (unknown, 2 bytes)
    patched = frame[: -len(tail)] + bytes([2, 0, 4, 4]) + b"abc" + bytes([9, 2, 0xAA, 0xBB])
    assert protocol.decode_request(bytes(patched))[1].cluster_id == "abc"
    huge = frame[: -len(tail)] + bytes(
        [1, 9, 0xFF, 0xFF, 0xFF, 0x7F]
    )  # unknown tag claiming 256 MiB
    _no_big_allocation(lambda: protocol.decode_request(bytes(huge)))
