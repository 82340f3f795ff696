"""Protocol codec benchmarks: kfast (Cython, schema-driven) vs kafka-python 3.

Groups (``pytest bench/test_protocol.py --benchmark-only -k <group>``):
  protocol_produce_parse    decode a Produce v9 request: 100 partitions x 16 KiB
                            of records (kfast hands records out as memoryviews)
  protocol_fetch_encode     encode a (prebuilt) Fetch v12 response for 100
                            partitions, record bytes excluded: kfast encodes
                            FileRegion placeholders (parts mode); kafka-python
                            encodes empty records, since it cannot reference
                            file bytes
  protocol_metadata_encode  encode a (prebuilt) Metadata v12 response: 100 topics x 100
                            partitions (10,000), 3 replicas each
"""

import os
import tempfile
import uuid

import kafka.protocol.consumer.fetch as kp_fetch
import kafka.protocol.metadata as kp_metadata
import kafka.protocol.producer as kp_producer
import pytest

import kfast.protocol as protocol

PARTITIONS = 100
RECORDS = os.urandom(16 * 1024)


def _kfast_produce_frame():
    body = protocol.ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            protocol.ProduceRequest.TopicProduceData(
                name="bench",
                partition_data=[
                    protocol.ProduceRequest.PartitionProduceData(index=i, records=RECORDS)
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    return protocol.encode_request(0, 9, 1, "bench-client", body)


def test_protocol_produce_parse_kfast(benchmark):
    frame = _kfast_produce_frame()[4:]
    header, body = benchmark(protocol.decode_request, frame)
    assert header.api_key == 0 and len(body.topic_data[0].partition_data) == PARTITIONS
    assert bytes(body.topic_data[0].partition_data[7].records) == RECORDS


def test_protocol_produce_parse_kafka_python(benchmark):
    frame = _kfast_produce_frame()[4:]
    cls = kp_producer.ProduceRequest

    body = benchmark(lambda: cls.decode(frame, version=9, header=True))
    assert len(body.topic_data[0].partition_data) == PARTITIONS


@pytest.fixture(scope="module")
def segment():
    with tempfile.TemporaryFile() as f:
        f.write(RECORDS)
        f.flush()
        yield f


def test_protocol_fetch_encode_kfast(benchmark, segment):
    R = protocol.FetchResponse
    body = R(
        session_id=0,
        responses=[
            R.FetchableTopicResponse(
                topic="bench",
                partitions=[
                    R.PartitionData(
                        partition_index=i,
                        high_watermark=1000 + i,
                        last_stable_offset=1000 + i,
                        log_start_offset=0,
                        records=protocol.FileRegion(segment, 0, len(RECORDS)),
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    parts = benchmark(protocol.encode_response_parts, 1, 12, 42, body)
    assert sum(isinstance(p, protocol.FileRegion) for p in parts) == PARTITIONS


def test_protocol_fetch_encode_kafka_python(benchmark):
    R = kp_fetch.FetchResponse
    body = R(
        version=12,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            R.FetchableTopicResponse(
                version=12,
                topic="bench",
                partitions=[
                    R.FetchableTopicResponse.PartitionData(
                        version=12,
                        partition_index=i,
                        error_code=0,
                        high_watermark=1000 + i,
                        last_stable_offset=1000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    body.with_header(correlation_id=42)
    frame = benchmark(lambda: body.encode(header=True, framed=True))
    assert len(frame) > PARTITIONS * 20


TOPICS, PER_TOPIC = 100, 100


def _replicas(p):
    return [p % 5, (p + 1) % 5, (p + 2) % 5]


def test_protocol_metadata_encode_kfast(benchmark):
    R = protocol.MetadataResponse
    body = R(
        brokers=[
            R.MetadataResponseBroker(node_id=n, host=f"broker-{n}", port=9092, rack=None)
            for n in range(5)
        ],
        cluster_id="bench-cluster",
        controller_id=0,
        topics=[
            R.MetadataResponseTopic(
                name=f"topic-{t}",
                topic_id=uuid.uuid4(),
                partitions=[
                    R.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 5,
                        leader_epoch=3,
                        replica_nodes=_replicas(p),
                        isr_nodes=_replicas(p),
                    )
                    for p in range(PER_TOPIC)
                ],
            )
            for t in range(TOPICS)
        ],
    )
    frame = benchmark(protocol.encode_response, 3, 12, 42, body)
    _, decoded = protocol.decode_response(3, 12, frame[4:])
    assert sum(len(t.partitions) for t in decoded.topics) == TOPICS * PER_TOPIC


def test_protocol_metadata_encode_kafka_python(benchmark):
    R = kp_metadata.MetadataResponse
    T = R.MetadataResponseTopic
    body = R(
        version=12,
        throttle_time_ms=0,
        brokers=[
            R.MetadataResponseBroker(
                version=12, node_id=n, host=f"broker-{n}", port=9092, rack=None
            )
            for n in range(5)
        ],
        cluster_id="bench-cluster",
        controller_id=0,
        topics=[
            T(
                version=12,
                error_code=0,
                name=f"topic-{t}",
                topic_id=uuid.uuid4(),
                is_internal=False,
                partitions=[
                    T.MetadataResponsePartition(
                        version=12,
                        error_code=0,
                        partition_index=p,
                        leader_id=p % 5,
                        leader_epoch=3,
                        replica_nodes=_replicas(p),
                        isr_nodes=_replicas(p),
                        offline_replicas=[],
                    )
                    for p in range(PER_TOPIC)
                ],
            )
            for t in range(TOPICS)
        ],
    )
    body.with_header(correlation_id=42)
    frame = benchmark(lambda: body.encode(header=True, framed=True))
    assert len(frame) > TOPICS * PER_TOPIC * 20
