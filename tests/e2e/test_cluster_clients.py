"""Three combined nodes (process.roles=broker,controller), each a real
``kfast serve`` process, seen by real clients as one Kafka cluster.

Topics here have one replica per partition, spread over the brokers, so
every broker leads some partitions and a killed broker's partitions go
offline until it returns (with its data); replicated topics are
tests/e2e/test_replication.py's.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.kfast_cluster_config(
        combined=True,
        overrides={"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200},
    ),
]


def brokers_seen(bootstrap: str) -> dict[int, int]:
    """{broker id: port} from a fresh client's Metadata."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.id: b.port for b in metadata.brokers.values()}


def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(30)


def produce(bootstrap: str, topic: str, count: int, prefix: str = "v") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures = []
    for i in range(count):
        producer.produce(
            topic,
            key=str(i),
            value=f"{prefix}{i}",
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert failures == []


def consume_all(bootstrap: str, topic: str, count: int, group: str) -> list[str]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def test_three_nodes_are_one_cluster_to_clients(kfast_cluster):
    cluster = kfast_cluster
    ports = {n.node_id: n.broker_port for n in cluster.nodes.values()}
    # Every broker describes the same three brokers.
    for node in cluster.nodes.values():
        assert brokers_seen(f"127.0.0.1:{node.broker_port}") == ports
    # A topic created through one broker is placed across all three and
    # visible through each.
    create(f"127.0.0.1:{ports[1]}", "orders", 6)
    cluster.wait_until(
        lambda: all(len(leaders(f"127.0.0.1:{port}", "orders")) == 6 for port in ports.values()),
        10,
        "the topic on every broker",
    )
    assert set(leaders(cluster.bootstrap_servers, "orders").values()) == {1, 2, 3}
    produce(cluster.bootstrap_servers, "orders", 900)
    values = consume_all(cluster.bootstrap_servers, "orders", 900, "g1")
    assert sorted(values) == sorted(f"v{i}" for i in range(900))


def test_a_killed_broker_is_fenced_and_returns_with_its_data(kfast_cluster):
    cluster = kfast_cluster
    create(cluster.bootstrap_servers, "events", 6)
    cluster.wait_until(
        lambda: len(leaders(cluster.bootstrap_servers, "events")) == 6, 10, "the topic"
    )
    produce(cluster.bootstrap_servers, "events", 600, "before-")
    victim = next(n for n in cluster.nodes if n != cluster.leader())
    cluster.kill(victim)
    alive = ",".join(
        f"127.0.0.1:{n.broker_port}" for n in cluster.nodes.values() if n.node_id != victim
    )
    # Fenced after broker.session.timeout.ms: gone from Metadata, its
    # partitions without a leader (one replica each), the rest still served.
    cluster.wait_until(lambda: victim not in brokers_seen(alive), 15, "the broker fenced")
    orphaned = [p for p, leader in leaders(alive, "events").items() if leader == -1]
    assert orphaned, "the killed broker led no partition"
    create(alive, "while-down", 4)
    assert set(leaders(alive, "while-down").values()) <= set(cluster.nodes) - {victim}
    cluster.restart(victim)
    cluster.wait_until(lambda: victim in brokers_seen(alive), 30, "the broker back")
    cluster.wait_until(
        lambda: -1 not in leaders(cluster.bootstrap_servers, "events").values(),
        15,
        "its partitions led again",
    )
    values = consume_all(cluster.bootstrap_servers, "events", 600, "g2")
    assert sorted(values) == sorted(f"before-{i}" for i in range(600))


@pytest.mark.kfast_cluster_config(
    controllers=3,
    brokers=2,
    overrides={"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200},
)
def test_three_controllers_and_two_brokers(kfast_cluster):
    """Broker-only nodes follow the metadata log as observers (they fetch it
    from the leader without voting), register with the active controller,
    and carry on through its kill -9."""
    cluster = kfast_cluster
    assert cluster.brokers() == {4, 5}
    leader = cluster.wait_for_leader()
    state = cluster.describe_quorum(leader)
    assert sorted(v.replica_id for v in state.current_voters) == [1, 2, 3]
    cluster.wait_until(
        lambda: sorted(o.replica_id for o in cluster.describe_quorum(leader).observers) == [4, 5],
        10,
        "the brokers as observers",
    )
    create(cluster.bootstrap_servers, "orders", 4)
    cluster.wait_until(
        lambda: len(leaders(cluster.bootstrap_servers, "orders")) == 4, 10, "the topic"
    )
    assert set(leaders(cluster.bootstrap_servers, "orders").values()) == {4, 5}
    produce(cluster.bootstrap_servers, "orders", 400)
    cluster.kill(leader)
    # The admin request goes through a broker to whichever controller is
    # active now.
    create(cluster.bootstrap_servers, "after-failover", 2)
    cluster.wait_until(
        lambda: len(leaders(cluster.bootstrap_servers, "after-failover")) == 2,
        10,
        "the topic created after the failover",
    )
    assert sorted(consume_all(cluster.bootstrap_servers, "orders", 400, "g3")) == sorted(
        f"v{i}" for i in range(400)
    )


@pytest.mark.kfast_cluster_config(
    controllers=3,
    combined=True,
    node_overrides={
        1: {"broker.rack": "rack-a"},
        2: {"broker.rack": "rack-b"},
        3: {"broker.rack": "rack-a"},
    },
)
def test_racks_are_published_and_placement_alternates_them(kfast_cluster):
    cluster = kfast_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_cluster(request_timeout=10).result(30)
    assert {node.id: node.rack for node in described.nodes} == {
        1: "rack-a",
        2: "rack-b",
        3: "rack-a",
    }
    admin.create_topics([NewTopic("spread", 6, 2)], operation_timeout=10)["spread"].result(30)
    cluster.wait_until(
        lambda: len(leaders(cluster.bootstrap_servers, "spread")) == 6, 10, "the topic"
    )
    topic = admin.list_topics("spread", timeout=10).topics["spread"]
    racks = {1: "rack-a", 2: "rack-b", 3: "rack-a"}
    for partition in topic.partitions.values():
        # Two replicas of every partition sit in two different racks.
        assert {racks[r] for r in partition.replicas} == {"rack-a", "rack-b"}
