"""Every version of every API in the API key table, over a real socket to a
real broker.

An API the broker advertises in ApiVersions gets a minimal valid request at
each version it advertises, and the answer must decode at that version, carry
the request's correlation id and hold only sensible error codes: codes Kafka
defines, never UNKNOWN_SERVER_ERROR (a handler crashed) or UNSUPPORTED_VERSION
(the version was advertised). A response that cannot be encoded at the
request's version (a field the version lacks, such as DescribeQuorum's v2-only
``nodes`` at v0) closes the connection, which fails here instead of in a
client. An API the broker does not advertise is Kafka's "not enabled" case:
the connection is closed without an answer.
"""

from __future__ import annotations

import socket
import struct

import pytest

import kfast.protocol as p
from kfast.controller.topics import CLUSTER_METADATA_TOPIC_NAME
from kfast.protocol import api_keys, errors

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

_NOT_SENSIBLE = {errors.UnknownServerException.code, errors.UnsupportedVersionException.code}

# Where a default-constructed body is not a request Kafka answers, the fields
# that make it one. Everything else is sent with every field at its default
# (empty lists, empty strings), which is valid for every other API.
_BODIES = {
    # acks=0 is never answered.
    "Produce": dict(acks=-1, timeout_ms=1000),
    # KIP-511: v3+ must name the client software.
    "ApiVersions": dict(client_software_name="kfast-test", client_software_version="1"),
    # A null transactional id asks for an idempotent producer id.
    "InitProducerId": dict(transactional_id=None, transaction_timeout_ms=60000),
    # Ask for the metadata partition so the partition-level fields are written.
    "DescribeQuorum": dict(
        topics=[
            p.DescribeQuorumRequest.TopicData(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[p.DescribeQuorumRequest.PartitionData(partition_index=0)],
            )
        ]
    ),
}


def _versions():
    for api in api_keys.API_KEYS:
        if "broker" not in api.listeners:
            continue
        low = 0 if api.key == api_keys.PRODUCE else api.min_version
        for version in range(low, api.max_stable_version + 1):
            yield pytest.param(api, version, id=f"{api.name}-v{version}")


@pytest.fixture(scope="module")
def advertised(broker):
    """{api_key: (min, max)} from the broker's own ApiVersions answer."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        response = _round_trip(
            sock,
            api_keys.BY_KEY[api_keys.API_VERSIONS],
            3,
            1,
            p.ApiVersionsRequest(**_BODIES["ApiVersions"]),
        )
    assert response is not None, "ApiVersions closed the connection"
    _, body = response
    assert body.error_code == 0
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in body.api_keys}


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _round_trip(sock, api, version, correlation_id, body):
    """(correlation id, decoded body), or None if the broker closed the
    connection instead of answering."""
    sock.sendall(p.encode_request(api.key, version, correlation_id, "round-trip", body))
    size = _read_exactly(sock, 4)
    if size is None:
        return None
    frame = _read_exactly(sock, struct.unpack(">i", size)[0])
    assert frame is not None, "the connection closed in the middle of a response"
    return p.decode_response(api.key, version, frame)


def _error_codes(message, found: list) -> list:
    """Every ``error_code`` field in a response body, at any depth."""
    if isinstance(message, list):
        for item in message:
            _error_codes(item, found)
    elif hasattr(type(message), "_field_names"):
        for name in type(message)._field_names:
            value = getattr(message, name)
            if name == "error_code":
                found.append(value)
            else:
                _error_codes(value, found)
    return found


@pytest.mark.parametrize("api, version", list(_versions()))
def test_every_version_round_trips(broker, advertised, api, version):
    body = p.request_class(api.key)(**_BODIES.get(api.name, {}))
    correlation_id = 1000 + api.key * 100 + version
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        response = _round_trip(sock, api, version, correlation_id, body)
    if api.key not in advertised:
        assert response is None, f"{api.name} is not advertised but was answered"
        return
    low, high = advertised[api.key]
    assert low <= version <= high, f"{api.name} v{version} is outside the advertised {low}-{high}"
    assert response is not None, f"{api.name} v{version} closed the connection"
    received_id, decoded = response
    assert received_id == correlation_id
    codes = _error_codes(decoded, [])
    for code in codes:
        # for_code maps a code Kafka does not define to UNKNOWN_SERVER_ERROR.
        assert errors.for_code(code).code == code, f"{api.name} v{version}: unknown code {code}"
        assert code not in _NOT_SENSIBLE, (
            f"{api.name} v{version} answered {errors.for_code(code).name}"
        )


def test_every_served_api_is_covered(advertised):
    """The broker advertises nothing the table does not list for its listener
    (so the parametrization above covers every advertised version)."""
    for key, (low, high) in advertised.items():
        api = api_keys.BY_KEY[key]
        assert "broker" in api.listeners
        assert (low, high) == (
            0 if key == api_keys.PRODUCE else api.min_version,
            api.max_stable_version,
        )
