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
    value = protocol.BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=5,
        current_metadata_offset=100,
        want_fence=True,
        want_shut_down=False,
    )
    _roundtrip(63, "request", 0, value, "0000000100000000000000050000000000000064010000")


def test_broker_heartbeat_v1_tagged_offline_log_dirs():
    d = uuid.UUID(int=1)
    value = protocol.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=5, current_metadata_offset=100, offline_log_dirs=[d]
    )
    # tagged section: 1 field, tag 0, 17 bytes = compact count 2 + one uuid
    _roundtrip(
        63,
        "request",
        1,
        value,
        "0000000100000000000000050000000000000064000001001102" + d.bytes.hex(),
    )
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
    _roundtrip(63, "response", 0, value, "00000000000000010000")


def test_consumer_group_heartbeat_v0_request():
    value = protocol.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="", member_epoch=0, subscribed_topic_names=["t"]
    )
    _roundtrip(68, "request", 0, value, "026701000000000000ffffffff020274000000")


def test_vote_v0_request():
    V = protocol.VoteRequest
    value = V(
        cluster_id="c",
        topics=[
            V.TopicData(
                topic_name="__cluster_metadata",
                partitions=[
                    V.PartitionData(
                        partition_index=0,
                        replica_epoch=3,
                        replica_id=2,
                        last_offset_epoch=2,
                        last_offset=40,
                    )
                ],
            )
        ],
    )
    name = b"__cluster_metadata"
    _roundtrip(
        52,
        "request",
        0,
        value,
        "0263"
        "02" + bytes([len(name) + 1]).hex() + name.hex() + "02"
        "00000000"
        "00000003"
        "00000002"
        "00000002"
        "0000000000000028"
        "00"
        "00"
        "00",
    )


def test_api_versions_v0_fallback_for_unsupported_version():
    # KIP-511: a request version the broker does not know is answered in v0:
    # error_code UNSUPPORTED_VERSION (35), then the supported ranges.
    ranges = supported_versions()
    R = protocol.ApiVersionsResponse
    body = R(
        error_code=35,
        api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges],
    )
    frame = protocol.encode_response(18, 0, 77, body)
    expected = struct.pack(">ihi", 77, 35, len(ranges)) + b"".join(
        struct.pack(">hhh", k, lo, hi) for k, lo, hi in ranges
    )
    assert frame == struct.pack(">i", len(expected)) + expected


def test_supported_versions_advertise_produce_from_v0():
    # KAFKA-18659: librdkafka disables compression without Produce v0-2.
    produce = [r for r in supported_versions() if r[0] == 0]
    assert produce and produce[0][1] == 0
    assert all(r[0] != 0 for r in supported_versions("controller"))
    assert any(r[0] == 52 for r in supported_versions("controller"))  # Vote


def test_vote_v2_request_pre_vote():
    V = protocol.VoteRequest
    d = uuid.UUID(int=7)
    value = V(
        cluster_id="c",
        voter_id=1,
        topics=[
            V.TopicData(
                topic_name="m",
                partitions=[
                    V.PartitionData(
                        partition_index=0,
                        replica_epoch=3,
                        replica_id=2,
                        replica_directory_id=d,
                        voter_directory_id=d,
                        last_offset_epoch=2,
                        last_offset=40,
                        pre_vote=True,
                    )
                ],
            )
        ],
    )
    _roundtrip(
        52,
        "request",
        2,
        value,
        "0263"
        "00000001"
        "02"
        "026d"
        "02"
        "00000000"
        "00000003"
        "00000002" + d.hex + d.hex + "00000002"
        "0000000000000028"
        "01"
        "00"
        "00"
        "00",
    )
    # a pre-vote cannot be expressed in v1, and pre_vote is not ignorable
    try:
        codec.encode(schema(52).request.program(1), value)
    except protocol.errors.UnsupportedVersionException:
        pass
    else:
        raise AssertionError("pre_vote must not be dropped silently in v1")


def test_streams_group_heartbeat_v0_request_joining_member():
    S = protocol.StreamsGroupHeartbeatRequest
    value = S(
        group_id="app",
        member_id="m",
        member_epoch=0,
        endpoint_information_epoch=0,
        rebalance_timeout_ms=30000,
        topology=S.Topology(
            epoch=1, subtopologies=[S.Subtopology(subtopology_id="0", source_topics=["in"])]
        ),
        active_tasks=[],
        standby_tasks=[],
        warmup_tasks=[],
        process_id="p",
        user_endpoint=S.Endpoint(host="h", port=9092),
    )
    _roundtrip(
        88,
        "request",
        0,
        value,
        "04617070"
        "026d"
        "00000000"
        "00000000"
        "00"
        "00"  # instance_id, rack_id: null
        "00007530"  # rebalance_timeout_ms 30000
        "01"
        "00000001"
        "02"  # topology present: epoch 1, one subtopology
        "0230"
        "0203696e"
        "01"
        "01"
        "01"
        "01"
        "01"
        "00"
        "00"  # end of topology
        "01"
        "01"
        "01"  # active/standby/warmup tasks: empty
        "0270"  # process_id "p"
        "01"
        "0268"
        "2384"
        "00"  # user_endpoint present: h:9092
        "00"
        "00"
        "00"  # client_tags, task_offsets, task_end_offsets: null
        "00"  # shutdown_application false
        "00",
    )


def test_streams_group_heartbeat_v0_response_defaults():
    value = protocol.StreamsGroupHeartbeatResponse(
        member_id="m", member_epoch=1, heartbeat_interval_ms=5000
    )
    _roundtrip(
        88,
        "response",
        0,
        value,
        "00000000000000026d0000000100001388000000000000000000000000000000000000",
    )


def test_share_fetch_v2_request_renew_acknowledgement():
    F = protocol.ShareFetchRequest
    t = uuid.UUID(int=3)
    value = F(
        group_id="g",
        member_id="m",
        share_session_epoch=1,
        max_wait_ms=500,
        min_bytes=1,
        max_records=500,
        batch_size=500,
        share_acquire_mode=1,
        is_renew_ack=True,
        topics=[
            F.FetchTopic(
                topic_id=t,
                partitions=[
                    F.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            F.AcknowledgementBatch(
                                first_offset=10, last_offset=11, acknowledge_types=[4]
                            )
                        ],
                    )
                ],
            )
        ],
    )
    _roundtrip(
        78,
        "request",
        2,
        value,
        "0267"
        "026d"
        "00000001"
        "000001f4"
        "00000001"
        "7fffffff"
        "000001f4"
        "000001f4"
        "01"
        "01"  # share_acquire_mode 1, is_renew_ack
        "02" + t.hex + "02"
        "00000000"
        "02"
        "000000000000000a"
        "000000000000000b"
        "0204"
        "00"
        "00"
        "00"  # end of partition, end of topic
        "01"  # forgotten_topics_data: empty
        "00",
    )
    try:
        codec.encode(schema(78).request.program(1), value)
    except protocol.errors.UnsupportedVersionException:
        pass
    else:
        raise AssertionError("share_acquire_mode must not be dropped silently in v1")


def test_share_acknowledge_v2_response_drops_ignorable_lock_timeout_in_v1():
    A = protocol.ShareAcknowledgeResponse
    value = A(acquisition_lock_timeout_ms=30000, responses=[], node_endpoints=[])
    _roundtrip(79, "response", 2, value, "0000000000000000007530010100")
    v1 = codec.encode(schema(79).response.program(1), value)
    assert v1.hex() == "00000000000000010100"


def test_share_group_apis_start_at_v1_in_kafka_4_2():
    for key in (76, 77, 78, 79):
        assert protocol.api_keys.BY_KEY[key].min_version == 1
        assert not protocol.api_keys.BY_KEY[key].latest_version_unstable
