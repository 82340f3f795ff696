"""Transactions on a cluster of separate processes (one controller, three
brokers): the transaction coordinator is the leader of the transactional
id's __transaction_state partition, markers reach partition leaders on
other brokers over WriteTxnMarkers, and kill -9 of the coordinator's broker
in the middle of a transaction leaves it committed or aborted as a whole:
the partition's new leader loads the id, the producer's commit is either
completed there or the transaction is aborted, and a new producer with the
same transactional.id starts. A coordinator killed between PrepareCommit
and CompleteCommit (or PrepareAbort and CompleteAbort) leaves the decision
to its successor, which writes the markers."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from replication_support import create
from transaction_support import offsets, read_to_end

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

FAST_SESSIONS = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 200,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
ONE_CONTROLLER = pytest.mark.kfast_cluster_config(controllers=1, brokers=3, overrides=FAST_SESSIONS)
PARTITIONS = 3


def transaction_coordinator(cluster, transactional_id: str, exclude=()) -> int:
    """The broker FindCoordinator names, once one is named."""

    def ask():
        for node_id, node in cluster.nodes.items():
            if not node.broker_port or not node.alive or node_id in exclude:
                continue
            try:
                with BlockingConnection("127.0.0.1", node.broker_port) as connection:
                    response = connection.send(
                        {"key": transactional_id, "key_type": 1},
                        api_key=api_keys.BY_NAME["FindCoordinator"].key,
                        version=3,
                    )
            except Exception:
                continue
            if response.error_code == 0 and response.node_id not in exclude:
                found.append(response.node_id)
                return True
        return False

    found: list[int] = []
    cluster.wait_until(ask, 30, f"a coordinator for {transactional_id}")
    return found[0]


def read_committed(
    cluster, topic: str, expected: int, timeout: float = 60, partitions: int = PARTITIONS
) -> list[bytes]:
    """Every committed value of the topic, reading until ``expected`` came
    (and then to the end, so that nothing extra hides)."""
    return read_to_end(
        cluster.bootstrap_servers, topic, partitions, "read_committed", timeout, expected
    )[0]


@ONE_CONTROLLER
def test_transactions_commit_across_brokers(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "spread", partitions=PARTITIONS)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "spread-tx"}
    )
    producer.init_transactions(60)
    for round_, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for i in range(30):
            producer.produce("spread", value=f"{round_}-{i}".encode(), partition=i % PARTITIONS)
        (producer.commit_transaction if commit else producer.abort_transaction)(60)
    values = read_committed(cluster, "spread", 60)
    assert sorted(values) == sorted(f"{r}-{i}".encode() for r in (0, 2) for i in range(30))


@ONE_CONTROLLER
def test_kill_9_of_the_transaction_coordinator_mid_transaction(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "orders", partitions=PARTITIONS)
    transactional_id = f"failover-{uuid.uuid4().hex[:8]}"
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": 20000,
    }
    producer = Producer(config)
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("orders", value=f"first-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    coordinator = transaction_coordinator(cluster, transactional_id)
    cluster.kill(coordinator)
    # The new leader of the id's __transaction_state partition takes over.
    assert transaction_coordinator(cluster, transactional_id, exclude={coordinator}) != coordinator
    try:
        producer.commit_transaction(60)
        committed = True
    except KafkaException as exc:
        # Aborted instead (e.g. fenced by the new coordinator): all or nothing.
        committed = False
        if exc.args[0].txn_requires_abort():
            producer.abort_transaction(60)
    successor = Producer(config)
    successor.init_transactions(60)
    successor.begin_transaction()
    for i in range(30):
        successor.produce("orders", value=f"second-{i}".encode(), partition=i % PARTITIONS)
    successor.commit_transaction(60)
    first = [f"first-{i}".encode() for i in range(30)] if committed else []
    second = [f"second-{i}".encode() for i in range(30)]
    values = read_committed(cluster, "orders", len(first) + len(second))
    assert sorted(values) == sorted(first + second)
    cluster.restart(coordinator)
    cluster.wait_for_isr("orders", 0, {2, 3, 4}, 60)


def describe_transaction(cluster, node_id: int, transactional_id: str):
    """DescribeTransactions v0 of one id, asked of ``node_id``."""
    with BlockingConnection("127.0.0.1", cluster.nodes[node_id].broker_port) as connection:
        response = connection.send(
            {"transactional_ids": [transactional_id]},
            api_key=api_keys.BY_NAME["DescribeTransactions"].key,
            version=0,
        )
    return response.transaction_states[0]


@ONE_CONTROLLER
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_new_coordinator_completes_a_decision_made_before_a_kill_9(kfast_cluster, commit):
    """The coordinator writes PrepareCommit (PrepareAbort), answers the
    producer, and dies before any marker is written: the output partition's
    only replica is frozen (SIGSTOP) and fenced, so the markers wait for a
    leader. The __transaction_state partition's new leader loads the
    decision and sends the markers again once the partition is back: the
    transaction ends committed (aborted), its records become readable (stay
    hidden) and the last stable offset reaches the high watermark."""
    cluster = kfast_cluster
    transactional_id = f"prepared-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60000,
        }
    )
    producer.init_transactions(60)
    coordinator = transaction_coordinator(cluster, transactional_id)
    # The output partition lives on one other broker only: while it is
    # fenced nobody can take the markers.
    holder = min(
        node_id
        for node_id, node in cluster.nodes.items()
        if node.broker_port and node_id != coordinator
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("held", 1, replica_assignment=[[holder]])])["held"].result(30)
    cluster.wait_until(
        lambda: getattr(cluster.partition_state("held").get(0), "leader", -1) == holder,
        30,
        "held-0 led by its replica",
    )
    values = [f"held-{i}".encode() for i in range(20)]
    producer.begin_transaction()
    for value in values:
        producer.produce("held", value=value, partition=0)
    assert producer.flush(60) == 0
    cluster.pause(holder)
    cluster.wait_until(
        lambda: getattr(cluster.partition_state("held").get(0), "leader", 0) == -1,
        30,
        "held-0 without a leader (its replica fenced)",
    )
    # Answered once the decision is replicated.
    (producer.commit_transaction if commit else producer.abort_transaction)(60)
    decided = describe_transaction(cluster, coordinator, transactional_id)
    outcome = "Commit" if commit else "Abort"
    assert decided.error_code == 0 and decided.transaction_state == f"Prepare{outcome}"
    cluster.kill(coordinator)
    cluster.resume(holder)
    successor = transaction_coordinator(cluster, transactional_id, exclude={coordinator})
    assert successor != coordinator
    cluster.wait_until(
        lambda: (
            describe_transaction(cluster, successor, transactional_id).transaction_state
            == f"Complete{outcome}"
        ),
        60,
        "the new coordinator to complete the transaction",
    )
    visible = values if commit else []
    assert sorted(read_committed(cluster, "held", len(visible), partitions=1)) == sorted(visible)
    with BlockingConnection("127.0.0.1", cluster.nodes[holder].broker_port) as connection:
        last_stable, high_watermark = offsets(connection, 0, topic="held")
    # The records and one marker, all stable.
    assert last_stable == high_watermark == len(values) + 1
