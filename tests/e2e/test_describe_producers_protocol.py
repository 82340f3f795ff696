"""DescribeProducers (API 61) on the wire, every version kfast advertises:
the producer state of a partition (an idempotent producer's last sequence
and timestamp; a transactional producer's open transaction's first offset,
gone once the marker is written, and the marker's coordinator epoch) and
Kafka's errors: INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION for an
unknown topic (with its message) and for an unknown partition, and on a
cluster NOT_LEADER_OR_FOLLOWER from a broker that hosts no replica, while a
follower answers with the state it replicated."""

from __future__ import annotations

import time

import pytest
from e2e_support import wait_until
from test_transactions_protocol import versions
from transaction_support import add_partitions, end_txn, fresh_id, init, send

from kfast.client.connection import BlockingConnection
from kfast.protocol import errors as E
from kfast.records import RecordBatchBuilder
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e

TOPIC = "describe-producers"
UNKNOWN = E.UnknownTopicOrPartitionException.code


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    broker = KfastBroker(
        {"num.partitions": 1}, data_dir=str(tmp_path_factory.mktemp("kfast-describe-producers"))
    )
    broker.start()
    connection = BlockingConnection(broker.host, broker.port)
    response = send(
        connection,
        "CreateTopics",
        4,
        topics=[{"name": TOPIC, "num_partitions": 4, "replication_factor": 1}],
        timeout_ms=10000,
    )
    assert response.topics[0].error_code == 0
    # FindCoordinator creates __transaction_state; its partitions then load.
    wait_until(
        lambda: send(connection, "FindCoordinator", 3, key=fresh_id(), key_type=1).error_code == 0,
        15,
        "a transaction coordinator",
    )
    yield connection
    connection.close()
    broker.close()


def produce(
    conn,
    partition: int,
    producer_id: int,
    epoch: int,
    sequence: int,
    count: int,
    transactional_id: str | None = None,
    topic: str = TOPIC,
) -> int:
    """Append ``count`` records as one batch; the base offset."""
    builder = RecordBatchBuilder(
        0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional_id is not None,
    )
    for i in range(count):
        builder.append(int(time.time() * 1000), None, b"v%d" % i)
    response = send(
        conn,
        "Produce",
        9,
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            {"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}
        ],
    )
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == 0, E.for_code(answer.error_code).__name__
    return answer.base_offset


def describe(conn, version: int, topics: dict[str, list[int]]):
    response = send(
        conn,
        "DescribeProducers",
        version,
        topics=[{"name": t, "partition_indexes": p} for t, p in topics.items()],
    )
    assert response.throttle_time_ms == 0
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def producers(conn, version: int, partition: int) -> dict:
    answer = describe(conn, version, {TOPIC: [partition]})[(TOPIC, partition)]
    assert answer.error_code == 0 and answer.error_message is None
    return {p.producer_id: p for p in answer.active_producers}


@pytest.mark.parametrize("version", versions("DescribeProducers"))
def test_an_idempotent_producer_and_an_empty_partition(conn, version):
    partition = 0
    before = {p for p in producers(conn, version, partition)}
    response = send(conn, "InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000)
    producer_id, epoch = response.producer_id, response.producer_epoch
    started = int(time.time() * 1000)
    produce(conn, partition, producer_id, epoch, 0, 3)
    produce(conn, partition, producer_id, epoch, 3, 2)
    found = producers(conn, version, partition)
    assert set(found) - before == {producer_id}
    state = found[producer_id]
    assert (
        state.producer_epoch,
        state.last_sequence,
        state.coordinator_epoch,
        state.current_txn_start_offset,
    ) == (epoch, 4, -1, -1)
    assert started - 1000 <= state.last_timestamp <= int(time.time() * 1000)
    assert producers(conn, version, 3) == {}


@pytest.mark.parametrize("version", versions("DescribeProducers"))
def test_an_open_transaction_has_its_start_offset_until_its_marker(conn, version):
    partition = 1
    transactional_id = fresh_id()
    response = init(conn, transactional_id)
    producer_id, epoch = response.producer_id, response.producer_epoch
    assert add_partitions(
        conn, 3, transactional_id, producer_id, epoch, [partition], topic=TOPIC
    ) == {(TOPIC, partition): 0}
    first = produce(conn, partition, producer_id, epoch, 0, 2, transactional_id)
    produce(conn, partition, producer_id, epoch, 2, 1, transactional_id)
    state = producers(conn, version, partition)[producer_id]
    assert (state.producer_epoch, state.last_sequence, state.current_txn_start_offset) == (
        epoch,
        2,
        first,
    )
    assert state.coordinator_epoch == -1  # no marker of this producer yet
    assert end_txn(conn, 3, transactional_id, producer_id, epoch, True).error_code == 0
    # The marker is written by the coordinator after EndTxn answers.
    wait_until(
        lambda: producers(conn, version, partition)[producer_id].current_txn_start_offset == -1,
        10,
        "the commit marker",
    )
    state = producers(conn, version, partition)[producer_id]
    assert state.coordinator_epoch >= 0 and state.last_sequence == 2


@pytest.mark.parametrize("version", versions("DescribeProducers"))
def test_unknown_and_invalid_topics_and_partitions(conn, version):
    answers = describe(conn, version, {"no-such-topic": [0, 1], TOPIC: [0, 99], "bad/name": [0]})
    for index in (0, 1):
        missing = answers[("no-such-topic", index)]
        assert missing.error_code == UNKNOWN and missing.active_producers == []
        assert missing.error_message == E.UnknownTopicOrPartitionException.default_message
    assert answers[(TOPIC, 0)].error_code == 0
    assert answers[(TOPIC, 99)].error_code == UNKNOWN
    invalid = answers[("bad/name", 0)]
    assert invalid.error_code == E.InvalidTopicException.code and "illegal" in invalid.error_message


TWO_BROKERS = pytest.mark.kfast_cluster_config(controllers=1, brokers=2)


@pytest.mark.slow
@pytest.mark.timeout(180)
@TWO_BROKERS
def test_a_follower_answers_with_its_replicated_state_and_a_non_replica_does_not(kfast_cluster):
    cluster = kfast_cluster
    brokers = sorted(cluster.brokers())
    connections = {
        b: BlockingConnection("127.0.0.1", cluster.nodes[b].broker_port) for b in brokers
    }
    try:
        some = connections[brokers[0]]
        response = send(
            some,
            "CreateTopics",
            4,
            timeout_ms=15000,
            topics=[
                {"name": "replicated", "num_partitions": 1, "replication_factor": 2},
                {"name": "single", "num_partitions": 1, "replication_factor": 1},
            ],
        )
        assert [t.error_code for t in response.topics] == [0, 0]
        cluster.wait_until(
            lambda: (
                all(len(p.isr) == 2 for p in cluster.partition_state("replicated").values())
                and cluster.partition_state("single").get(0, (-1,))[0] >= 0
            ),
            30,
            "both topics' leaders",
        )
        leader = cluster.partition_state("replicated")[0].leader
        follower = next(b for b in brokers if b != leader)
        single_leader = cluster.partition_state("single")[0].leader
        version = versions("DescribeProducers")[-1]

        def on(broker: int, topic: str):
            return describe(connections[broker], version, {topic: [0]})[(topic, 0)]

        # The metadata names the replicas before each broker has applied them.
        cluster.wait_until(
            lambda: (
                on(leader, "replicated").error_code == 0
                and on(follower, "replicated").error_code == 0
                and on(single_leader, "single").error_code == 0
            ),
            15,
            "the replicas",
        )
        init_answer = send(
            connections[leader],
            "InitProducerId",
            4,
            transactional_id=None,
            transaction_timeout_ms=60000,
        )
        produce(
            connections[leader],
            0,
            init_answer.producer_id,
            init_answer.producer_epoch,
            0,
            5,
            topic="replicated",
        )
        cluster.wait_until(
            lambda: (
                [p.producer_id for p in on(follower, "replicated").active_producers]
                == [init_answer.producer_id]
            ),
            15,
            "the follower's producer state",
        )
        assert on(follower, "replicated").active_producers[0].last_sequence == 4
        other = next(b for b in brokers if b != single_leader)
        answer = on(other, "single")
        assert answer.error_code == E.NotLeaderOrFollowerException.code
        assert answer.active_producers == []
    finally:
        for connection in connections.values():
            connection.close()
