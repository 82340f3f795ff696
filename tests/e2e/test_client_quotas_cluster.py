"""Client quotas on a cluster (a controller and a broker, real `kfast serve`
processes): AlterClientQuotas sent to the broker reaches the controller,
the broker enforces what the metadata log says, and CreateTopics forwarded
to the controller is held to the client's controller_mutation_rate there."""

from __future__ import annotations

import pytest
from configs_support import kfast_configs
from e2e_support import wait_until
from kafka.admin import KafkaAdminClient

from kfast.protocol import errors

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.kfast_cluster_config(controllers=1, brokers=1),
]


def test_quotas_through_a_broker_and_the_controller(kfast_cluster):
    kfast_cluster.wait_for_brokers()
    bootstrap = kfast_cluster.bootstrap_servers

    class Broker:
        bootstrap_servers = bootstrap

    status, out, err = kfast_configs(
        Broker,
        "--client",
        "mutator",
        "--alter",
        "--add-config",
        "controller_mutation_rate=2,producer_byte_rate=1000000",
    )
    assert (status, err) == (0, "")
    # The broker answers DescribeClientQuotas from its copy of the metadata.
    wait_until(
        lambda: (
            kfast_configs(Broker, "--client", "mutator", "--describe")[1]
            == "Quota configs for client-id 'mutator' are controller_mutation_rate=2.0, "
            "producer_byte_rate=1000000.0\n"
        ),
        message="the quota on the broker",
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="mutator")
    try:
        response = admin.create_topics(
            {
                "a": {"num_partitions": 15, "replication_factor": 1},
                "b": {"num_partitions": 10, "replication_factor": 1},
                "c": {"num_partitions": 1, "replication_factor": 1},
            },
            raise_errors=False,
        )
    finally:
        admin.close()
    assert {t["name"]: t["error_code"] for t in response["topics"]} == {
        "a": 0,
        "b": 0,
        "c": errors.ThrottlingQuotaExceededException.code,
    }


def test_broker_loggers_are_the_brokers_own(kfast_cluster):
    """IncrementalAlterConfigs of BROKER_LOGGER resources is answered by the
    broker itself, not forwarded to the controller (Kafka's broker does the
    same): the broker's logger changes."""
    kfast_cluster.wait_for_brokers()
    [broker_id] = kfast_cluster.brokers()

    class Broker:
        bootstrap_servers = kfast_cluster.bootstrap_servers

    status, out, err = kfast_configs(
        Broker,
        "--broker-logger",
        str(broker_id),
        "--alter",
        "--add-config",
        "kfast.server.fetch_apis=TRACE",
    )
    assert (status, out, err) == (
        0,
        f"Completed updating config for broker-logger {broker_id}.\n",
        "",
    )
    _, out, _ = kfast_configs(Broker, "--broker-logger", str(broker_id), "--describe")
    assert "  kfast.server.fetch_apis=TRACE sensitive=false synonyms={}\n" in out
