"""``kfast groups`` against a broker with real confluent-kafka groups."""

from __future__ import annotations

import uuid

import pytest

from kfast.cli import main
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory):
    instance = KfastBroker(
        {"group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 500},
        data_dir=str(tmp_path_factory.mktemp("kfast-groups-cli")),
    )
    instance.start()
    yield instance
    instance.close()


def kfast_groups(capsys, broker, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["groups", *args, "--bootstrap-server", broker.bootstrap_servers])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    return [line.split() for line in lines[start + 1 :] if line.strip()]


@pytest.fixture
def loaded(cli_broker):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"cli-{uuid.uuid4().hex[:6]}", f"cli-group-{uuid.uuid4().hex[:6]}"
    bootstrap = cli_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce(topic, b"v", partition=i % 3)
    assert producer.flush(15) == 0
    return topic, group


def test_describe_shows_members_offsets_and_lag(capsys, cli_broker, loaded):
    from confluent_kafka import Consumer, TopicPartition

    topic, group = loaded
    consumer = Consumer(
        {
            "bootstrap.servers": cli_broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "cli-test-client",
        }
    )
    try:
        consumer.subscribe([topic])
        consumed = 0
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                consumed += 1
            if consumed >= 5 and len(consumer.assignment()) == 3:
                break
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
        status, out, _ = kfast_groups(capsys, cli_broker, "describe", "--group", group)
        assert status == 0
        table = {int(r[2]): r for r in rows(out)}
        assert sorted(table) == [0, 1, 2]
        assert table[0][3:6] == ["4", "10", "6"]  # committed, log end, lag
        assert table[1][3] == "-" and table[1][4] == "10"
        assert all(r[8] == "cli-test-client" for r in table.values())
        status, out, _ = kfast_groups(capsys, cli_broker, "list", "--state")
        assert [group, "Stable"] in [line.split() for line in out.splitlines()]
        status, _, err = kfast_groups(
            capsys,
            cli_broker,
            "reset-offsets",
            "--group",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
        )
        assert status == 1 and "inactive" in err
    finally:
        consumer.close()


def test_reset_offsets_then_delete(capsys, cli_broker, loaded):
    topic, group = loaded
    status, out, _ = kfast_groups(
        capsys, cli_broker, "reset-offsets", "--group", group, "--topic", topic, "--to-latest"
    )
    assert status == 0 and [r[3] for r in rows(out)] == ["10", "10", "10"]
    status, out, _ = kfast_groups(capsys, cli_broker, "list")
    assert group not in out.split()  # a dry run commits nothing
    status, out, _ = kfast_groups(
        capsys,
        cli_broker,
        "reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:1",
        "--to-offset",
        "7",
        "--execute",
    )
    assert status == 0
    status, out, _ = kfast_groups(capsys, cli_broker, "describe", "--group", group)
    assert [(r[2], r[3], r[5]) for r in rows(out)] == [("1", "7", "3")]
    assert "has no active members" in out
    status, out, _ = kfast_groups(capsys, cli_broker, "delete", "--group", group)
    assert status == 0 and f"('{group}') was successful" in out
    status, _, err = kfast_groups(capsys, cli_broker, "describe", "--group", group)
    assert status == 1 and "does not exist" in err
    status, out, _ = kfast_groups(capsys, cli_broker, "delete", "--group", group)
    assert status == 1 and "GroupIdNotFoundException" in out


def test_describe_a_kip848_group(capsys, cli_broker, loaded):
    from confluent_kafka import Consumer

    topic, group = loaded
    consumer = Consumer(
        {
            "bootstrap.servers": cli_broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "client.id": "kip848-client",
        }
    )
    owned: set[int] = set()
    try:
        consumer.subscribe([topic], on_assign=lambda c, ps: owned.update(p.partition for p in ps))
        for _ in range(100):
            consumer.poll(0.1)
            if len(owned) == 3:
                break
        assert owned == {0, 1, 2}
        status, out, _ = kfast_groups(capsys, cli_broker, "describe", "--group", group)
        assert status == 0
        table = rows(out)
        assert sorted(int(r[2]) for r in table) == [0, 1, 2]
        assert {r[8] for r in table} == {"kip848-client"}
        status, out, _ = kfast_groups(capsys, cli_broker, "list", "--state")
        assert [group, "Stable"] in [line.split() for line in out.splitlines()]
    finally:
        consumer.close()
