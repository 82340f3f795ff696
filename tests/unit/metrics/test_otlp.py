"""kfast.metrics.otlp: OTLP MetricsData decoded against the reference
encoder (opentelemetry-proto's generated protobuf classes), and never
anything but OtlpDecodeError on bytes that are not one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.metrics.otlp import (
    TEMPORALITY_CUMULATIVE,
    TEMPORALITY_DELTA,
    MetricPoint,
    OtlpDecodeError,
    decode_metrics_data,
)

pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
common = pytest.importorskip("opentelemetry.proto.common.v1.common_pb2")


def key_value(key: str, value) -> common.KeyValue:
    kv = common.KeyValue(key=key)
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    elif isinstance(value, float):
        kv.value.double_value = value
    else:
        kv.value.string_value = value
    return kv


def metrics_data() -> bytes:
    data = pb.MetricsData()
    resource = data.resource_metrics.add()
    resource.resource.attributes.append(key_value("client_rack", "r1"))
    scope = resource.scope_metrics.add()
    gauge = scope.metrics.add(name="org.apache.kafka.producer.record.queue.time.avg")
    point = gauge.gauge.data_points.add(as_double=2.5, time_unix_nano=123)
    point.attributes.append(key_value("node_id", "1"))
    total = scope.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    total.sum.aggregation_temporality = TEMPORALITY_DELTA
    total.sum.is_monotonic = True
    total.sum.data_points.add(as_int=-7).attributes.append(key_value("flag", True))
    histogram = scope.metrics.add(name="latency")
    histogram.histogram.aggregation_temporality = TEMPORALITY_CUMULATIVE
    h = histogram.histogram.data_points.add(
        count=4, sum=10.5, bucket_counts=[1, 3], explicit_bounds=[1.0]
    )
    h.attributes.append(key_value("n", 42))
    return data.SerializeToString()


def test_decodes_what_the_reference_encoder_writes():
    assert decode_metrics_data(metrics_data()) == [
        MetricPoint(
            "org.apache.kafka.producer.record.queue.time.avg",
            "gauge",
            (("client_rack", "r1"), ("node_id", "1")),
            2.5,
            0,
            0,
            False,
        ),
        MetricPoint(
            "org.apache.kafka.producer.connection.creation.total",
            "sum",
            (("client_rack", "r1"), ("flag", "true")),
            -7.0,
            0,
            TEMPORALITY_DELTA,
            True,
        ),
        MetricPoint(
            "latency",
            "histogram",
            (("client_rack", "r1"), ("n", "42")),
            10.5,
            4,
            TEMPORALITY_CUMULATIVE,
            False,
        ),
    ]


def test_every_truncation_is_an_error_or_a_prefix():
    data = metrics_data()
    for end in range(len(data)):
        try:
            decode_metrics_data(data[:end])
        except OtlpDecodeError:
            pass


def test_groups_and_overlong_varints_are_rejected():
    with pytest.raises(OtlpDecodeError):
        decode_metrics_data(b"\x0b\x0c")  # field 1, start group
    with pytest.raises(OtlpDecodeError):
        decode_metrics_data(b"\x08" + b"\xff" * 10 + b"\x01")
    with pytest.raises(OtlpDecodeError):
        decode_metrics_data(b"\x0a\x05ab")  # length past the end


@given(st.binary(max_size=400))
def test_random_bytes_never_crash_the_decoder(data):
    try:
        points = decode_metrics_data(data)
    except OtlpDecodeError:
        return
    assert all(isinstance(point, MetricPoint) for point in points)


@given(st.binary(max_size=60), st.integers(min_value=0, max_value=400))
def test_random_bytes_spliced_into_a_valid_message_never_crash(junk, at):
    data = metrics_data()
    at = min(at, len(data))
    try:
        decode_metrics_data(data[:at] + junk + data[at:])
    except OtlpDecodeError:
        pass
