"""A cluster secured end to end (issue 19 item 4): the controller listener
and the inter-broker (replication) listeners are SASL_SSL with PLAIN, so
brokers register with the controller, follow the metadata log and
replicate through TLS and SASL, with kfast's own client presenting the
listener's truststore and the JAAS username/password of
sasl.mechanism.controller.protocol / sasl.mechanism.inter.broker.protocol.
Clients use the PLAINTEXT listener. Secrets come from the fixtures."""

from __future__ import annotations

import os
import secrets

import pytest

from kfast.testing.certificates import TestCA
from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]


def replicate_and_check(cluster, topic: str, controller_refuses_early: bool = False) -> None:
    """A topic of 2 replicas on brokers 2 and 3 takes 20 acks=all records;
    both replicas end in sync and identical (the follower fetched over the
    secured replication listener), and no node logged a failed login.

    ``controller_refuses_early``: the controller's log is not checked. Its
    listener serves before its first commit (as Kafka's ControllerServer
    enables request processing once the publishers are installed, not once
    metadata is loaded), so with SCRAM users that exist only through the
    bootstrap records a broker that connects before that commit is refused
    and retries; that the brokers then registered is what cluster.start()
    waited for."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(20):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(60) == 0
    cluster.wait_for_isr(topic, 0, {2, 3})
    cluster.wait_for_identical_replicas(topic, 0, [2, 3])
    for node in cluster.nodes.values():
        if controller_refuses_early and not node.broker_port:
            continue
        log = open(node.log_path, encoding="utf-8", errors="replace").read()
        assert "Failed authentication" not in log


def test_controller_and_replication_over_sasl_ssl(tmp_path):
    ca = TestCA(str(tmp_path / "ca"))
    server = ca.issue("localhost", server=True)
    password = secrets.token_urlsafe(12)
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="kfast" password="{password}" user_kfast="{password}";'
    )
    secured = ["CONTROLLER", "REPLICATION_FROM_2", "REPLICATION_FROM_3"]
    overrides = {
        "listener.security.protocol.map": ",".join(
            ["PLAINTEXT:PLAINTEXT"] + [f"{name}:SASL_SSL" for name in secured]
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": server.keystore_path,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca.cert_path,
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        **{f"listener.name.{name.lower()}.plain.sasl.jaas.config": jaas for name in secured},
    }
    with KfastCluster(
        controllers=1,
        brokers=2,
        replication_links=True,
        overrides=overrides,
        base_dir=str(tmp_path / "cluster"),
    ) as cluster:
        cluster.start()  # returns once both brokers registered through SASL_SSL
        replicate_and_check(cluster, "secured")


def test_scram_between_nodes_from_the_first_start(tmp_path):
    """kfast storage format --add-scram (kafka-storage.sh's): the controller
    listener (SASL_PLAINTEXT) and the replication listeners (SASL_SSL) take
    SCRAM-SHA-512 only, and the one user exists solely through the bootstrap
    checkpoint, so brokers register and replicate only if the first active
    controller committed its UserScramCredentialRecord."""
    ca = TestCA(str(tmp_path / "ca"))
    server = ca.issue("localhost", server=True)
    password = secrets.token_urlsafe(12)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="kfast" password="{password}";'
    )
    replication = ["REPLICATION_FROM_2", "REPLICATION_FROM_3"]
    overrides = {
        "listener.security.protocol.map": ",".join(
            ["PLAINTEXT:PLAINTEXT", "CONTROLLER:SASL_PLAINTEXT"]
            + [f"{name}:SASL_SSL" for name in replication]
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": server.keystore_path,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca.cert_path,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        **{
            f"listener.name.{name.lower()}.scram-sha-512.sasl.jaas.config": jaas
            for name in ["CONTROLLER"] + replication
        },
    }
    with KfastCluster(
        controllers=1,
        brokers=2,
        replication_links=True,
        overrides=overrides,
        base_dir=str(tmp_path / "cluster"),
        add_scram=[f"SCRAM-SHA-512=[name=kfast,password={password}]"],
    ) as cluster:
        assert os.path.exists(
            os.path.join(cluster.nodes[1].data_dir, "data", "bootstrap.checkpoint")
        )
        cluster.start()  # returns once both brokers registered through SCRAM
        replicate_and_check(cluster, "scram-secured", controller_refuses_early=True)
