"""``kfast reassign-partitions`` and replication throttles between real
``kfast serve`` processes (one controller, brokers 2-4), seen by real
clients: a throttled move of a few MB to a new broker takes as long as the
rate says, --verify reports it and removes the throttles (DescribeConfigs
from confluent-kafka shows them set, then gone); --cancel of a throttled
move in progress restores the original replicas; --generate's proposal,
fed to --execute, moves the partitions where it said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from replication_support import read_all

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

ONE_CONTROLLER = pytest.mark.kfast_cluster_config(
    controllers=1,
    brokers=3,
    overrides={"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200},
)
RECORD = b"r" * 1000
THROTTLES = {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
THROTTLED_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def reassign(cluster, *options, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "reassign-partitions",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def plan_file(tmp_path, name: str, partitions: dict) -> str:
    path = tmp_path / name
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": partition, "replicas": replicas}
                    for (topic, partition), replicas in partitions.items()
                ],
            }
        )
    )
    return str(path)


def create_on(cluster, topic: str, assignment: list[list[int]]) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics(
        [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)]
    )[topic].result(30)
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state(topic)) == len(assignment)
            and all(p.leader >= 0 for p in cluster.partition_state(topic).values())
        ),
        15,
        f"{topic} created",
    )
    return admin


def fill(cluster, topic: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=RECORD, partition=i % partitions)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def broker_configs(admin: AdminClient, broker: int) -> dict:
    """The throttle rates DescribeConfigs lists for ``broker``: name -> (value, source)."""
    [future] = admin.describe_configs([ConfigResource("BROKER", str(broker))]).values()
    return {
        name: (entry.value, ConfigSource(entry.source))
        for name, entry in future.result(30).items()
        if name in THROTTLES
    }


def topic_throttles(admin: AdminClient, topic: str) -> dict:
    [future] = admin.describe_configs([ConfigResource("TOPIC", topic)]).values()
    configs = future.result(30)
    return {
        name: (configs[name].value, ConfigSource(configs[name].source))
        for name in THROTTLED_REPLICAS
    }


def replica_bytes(cluster, node: int, topic: str) -> int:
    directory = os.path.join(cluster.nodes[node].data_dir, "data", f"{topic}-0")
    if not os.path.isdir(directory):
        return 0
    return sum(
        os.path.getsize(os.path.join(directory, n))
        for n in os.listdir(directory)
        if n.endswith(".log")
    )


@ONE_CONTROLLER
def test_a_throttled_move_takes_as_long_as_the_rate_says_and_verify_removes_the_throttle(
    kfast_cluster, tmp_path
):
    """~2.5 MB moved from broker 2 to broker 3 at 200 KB/s: both quotas
    hold the catch-up to about 10 s (unthrottled it is well under a
    second); the throttle configs are in place while it moves and gone
    after --verify."""
    cluster = kfast_cluster
    admin = create_on(cluster, "throttled", [[2]])
    fill(cluster, "throttled", 2500)
    size = replica_bytes(cluster, 2, "throttled")
    assert size > 2_500_000
    plan = plan_file(tmp_path, "plan.json", {("throttled", 0): [3]})

    started = time.monotonic()
    executed = reassign(
        cluster, "--execute", "--reassignment-json-file", plan, "--throttle", "200000"
    )
    assert executed.stdout.splitlines() == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"throttled","partition":0,"replicas":[2],'
        '"log_dirs":["any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 200000 B/s",
        "Successfully started partition reassignment for throttled-0",
    ]
    # While it moves: the throttles as Kafka's tool sets them.
    for broker in (2, 3):
        assert broker_configs(admin, broker) == {
            name: ("200000", ConfigSource.DYNAMIC_BROKER_CONFIG) for name in THROTTLES
        }
    assert broker_configs(admin, 4) == {}
    assert topic_throttles(admin, "throttled") == {
        "leader.replication.throttled.replicas": ("0:2", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "follower.replication.throttled.replicas": ("0:3", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    }
    assert reassign(cluster, "--list").stdout == (
        "Current partition reassignments:\nthrottled-0: replicas: 3,2. adding: 3. removing: 2.\n"
    )
    in_progress = reassign(cluster, "--verify", "--reassignment-json-file", plan).stdout
    assert "Reassignment of partition throttled-0 is still in progress." in in_progress
    assert "Clearing" not in in_progress
    # Part of the data, not all of it, a few seconds in.
    cluster.wait_until(lambda: replica_bytes(cluster, 3, "throttled") > 0, 15, "broker 3 fetching")
    cluster.wait_until(lambda: time.monotonic() - started > 3, 5, "three seconds")
    assert 0 < replica_bytes(cluster, 3, "throttled") < size

    cluster.wait_until(
        lambda: cluster.partition_state("throttled")[0].replicas == (3,),
        60,
        "the throttled reassignment completed",
    )
    elapsed = time.monotonic() - started
    # 2.5 MB at 200 KB/s: the first 1 MB fetch is free, the rest waits
    # about 5 s a megabyte; without the throttle the move is done in < 1 s.
    assert elapsed > 6, f"the move took {elapsed:.1f} s: not throttled"

    verified = reassign(cluster, "--verify", "--reassignment-json-file", plan)
    assert verified.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition throttled-0 is completed.",
        "",
        "Clearing broker-level throttles on brokers 2,3,4",
        "Clearing topic-level throttles on topic throttled",
    ]
    for broker in (2, 3, 4):
        assert broker_configs(admin, broker) == {}
    assert topic_throttles(admin, "throttled") == {
        name: ("", ConfigSource.DEFAULT_CONFIG) for name in THROTTLED_REPLICAS
    }
    assert reassign(cluster, "--list").stdout == "No partition reassignments found.\n"
    got = read_all(cluster.bootstrap_servers, "throttled", 1, 2500)[0]
    assert [offset for offset, _ in got] == list(range(2500))


@ONE_CONTROLLER
def test_cancel_of_a_throttled_move_in_progress_restores_the_original_replicas(
    kfast_cluster, tmp_path
):
    cluster = kfast_cluster
    admin = create_on(cluster, "cancelled", [[2, 3]])
    cluster.wait_for_isr("cancelled", 0, {2, 3}, 15)
    fill(cluster, "cancelled", 3000)
    plan = plan_file(tmp_path, "plan.json", {("cancelled", 0): [4, 3]})
    reassign(cluster, "--execute", "--reassignment-json-file", plan, "--throttle", "50000")
    assert cluster.partition_state("cancelled")[0].replicas == (4, 3, 2)
    # Broker 4 has started to copy (at 50 KB/s, 3 MB would take a minute).
    cluster.wait_until(lambda: replica_bytes(cluster, 4, "cancelled") > 0, 15, "broker 4 fetching")
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan).stdout.startswith(
        "Status of partition reassignment:\n"
        "Reassignment of partition cancelled-0 is still in progress.\n"
    )

    cancelled = reassign(cluster, "--cancel", "--reassignment-json-file", plan)
    assert cancelled.stdout.splitlines() == [
        "Successfully cancelled partition reassignment for: cancelled-0",
        "None of the specified partition moves are active.",
        "Clearing broker-level throttles on brokers 2,3,4",
        "Clearing topic-level throttles on topic cancelled",
    ]
    state = cluster.partition_state("cancelled")[0]
    assert set(state.replicas) == {2, 3} and set(state.isr) == {2, 3} and state.leader == 2
    cluster.wait_until(
        lambda: not os.path.exists(os.path.join(cluster.nodes[4].data_dir, "data", "cancelled-0")),
        15,
        "the added replica deleted",
    )
    assert reassign(cluster, "--list").stdout == "No partition reassignments found.\n"
    for broker in (2, 3, 4):
        assert broker_configs(admin, broker) == {}
    assert topic_throttles(admin, "cancelled")["follower.replication.throttled.replicas"] == (
        "",
        ConfigSource.DEFAULT_CONFIG,
    )
    again = reassign(cluster, "--cancel", "--reassignment-json-file", plan)
    assert again.stdout.startswith("None of the specified partition reassignments are active.")
    got = read_all(cluster.bootstrap_servers, "cancelled", 1, 3000)[0]
    assert len(got) == 3000


@ONE_CONTROLLER
def test_generate_proposes_a_plan_that_execute_carries_out(kfast_cluster, tmp_path):
    cluster = kfast_cluster
    create_on(cluster, "spread", [[2], [2], [2]])
    fill(cluster, "spread", 300, partitions=3)
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"spread"}],"version":1}')
    generated = reassign(
        cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "3,4"
    ).stdout.splitlines()
    assert generated[0] == "Current partition replica assignment"
    assert json.loads(generated[1]) == {
        "version": 1,
        "partitions": [
            {"topic": "spread", "partition": p, "replicas": [2], "log_dirs": ["any"]}
            for p in range(3)
        ],
    }
    assert generated[2:4] == ["", "Proposed partition reassignment configuration"]
    proposal = json.loads(generated[4])
    targets = {p["partition"]: p["replicas"] for p in proposal["partitions"]}
    assert set(targets) == {0, 1, 2} and all(
        len(r) == 1 and r[0] in (3, 4) for r in targets.values()
    )
    assert {r[0] for r in targets.values()} == {3, 4}  # spread over both brokers
    plan = tmp_path / "proposed.json"
    plan.write_text(generated[4])

    executed = reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert (
        executed.stdout.splitlines()[-1]
        == "Successfully started partition reassignments for spread-0,spread-1,spread-2"
    )
    cluster.wait_until(
        lambda: (
            {p: list(info.replicas) for p, info in cluster.partition_state("spread").items()}
            == targets
        ),
        30,
        "the proposed assignment in place",
    )
    verified = reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
    assert verified.stdout.splitlines()[:4] == ["Status of partition reassignment:"] + [
        f"Reassignment of partition spread-{p} is completed." for p in range(3)
    ]
    got = read_all(cluster.bootstrap_servers, "spread", 3, 300)
    assert {p: len(records) for p, records in got.items()} == {0: 100, 1: 100, 2: 100}


@ONE_CONTROLLER
def test_execute_refuses_what_kafkas_tool_refuses(kfast_cluster, tmp_path):
    cluster = kfast_cluster
    create_on(cluster, "refused", [[2]])
    fill(cluster, "refused", 1500)  # more than the first, unthrottled fetch
    unknown = reassign(
        cluster,
        "--execute",
        "--reassignment-json-file",
        plan_file(tmp_path, "unknown.json", {("refused", 0): [9]}),
        check=False,
    )
    assert (unknown.returncode, unknown.stdout) == (1, "Error: Unknown broker id 9\n")
    missing = reassign(
        cluster,
        "--execute",
        "--reassignment-json-file",
        plan_file(tmp_path, "missing.json", {("refused", 5): [3]}),
        check=False,
    )
    assert (missing.returncode, missing.stdout) == (
        1,
        "Error: Unable to find partition: refused-5\n",
    )
    reassign(
        cluster,
        "--execute",
        "--reassignment-json-file",
        plan_file(tmp_path, "slow.json", {("refused", 0): [3]}),
        "--throttle",
        "1",
    )
    busy = reassign(
        cluster,
        "--execute",
        "--reassignment-json-file",
        plan_file(tmp_path, "other.json", {("refused", 0): [4]}),
        check=False,
    )
    assert busy.returncode == 1
    assert busy.stdout.startswith(
        "Cannot execute because there is an existing partition assignment."
    )
