"""Transaction version 2 (KIP-890 part 2) on the wire, with kfast's own
client so each request is seen: a Produce v12 transactional write needs no
AddPartitionsToTxn (the partition leader has the coordinator add the
partition), a TxnOffsetCommit v5 needs no AddOffsetsToTxn, EndTxn v5 answers
the producer id and the epoch bumped for the next transaction, the markers
carry that epoch, and a write of the ended transaction that arrives after
its marker is fenced by it. Older versions keep the part 1 rules: a
partition nobody added is refused. (The Java client runs the same protocol
end to end in test_java_client.py.)"""

from __future__ import annotations

import pytest
from e2e_support import wait_until
from transaction_support import TOPIC, end_txn, fresh_id, init, offsets, produce_transactional, send

from kfast.client.connection import BlockingConnection
from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.coordinator.group.records import partition_for
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions' default


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    with KfastBroker(
        {"group.initial.rebalance.delay.ms": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-txn-v2")),
    ) as broker:
        connection = BlockingConnection(broker.host, broker.port)
        assert (
            send(
                connection,
                "CreateTopics",
                4,
                topics=[{"name": TOPIC, "num_partitions": 2, "replication_factor": 1}],
                timeout_ms=10000,
            )
            .topics[0]
            .error_code
            == 0
        )
        yield connection
        connection.close()


def describe(conn, transactional_id):
    state = send(
        conn, "DescribeTransactions", 0, transactional_ids=[transactional_id]
    ).transaction_states[0]
    assert state.error_code == 0
    return (
        state.transaction_state,
        state.producer_epoch,
        sorted((t.topic, p) for t in state.topics for p in t.partitions),
    )


def partition_producer(conn, partition, producer_id):
    """(epoch, current transaction start offset) the partition holds."""
    response = send(
        conn, "DescribeProducers", 0, topics=[{"name": TOPIC, "partition_indexes": [partition]}]
    )
    found = response.topics[0].partitions[0]
    assert found.error_code == 0
    [state] = [p for p in found.active_producers if p.producer_id == producer_id]
    return state.producer_epoch, state.current_txn_start_offset


def settled(conn, partition):
    wait_until(
        lambda: offsets(conn, partition)[0] == offsets(conn, partition)[1],
        10,
        f"the marker on partition {partition}",
    )


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(conn):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert produce_transactional(conn, transactional_id, pid, epoch, 0, [b"a"], version=12) == 0
    assert describe(conn, transactional_id) == ("Ongoing", epoch, [(TOPIC, 0)])
    # Produce v11 is a version 1 client's: verified only, and partition 1
    # was never added.
    assert (
        produce_transactional(conn, transactional_id, pid, epoch, 1, [b"x"], version=11)
        == E.TransactionAbortableException.code
    )

    committed = end_txn(conn, 5, transactional_id, pid, epoch, True)
    assert (committed.error_code, committed.producer_id, committed.producer_epoch) == (
        0,
        pid,
        epoch + 1,
    )
    settled(conn, 0)
    # The marker carries the bumped epoch; no transaction open on the partition.
    assert partition_producer(conn, 0, pid) == (epoch + 1, -1)
    assert describe(conn, transactional_id) == ("CompleteCommit", epoch + 1, [])

    # The next transaction runs at the answered epoch, its sequence from 0.
    assert produce_transactional(conn, transactional_id, pid, epoch + 1, 0, [b"b"], version=12) == 0
    start = partition_producer(conn, 0, pid)[1]
    assert start == offsets(conn, 0)[0] >= 0  # the LSO waits at its first offset
    aborted = end_txn(conn, 5, transactional_id, pid, epoch + 1, False)
    assert (aborted.error_code, aborted.producer_id, aborted.producer_epoch) == (0, pid, epoch + 2)
    settled(conn, 0)
    assert partition_producer(conn, 0, pid) == (epoch + 2, -1)


def test_a_write_of_an_ended_transaction_is_fenced_by_its_marker(conn):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert produce_transactional(conn, transactional_id, pid, epoch, 1, [b"in"], version=12) == 0
    assert end_txn(conn, 5, transactional_id, pid, epoch, False).error_code == 0
    settled(conn, 1)
    end = offsets(conn, 1)[1]
    # The write the network held back: the old epoch, the next sequence.
    late = produce_transactional(
        conn, transactional_id, pid, epoch, 1, [b"late"], sequence=1, version=12
    )
    assert late == E.InvalidProducerEpochException.code
    assert offsets(conn, 1) == (end, end)  # nothing written, nothing hanging
    assert describe(conn, transactional_id) == ("CompleteAbort", epoch + 1, [])


def txn_offset_commit(conn, version, transactional_id, group, producer_id, epoch, offset):
    response = send(
        conn,
        "TxnOffsetCommit",
        version,
        transactional_id=transactional_id,
        group_id=group,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    return response.topics[0].partitions[0].error_code


def committed_offset(conn, group):
    response = send(
        conn,
        "OffsetFetch",
        7,
        group_id=group,
        require_stable=True,
        topics=[{"name": TOPIC, "partition_indexes": [0]}],
    )
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.error_code


def test_txn_offset_commit_v5_adds_the_offsets_partition(conn):
    group = f"g-{fresh_id()}"
    assert send(conn, "FindCoordinator", 3, key=group, key_type=0).error_code == 0
    offsets_partition = (GROUP_METADATA_TOPIC_NAME, partition_for(group, OFFSETS_PARTITIONS))
    transactional_id = fresh_id()
    producer = init(conn, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert txn_offset_commit(conn, 5, transactional_id, group, pid, epoch, 7) == 0
    assert describe(conn, transactional_id) == ("Ongoing", epoch, [offsets_partition])
    assert committed_offset(conn, group) == (-1, E.UnstableOffsetCommitException.code)
    assert end_txn(conn, 5, transactional_id, pid, epoch, True).error_code == 0
    wait_until(lambda: committed_offset(conn, group) == (7, 0), 10, "the committed offset")


@pytest.mark.parametrize(
    "version, code",
    [(4, E.TransactionAbortableException.code), (3, E.InvalidTxnStateException.code)],
)
def test_txn_offset_commit_below_v5_needs_add_offsets_to_txn(conn, version, code):
    group = f"g-{fresh_id()}"
    assert send(conn, "FindCoordinator", 3, key=group, key_type=0).error_code == 0
    transactional_id = fresh_id()
    producer = init(conn, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert txn_offset_commit(conn, version, transactional_id, group, pid, epoch, 7) == code
    assert describe(conn, transactional_id) == ("Empty", epoch, [])
    # After AddOffsetsToTxn the same commit goes through.
    assert (
        send(
            conn,
            "AddOffsetsToTxn",
            3,
            transactional_id=transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group,
        ).error_code
        == 0
    )
    assert txn_offset_commit(conn, version, transactional_id, group, pid, epoch, 7) == 0


@pytest.mark.parametrize("end_version", [3, 5])
def test_on_one_broker_the_transaction_is_complete_when_end_txn_answers(conn, end_version):
    """The markers of partitions the coordinator's own broker leads are
    written in the step that decides the transaction, so the producer's
    next AddPartitionsToTxn is not answered CONCURRENT_TRANSACTIONS (which
    costs librdkafka a retry backoff: the slow tail of flush + commit)."""
    transactional_id = fresh_id()
    producer = init(conn, transactional_id, version=5)
    pid, epoch = producer.producer_id, producer.producer_epoch
    for round_ in range(3):
        assert (
            send(
                conn,
                "AddPartitionsToTxn",
                3,
                v3_and_below_transactional_id=transactional_id,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
            )
            .results_by_topic_v3_and_below[0]
            .results_by_partition[0]
            .partition_error_code
            == 0
        ), round_
        assert (
            produce_transactional(
                conn,
                transactional_id,
                pid,
                epoch,
                0,
                [b"r"],
                sequence=0 if end_version == 5 else round_,
            )
            == 0
        )
        answer = send(
            conn,
            "EndTxn",
            end_version,
            transactional_id=transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        )
        assert answer.error_code == 0
        epoch = answer.producer_epoch if end_version == 5 else epoch
        assert describe(conn, transactional_id)[0] == "CompleteCommit"
