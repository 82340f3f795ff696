"""KIP-714 client metrics (issue 20, item 2): a subscription created as a
CLIENT_METRICS config resource with kafka-python's admin client (what
kafka-client-metrics.sh sends), librdkafka pushing its metrics on its own,
the pushed values on the Prometheus endpoint; and the protocol's error
codes over a raw socket.
"""

from __future__ import annotations

import base64
import uuid

import pytest
from confluent_kafka import Producer
from e2e_support import wait_until
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from test_admin_protocol import Client
from test_metrics_endpoint import scrape

from kfast.protocol import errors
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    broker = KfastBroker(
        {"num.partitions": 1, "kfast.metrics.port": 0, "telemetry.max.bytes": 8192},
        data_dir=str(tmp_path_factory.mktemp("kfast-telemetry")),
    )
    broker.start()
    yield broker
    broker.close()


def subscribe(broker, name: str, **configs) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs=configs)],
            incremental=True,
            raise_on_unknown=False,
        )
    finally:
        admin.close()


def test_librdkafka_pushes_its_metrics_to_the_endpoint(metered, topic):
    subscribe(
        metered,
        "producers",
        **{
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": "500",
            "match": "client_software_name=confluent-kafka-python",
        },
    )
    admin = KafkaAdminClient(bootstrap_servers=metered.bootstrap_servers)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers")]
        )
        entries = {
            name: (entry["value"], entry["config_source"])
            for name, entry in described["client_metrics"]["producers"].items()
        }
        source = "DYNAMIC_CLIENT_METRICS_CONFIG"  # ConfigSource 7
        assert entries == {
            "metrics": ("org.apache.kafka.producer.", source),
            "interval.ms": ("500", source),
            "match": ("client_software_name=confluent-kafka-python", source),
        }
        listed = admin.list_config_resources([ConfigResourceType.CLIENT_METRICS])
        assert "producers" in listed["client_metrics"]
    finally:
        admin.close()

    producer = Producer(
        {
            "bootstrap.servers": metered.bootstrap_servers,
            "client.id": "telemetry-e2e",
            "enable.metrics.push": True,
        }
    )
    for i in range(20):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    port = metered.broker.metrics_server.port

    def pushed():
        samples, types = scrape(port)
        found = {
            labels: value
            for (name, labels), value in samples.items()
            if name == "org_apache_kafka_producer_request_latency_avg"
        }
        return (found, types) if found else None

    found, types = wait_until(pushed, 30, "a telemetry push from librdkafka")
    labels = dict(next(iter(found)))
    assert labels["client_id"] == "telemetry-e2e"
    assert labels["client_software_name"] == "confluent-kafka-python"
    # Kafka's Uuid.toString(): 16 bytes in base64url without padding.
    assert len(base64.urlsafe_b64decode(labels["client_instance_id"] + "==")) == 16
    assert types["org_apache_kafka_producer_request_latency_avg"] == "gauge"
    # Subscribed to producer metrics only: nothing else was asked for.
    assert not any(name.startswith("org_apache_kafka_consumer") for name in types)
    producer.flush(1)


def test_telemetry_errors_over_the_wire(metered):
    subscribe(
        metered, "raw", **{"metrics": "*", "interval.ms": "60000", "match": "client_id=t"}
    )  # the raw client's id
    client = Client(metered)
    try:
        got = client.request("GetTelemetrySubscriptions", 0, client_instance_id=uuid.UUID(int=0))
        assert got.error_code == 0 and got.client_instance_id.int != 0
        assert got.requested_metrics == ["*"] and got.push_interval_ms == 60000
        assert got.telemetry_max_bytes == 8192 and got.delta_temporality
        assert sorted(got.accepted_compression_types) == [1, 2, 3, 4]
        instance = got.client_instance_id
        again = client.request("GetTelemetrySubscriptions", 0, client_instance_id=instance)
        assert again.error_code == errors.ThrottlingQuotaExceededException.code

        def push(**fields):
            body = dict(
                client_instance_id=instance,
                subscription_id=got.subscription_id,
                terminating=False,
                compression_type=0,
                metrics=b"",
            )
            body.update(fields)
            return client.request("PushTelemetry", 0, **body).error_code

        assert push(metrics=b"\x0b") == errors.InvalidRecordException.code  # not OTLP
        assert push() == errors.ThrottlingQuotaExceededException.code  # one per interval
        assert (
            push(terminating=True, subscription_id=got.subscription_id + 1)
            == errors.UnknownSubscriptionIdException.code
        )
        assert push() == errors.InvalidRequestException.code  # after terminating
        other = client.request("GetTelemetrySubscriptions", 0, client_instance_id=None)
        assert other.error_code == 0 and other.client_instance_id != instance
        assert (
            client.request(
                "PushTelemetry",
                0,
                client_instance_id=other.client_instance_id,
                subscription_id=other.subscription_id,
                terminating=False,
                compression_type=0,
                metrics=b"\0" * 8193,
            ).error_code
            == errors.TelemetryTooLargeException.code
        )
        assert (
            client.request(
                "PushTelemetry",
                0,
                client_instance_id=uuid.UUID(int=0),
                subscription_id=0,
                terminating=False,
                compression_type=0,
                metrics=b"",
            ).error_code
            == errors.InvalidRequestException.code
        )
    finally:
        client.close()


def test_an_instance_is_forgotten_when_its_connection_closes(metered):
    """Kafka's ClientMetricsManager drops a client instance when the
    connection it was created on closes: the same instance id asking again
    on a new connection is answered at once instead of throttled for the
    rest of its push interval."""
    subscribe(
        metered, "closing", **{"metrics": "*", "interval.ms": "60000", "match": "client_id=t"}
    )  # the raw client's id
    first = Client(metered)
    try:
        got = first.request("GetTelemetrySubscriptions", 0, client_instance_id=uuid.UUID(int=0))
        assert got.error_code == 0
        instance = got.client_instance_id
        assert (
            first.request("GetTelemetrySubscriptions", 0, client_instance_id=instance).error_code
            == errors.ThrottlingQuotaExceededException.code
        )
    finally:
        first.close()
    second = Client(metered)
    try:
        # The broker learns of the close asynchronously: ask until answered
        # (a throttled ask changes nothing), far sooner than the 60 s interval.
        def answered():
            response = second.request("GetTelemetrySubscriptions", 0, client_instance_id=instance)
            return response if response.error_code == 0 else None

        answer = wait_until(answered, 20, "the instance forgotten with its connection")
        assert answer.client_instance_id == instance
        assert answer.subscription_id == got.subscription_id
    finally:
        second.close()


def test_librdkafka_series_leave_with_the_client(metered, topic):
    """A producer closed: its pushed series leave the endpoint with its
    connection, not max(60 s, 3 intervals) later."""
    subscribe(
        metered,
        "producers",
        **{
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": "500",
            "match": "client_software_name=confluent-kafka-python",
        },
    )
    producer = Producer(
        {
            "bootstrap.servers": metered.bootstrap_servers,
            "client.id": "telemetry-close",
            "enable.metrics.push": True,
        }
    )
    producer.produce(topic, b"v")
    assert producer.flush(30) == 0
    port = metered.broker.metrics_server.port

    def series() -> int:
        return sum(
            1 for (name, labels) in scrape(port)[0] if ("client_id", "telemetry-close") in labels
        )

    wait_until(lambda: series() > 0, 30, "a telemetry push from librdkafka")
    producer.close()
    wait_until(lambda: series() == 0, 20, "the closed producer's series gone")


def test_not_advertised_without_the_endpoint(broker):
    client = Client(broker)
    try:
        versions = client.request(
            "ApiVersions", 3, client_software_name="t", client_software_version="1"
        )
        keys = {api.api_key for api in versions.api_keys}
        assert 0 in keys and 71 not in keys and 72 not in keys
    finally:
        client.close()


def client_metrics(broker, *argv) -> tuple[int, str, str]:
    import io

    from kfast.cli import build_parser
    from kfast.tools import client_metrics as tool

    args = build_parser().parse_args(
        ["client-metrics", "--bootstrap-server", broker.bootstrap_servers, *argv]
    )
    out, err = io.StringIO(), io.StringIO()
    return tool.run(args, out=out, err=err), out.getvalue(), err.getvalue()


def test_kfast_client_metrics_is_kafka_client_metrics_sh(metered):
    assert client_metrics(
        metered,
        "--alter",
        "--name",
        "cli",
        "--metrics",
        "org.apache.kafka.consumer.,org.apache.kafka.producer.",
        "--interval",
        "2000",
        "--match",
        "client_id=cli-.*",
    ) == (0, "Altered client metrics config for cli.\n", "")
    code, out, _ = client_metrics(metered, "--describe", "--name", "cli")
    assert code == 0 and out.splitlines()[0] == "Client metrics configs for cli are:"
    assert sorted(out.splitlines()[1:]) == [
        "  interval.ms=2000",
        "  match=client_id=cli-.*",
        "  metrics=org.apache.kafka.consumer.,org.apache.kafka.producer.",
    ]
    assert "cli" in client_metrics(metered, "--list")[1].split()
    assert (
        client_metrics(metered, "--alter", "--name", "cli", "--interval", "5")[1]
        == "Error while executing client metrics command : Invalid value 5 for interval.ms, "
        "interval must be between 100 and 3600000 (1 hour)\n"
    )
    code, out, _ = client_metrics(metered, "--alter", "--generate-name", "--metrics", "*")
    generated = out.split()[-1].rstrip(".")
    assert code == 0 and uuid.UUID(generated)
    assert client_metrics(metered, "--delete", "--name", "cli") == (
        0,
        "Deleted client metrics config for cli.\n",
        "",
    )
    listed = client_metrics(metered, "--list")[1].split()
    assert "cli" not in listed and generated in listed
    assert client_metrics(metered, "--list", "--name", "x", "--interval", "100")[0] == 1
