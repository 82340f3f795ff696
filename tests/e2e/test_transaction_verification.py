"""Transaction verification (KIP-890 part 1) against real brokers: a
transactional write that arrives after its transaction ended -- delayed in
the network while the producer aborted -- is refused with
INVALID_TXN_STATE instead of opening a transaction no coordinator knows
(which would hold the partition's last stable offset back forever); the
same write with transaction.partition.verification.enable=false shows the
hang. On a cluster the leader asks a coordinator on another broker."""

from __future__ import annotations

import pytest
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
    wait_ended,
)

from kfast.client.connection import BlockingConnection
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e


def late_write_after_abort(
    conn, topic: str = TOPIC, partition: int = 0, transactional_id: str | None = None
) -> tuple[int, int]:
    """(error of the late write, the partition's end offset after the abort)."""
    transactional_id = transactional_id or fresh_id()
    producer = init(conn, transactional_id)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(conn, 3, transactional_id, pid, epoch, [partition], topic) == {
        (topic, partition): 0
    }
    assert (
        produce_transactional(conn, transactional_id, pid, epoch, partition, [b"in"], topic=topic)
        == 0
    )
    assert end_txn(conn, 3, transactional_id, pid, epoch, False).error_code == 0
    wait_until(
        lambda: offsets(conn, partition, topic)[0] == offsets(conn, partition, topic)[1],
        10,
        "the abort marker",
    )
    wait_ended(conn, transactional_id)
    end = offsets(conn, partition, topic)[1]
    # The write the network held back: same producer, same epoch, next sequence.
    code = produce_transactional(
        conn, transactional_id, pid, epoch, partition, [b"late"], sequence=1, topic=topic
    )
    return code, end


@pytest.mark.parametrize("verify", [True, False])
def test_a_write_after_the_abort_is_refused_not_left_hanging(tmp_path, verify):
    with KfastBroker(
        {"transaction.partition.verification.enable": str(verify).lower()}, data_dir=str(tmp_path)
    ) as broker:
        conn = BlockingConnection(broker.host, broker.port)
        assert (
            send(
                conn,
                "CreateTopics",
                4,
                topics=[{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                timeout_ms=10000,
            )
            .topics[0]
            .error_code
            == 0
        )
        code, end = late_write_after_abort(conn)
        stable, high_watermark = offsets(conn, 0)
        if verify:
            assert code == E.InvalidTxnStateException.code
            assert (stable, high_watermark) == (end, end)  # nothing written
        else:
            # Kafka before KIP-890: written, and a transaction nobody will end.
            assert code == 0 and high_watermark == end + 1 and stable == end
        conn.close()


def test_a_transaction_goes_on_after_verification(tmp_path):
    """The first write of each transaction on a partition is verified, the
    next ones are not asked about; commits still work."""
    with KfastBroker({}, data_dir=str(tmp_path)) as broker:
        conn = BlockingConnection(broker.host, broker.port)
        send(
            conn,
            "CreateTopics",
            4,
            topics=[{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
            timeout_ms=10000,
        )
        transactional_id = fresh_id()
        producer = init(conn, transactional_id)
        pid, epoch = producer.producer_id, producer.producer_epoch
        # Not added first: refused, nothing opened.
        assert (
            produce_transactional(conn, transactional_id, pid, epoch, 0, [b"x"])
            == E.InvalidTxnStateException.code
        )
        assert add_partitions(conn, 3, transactional_id, pid, epoch, [0]) == {(TOPIC, 0): 0}
        for sequence in range(3):
            assert (
                produce_transactional(
                    conn, transactional_id, pid, epoch, 0, [b"v%d" % sequence], sequence=sequence
                )
                == 0
            )
        assert end_txn(conn, 3, transactional_id, pid, epoch, True).error_code == 0
        wait_until(
            lambda: offsets(conn, 0)[0] == offsets(conn, 0)[1] == 4,
            10,
            "three records and the commit marker",
        )
        conn.close()


@pytest.mark.slow
@pytest.mark.kfast_cluster_config(controllers=1, brokers=3)
def test_the_leader_asks_a_coordinator_on_another_broker(kfast_cluster):
    cluster = kfast_cluster
    from replication_support import create

    create(cluster, TOPIC, partitions=1, min_insync=1)
    leader = cluster.partition_state(TOPIC)[0].leader
    conn = BlockingConnection("127.0.0.1", cluster.nodes[leader].broker_port)
    # A transactional id whose coordinator is another broker.
    for _ in range(200):
        transactional_id = fresh_id()
        found = send(conn, "FindCoordinator", 3, key=transactional_id, key_type=1)
        if found.error_code == 0 and found.node_id != leader:
            break
    else:
        pytest.fail("no transactional id coordinated elsewhere")
    coordinator = BlockingConnection("127.0.0.1", found.port)
    producer = init(coordinator, transactional_id)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(coordinator, 3, transactional_id, pid, epoch, [0]) == {(TOPIC, 0): 0}
    assert produce_transactional(conn, transactional_id, pid, epoch, 0, [b"in"]) == 0
    assert end_txn(coordinator, 3, transactional_id, pid, epoch, False).error_code == 0
    wait_until(lambda: offsets(conn, 0)[0] == offsets(conn, 0)[1], 10, "the abort marker")
    wait_ended(coordinator, transactional_id)
    assert (
        produce_transactional(conn, transactional_id, pid, epoch, 0, [b"late"], sequence=1)
        == E.InvalidTxnStateException.code
    )
    # Transaction version 2 (Produce v12): the leader has that coordinator
    # add the partition (AddPartitionsToTxn verify_only=false).
    producer = init(coordinator, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert produce_transactional(conn, transactional_id, pid, epoch, 0, [b"v2"], version=12) == 0
    committed = end_txn(coordinator, 5, transactional_id, pid, epoch, True)
    assert (committed.error_code, committed.producer_epoch) == (0, epoch + 1)
    wait_until(lambda: offsets(conn, 0)[0] == offsets(conn, 0)[1], 10, "the commit marker")
    coordinator.close()
    conn.close()
