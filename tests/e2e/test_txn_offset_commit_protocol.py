"""TxnOffsetCommit on the wire, every version (0-5), and OffsetFetch's
require_stable (v7+): transactional offsets stay pending, invisible to
OffsetFetch and UNSTABLE_OFFSET_COMMIT when stable offsets are required,
until the producer's transaction marker reaches the offsets partition
(the end to end flow with real transactional clients is in
test_transactions*.py)."""

from __future__ import annotations

import uuid

import pytest

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e

KEY = {
    name: api_keys.BY_NAME[name].key
    for name in (
        "TxnOffsetCommit",
        "OffsetFetch",
        "OffsetCommit",
        "FindCoordinator",
        "CreateTopics",
        "InitProducerId",
        "JoinGroup",
    )
}


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    # The offsets here belong to made-up producers with no transaction, so
    # the transaction coordinator's check before the write (KIP-890) is off;
    # it is tested with real transactions in test_transactions_v2_protocol.py.
    broker = KfastBroker(
        {"group.initial.rebalance.delay.ms": 0, "transaction.partition.verification.enable": False},
        data_dir=str(tmp_path_factory.mktemp("kfast-txn-offsets")),
    )
    broker.start()
    connection = BlockingConnection(broker.host, broker.port)
    response = connection.send(
        {
            "topics": [{"name": "txn-t", "num_partitions": 2, "replication_factor": 1}],
            "timeout_ms": 10000,
        },
        api_key=KEY["CreateTopics"],
        version=4,
    )
    assert response.topics[0].error_code == 0
    yield connection
    connection.close()
    broker.close()


def send(conn, api, version, **body):
    return conn.send(body, api_key=KEY[api], version=version)


def group_id(conn) -> str:
    group = f"g-{uuid.uuid4().hex[:8]}"
    # FindCoordinator creates __consumer_offsets; the answer is immediate
    # on one node.
    assert send(conn, "FindCoordinator", 3, key=group, key_type=0).error_code == 0
    return group


def txn_commit(
    conn, version, group, partitions, producer_id=4242, epoch=0, generation=-1, member=""
):
    return send(
        conn,
        "TxnOffsetCommit",
        version,
        transactional_id="tx",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        topics=[
            {
                "name": "txn-t",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                    for p, o in partitions.items()
                ],
            }
        ],
    )


def fetch(conn, version, group, stable):
    if version >= 8:
        response = send(
            conn,
            "OffsetFetch",
            version,
            require_stable=stable,
            groups=[
                {
                    "group_id": group,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": "txn-t", "partition_indexes": [0, 1]}],
                }
            ],
        )
        partitions = response.groups[0].topics[0].partitions
    else:
        response = send(
            conn,
            "OffsetFetch",
            version,
            group_id=group,
            require_stable=stable,
            topics=[{"name": "txn-t", "partition_indexes": [0, 1]}],
        )
        partitions = response.topics[0].partitions
    return {p.partition_index: (p.committed_offset, p.error_code) for p in partitions}


@pytest.mark.parametrize("version", range(6))
def test_txn_offset_commit_every_version_stays_pending(conn, version):
    group = group_id(conn)
    response = txn_commit(conn, version, group, {0: 11, 1: 12}, producer_id=5000 + version)
    assert [p.error_code for p in response.topics[0].partitions] == [0, 0]
    unstable = E.UnstableOffsetCommitException.code
    for fetch_version in (7, 8):
        assert fetch(conn, fetch_version, group, stable=True) == {
            0: (-1, unstable),
            1: (-1, unstable),
        }
        assert fetch(conn, fetch_version, group, stable=False) == {0: (-1, 0), 1: (-1, 0)}


def test_unknown_partitions_and_generations(conn):
    group = group_id(conn)
    response = send(
        conn,
        "TxnOffsetCommit",
        3,
        transactional_id="tx",
        group_id=group,
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": "nope",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    assert response.topics[0].partitions[0].error_code == E.UnknownTopicOrPartitionException.code
    # A generation for a group that does not exist.
    response = txn_commit(conn, 3, group, {0: 1}, generation=3, member="m")
    assert response.topics[0].partitions[0].error_code == E.IllegalGenerationException.code
