"""Hand-checked encodings and the public API's framing."""

import pytest

import kfast.protocol as protocol
from kfast.protocol import errors


def test_metadata_request_v12_bytes():
    frame = protocol.encode_request(3, 12, 7, "cli", protocol.MetadataRequest(topics=None))
    # size | key 3 | version 12 | correlation 7 | client id "cli" | no header tags
    # | topics null (compact 0) | allow_auto_topic_creation true
    # | include_topic_authorized_operations false | no body tags
    assert frame.hex() == "000000120003000c000000070003636c690000010000"
    header, body = protocol.decode_request(frame[4:])
    assert header == protocol.RequestHeader(3, 12, 7, "cli", 14)
    assert body.topics is None and body.allow_auto_topic_creation is True


def test_api_versions_response_header_is_v0_even_when_flexible():
    body = protocol.ApiVersionsResponse(
        error_code=0,
        api_keys=[
            protocol.ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)
        ],
    )
    frame = protocol.encode_response(18, 3, 9, body)
    assert frame[4:8] == b"\x00\x00\x00\x09"
    # v0 header: the body starts right after the correlation id.
    assert frame[8:10] == b"\x00\x00"  # error_code
    corr, decoded = protocol.decode_response(18, 3, frame[4:])
    assert corr == 9 and decoded.api_keys[0].max_version == 11


def test_produce_records_decode_as_views_of_the_request_buffer():
    req = protocol.ProduceRequest(
        acks=-1,
        timeout_ms=100,
        topic_data=[
            protocol.ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    protocol.ProduceRequest.PartitionProduceData(index=3, records=b"batch-bytes")
                ],
            )
        ],
    )
    frame = bytearray(protocol.encode_request(0, 9, 1, None, req))
    _, body = protocol.decode_request(memoryview(frame)[4:])
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"batch-bytes"
    frame[-5] ^= 0xFF  # a byte inside the records: the view sees it
    assert bytes(records) != b"batch-bytes"


def test_fetch_response_parts_carry_file_regions(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        region = protocol.FileRegion(f, 2, 5)
        body = protocol.FetchResponse(
            responses=[
                protocol.FetchResponse.FetchableTopicResponse(
                    topic="t",
                    partitions=[
                        protocol.FetchResponse.PartitionData(
                            partition_index=0, records=[b"ab", region]
                        )
                    ],
                )
            ]
        )
        parts = protocol.encode_response_parts(1, 12, 5, body)
        plain = protocol.encode_response(1, 12, 5, body)
        assert region in parts
        assert sum(len(p) for p in parts) == len(plain)
        assert int.from_bytes(parts[0], "big") == len(plain) - 4
        joined = b"".join(
            p.read() if isinstance(p, protocol.FileRegion) else bytes(p) for p in parts
        )
        assert joined == plain
    _, decoded = protocol.decode_response(1, 12, plain[4:])
    assert bytes(decoded.responses[0].partitions[0].records) == b"ab23456"


def test_unsupported_version_carries_the_header():
    frame = bytearray(
        protocol.encode_request(
            18,
            3,
            4,
            "c",
            protocol.ApiVersionsRequest(client_software_name="x", client_software_version="1"),
        )
    )
    frame[6:8] = (99).to_bytes(2, "big")
    header = protocol.decode_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 99, 4)
    with pytest.raises(errors.UnsupportedVersionException) as info:
        protocol.decode_request_body(header, frame[4:])
    assert info.value.header == header


def test_non_ignorable_field_missing_from_version_raises():
    body = protocol.MetadataRequest(topics=None, include_topic_authorized_operations=True)
    with pytest.raises(errors.UnsupportedVersionException):
        protocol.encode_request(3, 7, 1, None, body)
    # ignorable: dropped silently
    resp = protocol.MetadataResponse(cluster_id="x")
    assert (
        protocol.decode_response(3, 1, protocol.encode_response(3, 1, 1, resp)[4:])[1].cluster_id
        is None
    )


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        protocol.ProduceRequest(not_a_field=1)


def test_defaults_follow_kafka():
    p = protocol.FetchRequest.FetchPartition()
    assert (p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch) == (-1, -1, -1)
    assert protocol.FetchRequest().max_bytes == 0x7FFFFFFF
    assert (
        protocol.MetadataResponse.MetadataResponseTopic().topic_authorized_operations == -2147483648
    )


def test_record_views_keep_the_buffer_exported():
    req = protocol.ProduceRequest(
        topic_data=[
            protocol.ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    protocol.ProduceRequest.PartitionProduceData(index=0, records=b"xyz")
                ],
            )
        ]
    )
    buf = bytearray(protocol.encode_request(0, 3, 1, None, req)[4:])
    _, body = protocol.decode_request(buf)
    records = body.topic_data[0].partition_data[0].records
    del body
    assert records.tobytes() == b"xyz" and records.nbytes == 3 and len(records) == 3
    with pytest.raises(BufferError):
        buf.extend(b"more")  # still exported: the view pins the buffer
    records.release()
    buf.extend(b"more")


def test_parts_keep_large_buffers_and_region_lists_uncopied(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(range(256)) * 4)
    big = memoryview(bytes(40000))  # >= 32 KiB: its own part
    with open(path, "rb") as f:
        regions = [protocol.FileRegion(f, 0, 100), protocol.FileRegion(f, 500, 24)]
        R = protocol.FetchResponse
        body = R(
            responses=[
                R.FetchableTopicResponse(
                    partitions=[
                        R.PartitionData(partition_index=0, records=regions),
                        R.PartitionData(partition_index=1, records=big),
                        R.PartitionData(partition_index=2, records=None),
                    ]
                )
            ]
        )
        parts = protocol.encode_response_parts(1, 16, 3, body)
        assert parts[parts.index(regions[0]) + 1] is regions[1]
        assert any(p is big for p in parts)
        plain = protocol.encode_response(1, 16, 3, body)
        assert sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in parts) == len(
            plain
        )
    _, decoded = protocol.decode_response(1, 16, plain[4:])
    got = decoded.responses[0].partitions
    assert bytes(got[0].records) == (bytes(range(256)) * 4)[:100] + (bytes(range(256)) * 4)[500:524]
    assert bytes(got[1].records) == bytes(big)
    assert got[2].records is None
