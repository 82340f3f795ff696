"""Two-phase commit participation (KIP-939) on the wire: InitProducerId v6
with enable2Pc and keepPreparedTxn, against a broker with
transaction.two.phase.commit.enable and one without. A two-phase commit
transaction never times out -- the coordinator's timeout abort passes it by,
a broker restart keeps it open -- and the producer's commit or abort ends it
whenever its external transaction manager decides."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from e2e_support import wait_until
from transaction_support import (
    TOPIC,
    add_partitions,
    end_txn,
    fresh_id,
    init,
    offsets,
    produce_transactional,
    send,
)

from kfast.client.connection import BlockingConnection
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

INT_MAX = 2**31 - 1
AUTHORIZATION_FAILED = E.TransactionalIdAuthorizationException.code


def start(data_dir, **overrides) -> tuple[KfastBroker, BlockingConnection]:
    """A broker serving InitProducerId v6, which Kafka 4.2 still marks
    unstable (its internal unstable.api.versions.enable)."""
    broker = KfastBroker(
        {"num.partitions": 1, "unstable.api.versions.enable": "true", **overrides},
        data_dir=str(data_dir),
    ).start()
    return broker, connect(broker)


def connect(broker: KfastBroker) -> BlockingConnection:
    return BlockingConnection(broker.host, broker.port)


def create_topic(conn) -> None:
    response = send(
        conn,
        "CreateTopics",
        4,
        topics=[{"name": TOPIC, "num_partitions": 2, "replication_factor": 1}],
        timeout_ms=10000,
    )
    assert response.topics[0].error_code == 0


def describe(conn, transactional_id: str):
    [state] = send(
        conn, "DescribeTransactions", 0, transactional_ids=[transactional_id]
    ).transaction_states
    return state


def read_committed(broker: KfastBroker, partition: int) -> list[bytes]:
    """The values a read_committed confluent-kafka consumer reads of the
    partition up to its last stable offset."""
    with connect(broker) as conn:
        end = offsets(conn, partition)[0]
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": fresh_id(),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        values = []

        def caught_up() -> bool:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                assert message.error() is None, message.error()
                values.append(message.value())
            return consumer.position([TopicPartition(TOPIC, partition)])[0].offset >= end

        wait_until(caught_up, message=f"the read_committed consumer at {end}")
        return values
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def disabled(tmp_path_factory):
    broker, conn = start(tmp_path_factory.mktemp("kfast-2pc-off"))
    create_topic(conn)
    yield conn
    conn.close()
    broker.close()


def test_refused_while_the_broker_setting_is_false(disabled):
    answer = send(
        disabled, "ApiVersions", 3, client_software_name="kfast-test", client_software_version="1"
    )
    versions = {k.api_key: k.max_version for k in answer.api_keys}
    assert versions[22] == 6
    for fields in (
        {"enable2_pc": True},
        {"keep_prepared_txn": True},
        {"enable2_pc": True, "keep_prepared_txn": True},
    ):
        response = init(disabled, fresh_id(), 6, **fields)
        assert (
            response.error_code,
            response.producer_id,
            response.producer_epoch,
            response.ongoing_txn_producer_id,
            response.ongoing_txn_producer_epoch,
        ) == (AUTHORIZATION_FAILED, -1, -1, -1, -1)
    plain = init(disabled, fresh_id(), 6)
    assert plain.error_code == 0 and plain.producer_epoch == 0
    assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)


def test_prepared_transactions_outlive_timeouts_and_a_restart(tmp_path):
    broker, conn = start(
        tmp_path,
        **{
            "transaction.two.phase.commit.enable": "true",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100,
        },
    )
    try:
        create_topic(conn)
        # keepPreparedTxn: not served (Kafka 4.2's coordinator answers the same).
        assert (
            init(conn, fresh_id(), 6, enable2_pc=True, keep_prepared_txn=True).error_code
            == E.UnsupportedVersionException.code
        )
        # Two 2PC transactions (commit, abort) and a plain one, all asking a
        # one-second timeout; each writes three records to its own place.
        plain_id, commit_id, abort_id = fresh_id(), fresh_id(), fresh_id()
        plain = init(conn, plain_id, 6, timeout_ms=1000)
        to_commit = init(conn, commit_id, 6, timeout_ms=1000, enable2_pc=True)
        to_abort = init(conn, abort_id, 6, timeout_ms=1000, enable2_pc=True)
        for answer in (plain, to_commit, to_abort):
            assert answer.error_code == 0
            assert (answer.ongoing_txn_producer_id, answer.ongoing_txn_producer_epoch) == (-1, -1)
        for tid, answer, partition in (
            (plain_id, plain, 0),
            (commit_id, to_commit, 1),
            (abort_id, to_abort, 1),
        ):
            assert add_partitions(
                conn, 3, tid, answer.producer_id, answer.producer_epoch, [partition]
            ) == {(TOPIC, partition): 0}
            assert (
                produce_transactional(
                    conn,
                    tid,
                    answer.producer_id,
                    answer.producer_epoch,
                    partition,
                    [tid.encode() + b"-%d" % i for i in range(3)],
                )
                == 0
            )
        assert describe(conn, commit_id).transaction_timeout_ms == INT_MAX
        # The plain transaction is aborted by the coordinator after its second;
        # the 2PC ones stay open, holding the last stable offset of partition 1.
        wait_until(
            lambda: describe(conn, plain_id).transaction_state == "CompleteAbort",
            message="the plain transaction's timeout abort",
        )
        assert [describe(conn, t).transaction_state for t in (commit_id, abort_id)] == [
            "Ongoing",
            "Ongoing",
        ]
        assert offsets(conn, 1) == (0, 6)

        conn.close()
        broker.restart()
        conn = connect(broker)
        # Replayed from __transaction_state: still open, still without a timeout.
        state = wait_until(
            lambda: (lambda s: s if s.error_code == 0 else None)(describe(conn, commit_id)),
            message="the coordinator's load",
        )
        assert (state.transaction_state, state.transaction_timeout_ms, state.producer_id) == (
            "Ongoing",
            INT_MAX,
            to_commit.producer_id,
        )
        assert describe(conn, abort_id).transaction_state == "Ongoing"

        # The external decision arrives: one commits, the other aborts.
        assert (
            end_txn(
                conn, 5, commit_id, to_commit.producer_id, to_commit.producer_epoch, True
            ).error_code
            == 0
        )
        assert (
            end_txn(
                conn, 5, abort_id, to_abort.producer_id, to_abort.producer_epoch, False
            ).error_code
            == 0
        )
        wait_until(
            lambda: offsets(conn, 1)[0] == offsets(conn, 1)[1], message="the markers of partition 1"
        )
        assert read_committed(broker, 1) == [commit_id.encode() + b"-%d" % i for i in range(3)]
        assert read_committed(broker, 0) == []
    finally:
        conn.close()
        broker.close()
