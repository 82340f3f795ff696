"""kfast.server.client_metrics: KIP-714 subscriptions, push timing and
errors as Kafka's ClientMetricsManager applies them (simulated clock)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kfast import compression
from kfast.protocol import errors
from kfast.server.client_metrics import ACCEPTED_COMPRESSION_TYPES, ClientMetricsManager

pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


def ctx(client_id="producer-1", software=("librdkafka", "2.5.0")):
    return SimpleNamespace(
        client_id=client_id,
        client_address=("127.0.0.1", 5555),
        connection=SimpleNamespace(client_software=software),
    )


def push(instance_id, subscription_id, metrics=b"", terminating=False, codec=0):
    return SimpleNamespace(
        client_instance_id=instance_id,
        subscription_id=subscription_id,
        terminating=terminating,
        compression_type=codec,
        metrics=metrics,
    )


def gauge(value: float) -> bytes:
    data = pb.MetricsData()
    metric = data.resource_metrics.add().scope_metrics.add().metrics.add(name="m.avg")
    metric.gauge.data_points.add(as_double=value)
    return data.SerializeToString()


@pytest.fixture
def manager():
    clock = Clock()
    m = ClientMetricsManager(1024, time_ms=clock)
    m.clock = clock
    m.update_subscriptions(
        {
            "prod": {
                "metrics": "org.apache.kafka.producer.,m.",
                "interval.ms": "1000",
                "match": "client_software_name=librdkafka",
            },
            "slow": {"metrics": "x.", "interval.ms": "5000"},
        }
    )
    return m


def test_a_matching_client_gets_the_union_and_the_smallest_interval(manager):
    got = manager.get_subscriptions(ctx(), uuid.UUID(int=0))
    assert got["client_instance_id"].int != 0
    assert got["requested_metrics"] == ["m.", "org.apache.kafka.producer.", "x."]
    assert got["push_interval_ms"] == 1000
    assert got["accepted_compression_types"] == list(ACCEPTED_COMPRESSION_TYPES)
    assert got["telemetry_max_bytes"] == 1024 and got["delta_temporality"] is True
    other = manager.get_subscriptions(ctx(software=("apache-kafka-java", "4.0")), None)
    assert other["requested_metrics"] == ["x."] and other["push_interval_ms"] == 5000


def test_push_timing_errors_and_terminating(manager):
    got = manager.get_subscriptions(ctx(), None)
    instance, sub = got["client_instance_id"], got["subscription_id"]
    with pytest.raises(errors.ThrottlingQuotaExceededException):
        manager.get_subscriptions(ctx(), instance)  # before one interval
    manager.push(ctx(), push(instance, sub, gauge(1.5)))  # right after the get: accepted
    with pytest.raises(errors.ThrottlingQuotaExceededException):
        manager.push(ctx(), push(instance, sub, gauge(2.0)))
    manager.clock.now += 1000
    with pytest.raises(errors.UnknownSubscriptionIdException):
        manager.push(ctx(), push(instance, sub + 1))
    manager.clock.now += 1000
    with pytest.raises(errors.UnsupportedCompressionTypeException):
        manager.push(ctx(), push(instance, sub, codec=9))
    manager.clock.now += 1000
    with pytest.raises(errors.TelemetryTooLargeException):
        manager.push(ctx(), push(instance, sub, b"\0" * 1025))
    manager.clock.now += 1000
    with pytest.raises(errors.InvalidRecordException):
        manager.push(ctx(), push(instance, sub, b"\x0b"))
    manager.clock.now += 1000
    payload = compression.compress(compression.COMPRESSION_ZSTD, gauge(3.0))
    manager.push(ctx(), push(instance, sub, payload, codec=compression.COMPRESSION_ZSTD))
    assert [(name, value) for name, _, _, value, *_ in manager.snapshot()] == [("m.avg", 3.0)]
    manager.push(ctx(), push(instance, sub, terminating=True))  # early: terminating is let in
    manager.clock.now += 5000
    with pytest.raises(errors.InvalidRequestException):
        manager.push(ctx(), push(instance, sub))


def test_a_subscription_change_gives_a_new_id(manager):
    got = manager.get_subscriptions(ctx(), None)
    instance = got["client_instance_id"]
    manager.update_subscriptions({"prod": {"metrics": "*", "interval.ms": "200"}})
    with pytest.raises(errors.UnknownSubscriptionIdException):
        manager.push(ctx(), push(instance, got["subscription_id"]))
    again = manager.get_subscriptions(ctx(), instance)  # re-evaluated: not early
    assert again["requested_metrics"] == ["*"] and again["push_interval_ms"] == 200
    assert again["subscription_id"] != got["subscription_id"]


def test_reserved_ids_and_expiry(manager):
    with pytest.raises(errors.InvalidRequestException):
        manager.push(ctx(), push(uuid.UUID(int=0), 0))
    got = manager.get_subscriptions(ctx(), None)
    manager.push(ctx(), push(got["client_instance_id"], got["subscription_id"], gauge(1.0)))
    assert manager.snapshot()
    manager.clock.now += 60_001  # max(60 s, 3 x 1 s) without a request
    assert manager.snapshot() == [] and not manager.instances
