"""Every API, every version, both directions: random messages survive
encode -> decode -> encode unchanged."""
import pytest
from hypothesis import HealthCheck, given, settings

from kfast._ext import protocol_codec as codec
from kfast.protocol import api_keys
from kfast.protocol.schema import schema

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

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
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
