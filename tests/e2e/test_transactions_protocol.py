"""The transaction coordinator's APIs on the wire, every version kfast
advertises: FindCoordinator (TRANSACTION key type, batched v4+),
InitProducerId with a transactional id (epoch bumps, KIP-360 fencing,
PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below v4), AddPartitionsToTxn
(v0-3 from producers with per-partition errors, v4+ batched with
verify_only), AddOffsetsToTxn, EndTxn (v5: the bumped epoch in the answer),
WriteTxnMarkers (the partition's producer-state checks),
DescribeTransactions and ListTransactions; and that a transaction ends in
markers: the last stable offset reaches the log end."""

from __future__ import annotations

import pytest
from e2e_support import wait_until
from transaction_support import (  # noqa: F401
    KEY,
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
from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e

FENCED = E.ProducerFencedException.code
INVALID_EPOCH = E.InvalidProducerEpochException.code


def versions(name: str) -> range:
    api = api_keys.BY_NAME[name]
    return range(api.min_version, api.max_stable_version + 1)


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    broker = KfastBroker(
        {"num.partitions": 1}, data_dir=str(tmp_path_factory.mktemp("kfast-txn-protocol"))
    )
    broker.start()
    connection = BlockingConnection(broker.host, broker.port)
    response = send(
        connection,
        "CreateTopics",
        4,
        topics=[{"name": TOPIC, "num_partitions": 3, "replication_factor": 1}],
        timeout_ms=10000,
    )
    assert response.topics[0].error_code == 0
    connection.node_id = broker.broker.node_id
    connection.broker_port = broker.port
    yield connection
    connection.close()
    broker.close()


# -- FindCoordinator -----------------------------------------------------------------------
@pytest.mark.parametrize("version", [v for v in versions("FindCoordinator") if v >= 1])
def test_find_coordinator_for_a_transactional_id(conn, version):
    ids = [fresh_id(), fresh_id()]
    if version < 4:
        response = send(conn, "FindCoordinator", version, key=ids[0], key_type=1)
        assert (response.error_code, response.node_id) == (0, conn.node_id)
        assert response.port == conn.broker_port
        return
    response = send(conn, "FindCoordinator", version, key_type=1, coordinator_keys=ids)
    assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
        (i, 0, conn.node_id) for i in ids
    ]
    topics = send(
        conn,
        "Metadata",
        12,
        topics=[{"name": "__transaction_state"}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert len(topics.topics[0].partitions) == 50


# -- InitProducerId ------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions("InitProducerId"))
def test_init_producer_id_bumps_the_epoch_of_a_transactional_id(conn, version):
    transactional_id = fresh_id()
    first = init(conn, transactional_id, version)
    assert first.error_code == 0 and first.producer_id >= 0 and first.producer_epoch == 0
    again = init(conn, transactional_id, version)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)


@pytest.mark.parametrize("version", [v for v in versions("InitProducerId") if v >= 3])
def test_init_producer_id_with_a_stale_epoch_is_fenced(conn, version):
    transactional_id = fresh_id()
    first = init(conn, transactional_id, version)
    init(conn, transactional_id, version)  # another producer took epoch 1
    stale = init(
        conn,
        transactional_id,
        version,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
    )
    assert stale.error_code == (FENCED if version >= 4 else INVALID_EPOCH)


def test_init_producer_id_refuses_a_timeout_above_the_maximum(conn):
    response = send(
        conn,
        "InitProducerId",
        4,
        transactional_id=fresh_id(),
        transaction_timeout_ms=15 * 60 * 1000 + 1,
    )
    assert response.error_code == E.InvalidTxnTimeoutException.code


# -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
@pytest.mark.parametrize("version", [v for v in versions("AddPartitionsToTxn") if v < 4])
def test_add_partitions_v0_to_v3(conn, version):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(conn, version, transactional_id, pid, epoch, [0, 1]) == {
        (TOPIC, 0): 0,
        (TOPIC, 1): 0,
    }
    # One unknown partition fails the request; the others are not attempted.
    assert add_partitions(conn, version, transactional_id, pid, epoch, [2, 7]) == {
        (TOPIC, 2): E.OperationNotAttemptedException.code,
        (TOPIC, 7): E.UnknownTopicOrPartitionException.code,
    }
    # The coordinator's one error goes to every partition.
    assert add_partitions(
        conn, version, transactional_id, pid, epoch - 1 if epoch else 5, [0, 2]
    ) == dict.fromkeys([(TOPIC, 0), (TOPIC, 2)], FENCED if version >= 2 else INVALID_EPOCH)
    assert add_partitions(conn, version, transactional_id, pid + 1000, epoch, [0]) == {
        (TOPIC, 0): E.InvalidPidMappingException.code
    }
    assert end_txn(conn, 3, transactional_id, pid, epoch, False).error_code == 0


@pytest.mark.parametrize("version", [v for v in versions("AddPartitionsToTxn") if v >= 4])
def test_add_partitions_batched_from_brokers_and_verify_only(conn, version):
    ids = [fresh_id(), fresh_id()]
    producers = [init(conn, i) for i in ids]

    def transaction(i, partitions, verify_only):
        return {
            "transactional_id": ids[i],
            "producer_id": producers[i].producer_id,
            "producer_epoch": producers[i].producer_epoch,
            "verify_only": verify_only,
            "topics": [{"name": TOPIC, "partitions": partitions}],
        }

    def results(response):
        return {
            r.transactional_id: {
                (t.name, p.partition_index): p.partition_error_code
                for t in r.topic_results
                for p in t.results_by_partition
            }
            for r in response.results_by_transaction
        }

    added = send(
        conn,
        "AddPartitionsToTxn",
        version,
        transactions=[transaction(0, [0], False), transaction(1, [1, 2], False)],
    )
    assert added.error_code == 0
    assert results(added) == {ids[0]: {(TOPIC, 0): 0}, ids[1]: {(TOPIC, 1): 0, (TOPIC, 2): 0}}
    verified = send(
        conn,
        "AddPartitionsToTxn",
        version,
        transactions=[transaction(0, [0, 1], True), transaction(1, [2], True)],
    )
    assert results(verified) == {
        ids[0]: {(TOPIC, 0): 0, (TOPIC, 1): E.TransactionAbortableException.code},
        ids[1]: {(TOPIC, 2): 0},
    }
    for i, producer in enumerate(producers):
        assert (
            end_txn(
                conn, 3, ids[i], producer.producer_id, producer.producer_epoch, False
            ).error_code
            == 0
        )


@pytest.mark.parametrize("version", versions("AddOffsetsToTxn"))
def test_add_offsets_to_txn(conn, version):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    response = send(
        conn,
        "AddOffsetsToTxn",
        version,
        transactional_id=transactional_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        group_id="some-group",
    )
    assert response.error_code == 0
    stale = send(
        conn,
        "AddOffsetsToTxn",
        version,
        transactional_id=transactional_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch + 1,
        group_id="some-group",
    )
    assert stale.error_code == (FENCED if version >= 2 else INVALID_EPOCH)
    described = send(conn, "DescribeTransactions", 0, transactional_ids=[transactional_id])
    topics = {t.topic for t in described.transaction_states[0].topics}
    assert topics == {"__consumer_offsets"}
    assert (
        end_txn(
            conn, 3, transactional_id, producer.producer_id, producer.producer_epoch, False
        ).error_code
        == 0
    )


# -- EndTxn and the markers ------------------------------------------------------------------
@pytest.mark.parametrize("version", versions("EndTxn"))
@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_writes_the_markers_and_moves_the_last_stable_offset(conn, version, committed):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    pid, epoch = producer.producer_id, producer.producer_epoch
    partition = version % 3
    assert add_partitions(conn, 3, transactional_id, pid, epoch, [partition]) == {
        (TOPIC, partition): 0
    }
    assert produce_transactional(conn, transactional_id, pid, epoch, partition, [b"a", b"b"]) == 0
    stable, end = offsets(conn, partition)
    assert stable < end  # the open transaction holds the LSO back
    response = end_txn(conn, version, transactional_id, pid, epoch, committed)
    assert response.error_code == 0
    if version >= 5:
        # Transaction version 2: the end bumps the epoch, the client goes on with it.
        assert (response.producer_id, response.producer_epoch) == (pid, epoch + 1)
    # The marker moves the LSO past the transaction (and is one offset itself).
    wait_until(
        lambda: offsets(conn, partition)[0] == offsets(conn, partition)[1] == end + 1,
        10,
        "the marker to be written",
    )
    state = send(conn, "DescribeTransactions", 0, transactional_ids=[transactional_id])
    wait_until(
        lambda: (
            send(conn, "DescribeTransactions", 0, transactional_ids=[transactional_id])
            .transaction_states[0]
            .transaction_state
            == ("CompleteCommit" if committed else "CompleteAbort")
        ),
        10,
        "the completion",
    )
    assert state.transaction_states[0].error_code == 0


def test_end_txn_with_a_stale_epoch(conn):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    for version in versions("EndTxn"):
        response = end_txn(
            conn, version, transactional_id, producer.producer_id, producer.producer_epoch + 1, True
        )
        assert response.error_code == (FENCED if version >= 2 else INVALID_EPOCH)


# -- WriteTxnMarkers ---------------------------------------------------------------------
@pytest.mark.parametrize("version", versions("WriteTxnMarkers"))
def test_write_txn_markers_checks_the_producer_state(conn, version):
    transactional_id = fresh_id()
    init(conn, transactional_id)
    producer = init(conn, transactional_id)  # epoch 1: there is an older one
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add_partitions(conn, 3, transactional_id, pid, epoch, [0]) == {(TOPIC, 0): 0}
    assert produce_transactional(conn, transactional_id, pid, epoch, 0, [b"x"]) == 0

    def marker(producer_epoch, coordinator_epoch, topic=TOPIC, transaction_version=0):
        response = send(
            conn,
            "WriteTxnMarkers",
            version,
            markers=[
                {
                    "producer_id": pid,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "coordinator_epoch": coordinator_epoch,
                    "transaction_version": transaction_version,
                    "topics": [{"name": topic, "partition_indexes": [0]}],
                }
            ],
        )
        (result,) = response.markers
        assert result.producer_id == pid
        return result.topics[0].partitions[0].error_code

    assert marker(epoch, 1000) == 0
    assert marker(epoch, 999) == E.TransactionCoordinatorFencedException.code
    assert marker(epoch - 1, 1000) == INVALID_EPOCH
    assert marker(epoch, 1000, topic="no-such-topic") == E.UnknownTopicOrPartitionException.code
    if version >= 2:
        # Transaction version 2: the marker's epoch must be above the producer's.
        assert marker(epoch, 1000, transaction_version=2) == INVALID_EPOCH
        assert marker(epoch + 1, 1000, transaction_version=2) == 0
    # The coordinator's own markers for this transaction were fenced by the
    # higher coordinator epoch; abort moves the id on regardless.
    send(
        conn,
        "EndTxn",
        3,
        transactional_id=transactional_id,
        producer_id=pid,
        producer_epoch=epoch,
        committed=False,
    )


# -- DescribeTransactions / ListTransactions ---------------------------------------------
def test_describe_transactions(conn):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    assert add_partitions(
        conn, 3, transactional_id, producer.producer_id, producer.producer_epoch, [1, 2]
    ) == {(TOPIC, 1): 0, (TOPIC, 2): 0}
    response = send(
        conn, "DescribeTransactions", 0, transactional_ids=[transactional_id, "never-seen"]
    )
    ongoing, unknown = response.transaction_states
    assert (
        ongoing.error_code,
        ongoing.transaction_state,
        ongoing.producer_id,
        ongoing.producer_epoch,
        ongoing.transaction_timeout_ms,
    ) == (0, "Ongoing", producer.producer_id, producer.producer_epoch, 60000)
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [(TOPIC, [1, 2])]
    assert unknown.error_code == E.TransactionalIdNotFoundException.code
    assert (
        end_txn(
            conn, 3, transactional_id, producer.producer_id, producer.producer_epoch, False
        ).error_code
        == 0
    )


@pytest.mark.parametrize("version", versions("ListTransactions"))
def test_list_transactions(conn, version):
    transactional_id = fresh_id()
    producer = init(conn, transactional_id)
    assert add_partitions(
        conn, 3, transactional_id, producer.producer_id, producer.producer_epoch, [0]
    ) == {(TOPIC, 0): 0}
    fields = {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": []}
    if version >= 1:
        fields["duration_filter"] = -1
    if version >= 2:
        fields["transactional_id_pattern"] = transactional_id[:6] + ".*"
    response = send(conn, "ListTransactions", version, **fields)
    assert response.error_code == 0 and response.unknown_state_filters == ["Bogus"]
    listed = {
        (t.transactional_id, t.producer_id, t.transaction_state)
        for t in response.transaction_states
    }
    assert (transactional_id, producer.producer_id, "Ongoing") in listed
    if version >= 1:
        # Open for less than an hour: not listed with a one-hour duration filter.
        fields["duration_filter"] = 3600 * 1000
        response = send(conn, "ListTransactions", version, **fields)
        assert transactional_id not in {t.transactional_id for t in response.transaction_states}
    assert (
        end_txn(
            conn, 3, transactional_id, producer.producer_id, producer.producer_epoch, False
        ).error_code
        == 0
    )
