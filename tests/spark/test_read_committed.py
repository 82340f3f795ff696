"""``kafka.isolation.level=read_committed`` in the ``kfast`` source, against
a kfast broker fed by confluent-kafka's transactional producer: aborted
transactions' records are left out, an open transaction holds the read at
the last stable offset, and the default (read_uncommitted) reads them all.
Control batches (the markers) are never rows."""

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing import KfastBroker

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "payments"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = KfastBroker({}, data_dir=str(tmp_path_factory.mktemp("kfast-rc"))).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        future.result(30)
    yield broker
    broker.close()


def transactional(broker, transactional_id):
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id}
    )
    producer.init_transactions(30)
    return producer


def send(producer, values):
    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=int(value[-1]) % 2)


def values(spark, broker, **options):
    reader = (
        spark.read.format("kfast")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", TOPIC)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load().select("value", "partition", "offset").collect()
    return sorted(bytes(r.value).decode() for r in rows), rows


def test_read_committed_leaves_out_aborted_and_open_transactions(spark, broker):
    committer = transactional(broker, "committer")
    aborter = transactional(broker, "aborter")
    # Interleaved on both partitions: committed, aborted, committed again.
    committer.begin_transaction()
    aborter.begin_transaction()
    send(committer, [f"c{i}" for i in range(6)])
    send(aborter, [f"a{i}" for i in range(6)])
    committer.flush(30)
    aborter.flush(30)
    aborter.abort_transaction(30)
    committer.commit_transaction(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    send(plain, [f"p{i}" for i in range(4)])
    plain.flush(30)

    committed = sorted([f"c{i}" for i in range(6)] + [f"p{i}" for i in range(4)])
    got, rows = values(spark, broker, **{"kafka.isolation.level": "read_committed"})
    assert got == committed
    # The aborted records' offsets are gaps, as with Spark's own source.
    by_partition = {}
    for row in rows:
        by_partition.setdefault(row.partition, []).append(row.offset)
    assert any(
        sorted(offsets) != list(range(min(offsets), min(offsets) + len(offsets)))
        for offsets in by_partition.values()
    )
    everything, _ = values(spark, broker)
    assert everything == sorted(committed + [f"a{i}" for i in range(6)])

    # An open transaction: read_committed stops at its first offset (the last
    # stable offset), hiding also what others wrote after it, until it ends.
    opener = transactional(broker, "opener")
    opener.begin_transaction()
    send(opener, ["o0", "o1"])
    opener.flush(30)
    send(plain, ["q0", "q1"])
    plain.flush(30)
    assert values(spark, broker, **{"kafka.isolation.level": "read_committed"})[0] == committed
    assert {"o0", "o1", "q0", "q1"} <= set(values(spark, broker)[0])
    opener.commit_transaction(30)
    assert values(spark, broker, **{"kafka.isolation.level": "read_committed"})[0] == sorted(
        committed + ["o0", "o1", "q0", "q1"]
    )
