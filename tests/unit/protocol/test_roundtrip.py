"""Every API, every version, both directions: random messages survive
encode -> decode -> encode unchanged."""

import pytest
from hypothesis import HealthCheck, given, settings

from kfast._ext import protocol_codec as codec
from kfast.protocol import api_keys
from kfast.protocol.schema import schema

from ..hypothesis_budget import examples
from .protocol_strategies import message

CASES = [
    (api.name, version, direction)
    for api in api_keys.API_KEYS
    for version in range(api.min_version, api.max_version + 1)
    for direction in ("request", "response")
]


@pytest.mark.parametrize("name,version,direction", CASES)
def test_roundtrip(name, version, direction):
    ms = getattr(schema(name), direction)
    program = ms.program(version)

    @settings(
        max_examples=examples(4),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(message(ms, version))
    def check(value):
        encoded = codec.encode(program, value)
        decoded, end = codec.decode(program, encoded)
        assert end == len(encoded)
        assert decoded.to_dict() == value.to_dict()
        assert codec.encode(program, decoded) == encoded

    check()


def test_every_api_has_both_directions_and_a_class_per_struct():
    for api in api_keys.API_KEYS:
        s = schema(api.key)
        assert s.request.cls.__name__ == api.name + "Request"
        assert s.response.cls.__name__ == api.name + "Response"


FRAME_CASES = [
    (api.key, version)
    for api in api_keys.API_KEYS
    for version in sorted({api.min_version, api.max_version})
]


@pytest.mark.parametrize("key,version", FRAME_CASES)
def test_frames_through_the_public_api(key, version):
    import kfast.protocol as protocol

    from .protocol_strategies import sample

    s = schema(key)
    api = api_keys.api_key(key)
    request = sample(s.request, version)
    frame = protocol.encode_request(key, version, 123, "client-é", request)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, body = protocol.decode_request(frame[4:])
    assert header.api_key == key and header.api_version == version
    assert header.correlation_id == 123 and header.client_id == "client-é"
    # header v1: 2+2+4+2+len(client id); v2 adds the tagged-field count
    expected = (
        10 + len("client-é".encode()) + (1 if api.request_header_version(version) == 2 else 0)
    )
    assert header.header_length == expected
    assert body == request
    response = sample(s.response, version)
    frame = protocol.encode_response(key, version, 321, response)
    correlation_id, decoded = protocol.decode_response(key, version, frame[4:])
    assert correlation_id == 321 and decoded == response
    parts = protocol.encode_response_parts(key, version, 321, response)
    assert b"".join(bytes(p) for p in parts) == frame
