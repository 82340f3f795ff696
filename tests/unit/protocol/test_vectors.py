"""Hand-written byte vectors for APIs kafka-python does not cover, derived
field by field from the Kafka protocol grammar (flexible versions: compact
lengths are length + 1, every struct ends with a tagged-field count)."""
import struct
import uuid

import kfast.protocol as protocol
from kfast._ext import protocol_codec as codec
from kfast.protocol import supported_versions
from kfast.protocol.schema import schema


def _roundtrip(key, direction, version, value, expected_hex):
    program = getattr(schema(key), direction).program(version)
    encoded = codec.encode(program, value)
    assert encoded.hex() == expected_hex
    decoded, end = codec.decode(program, bytes.fromhex(expected_hex))
    assert end == len(encoded)
    assert decoded == value
    return decoded


def test_broker_heartbeat_v0_request():
    value = protocol.BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=100,
                                            want_fence=True, want_shut_down=False)
    _roundtrip(63, "request", 0, value,
               "00000001" "0000000000000005" "0000000000000064" "01" "00" "00")


def test_broker_heartbeat_v1_tagged_offline_log_dirs():
    d = uuid.UUID(int=1)
    value = protocol.BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=100,
                                            offline_log_dirs=[d])
    # tagged section: 1 field, tag 0, 17 bytes = compact count 2 + one uuid
    _roundtrip(63, "request", 1, value,
               "00000001" "0000000000000005" "0000000000000064" "00" "00"
               "01" "00" "11" "02" + d.bytes.hex())
    # v0 has no such field and it is not ignorable
    try:
        codec.encode(schema(63).request.program(0), value)
    except protocol.errors.UnsupportedVersionException:
        pass
    else:
        raise AssertionError("offline_log_dirs must not be dropped silently in v0")


def test_broker_heartbeat_v0_response_defaults():
    value = protocol.BrokerHeartbeatResponse(throttle_time_ms=0, error_code=0)
    assert value.is_fenced is True and value.is_caught_up is False
    _roundtrip(63, "response", 0, value, "00000000" "0000" "00" "01" "00" "00")


def test_consumer_group_heartbeat_v0_request():
    value = protocol.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="", member_epoch=0, subscribed_topic_names=["t"])
    _roundtrip(68, "request", 0, value,
               "0267" "01" "00000000" "00" "00" "ffffffff" "02" "0274" "00" "00" "00")


def test_vote_v0_request():
    V = protocol.VoteRequest
    value = V(cluster_id="c", topics=[V.TopicData(topic_name="__cluster_metadata", partitions=[
        V.PartitionData(partition_index=0, candidate_epoch=3, candidate_id=2,
                        last_offset_epoch=2, last_offset=40)])])
    name = b"__cluster_metadata"
    _roundtrip(52, "request", 0, value,
               "0263" "02" + bytes([len(name) + 1]).hex() + name.hex() + "02"
               "00000000" "00000003" "00000002" "00000002" "0000000000000028" "00" "00" "00")


def test_api_versions_v0_fallback_for_unsupported_version():
    # KIP-511: a request version the broker does not know is answered in v0:
    # error_code UNSUPPORTED_VERSION (35), then the supported ranges.
    ranges = supported_versions()
    R = protocol.ApiVersionsResponse
    body = R(error_code=35, api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                     for k, lo, hi in ranges])
    frame = protocol.encode_response(18, 0, 77, body)
    expected = struct.pack(">ihi", 77, 35, len(ranges)) + b"".join(
        struct.pack(">hhh", k, lo, hi) for k, lo, hi in ranges)
    assert frame == struct.pack(">i", len(expected)) + expected


def test_supported_versions_advertise_produce_from_v0():
    # KAFKA-18659: librdkafka disables compression without Produce v0-2.
    produce = [r for r in supported_versions() if r[0] == 0]
    assert produce and produce[0][1] == 0
    assert all(r[0] != 0 for r in supported_versions("controller"))
    assert any(r[0] == 52 for r in supported_versions("controller"))    # Vote
