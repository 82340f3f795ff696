"""A KIP-848 group (confluent-kafka, group.protocol=consumer) survives a
broker restart: the coordinator replays its records from __consumer_offsets,
so the group is described with the same members and epochs afterwards, the
members carry on with their epochs (no rebalance), no record is lost and the
committed offsets are intact. Without persistence the group would be gone
after the restart and its members would rejoin at epoch 0."""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e_support import wait_until

from kfast.protocol.errors import CoordinatorLoadInProgressException
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("confluent_kafka")

TOPIC = "kip848-restart"
GROUP = "kip848-restart-group"
PARTITIONS = 4
LOAD_IN_PROGRESS = CoordinatorLoadInProgressException.code


def describe(bootstrap: str):
    """The group as ConsumerGroupDescribe returns it (kfast's own client)."""
    from kfast.client.cluster import Cluster
    from kfast.protocol import ConsumerGroupDescribeRequest

    async def run():
        async with Cluster(bootstrap) as cluster:
            response = await cluster.send(None, ConsumerGroupDescribeRequest(group_ids=[GROUP]))
            return response.groups[0]

    def answered():
        group = asyncio.run(run())
        # While the coordinator replays the partition it answers "loading".
        return None if group.error_code == LOAD_IN_PROGRESS else group

    return wait_until(answered, message="the coordinator to load the group")


def members_of(group) -> dict:
    return {
        m.member_id: (
            m.member_epoch,
            sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
        )
        for m in group.members
    }


def produce(bootstrap: str, values) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(15) == 0


class Member:
    """A group.protocol=consumer consumer that commits each record it
    consumes before counting it."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": "kip848-restart",
            }
        )
        self.consumer.subscribe([TOPIC])
        self.values: list[str] = []

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error() is None:
            self.consumer.commit(message=message, asynchronous=False)
            self.values.append(message.value().decode())


def poll_until(members, condition, timeout=40.0, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if condition():
            return
    raise AssertionError(f"timed out waiting for {message}")


def kfast_groups_describe(capsys, bootstrap: str) -> list[list[str]]:
    """The rows of ``kfast groups describe`` (kafka-consumer-groups.sh's table)."""
    from kfast.cli import main

    capsys.readouterr()
    assert main(["groups", "describe", "--group", GROUP, "--bootstrap-server", bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    return [line.split() for line in lines[start + 1 :] if line.strip()]


def test_a_kip848_group_survives_a_broker_restart(tmp_path, capsys):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = KfastBroker(data_dir=str(tmp_path / "data")).start()
    members = []
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(15)
        first = [f"a{i}" for i in range(100)]
        produce(bootstrap, first)
        members = [Member(bootstrap), Member(bootstrap)]

        def consumed():
            return [v for m in members for v in m.values]

        def stable_with_both():
            group = describe(bootstrap)
            return (
                group.group_state == "Stable"
                and len(group.members) == 2
                and all(m.assignment.topic_partitions for m in group.members)
            )

        poll_until(
            members,
            lambda: len(consumed()) == len(first) and stable_with_both(),
            message="both members to consume the first records",
        )
        before = describe(bootstrap)
        committed = members[0].consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == len(first)

        broker.restart()

        # Described from the replayed records, before any member heartbeats
        # again (the first request loads the partition).
        after = describe(bootstrap)
        assert after.error_code == 0 and after.group_state == "Stable"
        assert (after.group_epoch, after.assignment_epoch) == (
            before.group_epoch,
            before.assignment_epoch,
        )
        assert members_of(after) == members_of(before)
        assert {m.client_id for m in after.members} == {"kip848-restart"}
        # kfast groups describe: the same owners, the committed offsets, no lag
        table = kfast_groups_describe(capsys, bootstrap)
        owners = {p: m for m, (_, ps) in members_of(before).items() for p in ps}
        assert sorted((int(r[2]), r[3], r[5], r[6]) for r in table) == [
            (p, "25", "0", owners[p]) for p in range(PARTITIONS)
        ]

        # Consumption carries on: every record once, no record lost.
        second = [f"b{i}" for i in range(100)]
        produce(bootstrap, second)
        poll_until(
            members,
            lambda: len(consumed()) >= len(first) + len(second),
            message="the records produced after the restart",
        )
        assert sorted(consumed()) == sorted(first + second)
        committed = members[1].consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == len(first) + len(second)

        # The members kept their ids and epochs: no rebalance happened.
        resumed = describe(bootstrap)
        assert members_of(resumed) == members_of(before)
        assert resumed.group_epoch == before.group_epoch
    finally:
        for member in members:
            member.consumer.close()
        broker.close()
