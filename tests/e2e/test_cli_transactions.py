"""``kfast transactions`` against a broker, with kafka-transactions.sh's
output: list, describe and describe-producers show the open transaction of
a confluent-kafka transactional producer (and find-hanging does not take
it for a hanging one); a transaction nobody will end (a transactional
batch of a producer the coordinator does not know) holds back the last
stable offset until ``abort --start-offset`` ends it, and a read_committed
consumer then reads the transactions committed after it. (The hanging one
is written to a broker with KIP-890's verification off, which would refuse
it otherwise.)"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer
from test_transactions import consume_confluent, new_topic

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from kfast.records import RecordBatchBuilder
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

KEY = api_keys.BY_NAME


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-cli-txn")),
    )
    instance.start()
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def unverified_broker(tmp_path_factory):
    """A broker that does not verify first transactional writes with the
    coordinator (KIP-890 off), as Kafka's tests make a hanging transaction."""
    instance = KfastBroker(
        {
            "num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "transaction.partition.verification.enable": False,
        },
        data_dir=str(tmp_path_factory.mktemp("kfast-cli-txn-unverified")),
    )
    instance.start()
    yield instance
    instance.close()


def transactions(broker, *args, status=0) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "transactions",
            "--bootstrap-server",
            broker.bootstrap_servers,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == status, result.stderr
    return result


def table(output: str) -> list[list[str]]:
    """Kafka's prettyPrintTable: every column padded, then a tab."""
    lines = output.splitlines()
    assert lines and all(line.endswith("\t") for line in lines), repr(output)
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


def transactional_producer(broker, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": transactional_id,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    return producer


def test_list_describe_and_describe_producers_show_an_open_transaction(broker):
    topic = new_topic(broker.bootstrap_servers)
    transactional_id = f"cli-{uuid.uuid4().hex[:8]}"
    producer = transactional_producer(broker, transactional_id)
    producer.begin_transaction()
    for value in (b"a", b"b", b"c"):
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    node = str(broker.broker.node_id)

    listed = table(transactions(broker, "list").stdout)
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    row = next(r for r in listed[1:] if r[0] == transactional_id)
    assert row[1] == node and row[3] == "Ongoing"
    producer_id = row[2]
    by_pattern = table(
        transactions(broker, "list", "--transactional-id-pattern", f"^{transactional_id}$").stdout
    )
    assert [r[0] for r in by_pattern[1:]] == [transactional_id]
    assert table(transactions(broker, "list", "--duration-filter", "3600000").stdout)[1:] == []

    described = table(
        transactions(broker, "describe", "--transactional-id", transactional_id).stdout
    )
    assert described[0] == [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    coordinator, tid, pid, epoch, state, timeout_ms, start, duration, partitions = described[1]
    assert (coordinator, tid, pid, state, partitions) == (
        node,
        transactional_id,
        producer_id,
        "Ongoing",
        f"{topic}-0",
    )
    assert timeout_ms == "60000"  # librdkafka's transaction.timeout.ms
    assert int(start) <= int(time.time() * 1000) and int(duration) >= 0

    producers = table(
        transactions(broker, "describe-producers", "--topic", topic, "--partition", "0").stdout
    )
    assert producers[0] == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in producers[1:]] == [
        (producer_id, epoch, "-1", "2", "0")
    ]
    on_broker = table(
        transactions(
            broker, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", node
        ).stdout
    )
    assert on_broker == producers

    # Its coordinator has the partition in the transaction: not hanging.
    hanging = table(
        transactions(
            broker, "find-hanging", "--broker-id", node, "--max-transaction-timeout", "0"
        ).stdout
    )
    assert hanging == [
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
    ]

    producer.commit_transaction(30)
    after = table(
        transactions(broker, "describe-producers", "--topic", topic, "--partition", "0").stdout
    )[1]
    assert after[0] == producer_id and after[5] == "None" and int(after[2]) >= 0
    assert (
        table(transactions(broker, "describe", "--transactional-id", transactional_id).stdout)[1][4]
        == "CompleteCommit"
    )


def test_errors_print_kafkas_message_and_exit_1(broker):
    missing = transactions(broker, "describe", "--transactional-id", "no-such-id", status=1)
    assert missing.stderr.strip() == (
        "Failed to describe transaction state of transactional-id `no-such-id`: "
        "DescribeTransactions request for transactionalId `no-such-id` failed because the ID "
        "could not be found. Enable debug logging for additional detail."
    )
    topic = new_topic(broker.bootstrap_servers)
    nothing = transactions(
        broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "5", status=1
    )
    assert nothing.stderr.strip() == (
        f"Could not find any open transactions starting at offset 5 on partition {topic}-0"
    )
    unnamed = transactions(broker, "abort", "--topic", topic, "--partition", "0", status=1)
    assert "must be identified either with --start-offset" in unnamed.stderr
    unscoped = transactions(broker, "find-hanging", status=1)
    assert "requires either --topic or --broker-id" in unscoped.stderr
    no_replica = transactions(
        broker,
        "describe-producers",
        "--topic",
        topic,
        "--partition",
        "0",
        "--broker-id",
        "12345",
        status=1,
    )
    assert no_replica.stderr.startswith(
        f"Failed to describe producers for partition {topic}-0 on broker 12345: "
    )


def send(connection, api: str, version: int, **body):
    return connection.send(body, api_key=KEY[api].key, version=version)


def write_hanging_transaction(broker, topic: str) -> tuple[int, int]:
    """A transactional batch no coordinator will end: its producer id came
    from an idempotent InitProducerId and its transactional id was never
    registered, as a late write could leave one before KIP-890's
    verification (off on this broker). (producer id, first offset)."""
    with BlockingConnection(broker.host, broker.port) as connection:
        answer = send(
            connection, "InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000
        )
        builder = RecordBatchBuilder(
            0,
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        builder.append(int(time.time() * 1000), None, b"hanging")
        response = send(
            connection,
            "Produce",
            9,
            transactional_id=f"lost-{uuid.uuid4().hex}",
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                {"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}
            ],
        )
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == 0
    return answer.producer_id, partition.base_offset


def last_stable_offset(broker, topic: str) -> int:
    with BlockingConnection(broker.host, broker.port) as connection:
        response = send(
            connection,
            "ListOffsets",
            5,
            replica_id=-1,
            isolation_level=1,
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        )
    return response.topics[0].partitions[0].offset


def test_abort_ends_a_hanging_transaction_and_read_committed_gets_past_it(unverified_broker):
    broker = unverified_broker
    topic = new_topic(broker.bootstrap_servers)
    node = str(broker.broker.node_id)
    hanging_producer, start = write_hanging_transaction(broker, topic)
    producer = transactional_producer(broker, f"cli-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(30)
    assert last_stable_offset(broker, topic) == start  # held back by the hanging one

    found = table(
        transactions(
            broker, "find-hanging", "--broker-id", node, "--max-transaction-timeout", "0"
        ).stdout
    )
    rows = [r for r in found[1:] if r[0] == topic]
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        ("0", str(hanging_producer), "0", "-1", str(start))
    ]
    assert int(rows[0][7]) == 0  # minutes since its last write
    assert (
        transactions(broker, "find-hanging", "--topic", topic, "--partition", "0").stdout.count(
            "\n"
        )
        == 1
    )  # younger than 15 minutes: only the header

    aborted = transactions(
        broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start)
    )
    assert aborted.stdout == ""
    assert last_stable_offset(broker, topic) > start
    assert consume_confluent(
        broker.bootstrap_servers, topic, "read_committed", until=b"committed"
    ) == [b"committed"]
    producers = table(
        transactions(broker, "describe-producers", "--topic", topic, "--partition", "0").stdout
    )
    states = {r[0]: r for r in producers[1:]}
    assert states[str(hanging_producer)][5] == "None"
    again = transactions(
        broker,
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start-offset",
        str(start),
        status=1,
    )
    assert "Could not find any open transactions" in again.stderr
    found = table(
        transactions(
            broker, "find-hanging", "--broker-id", node, "--max-transaction-timeout", "0"
        ).stdout
    )
    assert [r for r in found[1:] if r[0] == topic] == []
