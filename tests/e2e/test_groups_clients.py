"""Issue 6's group scenarios for every client that can run them.

test_groups.py runs the three-consumer split / kill / close scenario for
the Python clients and the other scenarios with confluent-kafka; this module
fills the rest of the matrix:

- a static member restarting within its session timeout gets its partitions
  back with no rebalance: kafka-python, aiokafka, kcat -G, confluent-kafka
  with group.protocol=consumer (KIP-848 static members);
- 20 consumers joining at once converge to one generation with every
  partition owned exactly once: kafka-python, aiokafka, kcat -G,
  confluent-kafka with group.protocol=consumer;
- a broker restart keeps the group and its committed offsets, and
  consumption resumes from them: kafka-python, aiokafka, kcat -G;
- offsets committed with metadata by a group member are fetched back with
  it: kafka-python, aiokafka, confluent-kafka classic and consumer protocol
  (kcat cannot carry metadata);
- kcat -G through test_groups.py's split / kill / close scenario.

What the broker believes is read on the broker's own loop (``group_view``);
what each client believes comes from its rebalance callbacks.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
import uuid

import pytest
from e2e_support import wait_until
from group_support import (  # noqa: F401 (fixtures)
    PARTITIONS,
    SESSION_MS,
    ConsumerProcess,
    create_topic,
    group_broker,
    kcat_command,
    names,
    owned,
    produce,
    subscribe_kafka_python,
)

pytestmark = pytest.mark.e2e

# Above SESSION_MS: a restarted static member must be back before it expires.
STATIC_SESSION_MS = 10000
TWENTY = 20
TWENTY_PARTITIONS = 2 * TWENTY


def group_view(broker, group_id: str):
    """(state, generation or group epoch, {member_id: sorted partitions},
    {member epochs}) of a group as the coordinator holds it, read on the
    broker's loop; None if the coordinator does not know the group."""
    from kfast.coordinator.group.consumer_protocol import assigned_partitions

    def read():
        coordinator = broker.broker.group_coordinator.coordinator
        classic = coordinator.groups.get(group_id)
        if classic is not None:
            return (
                classic.state,
                classic.generation_id,
                {
                    m.member_id: sorted(p for _, p in assigned_partitions(m.assignment))
                    for m in classic.members.values()
                },
                {classic.generation_id},
            )
        group = coordinator.consumer_groups.get(group_id)
        if group is None:
            return None
        return (
            group.state,
            group.group_epoch,
            {
                m.member_id: sorted(p for ps in m.assigned.values() for p in ps)
                for m in group.members.values()
            },
            {m.member_epoch for m in group.members.values()},
        )

    return broker.call_soon(read)


def assert_converged(broker, group_id: str, client_views, partitions: int):
    """One Stable generation of TWENTY members on the broker, each owning
    two partitions, and the clients agreeing: every partition owned once."""

    def stable():
        view = group_view(broker, group_id)
        if view is None:
            return False
        state, epoch, members, member_epochs = view
        return (
            state == "Stable"
            and len(members) == TWENTY
            and member_epochs == {epoch}
            and sorted(p for ps in members.values() for p in ps) == list(range(partitions))
            and all(len(ps) == partitions // TWENTY for ps in members.values())
        )

    wait_until(stable, 60, f"{TWENTY} members in one Stable generation")

    def clients_agree():
        views = client_views()
        return len(views) == TWENTY and sorted(p for ps in views for p in ps) == list(
            range(partitions)
        )

    wait_until(clients_agree, 30, "every consumer holding its partitions")
    # Stable again after the clients' views settled: no late rebalance.
    state, epoch, _, _ = group_view(broker, group_id)
    assert state == "Stable"
    return epoch


# -- static membership -----------------------------------------------------------------
@pytest.mark.parametrize(
    "client",
    [
        "kafka-python",
        "aiokafka",
        "kcat",
        "confluent-consumer",
    ],
)
def test_static_member_restart_gets_its_partitions_back_without_rebalance(
    group_broker, names, client
):
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, PARTITIONS)
    a = ConsumerProcess(client, bootstrap, topic, group, "static-a", STATIC_SESSION_MS)
    b = ConsumerProcess(client, bootstrap, topic, group, "static-b", STATIC_SESSION_MS)
    restarted = None
    try:
        wait_until(
            lambda: owned([a, b]) == list(range(PARTITIONS)) and a.assigned and b.assigned,
            30,
            "two static members share the topic",
        )
        wait_until(lambda: group_view(group_broker, group)[0] == "Stable", 15, "group Stable")
        _, generation, _, _ = group_view(group_broker, group)
        mine, b_assignments = list(a.assigned), len(b.assignments)
        if client == "confluent-consumer":
            # KIP-848: a static member that is still active fences its
            # instance id (UNRELEASED_INSTANCE_ID); closing leaves with epoch
            # -2, which keeps its partitions until the session ends.
            a.terminate()
            a.proc.wait(20)
        else:
            # Classic static members never send LeaveGroup: a crash and a
            # close look the same to the coordinator.
            a.kill()
        restarted = ConsumerProcess(client, bootstrap, topic, group, "static-a", STATIC_SESSION_MS)
        wait_until(lambda: restarted.assigned is not None, 20, "restarted member assigned")
        assert restarted.assigned == mine
        produce(bootstrap, topic, [f"s{i}" for i in range(12)])
        wait_until(lambda: len(restarted.values | b.values) == 12, 20, "records consumed")
        assert len(b.assignments) == b_assignments  # b saw no rebalance
        state, generation_after, members, _ = group_view(group_broker, group)
        assert (state, generation_after, len(members)) == ("Stable", generation, 2)
    finally:
        for consumer in (a, b, restarted):
            if consumer is not None:
                consumer.stop()


@pytest.mark.parametrize("version", range(5, 10))
def test_static_leader_rejoining_a_stable_group_on_the_wire(group_broker, version):
    """What the clients above rely on, version by version: v9+ tells the
    rejoined static leader to skip the assignment (KIP-814); v5-8 cannot, so
    the leader is answered as a follower (no members, its old member id as
    leader) and takes the current assignment from SyncGroup."""
    from kfast.client.connection import BlockingConnection
    from kfast.coordinator.group.consumer_protocol import encode_assignment, encode_subscription
    from kfast.protocol import api_keys

    find_key, join_key, sync_key = (
        api_keys.BY_NAME[n].key for n in ("FindCoordinator", "JoinGroup", "SyncGroup")
    )
    group = f"wire-{uuid.uuid4().hex[:8]}"
    assignment = encode_assignment({"t": [0, 1]})

    def join(conn):
        return conn.send(
            {
                "group_id": group,
                "session_timeout_ms": STATIC_SESSION_MS,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "group_instance_id": "leader",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}],
            },
            api_key=join_key,
            version=version,
        )

    def sync(conn, member_id, assignments):
        return conn.send(
            {
                "group_id": group,
                "generation_id": 1,
                "member_id": member_id,
                "group_instance_id": "leader",
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": assignments,
            },
            api_key=sync_key,
            version=3,
        )

    conn = BlockingConnection(group_broker.host, group_broker.port)
    try:
        # FindCoordinator creates __consumer_offsets; the group's partition
        # may still be loading (retriable errors) for the first join.
        find = conn.send({"key": group, "key_type": 0}, api_key=find_key, version=3)
        assert find.error_code == 0
        first = wait_until(
            lambda: (lambda r: r if r.error_code == 0 else None)(join(conn)), 15, "first JoinGroup"
        )
        assert (first.error_code, first.generation_id, first.leader) == (0, 1, first.member_id)
        stored = sync(
            conn, first.member_id, [{"member_id": first.member_id, "assignment": assignment}]
        )
        assert (stored.error_code, bytes(stored.assignment)) == (0, assignment)
        again = join(conn)
        assert again.error_code == 0 and again.member_id != first.member_id
        assert again.generation_id == 1  # no rebalance
        if version >= 9:
            assert again.skip_assignment and again.leader == again.member_id
            assert [m.member_id for m in again.members] == [again.member_id]
        else:
            assert (again.leader, list(again.members)) == (first.member_id, [])
        current = sync(conn, again.member_id, [])
        assert (current.error_code, bytes(current.assignment)) == (0, assignment)
    finally:
        conn.close()


# -- twenty consumers at once ------------------------------------------------------------
def _recording_listener(base, assigned: dict[int, list[int]]):
    """A rebalance listener class (kafka-python's or aiokafka's ``base``)
    whose instance ``Listener(index)`` records member ``index``'s partitions."""

    class Listener(base):
        def __init__(self, index):
            self.index = index

        def on_partitions_revoked(self, revoked):
            assigned[self.index] = []

        def on_partitions_assigned(self, partitions):
            assigned[self.index] = sorted(p.partition for p in partitions)

    return Listener


def _twenty_kafka_python(broker, topic, group):
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    assigned: dict[int, list[int]] = {}
    stop = threading.Event()
    ready = threading.Barrier(TWENTY + 1)

    Listener = _recording_listener(ConsumerRebalanceListener, assigned)

    def run(index):
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            group_id=group,
            session_timeout_ms=10000,
            heartbeat_interval_ms=1000,
            metadata_max_age_ms=1000,
        )
        try:
            subscribe_kafka_python(consumer, topic, Listener(index))
            ready.wait(30)  # subscribed together, then all join at once
            while not stop.is_set():
                consumer.poll(100)
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(TWENTY)]
    for thread in threads:
        thread.start()
    try:
        ready.wait(30)
        return assert_converged(broker, group, lambda: list(assigned.values()), TWENTY_PARTITIONS)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def _twenty_aiokafka(broker, topic, group):
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    assigned: dict[int, list[int]] = {}

    Listener = _recording_listener(ConsumerRebalanceListener, assigned)

    async def main():
        consumers = [
            AIOKafkaConsumer(
                bootstrap_servers=broker.bootstrap_servers,
                group_id=group,
                session_timeout_ms=10000,
                heartbeat_interval_ms=1000,
                metadata_max_age_ms=1000,
            )
            for _ in range(TWENTY)
        ]
        stop = asyncio.Event()

        async def run(index, consumer):
            consumer.subscribe([topic], listener=Listener(index))
            await consumer.start()
            while not stop.is_set():
                await consumer.getmany(timeout_ms=100)

        tasks = [asyncio.create_task(run(i, c)) for i, c in enumerate(consumers)]
        try:
            # The broker is read from another thread: keep this loop running.
            return await asyncio.to_thread(
                assert_converged, broker, group, lambda: list(assigned.values()), TWENTY_PARTITIONS
            )
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)

    return asyncio.run(main())


def _twenty_confluent_consumer(broker, topic, group):
    from confluent_kafka import Consumer

    consumers = [
        Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": group,
                "group.protocol": "consumer",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        for _ in range(TWENTY)
    ]
    stop = threading.Event()
    # KIP-848 callbacks are incremental; assignment() from another thread
    # than poll() blocks in librdkafka, so the poll threads keep the sets.
    assigned: dict[int, set[int]] = {}

    def run(index, consumer):
        mine = assigned.setdefault(index, set())
        consumer.subscribe(
            [topic],
            on_assign=lambda c, ps: mine.update(p.partition for p in ps),
            on_revoke=lambda c, ps: mine.difference_update(p.partition for p in ps),
            on_lost=lambda c, ps: mine.difference_update(p.partition for p in ps),
        )
        while not stop.is_set():
            consumer.poll(0.1)

    threads = [
        threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(consumers)
    ]
    for thread in threads:
        thread.start()
    try:
        return assert_converged(
            broker, group, lambda: [sorted(ps) for ps in list(assigned.values())], TWENTY_PARTITIONS
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for consumer in consumers:
            consumer.close()


def _twenty_kcat(broker, topic, group):
    consumers = [
        ConsumerProcess("kcat", broker.bootstrap_servers, topic, group, session_ms=10000)
        for _ in range(TWENTY)
    ]
    try:
        return assert_converged(
            broker,
            group,
            lambda: [c.assigned for c in consumers if c.assigned is not None],
            TWENTY_PARTITIONS,
        )
    finally:
        for consumer in consumers:
            consumer.stop()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "kcat", "confluent-consumer"])
def test_twenty_consumers_converge_to_one_generation(group_broker, names, client):
    topic, group = names
    create_topic(group_broker.bootstrap_servers, topic, TWENTY_PARTITIONS)
    run = {
        "kafka-python": _twenty_kafka_python,
        "aiokafka": _twenty_aiokafka,
        "kcat": _twenty_kcat,
        "confluent-consumer": _twenty_confluent_consumer,
    }[client]
    assert run(group_broker, topic, group) >= 1


# -- broker restart ----------------------------------------------------------------------
# Each client's two phases. commit(): join the group, consume the first
# batch and commit; returns {partition: (offset, metadata)} it committed.
# resume(expected): after the restart, read the committed offsets back
# ({partition: (offset, metadata)}) and consume until ``expected`` records
# arrived; returns (read back, [(partition, offset)] in arrival order).
FIRST, SECOND = 10, 4
RESTART_COMMITS = {0: (3, "before-0"), 1: (4, "before-1")}


def _restart_kafka_python_commit(bootstrap, topic, group):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
    )
    try:
        subscribe_kafka_python(consumer, topic)
        seen = 0
        deadline = time.monotonic() + 30
        while seen < FIRST and time.monotonic() < deadline:
            seen += sum(len(rs) for rs in consumer.poll(200).values())
        assert seen == FIRST
        # A member's commit: it carries the generation.
        consumer.commit(
            {
                TopicPartition(topic, p): OffsetAndMetadata(o, m, -1)
                for p, (o, m) in RESTART_COMMITS.items()
            }
        )
    finally:
        consumer.close()
    return RESTART_COMMITS


def _restart_kafka_python_resume(bootstrap, topic, group, expected):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    try:
        read_back = {}
        for p in RESTART_COMMITS:
            committed = consumer.committed(TopicPartition(topic, p), metadata=True)
            read_back[p] = (committed.offset, committed.metadata)
        subscribe_kafka_python(consumer, topic)
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(200).items():
                seen += [(tp.partition, r.offset) for r in records]
        return read_back, seen
    finally:
        consumer.close()


def _restart_aiokafka_commit(bootstrap, topic, group):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def main():
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            metadata_max_age_ms=1000,
        )
        await consumer.start()
        try:
            seen = 0
            async with asyncio.timeout(30):
                while seen < FIRST:
                    batch = await consumer.getmany(timeout_ms=200)
                    seen += sum(len(rs) for rs in batch.values())
            await consumer.commit(
                {
                    TopicPartition(topic, p): OffsetAndMetadata(o, m)
                    for p, (o, m) in RESTART_COMMITS.items()
                }
            )
        finally:
            await consumer.stop()

    asyncio.run(main())
    return RESTART_COMMITS


def _restart_aiokafka_resume(bootstrap, topic, group, expected):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        read_back = {
            tp.partition: (om.offset, om.metadata)
            for tp, om in offsets.items()
            if tp.topic == topic
        }
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            metadata_max_age_ms=1000,
        )
        await consumer.start()
        seen = []
        try:
            async with asyncio.timeout(30):
                while len(seen) < expected:
                    batch = await consumer.getmany(timeout_ms=200)
                    for tp, records in batch.items():
                        seen += [(tp.partition, r.offset) for r in records]
        finally:
            await consumer.stop()
        return read_back, seen

    return asyncio.run(main())


def _kcat_to_end(bootstrap, topic, group):
    """kcat -G -e: consume to the end of every assigned partition, commit
    (auto commit on close) and exit; [(partition, offset)] consumed."""
    import json

    proc = subprocess.run(
        kcat_command(bootstrap, topic, group, None, SESSION_MS, "-e"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [(r["partition"], r["offset"]) for r in map(json.loads, proc.stdout.splitlines())]


def _committed_by_admin(bootstrap, topic, group):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {
        tp.partition: (om.offset, om.metadata) for tp, om in offsets.items() if tp.topic == topic
    }


def _restart_kcat_commit(bootstrap, topic, group):
    consumed = _kcat_to_end(bootstrap, topic, group)
    assert len(consumed) == FIRST
    # kcat commits where it stopped: the log end offsets, with no metadata.
    return {p: (FIRST // 2, "") for p in (0, 1)}


def _restart_kcat_resume(bootstrap, topic, group, expected):
    read_back = _committed_by_admin(bootstrap, topic, group)
    return read_back, _kcat_to_end(bootstrap, topic, group)


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "kcat"])
def test_broker_restart_keeps_group_and_committed_offsets(group_broker, names, client):
    from kafka import KafkaAdminClient

    commit, resume = {
        "kafka-python": (_restart_kafka_python_commit, _restart_kafka_python_resume),
        "aiokafka": (_restart_aiokafka_commit, _restart_aiokafka_resume),
        "kcat": (_restart_kcat_commit, _restart_kcat_resume),
    }[client]
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [f"r{i}" for i in range(FIRST)], 2)
    committed = commit(bootstrap, topic, group)
    assert _committed_by_admin(bootstrap, topic, group) == committed
    state, generation, _, _ = group_view(group_broker, group)
    assert state == "Empty" and generation >= 1

    group_broker.restart()
    # The group is rebuilt from __consumer_offsets at start, before any
    # client asks: same generation, and described over the wire.
    assert group_view(group_broker, group)[:2] == ("Empty", generation)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert group in [g["group_id"] for g in admin.list_groups()]
        description = admin.describe_groups([group])[group]
        assert (description["group_state"], description["protocol_type"]) == ("Empty", "consumer")
    finally:
        admin.close()
    produce(bootstrap, topic, [f"s{i}" for i in range(SECOND)], 2)
    end = FIRST // 2 + SECOND // 2
    expected = sum(end - offset for offset, _ in committed.values())
    read_back, consumed = resume(bootstrap, topic, group, expected)
    assert read_back == committed
    # From the committed offset on, each record exactly once and in order:
    # nothing committed is delivered again, nothing after it is lost.
    for partition, (offset, _) in committed.items():
        assert [o for p, o in consumed if p == partition] == list(range(offset, end))


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent"])
def test_consumer_runs_through_a_broker_restart_without_rebalance(group_broker, names, client):
    """A Stable group is loaded back with its members, generation and
    assignment, and their sessions restart: a consumer that reconnects
    carries on in the same generation and reads each record once. (kcat -G
    exits when every broker connection is down, so it cannot take part.)"""
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [f"a{i}" for i in range(10)], 2)
    consumer = ConsumerProcess(client, bootstrap, topic, group, None, STATIC_SESSION_MS)
    try:
        wait_until(lambda: len(consumer.values) == 10, 30, "records before the restart")
        wait_until(lambda: group_view(group_broker, group)[0] == "Stable", 15, "group Stable")
        before, assignments = group_view(group_broker, group), len(consumer.assignments)
        group_broker.restart()
        assert group_view(group_broker, group) == before
        produce(bootstrap, topic, [f"b{i}" for i in range(10)], 2)
        wait_until(lambda: len(consumer.values) == 20, 30, "records after the restart")
        assert sorted(v for _, v in consumer.consumed) == sorted(consumer.values)
        # No rebalance after the restart: no assignment since.
        assert len(consumer.assignments) == assignments and consumer.assigned == [0, 1]
        assert group_view(group_broker, group) == before
    finally:
        consumer.stop()


# -- commit and fetch with metadata ------------------------------------------------------
METADATA_TOO_LARGE = "x" * 5000  # offset.metadata.max.bytes is 4096


def _member_metadata_kafka_python(bootstrap, topic, group):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import OffsetMetadataTooLargeError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
    )
    try:
        subscribe_kafka_python(consumer, topic)
        wait_until(
            lambda: consumer.poll(100) is not None and len(consumer.assignment()) == 2,
            20,
            "kafka-python member assigned",
        )
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        consumer.commit(
            {tp0: OffsetAndMetadata(5, "kp-meta", -1), tp1: OffsetAndMetadata(7, "", -1)}
        )
        with pytest.raises(OffsetMetadataTooLargeError):
            consumer.commit({tp0: OffsetAndMetadata(6, METADATA_TOO_LARGE, -1)})
        got = [consumer.committed(tp, metadata=True) for tp in (tp0, tp1)]
        return [(c.offset, c.metadata) for c in got]
    finally:
        consumer.close()


def _member_metadata_aiokafka(bootstrap, topic, group):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import OffsetMetadataTooLargeError
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def main():
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            metadata_max_age_ms=1000,
        )
        await consumer.start()
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        try:
            async with asyncio.timeout(20):
                while len(consumer.assignment()) != 2:
                    await consumer.getmany(timeout_ms=100)
            await consumer.commit(
                {tp0: OffsetAndMetadata(5, "aio-meta"), tp1: OffsetAndMetadata(7, "")}
            )
            with pytest.raises(OffsetMetadataTooLargeError):
                await consumer.commit({tp0: OffsetAndMetadata(6, METADATA_TOO_LARGE)})
            assert [await consumer.committed(tp) for tp in (tp0, tp1)] == [5, 7]
        finally:
            await consumer.stop()
        # AIOKafkaConsumer.committed() returns the offset only.
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group, partitions=[tp0, tp1])
        finally:
            await admin.close()
        return [(offsets[tp].offset, offsets[tp].metadata) for tp in (tp0, tp1)]

    return asyncio.run(main())


def _member_metadata_confluent(protocol):
    def run(bootstrap, topic, group):
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": protocol,
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 20
            while len(consumer.assignment()) != 2 and time.monotonic() < deadline:
                consumer.poll(0.1)
            assert len(consumer.assignment()) == 2
            consumer.commit(
                offsets=[
                    TopicPartition(topic, 0, 5, metadata="rdk-meta"),
                    TopicPartition(topic, 1, 7),
                ],
                asynchronous=False,
            )
            with pytest.raises(KafkaException) as info:
                consumer.commit(
                    offsets=[TopicPartition(topic, 0, 6, metadata=METADATA_TOO_LARGE)],
                    asynchronous=False,
                )
            assert "METADATA_TOO_LARGE" in repr(info.value).upper()
            got = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
            return [(p.offset, p.metadata or "") for p in got]
        finally:
            consumer.close()

    return run


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent", "confluent-consumer"])
def test_member_commits_and_fetches_offsets_with_metadata(group_broker, names, client):
    run, metadata = {
        "kafka-python": (_member_metadata_kafka_python, "kp-meta"),
        "aiokafka": (_member_metadata_aiokafka, "aio-meta"),
        "confluent": (_member_metadata_confluent("classic"), "rdk-meta"),
        "confluent-consumer": (_member_metadata_confluent("consumer"), "rdk-meta"),
    }[client]
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    # The too-large commit was refused and left the first one in place.
    assert run(bootstrap, topic, group) == [(5, metadata), (7, "")]
    # Another client reads the same offsets and metadata.
    by_admin = _committed_by_admin(bootstrap, topic, group)
    if client.startswith("confluent"):
        # confluent-kafka sends a str metadata with C's terminating NUL
        # (librdkafka reads it back as a C string, so it never shows there).
        by_admin = {p: (o, m.rstrip("\0")) for p, (o, m) in by_admin.items()}
    assert by_admin == {0: (5, metadata), 1: (7, "")}


# -- kcat -G through the split / kill / close scenario -----------------------------------
@pytest.mark.slow
def test_kcat_three_consumers_split_rebalance_on_kill_and_close(group_broker, names):
    """test_groups.py's scenario for the Python clients, with kcat -G
    processes: kcat commits on its own (auto commit), so what the killed one
    consumed but had not committed is consumed again by the others."""
    from test_groups import test_three_consumers_split_rebalance_on_kill_and_close as scenario

    scenario(group_broker, names, "kcat")
