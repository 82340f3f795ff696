"""A log dir on a full disk goes offline, as Kafka's LogDirFailureChannel.

Each test puts a log dir on its own small tmpfs (root mounts it; skipped with
the reason where mounting is impossible), fills it with a filler file and
writes with a real client until the disk is full:

- the only log dir full: the broker logs one line naming the failed dirs
  and exits 1 (Kafka halts), every idempotent acks=all produce is either
  acknowledged or fails within message.timeout.ms, no traceback is logged,
  and after the filler is removed a restart has every acknowledged record;
- two log dirs, one full: its partition answers KAFKA_STORAGE_ERROR and
  DescribeLogDirs reports the dir with KAFKA_STORAGE_ERROR, while the other
  dir's partition keeps taking and serving records; SIGTERM still exits 0;
- a broker of a cluster with two log dirs, one full: the controller moves
  that dir's leaderships (KIP-858) and the broker serves its other dir.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from disk_support import consume_values, fill, mounted_tmpfs
from e2e_support import ServeProcess, free_port, wait_until
from kafka.admin import KafkaAdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ALL_DIRS_FAILED = "Shutdown broker because all log dirs in"
VALUE_PAD = b"x" * 1000
# These tests fill the disk to ENOSPC, Kafka's failure: kfast's free-space
# threshold (test_free_space.py) would refuse the writes before that.
NO_THRESHOLD = "kfast.log.dirs.min.free.bytes=0"


@pytest.fixture
def small_disk(tmp_path):
    """A 8 MiB tmpfs at a fresh mount point; unmounted afterwards."""
    with mounted_tmpfs(tmp_path / "disk", "8m") as mount_point:
        yield mount_point


def _create_topic(broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _consume_values(broker, topic: str, partitions: list[int], expected: int) -> set[bytes]:
    return consume_values(broker.bootstrap_servers, topic, partitions, expected)


def _log_dirs(broker) -> dict[str, tuple[int, dict]]:
    """DescribeLogDirs through kafka-python: {dir: (error code, {(topic, p): size})}."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    (answer,) = answers
    found = {}
    for result in answer["log_dirs"]:
        sizes = {
            (t["name"], p["partition_index"]): p["partition_size"]
            for t in result["topics"]
            for p in t["partitions"]
        }
        found[result["log_dir"]] = (result["error_code"], sizes)
    return found


def test_the_only_log_dir_full_stops_the_broker_and_a_restart_has_every_acknowledged_record(
    small_disk,
):
    data = str(small_disk / "data")
    broker = ServeProcess(data, free_port(), [NO_THRESHOLD])
    try:
        broker.start()
        _create_topic(broker, "full", 2)
        filler = fill(small_disk, leave_bytes=2 << 20)
        acknowledged: list[bytes] = []
        failed: list[KafkaError] = []

        def on_delivery(err, msg):
            (failed.append(err) if err is not None else acknowledged.append(msg.value()))

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 5000,
            }
        )
        sent = 0
        deadline = time.monotonic() + 60
        while broker.proc.poll() is None and time.monotonic() < deadline:
            try:
                producer.produce("full", b"%08d" % sent + VALUE_PAD, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        # Every produce is answered within message.timeout.ms: acknowledged,
        # or failed once the broker is gone.
        assert producer.flush(30) == 0
        assert len(acknowledged) + len(failed) == sent
        assert acknowledged and failed
        assert broker.proc.wait(30) == 1
        output = "".join(broker.output)
        assert output.count(ALL_DIRS_FAILED) == 1, output[-3000:]
        assert "No space left on device" in output
        assert "Traceback" not in output, output[-5000:]

        os.unlink(filler)
        broker.start()
        values = _consume_values(broker, "full", [0, 1], len(acknowledged))
        assert set(acknowledged) <= values, f"{len(set(acknowledged) - values)} records lost"
        assert broker.terminate() == 0
    finally:
        broker.kill()


def test_a_full_log_dir_goes_offline_while_the_other_keeps_serving(tmp_path, small_disk):
    healthy = str(tmp_path / "healthy")
    full = str(small_disk / "data")
    # The healthy dir first: it holds the metadata log (metadata.log.dir
    # defaults to the first log dir) and the first partition.
    broker = ServeProcess(healthy, free_port(), [f"log.dirs={healthy},{full}", NO_THRESHOLD])
    try:
        broker.start()
        _create_topic(broker, "jbod", 2)
        placement = {d: sizes for d, (_, sizes) in _log_dirs(broker).items()}
        assert set(placement[healthy]) == {("jbod", 0)}
        assert set(placement[full]) == {("jbod", 1)}
        filler = fill(small_disk, leave_bytes=1 << 20)

        # A producer without retries sees the partition's own error.
        errors: dict[int, list] = {0: [], 1: []}
        acknowledged: dict[int, list] = {0: [], 1: []}

        def on_delivery(err, msg):
            target = errors if err is not None else acknowledged
            target[msg.partition()].append(err.code() if err is not None else msg.value())

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "acks": "all",
                "retries": 0,
                "linger.ms": 5,
                "message.timeout.ms": 10000,
            }
        )
        sent = 0
        deadline = time.monotonic() + 60
        while not errors[1] and time.monotonic() < deadline:
            try:
                producer.produce(
                    "jbod", b"%08d" % sent + VALUE_PAD, partition=1, on_delivery=on_delivery
                )
                sent += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(30)
        assert errors[1] and set(errors[1]) == {KafkaError.KAFKA_STORAGE_ERROR}, errors[1][:5]
        before_failure = list(acknowledged[1])
        assert before_failure

        # The full dir is offline (and says so); the healthy one serves.
        dirs = _log_dirs(broker)
        assert dirs[full][0] == KafkaError.KAFKA_STORAGE_ERROR
        assert dirs[healthy][0] == 0 and ("jbod", 0) in dirs[healthy][1]
        for i in range(200):
            producer.produce("jbod", b"healthy-%d" % i, partition=0, on_delivery=on_delivery)
        producer.produce("jbod", b"after", partition=1, on_delivery=on_delivery)
        assert producer.flush(30) == 0
        assert len(acknowledged[0]) == 200
        assert errors[1][-1] == KafkaError.KAFKA_STORAGE_ERROR
        assert _consume_values(broker, "jbod", [0], 200) == set(acknowledged[0])
        assert broker.proc.poll() is None
        output = "".join(broker.output)
        assert "Traceback" not in output, output[-5000:]
        assert ALL_DIRS_FAILED not in output
        # A clean stop with one dir offline (nothing is written to it).
        assert broker.terminate() == 0

        # Space freed: the dir comes back at the next start with its records.
        os.unlink(filler)
        broker.start()
        wait_until(lambda: _log_dirs(broker)[full][0] == 0, timeout=30)
        values = _consume_values(broker, "jbod", [1], len(before_failure))
        assert set(before_failure) <= values
        assert broker.terminate() == 0
    finally:
        broker.kill()


@pytest.mark.slow
def test_a_broker_of_a_cluster_whose_log_dir_fills_keeps_serving_its_other_dir(
    tmp_path, small_disk
):
    """KIP-858. Three brokers, RF 3; broker 4 has two log dirs, the second
    the small disk, and leads partition 0 (first dir) and 1 (small disk).
    When the small disk fills, broker 4 tells the controller (heartbeat
    offline_log_dirs): partition 1's leadership moves and 4 leaves the ISRs
    of the small disk's partitions, while 4 stays up and keeps leading
    partition 0. Every record an idempotent acks=all producer had
    acknowledged is there once, at its offset."""
    from confluent_kafka.admin import NewTopic as Topic
    from replication_support import read_all

    from kfast.testing.cluster import KfastCluster
    from kfast.testing.load import AckedLoad, audit

    fast_sessions = {
        "broker.session.timeout.ms": 2000,
        "broker.heartbeat.interval.ms": 200,
        "kfast.log.dirs.min.free.bytes": 0,
    }
    healthy, failing = tmp_path / "node4-logs", small_disk / "data"
    with KfastCluster(
        controllers=1,
        brokers=3,
        overrides=fast_sessions,
        base_dir=str(tmp_path / "cluster"),
        node_overrides={
            4: {
                "log.dirs": f"{healthy},{failing}",
                "metadata.log.dir": str(tmp_path / "node4-meta"),
            }
        },
    ) as cluster:
        cluster.wait_for_brokers({2, 3, 4})
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        assignment = [[4, 2, 3], [4, 3, 2], [2, 3, 4], [3, 2, 4]]
        admin.create_topics(
            [
                Topic(
                    "filling",
                    num_partitions=4,
                    replica_assignment=assignment,
                    config={"min.insync.replicas": "2"},
                )
            ]
        )["filling"].result(30)
        cluster.wait_until(
            lambda: all(len(p.isr) == 3 for p in cluster.partition_state("filling").values()),
            30,
            "three in-sync replicas",
        )

        # New logs go to the dir with fewer partitions: 0 and 2 to the
        # first, 1 and 3 to the small disk.
        def placed():
            return {n for n in os.listdir(healthy) if n.startswith("filling")} | {
                n for n in os.listdir(failing) if n.startswith("filling")
            }

        cluster.wait_until(lambda: len(placed()) == 4, 30, "broker 4's logs")
        assert {n for n in os.listdir(failing) if n.startswith("filling")} == {
            "filling-1",
            "filling-3",
        }
        fill(small_disk, leave_bytes=256 << 10)
        load = AckedLoad(cluster.bootstrap_servers, "filling", 4).start()
        try:
            bulk = Producer(
                {"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": 5}
            )
            bulk_acked = []
            for i in range(150):
                bulk.produce(
                    "filling",
                    b"bulk-%d-" % i + b"b" * 8192,
                    partition=(1, 3)[i % 2],
                    on_delivery=lambda err, msg: err or bulk_acked.append(msg),
                )
            bulk.flush(30)

            def moved():
                state = cluster.partition_state("filling", via=2)
                return state[1].leader in (2, 3) and 4 not in state[1].isr and 4 not in state[3].isr

            cluster.wait_until(moved, 60, "partition 1 to move off broker 4's failed dir")
            before = load.total
            cluster.wait_until(lambda: load.total > before + 500, 30, "acks after the move")
            state = cluster.partition_state("filling", via=2)
            assert state[0].leader == 4 and 4 in state[0].isr
            assert 4 in state[2].isr
        finally:
            load.stop()
        assert cluster.nodes[4].alive
        log = cluster.log_tail(4, 400)
        assert f"the controller knows log dir {failing} " in log, log
        assert "Halting" not in log and "Shutting down because" not in log, log
        assert ALL_DIRS_FAILED not in log and "Traceback" not in log, log
        assert load.unflushed == 0
        read = read_all(cluster.bootstrap_servers, "filling", 4, load.total + len(bulk_acked))
        result = audit(load.acked, read)
        assert result == (0, 0, 0), result


def test_a_topic_created_on_a_full_disk_stops_the_broker_with_one_line(small_disk):
    """No room even for the new partitions' files: the controller takes the
    topic (as Kafka's does), the broker cannot create its logs, the only dir
    goes offline and the broker stops, with no traceback (also none from
    closing the metadata log on the full disk)."""
    broker = ServeProcess(str(small_disk / "data"), free_port(), [NO_THRESHOLD])
    try:
        broker.start()
        fill(small_disk, leave_bytes=0)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        try:
            admin.create_topics([NewTopic("late", 3, 1)])["late"].result(15)
        except Exception:
            pass  # answered or cut off by the stop: either is Kafka's behaviour
        assert broker.proc.wait(30) == 1
        output = "".join(broker.output)
        assert output.count(ALL_DIRS_FAILED) == 1, output[-3000:]
        assert "Traceback" not in output, output[-5000:]
    finally:
        broker.kill()
