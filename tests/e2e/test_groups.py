"""Consumer groups with real clients: kafka-python, confluent-kafka (classic
protocol and group.protocol=consumer, KIP-848), aiokafka and kcat -G
against one kfast broker (helpers and the consumer subprocess script in
group_support.py; the client-by-scenario matrix in test_groups_clients.py).
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from e2e_support import wait_until
from group_support import (  # noqa: F401 (fixtures)
    PARTITIONS,
    SESSION_MS,
    ConsumerProcess,
    create_topic,
    group_broker,
    names,
    owned,
    produce,
)

pytestmark = pytest.mark.e2e


@pytest.mark.slow
@pytest.mark.parametrize("client", ["kafka-python", "confluent", "confluent-consumer", "aiokafka"])
def test_three_consumers_split_rebalance_on_kill_and_close(group_broker, names, client):
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, PARTITIONS)
    first = [f"a{i}" for i in range(60)]
    produce(bootstrap, topic, first)
    consumers = [ConsumerProcess(client, bootstrap, topic, group) for _ in range(3)]
    try:
        wait_until(
            lambda: (
                owned(consumers) == list(range(PARTITIONS))
                and all(len(c.assigned or []) == 2 for c in consumers)
            ),
            30,
            "three consumers sharing six partitions",
        )
        wait_until(
            lambda: set().union(*(c.values for c in consumers)) >= set(first),
            30,
            "every record consumed",
        )
        # kill -9: the session timeout moves the partitions to the others.
        killed_at = time.monotonic()
        consumers[0].kill()
        survivors = consumers[1:]
        wait_until(
            lambda: owned(survivors) == list(range(PARTITIONS)),
            SESSION_MS / 1000 + 15,
            "partitions of the killed consumer reassigned",
        )
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5
        second = [f"b{i}" for i in range(30)]
        produce(bootstrap, topic, second)
        wait_until(
            lambda: set().union(*(c.values for c in survivors)) >= set(second),
            30,
            "records after the kill consumed",
        )
        # A graceful close leaves the group at once: no session timeout wait.
        closed_at = time.monotonic()
        survivors[0].terminate()
        wait_until(
            lambda: owned(survivors[1:]) == list(range(PARTITIONS)),
            SESSION_MS / 1000,
            "partitions of the closed consumer reassigned",
        )
        assert time.monotonic() - closed_at < SESSION_MS / 1000
        third = [f"c{i}" for i in range(12)]
        produce(bootstrap, topic, third)
        wait_until(lambda: survivors[1].values >= set(third), 30, "records after the close")
    finally:
        for consumer in consumers:
            consumer.stop()


def test_static_member_restart_gets_its_partitions_back_without_rebalance(group_broker, names):
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, PARTITIONS)
    session = 10000
    a = ConsumerProcess("confluent", bootstrap, topic, group, "static-a", session)
    b = ConsumerProcess("confluent", bootstrap, topic, group, "static-b", session)
    restarted = None
    try:
        wait_until(
            lambda: owned([a, b]) == list(range(PARTITIONS)) and a.assigned and b.assigned,
            30,
            "two static members share the topic",
        )
        mine, b_assignments = list(a.assigned), len(b.assignments)
        a.kill()
        restarted = ConsumerProcess("confluent", bootstrap, topic, group, "static-a", session)
        wait_until(lambda: restarted.assigned is not None, 20, "restarted member assigned")
        assert restarted.assigned == mine
        produce(bootstrap, topic, [f"s{i}" for i in range(12)])
        wait_until(lambda: len(restarted.values | b.values) == 12, 20, "records consumed")
        assert len(b.assignments) == b_assignments  # b saw no rebalance
    finally:
        for consumer in (a, b, restarted):
            if consumer is not None:
                consumer.stop()


def test_kcat_balanced_consumers(group_broker, names):
    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, PARTITIONS)
    values = [f"k{i}" for i in range(30)]
    produce(bootstrap, topic, values)
    procs, outputs = [], [set(), set()]

    def pump(proc, out):
        for line in proc.stdout:
            out.add(line.strip())

    try:
        for out in outputs:
            proc = subprocess.Popen(
                [
                    "kcat",
                    "-b",
                    bootstrap,
                    "-G",
                    group,
                    "-o",
                    "beginning",
                    "-u",
                    "-X",
                    "session.timeout.ms=6000",
                    "-X",
                    "heartbeat.interval.ms=500",
                    topic,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            procs.append(proc)
            threading.Thread(target=pump, args=(proc, out), daemon=True).start()
        wait_until(lambda: outputs[0] | outputs[1] >= set(values), 30, "kcat consumed all")
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:

            def split():
                desc = admin.describe_groups([group])[group]
                # Assignments are only described in Stable (else empty bytes).
                if (
                    desc["group_state"] != "Stable"
                    or len(desc["members"]) != 2
                    or not all(isinstance(m["member_assignment"], dict) for m in desc["members"])
                ):
                    return False
                parts = [
                    p
                    for m in desc["members"]
                    for a in m["member_assignment"]["assigned_partitions"]
                    for p in a["partitions"]
                ]
                return sorted(parts) == list(range(PARTITIONS))

            wait_until(split, 30, "two kcat members splitting the partitions")
        finally:
            admin.close()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def test_commit_and_fetch_offsets_with_metadata(group_broker, names):
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTopicPartition

    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 5, metadata="hello"), TopicPartition(topic, 1, 7)],
            asynchronous=False,
        )
        got = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
        assert [(p.partition, p.offset) for p in got] == [(0, 5), (1, 7)]
        assert got[0].metadata == "hello"
    finally:
        consumer.close()
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tp = KTopicPartition(topic, 1)
        kp.commit({tp: OffsetAndMetadata(9, "meta-1", -1)})
        assert kp.committed(tp, metadata=True).offset == 9
        assert kp.committed(tp, metadata=True).metadata == "meta-1"
        assert kp.committed(KTopicPartition(topic, 0)) == 5
        too_big = OffsetAndMetadata(1, "x" * 5000, -1)
        with pytest.raises(Exception) as info:
            kp.commit({tp: too_big})
        assert (
            "OffsetMetadataTooLarge" in repr(info.value)
            or "METADATA_TOO_LARGE" in repr(info.value).upper()
        )
        assert kp.committed(tp) == 9
    finally:
        kp.close()


def test_twenty_consumers_converge_to_one_generation(group_broker, names):
    from confluent_kafka import Consumer
    from kafka import KafkaAdminClient

    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    partitions = 40
    create_topic(bootstrap, topic, partitions)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
            }
        )
        for _ in range(20)
    ]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    stop = threading.Event()

    def poll(consumer):
        while not stop.is_set():
            consumer.poll(0.1)

    threads = [threading.Thread(target=poll, args=(c,), daemon=True) for c in consumers]
    # assignment() from another thread than poll() blocks in librdkafka:
    # the poll threads record what on_assign hands them.
    assigned: dict[int, list[int]] = {}

    def subscribe(i, consumer):
        consumer.subscribe(
            [topic],
            on_assign=lambda c, ps: assigned.__setitem__(i, [p.partition for p in ps]),
            on_revoke=lambda c, ps: assigned.__setitem__(i, []),
        )

    try:
        for i, consumer in enumerate(consumers):
            subscribe(i, consumer)
        for thread in threads:
            thread.start()

        def converged():
            desc = admin.describe_groups([group])[group]
            if (
                desc["group_state"] != "Stable"
                or len(desc["members"]) != 20
                or not all(isinstance(m["member_assignment"], dict) for m in desc["members"])
            ):
                return None
            parts = [
                p
                for m in desc["members"]
                for a in m["member_assignment"]["assigned_partitions"]
                for p in a["partitions"]
            ]
            return sorted(parts) == list(range(partitions)) and all(
                len(
                    [
                        p
                        for a in m["member_assignment"]["assigned_partitions"]
                        for p in a["partitions"]
                    ]
                )
                == 2
                for m in desc["members"]
            )

        wait_until(converged, 60, "20 members in one Stable generation")
        wait_until(
            lambda: (
                sorted(p for ps in list(assigned.values()) for p in ps) == list(range(partitions))
                and len(assigned) == 20
            ),
            20,
            "every consumer holding its two partitions",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for consumer in consumers:
            consumer.close()
        admin.close()


def test_broker_restart_keeps_groups_and_offsets(group_broker, names):
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [f"r{i}" for i in range(10)], 2)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 3, metadata="before"), TopicPartition(topic, 1, 4)],
        asynchronous=False,
    )
    consumer.close()
    group_broker.restart()
    # Loaded at start, before any client asks (read from the test thread).
    assert group in group_broker.broker.group_coordinator.coordinator.offsets
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        got = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 20)
        assert [p.offset for p in got] == [3, 4]
        assert got[0].metadata == "before"
        consumer.subscribe([topic])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append((m.partition(), m.offset()))
        # resumes from the committed positions, not from the beginning
        assert len(seen) == 3 and all(offset >= {0: 3, 1: 4}[p] for p, offset in seen)
    finally:
        consumer.close()
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert group in [g["group_id"] for g in admin.list_groups()]
    finally:
        admin.close()


def test_confluent_admin_lists_and_describes_classic_and_kip848_groups(group_broker, names):
    from confluent_kafka import Consumer, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    bootstrap = group_broker.bootstrap_servers
    topic, group = names
    create_topic(bootstrap, topic, 2)
    consumers = {}
    try:
        for protocol in ("classic", "consumer"):
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"{group}-{protocol}",
                    "group.protocol": protocol,
                }
            )
            consumer.subscribe([topic])
            consumers[protocol] = consumer
            deadline = time.monotonic() + 20
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.1)
            assert len(consumer.assignment()) == 2
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
        assert listed[f"{group}-classic"] == ConsumerGroupType.CLASSIC
        assert listed[f"{group}-consumer"] == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups([f"{group}-classic", f"{group}-consumer"])
        classic = described[f"{group}-classic"].result(10)
        kip848 = described[f"{group}-consumer"].result(10)
        assert (classic.partition_assignor, kip848.partition_assignor) == ("range", "uniform")
        for description in (classic, kip848):
            [member] = description.members
            assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
    finally:
        for consumer in consumers.values():
            consumer.close()
