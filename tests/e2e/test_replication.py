"""Replication between real ``kfast serve`` processes, seen by real clients
(issue 17): followers fetch from leaders, the high watermark moves on the
in-sync replicas, acks=all waits for min.insync.replicas, leaders move to
in-sync replicas when a broker dies, a deposed leader truncates what it
never replicated, and a frozen follower leaves the ISR and rejoins it.

Two layouts: three combined nodes (the controller quorum dies with the
brokers), and one controller with three brokers (node 1 controls, 2-4
broker), where two brokers can be down while the controller decides.
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.errors import NotEnoughReplicasError
from replication_support import create, kafka_python_producer, read_all

from kfast.testing.load import AckedLoad, Audit, audit

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

LONG_POLL_MS = 8000
FAST_SESSIONS = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200}
COMBINED = pytest.mark.kfast_cluster_config(combined=True, overrides=FAST_SESSIONS)
ONE_CONTROLLER = pytest.mark.kfast_cluster_config(controllers=1, brokers=3, overrides=FAST_SESSIONS)


@COMBINED
def test_acks_all_records_reach_every_replica_byte_for_byte(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "orders", partitions=2)
    producer = kafka_python_producer(cluster, "all")
    for i in range(300):
        producer.send("orders", value=f"kp{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.close()
    confluent = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    for i in range(300):
        confluent.produce("orders", value=f"ck{i}", partition=i % 2)
    assert confluent.flush(30) == 0
    got = read_all(cluster.bootstrap_servers, "orders", 2, 600)
    assert sorted(v for p in got.values() for _, v in p) == sorted(
        [f"kp{i}" for i in range(300)] + [f"ck{i}" for i in range(300)]
    )
    for partition in (0, 1):
        data = cluster.wait_for_identical_replicas("orders", partition, (1, 2, 3), 15)
        assert len(data) > 0
        assert len(cluster.partition_state("orders")[partition].isr) == 3


@COMBINED
def test_kill_9_of_leaders_under_idempotent_acks_all_load_loses_nothing(kfast_cluster):
    """Three rounds: kill -9 the leader of a partition while an idempotent
    acks=all producer writes to all partitions, restart it. Every
    acknowledged record is read back exactly once at its acknowledged
    offset, and the three replicas end byte-identical."""
    cluster = kfast_cluster
    topic, partitions = "chaos", 3
    create(cluster, topic, partitions)
    load = AckedLoad(cluster.bootstrap_servers, topic, partitions, pause_s=0.01).start()
    rng = random.Random(17)
    try:
        for _ in range(3):
            time.sleep(2)
            state = cluster.partition_state(topic)
            victim = state[rng.randrange(partitions)].leader
            assert victim in cluster.nodes, state
            before = load.total
            cluster.kill(victim)
            # Leadership moves to an in-sync replica; writes go on.
            cluster.wait_until(
                lambda: all(
                    p.leader not in (victim, -1) for p in cluster.partition_state(topic).values()
                ),
                15,
                "leaders away from the killed broker",
            )
            cluster.wait_until(
                lambda: load.total > before + 100, 15, "acknowledgements after the failover"
            )
            cluster.restart(victim)
            for p in range(partitions):
                cluster.wait_for_isr(topic, p, {1, 2, 3}, 30)
    finally:
        load.stop(60)
    assert load.failures == [] and load.unflushed == 0
    read = read_all(cluster.bootstrap_servers, topic, partitions, load.total)
    assert audit(load.acked, read) == Audit(lost=0, duplicated=0, moved=0)
    for p in range(partitions):
        cluster.wait_for_identical_replicas(topic, p, (1, 2, 3), 30)


@ONE_CONTROLLER
def test_min_insync_replicas_with_two_brokers_down(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "guarded")
    leader = cluster.partition_state("guarded")[0].leader
    followers = [n for n in (2, 3, 4) if n != leader]
    for node in followers:
        cluster.kill(node)
    # The controller fences them after broker.session.timeout.ms and takes
    # them out of the ISR; the leader alone is below min.insync.replicas.
    cluster.wait_for_isr("guarded", 0, {leader}, 15)
    producer = kafka_python_producer(cluster, "all", retries=0)
    with pytest.raises(NotEnoughReplicasError):
        producer.send("guarded", b"refused").get(10)
    producer.close()
    producer = kafka_python_producer(cluster, 1)
    assert producer.send("guarded", b"acks=1 accepted").get(10).offset == 0
    producer.close()
    for node in followers:
        cluster.restart(node)
    cluster.wait_for_isr("guarded", 0, {2, 3, 4}, 30)
    producer = kafka_python_producer(cluster, "all", retries=0)
    assert producer.send("guarded", b"accepted again").get(10).offset == 1
    producer.close()
    assert [v for _, v in read_all(cluster.bootstrap_servers, "guarded", 1, 2)[0]] == [
        "acks=1 accepted",
        "accepted again",
    ]


@pytest.mark.kfast_cluster_config(
    controllers=1,
    brokers=3,
    overrides={
        # The followers' pause must not outlast their sessions (a fenced
        # follower would leave the ISR, and nobody in sync would remain).
        "broker.session.timeout.ms": 8000,
        "broker.heartbeat.interval.ms": 200,
        # Short parked follower fetches: see the pause below.
        "replica.fetch.wait.max.ms": 50,
    },
)
def test_a_deposed_leader_truncates_what_it_never_replicated(kfast_cluster):
    """The followers freeze, the leader takes acks=1 writes only it has and
    dies; a follower becomes leader in the next epoch and takes acks=all
    writes. The old leader returns as a follower, learns from the diverging
    epoch in its fetch response where its log left the new leader's, and
    truncates there: the replicas end identical, without the acks=1 writes
    (Kafka's documented loss for acks=1), with every acks=all write."""
    cluster = kfast_cluster
    create(cluster, "epochs")
    old = cluster.partition_state("epochs")[0]
    followers = [n for n in (2, 3, 4) if n != old.leader]
    producer = kafka_python_producer(cluster, "all")
    for i in range(50):
        producer.send("epochs", f"committed-{i}".encode())
    producer.flush(30)
    producer.close()
    cluster.wait_for_identical_replicas("epochs", 0, (2, 3, 4), 15)
    for node in followers:
        cluster.pause(node)
    # A frozen follower's last fetch may still be parked on the leader; an
    # append would answer it, into the follower's socket buffer, and the
    # records would reach it after all. Parked fetches expire after
    # replica.fetch.wait.max.ms (50 ms here); nothing outside the leader
    # can observe that, so wait ten times as long.
    time.sleep(0.5)
    try:
        # Straight to the leader (the frozen brokers answer nobody).
        producer = Producer(
            {"bootstrap.servers": f"127.0.0.1:{cluster.nodes[old.leader].broker_port}", "acks": 1}
        )
        for i in range(20):
            producer.produce("epochs", f"doomed-{i}")
        assert producer.flush(10) == 0
        cluster.kill(old.leader)
    finally:
        for node in followers:
            cluster.resume(node)
    cluster.wait_until(
        lambda: (
            cluster.partition_state("epochs").get(0) is not None
            and cluster.partition_state("epochs")[0].leader in followers
        ),
        30,
        "a follower elected",
    )
    new = cluster.partition_state("epochs")[0]
    assert new.leader_epoch > old.leader_epoch
    producer = kafka_python_producer(cluster, "all")
    for i in range(30):
        producer.send("epochs", f"after-{i}".encode())
    producer.flush(30)
    producer.close()
    cluster.restart(old.leader)
    cluster.wait_for_isr("epochs", 0, {2, 3, 4}, 30)
    cluster.wait_for_identical_replicas("epochs", 0, (2, 3, 4), 15)
    values = [v for _, v in read_all(cluster.bootstrap_servers, "epochs", 1, 80)[0]]
    assert values == [f"committed-{i}" for i in range(50)] + [f"after-{i}" for i in range(30)]
    with open(cluster.nodes[old.leader].log_path, encoding="utf-8") as f:
        assert "diverged from leader epoch" in f.read()


@pytest.mark.kfast_cluster_config(
    controllers=1,
    brokers=3,
    overrides={
        # Sessions outlast the freeze: the leader, not the controller's fencing,
        # takes the follower out of the ISR.
        "broker.session.timeout.ms": 30000,
        "replica.lag.time.max.ms": 1500,
    },
)
def test_a_frozen_follower_leaves_the_isr_and_rejoins_it(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "lagging")
    state = cluster.partition_state("lagging")[0]
    frozen = next(n for n in state.replicas if n != state.leader)
    cluster.pause(frozen)
    try:
        # A follower with nothing to fetch is in sync however long it is
        # silent (Kafka's isCaughtUp); once records arrive it is behind, and
        # after replica.lag.time.max.ms the leader drops it from the ISR --
        # acks=all stalls until then, and goes on with the two in-sync
        # replicas (min.insync 2).
        producer = kafka_python_producer(cluster, "all", via=state.leader, retries=0)
        futures = [producer.send("lagging", f"v{i}".encode()) for i in range(100)]
        producer.flush(15)
        assert [f.get(1).offset for f in futures] == list(range(100))
        producer.close()
        assert set(cluster.partition_state("lagging")[0].isr) == set(state.replicas) - {frozen}
    finally:
        cluster.resume(frozen)
    cluster.wait_for_isr("lagging", 0, set(state.replicas), 15)
    data = cluster.wait_for_identical_replicas("lagging", 0, state.replicas, 15)
    assert data.count(b"v99") == 1
    with open(cluster.nodes[state.leader].log_path, encoding="utf-8") as f:
        assert "shrinking the ISR" in f.read()


@COMBINED
def test_sigterm_moves_leaderships_before_the_broker_stops(kfast_cluster):
    """Controlled shutdown: the stopping broker's leaderships move to other
    in-sync replicas while it still answers, so an idempotent acks=all
    producer sees a metadata refresh, not an error, and loses nothing."""
    cluster = kfast_cluster
    topic, partitions = "graceful", 3
    create(cluster, topic, partitions)
    acked: list[tuple[float, str]] = []
    failures: list[str] = []
    stop = threading.Event()

    def produce():
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        i = 0
        while not stop.is_set():
            producer.produce(
                topic,
                value=f"v{i}",
                partition=i % partitions,
                on_delivery=(
                    lambda err, m: (
                        failures.append(str(err))
                        if err
                        else acked.append((time.monotonic(), m.value().decode()))
                    )
                ),
            )
            i += 1
            producer.poll(0.002)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        cluster.wait_until(lambda: len(acked) > 200, 15, "the producer running")
        victim = cluster.partition_state(topic)[0].leader
        assert cluster.stop(victim) == 0
        assert all(p.leader != victim for p in cluster.partition_state(topic).values())
        count = len(acked)
        cluster.wait_until(lambda: len(acked) > count + 200, 15, "writes after the stop")
    finally:
        stop.set()
        thread.join(60)
    assert failures == []
    with open(cluster.nodes[victim].log_path, encoding="utf-8") as f:
        assert f"controlled shutdown of broker {victim} completed" in f.read()
    got = read_all(cluster.bootstrap_servers, topic, partitions, len(acked))
    values = [v for p in got.values() for _, v in p]
    assert len(values) == len(set(values))
    assert {v for _, v in acked} <= set(values)


def _fail_over_and_return(cluster, topic: str) -> tuple[int, set[int]]:
    """Kill -9 the leader of partition 0, wait for its leaderships to move,
    bring it back in sync: (the broker, the partitions it prefers)."""
    state = cluster.partition_state(topic)
    victim = state[0].leader
    preferred = {p for p, info in state.items() if info.replicas[0] == victim}
    cluster.kill(victim)
    cluster.wait_until(
        lambda: all(
            cluster.partition_state(topic)[p].leader not in (victim, -1) for p in preferred
        ),
        15,
        "leaderships moved",
    )
    cluster.restart(victim)
    for p in state:
        cluster.wait_for_isr(topic, p, {1, 2, 3}, 30)
    return victim, preferred


@pytest.mark.kfast_cluster_config(
    combined=True, overrides={**FAST_SESSIONS, "auto.leader.rebalance.enable": "false"}
)
def test_leader_election_cli_moves_leaderships_back_to_preferred_replicas(kfast_cluster):
    import subprocess
    import sys

    cluster = kfast_cluster
    create(cluster, "preferred", partitions=3)
    victim, preferred = _fail_over_and_return(cluster, "preferred")
    assert all(cluster.partition_state("preferred")[p].leader != victim for p in preferred)

    def election(*options):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "kfast",
                "leader-election",
                "-b",
                cluster.bootstrap_servers,
                *options,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = election("--election-type", "preferred", "--all-topic-partitions")
    assert done.returncode == 0, done.stderr
    moved = ", ".join(f"preferred-{p}" for p in sorted(preferred))
    assert (
        f"Successfully completed leader election (PREFERRED) for partitions {moved}" in done.stdout
    )
    cluster.wait_until(
        lambda: all(
            info.leader == info.replicas[0]
            for info in cluster.partition_state("preferred").values()
        ),
        10,
        "every partition led by its preferred replica",
    )
    again = election("--election-type", "PREFERRED", "--topic", "preferred", "--partition", "0")
    assert again.returncode == 0
    assert again.stdout.strip() == "Valid replica already elected for partitions preferred-0"
    missing = election("--election-type", "UNCLEAN", "--topic", "nope", "--partition", "0")
    assert missing.returncode == 1
    assert (
        "Error completing leader election (UNCLEAN) for partition: nope-0: "
        "UnknownTopicOrPartitionException" in missing.stdout
    )


@pytest.mark.kfast_cluster_config(
    combined=True, overrides={**FAST_SESSIONS, "leader.imbalance.check.interval.seconds": 1}
)
def test_auto_leader_rebalance_returns_leaderships_after_a_failover(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "balanced", partitions=3)
    victim, preferred = _fail_over_and_return(cluster, "balanced")
    cluster.wait_until(
        lambda: all(cluster.partition_state("balanced")[p].leader == victim for p in preferred),
        15,
        "leaderships back on the broker",
    )


def _only_the_leader_has_the_last_records(
    cluster, topic: str, config: dict, delete_before: int | None = None
) -> tuple:
    """RF 3: both followers die (the ISR shrinks to the leader), the leader
    takes acks=1 records alone (then, with ``delete_before``, DeleteRecords
    moves its log start there) and dies, the followers come back out of
    sync. Returns (old leader, followers)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "1", **config})])[
        topic
    ].result(30)
    cluster.wait_for_isr(topic, 0, {2, 3, 4}, 15)
    leader = cluster.partition_state(topic)[0].leader
    followers = [n for n in (2, 3, 4) if n != leader]
    producer = kafka_python_producer(cluster, "all")
    for i in range(10):
        producer.send(topic, f"replicated-{i}".encode())
    producer.flush(30)
    producer.close()
    cluster.wait_for_identical_replicas(topic, 0, (2, 3, 4), 15)
    for node in followers:
        cluster.kill(node)
    cluster.wait_for_isr(topic, 0, {leader}, 15)
    producer = kafka_python_producer(cluster, 1, via=leader)
    for i in range(5):
        producer.send(topic, f"leader-only-{i}".encode()).get(10)
    producer.close()
    if delete_before is not None:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.nodes[leader].broker_port}"})
        (deleted,) = admin.delete_records([TopicPartition(topic, 0, delete_before)]).values()
        assert deleted.result(30).low_watermark == delete_before
        # A clean shutdown, which writes the log start checkpoint (after a
        # kill -9 the start would come back at the last periodic one).
        assert cluster.stop(leader) == 0
    else:
        cluster.kill(leader)
    for node in followers:
        cluster.restart(node)
    cluster.wait_for_brokers(set(followers))
    return leader, followers


@ONE_CONTROLLER
def test_unclean_leader_election_off_keeps_the_partition_offline_until_asked(kfast_cluster):
    import subprocess
    import sys

    cluster = kfast_cluster
    leader, followers = _only_the_leader_has_the_last_records(cluster, "careful", {})
    time.sleep(1)  # nothing to await: the absence of an election is the point
    assert cluster.partition_state("careful")[0].leader == -1
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "leader-election",
            "-b",
            cluster.bootstrap_servers,
            "--election-type",
            "UNCLEAN",
            "--topic",
            "careful",
            "--partition",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    state = cluster.partition_state("careful")[0]
    assert state.leader in followers and state.isr[0] == state.leader
    values = [v for _, v in read_all(cluster.bootstrap_servers, "careful", 1, 10)[0]]
    assert values == [f"replicated-{i}" for i in range(10)]


def _an_out_of_sync_replica_elected_takes_after(
    cluster, topic: str, delete_before: int | None = None
) -> int:
    """With unclean.leader.election.enable, a follower without the old
    leader's last records is elected and takes record "after" (offset 10).
    Returns the old leader (down)."""
    leader, followers = _only_the_leader_has_the_last_records(
        cluster, topic, {"unclean.leader.election.enable": "true"}, delete_before
    )
    cluster.wait_until(
        lambda: cluster.partition_state(topic)[0].leader in followers,
        15,
        "an out-of-sync replica elected",
    )
    producer = kafka_python_producer(cluster, "all")
    assert producer.send(topic, b"after").get(10).offset == 10
    producer.close()
    return leader


@ONE_CONTROLLER
def test_unclean_leader_election_on_brings_the_partition_back_with_the_documented_loss(
    kfast_cluster,
):
    cluster = kfast_cluster
    leader = _an_out_of_sync_replica_elected_takes_after(cluster, "hasty")
    # The old leader returns as a follower and truncates its leader-only records.
    cluster.restart(leader)
    cluster.wait_for_isr("hasty", 0, {2, 3, 4}, 30)
    cluster.wait_for_identical_replicas("hasty", 0, (2, 3, 4), 15)
    values = [v for _, v in read_all(cluster.bootstrap_servers, "hasty", 1, 11)[0]]
    assert values == [f"replicated-{i}" for i in range(10)] + ["after"]


@ONE_CONTROLLER
def test_a_replica_whose_log_starts_past_the_unclean_leaders_end_rejoins_the_isr(kfast_cluster):
    """The old leader's DeleteRecords put its log start (13) past the end of
    the out-of-sync replica elected uncleanly (10, then 11): returning as a
    follower it truncates to the leader's end, below its own log start, which
    must come down with it (Kafka's truncateTo) -- else its log end stays at
    13, every fetch is past the leader's end and it never rejoins the ISR."""
    cluster = kfast_cluster
    leader = _an_out_of_sync_replica_elected_takes_after(cluster, "pruned", delete_before=13)
    cluster.restart(leader)
    cluster.wait_for_isr("pruned", 0, {2, 3, 4}, 30)
    # In the ISR, it takes every acks=all record from now on.
    producer = kafka_python_producer(cluster, "all")
    assert producer.send("pruned", b"later").get(10).offset == 11
    producer.close()
    values = [v for _, v in read_all(cluster.bootstrap_servers, "pruned", 1, 12)[0]]
    assert values == [f"replicated-{i}" for i in range(10)] + ["after", "later"]


@COMBINED
def test_consumer_group_offsets_survive_kill_9_of_their_coordinator(kfast_cluster):
    """The group coordinator lives on the leader of the group's
    __consumer_offsets partition; when that broker dies the partition's new
    leader loads the group from its replica, so committed offsets survive
    and the group goes on (FindCoordinator names the new broker)."""
    cluster = kfast_cluster
    create(cluster, "work", partitions=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(300):
        producer.produce("work", value=f"job-{i}", partition=i % 3)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    seen: list[str] = []

    def consume(count: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "crew",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["work"])
        taken, deadline = 0, time.monotonic() + 60
        try:
            while taken < count and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                seen.append(message.value().decode())
                taken += 1
                consumer.commit(message=message, asynchronous=False)
        finally:
            consumer.close()
        assert taken == count

    def coordinator() -> int:
        group = admin.describe_consumer_groups(["crew"])["crew"].result(30)
        return group.coordinator.id

    consume(100)
    first = coordinator()
    cluster.kill(first)
    consume(100)
    second = coordinator()
    assert second != first
    cluster.restart(first)
    cluster.wait_for_isr("__consumer_offsets", 0, {1, 2, 3}, 30)
    cluster.kill(second)
    consume(100)
    assert sorted(seen) == sorted(f"job-{i}" for i in range(300))


@ONE_CONTROLLER
def test_reassignment_under_load_moves_a_partition_to_other_brokers(kfast_cluster):
    """AlterPartitionReassignments (kafka-python's admin): the new replicas
    join, catch up from the leader while a producer writes, enter the ISR;
    then the assignment is finalized, the leadership moves off the removed
    broker and its replica is deleted. Nothing acknowledged is lost."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTopicPartition

    cluster = kfast_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("moving", num_partitions=1, replica_assignment=[[2]])])[
        "moving"
    ].result(30)
    cluster.wait_for_isr("moving", 0, {2}, 15)
    acked: list[str] = []
    stop = threading.Event()

    def produce():
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        i = 0
        while not stop.is_set():
            producer.produce(
                "moving",
                value=f"m{i}",
                on_delivery=lambda err, m: None if err else acked.append(m.value().decode()),
            )
            i += 1
            producer.poll(0.001)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        cluster.wait_until(lambda: len(acked) > 500, 15, "the producer running")
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        result = kafka_admin.alter_partition_reassignments(
            {KafkaTopicPartition("moving", 0): [3, 4]}
        )
        assert list(result.values()) == [None]
        cluster.wait_until(
            lambda: cluster.partition_state("moving")[0].replicas == (3, 4),
            30,
            "the reassignment finalized",
        )
        assert not kafka_admin.list_partition_reassignments()
        kafka_admin.close()
        count = len(acked)
        cluster.wait_until(lambda: len(acked) > count + 200, 15, "writes to the new replicas")
    finally:
        stop.set()
        thread.join(60)
    state = cluster.partition_state("moving")[0]
    assert state.leader in (3, 4) and set(state.isr) == {3, 4}
    cluster.wait_for_identical_replicas("moving", 0, (3, 4), 15)
    cluster.wait_until(
        lambda: not os.path.exists(os.path.join(cluster.nodes[2].data_dir, "data", "moving-0")),
        15,
        "the removed replica deleted",
    )
    values = [v for _, v in read_all(cluster.bootstrap_servers, "moving", 1, len(acked))[0]]
    assert set(acked) <= set(values) and len(values) == len(set(values))


@pytest.mark.kfast_cluster_config(
    combined=True,
    overrides={
        **FAST_SESSIONS,
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
    },
    node_overrides={
        1: {"broker.rack": "rack-a"},
        2: {"broker.rack": "rack-b"},
        3: {"broker.rack": "rack-c"},
    },
)
def test_a_consumer_fetches_from_the_in_sync_replica_in_its_rack(kfast_cluster):
    """KIP-392: with RackAwareReplicaSelector the leader answers a consumer
    from another rack with the in-sync follower in the consumer's rack, and
    that follower serves the records (librdkafka's statistics name the
    broker each partition is fetched from)."""
    import json

    cluster = kfast_cluster
    create(cluster, "nearby")
    state = cluster.partition_state("nearby")[0]
    follower = next(r for r in state.replicas if r != state.leader)
    rack = {1: "rack-a", 2: "rack-b", 3: "rack-c"}[follower]
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(200):
        producer.produce("nearby", value=f"n{i}")
    assert producer.flush(30) == 0
    fetched_from: list[int] = []

    def on_stats(raw: str) -> None:
        partition = (
            json.loads(raw).get("topics", {}).get("nearby", {}).get("partitions", {}).get("0")
        )
        if partition is not None:
            fetched_from.append(partition["broker"])

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "near",
            "client.rack": rack,
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 100,
            "stats_cb": on_stats,
            # Long polls: a record must arrive when the follower gets it,
            # not when the follower's wait for it expires.
            "fetch.wait.max.ms": LONG_POLL_MS,
        }
    )
    consumer.subscribe(["nearby"])
    values, deadline = [], time.monotonic() + 30
    while (len(values) < 200 or follower not in fetched_from) and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            values.append(message.value().decode())
    assert sorted(values) == sorted(f"n{i}" for i in range(200))
    assert follower in fetched_from and fetched_from[-1] == follower
    # Caught up at the follower, its fetch waits there: a new record wakes it
    # as soon as the follower's high watermark covers it.
    for i in range(3):
        sent = time.monotonic()
        producer.produce("nearby", value=f"late{i}")
        assert producer.flush(30) == 0
        message = None
        while message is None and time.monotonic() < sent + 2 * LONG_POLL_MS / 1000:
            message = consumer.poll(0.1)
            if message is not None and message.error():
                message = None
        assert message is not None and message.value() == f"late{i}".encode()
        assert time.monotonic() - sent < LONG_POLL_MS / 1000 / 2, "woken at the wait's expiry"
    consumer.close()
    assert fetched_from[-1] == follower


@COMBINED
def test_kfasts_own_client_follows_a_leader_change(kfast_cluster):
    """kfast.client (the CLI's and the Spark source's client): an idempotent
    producer writes through a kill -9 of the partition's leader (it
    refreshes metadata and resends to the new leader), and a Fetcher reads
    everything back from the new leader."""
    import asyncio

    from kfast.client.fetcher import Fetcher
    from kfast.client.producer import KafkaProducer as KfastProducer

    cluster = kfast_cluster
    create(cluster, "own")
    leader = cluster.partition_state("own")[0].leader

    async def write(start: int, count: int) -> list[int]:
        async with KfastProducer(
            cluster.bootstrap_servers, enable_idempotence=True, retries=30
        ) as producer:
            futures = [
                await producer.send("own", f"r{i}".encode(), partition=0)
                for i in range(start, start + count)
            ]
            return [(await f).offset for f in futures]

    async def read(count: int) -> list[str]:
        values: list[str] = []
        async with Fetcher(cluster.bootstrap_servers) as fetcher:
            offset = 0
            while len(values) < count:
                records = await fetcher.fetch_records("own", 0, offset)
                values += [r.value.decode() for r in records]
                offset = records[-1].offset + 1 if records else offset
        return values

    assert asyncio.run(write(0, 200)) == list(range(200))
    cluster.kill(leader)
    assert asyncio.run(write(200, 200)) == list(range(200, 400))
    assert cluster.partition_state("own")[0].leader != leader
    assert asyncio.run(asyncio.wait_for(read(400), 60)) == [f"r{i}" for i in range(400)]


@ONE_CONTROLLER
def test_aiokafka_idempotent_producer_and_consumer_through_a_leader_kill(kfast_cluster):
    """aiokafka (the asyncio client): an idempotent acks=all producer keeps
    writing while the partition's leader is killed -9 (it finds the new
    leader and resends); an aiokafka consumer then reads every acknowledged
    record exactly once, at its acknowledged offset."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    cluster = kfast_cluster
    create(cluster, "aio")
    leader = cluster.partition_state("aio")[0].leader
    acked: dict[int, list] = {0: []}

    async def produce(start: int, count: int) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            request_timeout_ms=10000,
            retry_backoff_ms=100,
        )
        await producer.start()
        try:
            for i in range(start, start + count, 50):
                values = [f"a{j}" for j in range(i, min(i + 50, start + count))]
                futures = [await producer.send("aio", v.encode(), partition=0) for v in values]
                for value, future in zip(values, futures):
                    acked[0].append(((await future).offset, value))
        finally:
            await producer.stop()

    async def consume(count: int) -> dict[int, list]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            partition = AioTopicPartition("aio", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            got: list = []
            while len(got) < count:
                batches = await consumer.getmany(timeout_ms=500)
                got += [(m.offset, m.value.decode()) for ms in batches.values() for m in ms]
            return {0: got}
        finally:
            await consumer.stop()

    async def main():
        await produce(0, 300)
        cluster.kill(leader)
        await produce(300, 300)

    asyncio.run(asyncio.wait_for(main(), 90))
    assert cluster.partition_state("aio")[0].leader not in (leader, -1)
    cluster.restart(leader)
    read = asyncio.run(asyncio.wait_for(consume(600), 60))
    assert audit(acked, read) == Audit(lost=0, duplicated=0, moved=0)
    assert [v for _, v in read[0]] == [f"a{i}" for i in range(600)]
    cluster.wait_for_isr("aio", 0, {2, 3, 4}, 30)
    cluster.wait_for_identical_replicas("aio", 0, (2, 3, 4), 30)
