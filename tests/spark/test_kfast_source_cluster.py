"""The ``kfast`` source and sink over a three-broker cluster through a leader
change (issue 17): a kill -9 of a partition's leader between planning a
batch read and running it, a read planned and a write sent while the
cluster's metadata still names the dead broker as leader, and a streaming
query that reads across the kill. Every acknowledged record arrives exactly
once, in order per partition.

Layout: one controller (node 1) and three brokers (nodes 2-4); topics with
three replicas and ``min.insync.replicas=2``, written by confluent-kafka
with acks=all. The brokers keep Kafka's default session timeout (9 s): for
that long after a kill -9 the controller still lists the dead broker as the
leader, so the reader and the writer must follow leadership in time (refresh
metadata, retry with backoff, bounded in time), not count a few quick
retries.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 3
BROKERS = (2, 3, 4)
# Kafka's defaults, said out loud: the failover takes a session timeout.
SESSIONS = {"broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000}


@pytest.fixture
def cluster(tmp_path):
    with KfastCluster(
        controllers=1, brokers=3, overrides=SESSIONS, base_dir=str(tmp_path / "cluster")
    ) as cluster:
        yield cluster


def create_topic(cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
        topic
    ].result(30)
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state(topic)) == PARTITIONS
            and all(
                len(p.isr) == 3 and p.leader >= 0 for p in cluster.partition_state(topic).values()
            )
        ),
        30,
        f"{topic} with three in-sync replicas",
    )


def produce(cluster, topic: str, values: list[str]) -> dict[int, list[tuple[int, str]]]:
    """acks=all, value i to partition i % PARTITIONS; {partition: [(offset,
    value)]} of the acknowledgements, in offset order."""
    acked: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    failures: list[str] = []

    def on_delivery(error, message):
        if error:
            failures.append(str(error))
        else:
            acked[message.partition()].append((message.offset(), message.value().decode()))

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert failures == []
    return {p: sorted(records) for p, records in acked.items()}


def by_partition(rows) -> dict[int, list[tuple[int, str]]]:
    """Rows of (partition, offset, value) -> {partition: [(offset, value)]} in
    the order the rows came."""
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    for row in rows:
        out[row["partition"]].append((row["offset"], bytes(row["value"]).decode()))
    return out


def merged(*acks) -> dict[int, list[tuple[int, str]]]:
    return {p: sorted(sum((a[p] for a in acks), [])) for p in range(PARTITIONS)}


def read(spark, cluster, topic: str, **options):
    reader = (
        spark.read.format("kfast")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select("partition", "offset", "value")


def kill_leader(cluster, topic: str, partition: int) -> int:
    """kill -9 the broker leading ``topic``-``partition``; its id. The
    controller still names it leader until its session times out."""
    victim = cluster.partition_state(topic)[partition].leader
    assert victim in BROKERS
    cluster.kill(victim)
    return victim


def wait_for_new_leaders(cluster, topic: str, victim: int) -> None:
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state(topic)) == PARTITIONS
            and all(p.leader not in (victim, -1) for p in cluster.partition_state(topic).values())
        ),
        30,
        f"every leader of {topic} away from broker {victim}",
    )


# ---- batch ----------------------------------------------------------------------------


def test_batch_read_planned_before_a_kill_9_of_a_leader_returns_every_acknowledged_record(
    spark, cluster
):
    """The offset ranges are fixed (``df.rdd`` plans the scan: Metadata and
    ListOffsets against the old leaders), then the leader of partition 0
    dies, then the tasks run: each finds the partition's new leader and
    returns exactly the acknowledged records, in offset order."""
    topic = "planned"
    create_topic(cluster, topic)
    acked = produce(cluster, topic, [f"v{i}" for i in range(600)])
    # A client that retries quickly (backoff at most 200 ms) must still wait
    # the failover out: its retries are bounded by time, not by a count.
    planned = read(spark, cluster, topic, **{"kafka.retry.backoff.max.ms": "200"}).rdd
    # (partitions() ran just now: the ranges are fixed before the kill.)
    victim = kill_leader(cluster, topic, 0)
    rows = planned.collect()
    assert by_partition(rows) == acked
    wait_for_new_leaders(cluster, topic, victim)


def test_batch_read_planned_while_the_metadata_names_a_dead_leader(spark, cluster):
    """Right after a kill -9 of a leader (Metadata still lists it, for a
    session timeout) a batch read is planned and run: ListOffsets and Fetch
    wait for the new leader instead of failing, and the new leader does not
    answer before its high watermark covers what the old one acknowledged.
    The read returns exactly the acknowledged records, in order."""
    topic = "stale"
    create_topic(cluster, topic)
    acked = produce(cluster, topic, [f"v{i}" for i in range(300)])
    victim = kill_leader(cluster, topic, 1)
    assert by_partition(read(spark, cluster, topic).collect()) == acked
    wait_for_new_leaders(cluster, topic, victim)


@pytest.mark.parametrize("acks", ["all", "1"])
def test_batch_write_sent_while_the_metadata_names_a_dead_leader(spark, cluster, acks):
    """Right after a kill -9 of a leader, a batch write waits for the new
    leader instead of failing the tasks; a read afterwards returns the
    records acknowledged before the kill and every written row, each once,
    each task's rows in order.

    acks=all (idempotent): every write waits until the controller takes the
    dead broker out of the ISRs, when it also elects the new leader.
    acks=1: the live leaders answer at once, and the dead leader's
    partition is retried until the new leader is known (bounded by
    delivery.timeout.ms, not by a few quick retries)."""
    topic = "written"
    create_topic(cluster, topic)
    acked = produce(cluster, topic, [f"v{i}" for i in range(300)])
    victim = kill_leader(cluster, topic, 0)
    # Two tasks (ids [0, 150) and [150, 300)) write at once: each task's
    # records keep their order within a partition, the two interleave.
    written = spark.range(0, 300, numPartitions=2).selectExpr(
        "concat('w', id) AS value", f"CAST(id % {PARTITIONS} AS INT) AS partition"
    )
    (
        written.write.format("kfast")
        .mode("append")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", topic)
        .option("kafka.acks", acks)
        .option("kafka.enable.idempotence", str(acks == "all"))
        .save()
    )
    wait_for_new_leaders(cluster, topic, victim)
    after = by_partition(read(spark, cluster, topic).collect())
    for p in range(PARTITIONS):
        offsets = [offset for offset, _ in after[p]]
        assert offsets == list(range(len(offsets))), f"partition {p} not dense and in order"
        assert after[p][: len(acked[p])] == acked[p]
        ids = [int(value[1:]) for _, value in after[p][len(acked[p]) :]]
        assert sorted(ids) == list(range(p, 300, PARTITIONS)), f"partition {p}"
        for task in (range(0, 150), range(150, 300)):
            mine = [i for i in ids if i in task]
            assert mine == sorted(mine), f"a task's records out of order in partition {p}"


# ---- streaming ------------------------------------------------------------------------


def test_stream_reads_every_record_exactly_once_across_a_kill_9_of_a_leader(
    spark, cluster, tmp_path
):
    """A processing-time query into a memory sink: records written before the
    kill arrive; the leader of partition 2 dies (triggers keep running while
    Metadata names the dead broker); records written after the kill, through
    the new leaders, arrive too. The sink holds each acknowledged record
    exactly once."""
    topic = "streamed"
    create_topic(cluster, topic)
    before = produce(cluster, topic, [f"a{i}" for i in range(300)])
    query = (
        spark.readStream.format("kfast")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "offset", "value")
        .writeStream.format("memory")
        .queryName("streamed_rows")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def sunk(count: int):
        def arrived() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            assert query.isActive
            return spark.table("streamed_rows").count() >= count

        return arrived

    try:
        cluster.wait_until(sunk(300), 60, "the records written before the kill in the sink")
        victim = kill_leader(cluster, topic, 2)
        after = produce(cluster, topic, [f"b{i}" for i in range(300)])
        wait_for_new_leaders(cluster, topic, victim)
        cluster.wait_until(sunk(600), 60, "the records written after the kill in the sink")
        assert query.exception() is None
    finally:
        query.stop()
    rows = sorted(
        spark.table("streamed_rows").collect(), key=lambda r: (r["partition"], r["offset"])
    )
    assert by_partition(rows) == merged(before, after)
