"""KIP-853 dynamic controller quorums with real ``kfast serve`` processes:
formatted with ``kfast storage format --standalone`` / ``--initial-controllers``
/ ``--no-initial-controllers``, grown and shrunk with
``kfast metadata-quorum add-controller`` / ``remove-controller``, surviving
kill -9 of the leader. Metadata writes are IncrementalAlterConfigs of a
cluster-wide default (a ConfigRecord a controller-only quorum commits)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from test_controller_quorum import cluster_config, write_on_leader

from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]


def kfast(*args, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "kfast", *args], capture_output=True, text=True, timeout=90
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def status(cluster: KfastCluster, bootstrap: str | None = None) -> dict:
    out = kfast(
        "metadata-quorum",
        "--bootstrap-controller",
        bootstrap or cluster.controller_bootstrap,
        "describe",
        "--status",
    ).stdout
    return {
        k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.strip().splitlines())
    }


def voters(cluster: KfastCluster, bootstrap: str | None = None) -> list[dict]:
    """CurrentVoters of describe --status (Kafka prints them as JSON objects)."""
    return json.loads(status(cluster, bootstrap)["CurrentVoters"])


def observer_ids(cluster: KfastCluster, bootstrap: str | None = None) -> set[int]:
    return {o["id"] for o in json.loads(status(cluster, bootstrap)["CurrentObservers"])}


def add_controller(cluster: KfastCluster, node_id: int) -> str:
    return kfast(
        "metadata-quorum",
        "--bootstrap-controller",
        cluster.controller_bootstrap,
        "--command-config",
        cluster.nodes[node_id].config_path,
        "add-controller",
    ).stdout.strip()


def test_standalone_controller_grows_to_three_survives_kill_9_and_shrinks(tmp_path):
    with KfastCluster(
        controllers=3, base_dir=str(tmp_path), dynamic_quorum="standalone"
    ) as cluster:
        assert cluster.wait_for_leader() == 1
        write_on_leader(cluster, "log.retention.ms", "60000")
        # Nodes 2 and 3 follow the log as observers, found through the
        # bootstrap servers; then each joins with add-controller.
        cluster.wait_until(lambda: observer_ids(cluster) == {2, 3}, 30, "two observers")
        assert [v["id"] for v in voters(cluster)] == [1]
        for node_id in (2, 3):
            out = add_controller(cluster, node_id)
            port = cluster.nodes[node_id].port
            assert out == (
                f"Added controller {node_id} with directory id "
                f"{cluster.directory_id(node_id)} and endpoints: "
                f"CONTROLLER://127.0.0.1:{port}"
            )
        listed = voters(cluster)
        assert [(v["id"], v["directoryId"]) for v in listed] == [
            (n, cluster.directory_id(n)) for n in (1, 2, 3)
        ]
        assert listed[2]["endpoints"] == [f"CONTROLLER://127.0.0.1:{cluster.nodes[3].port}"]
        again = kfast(
            "metadata-quorum",
            "--bootstrap-controller",
            cluster.controller_bootstrap,
            "--command-config",
            cluster.nodes[2].config_path,
            "add-controller",
            check=False,
        )
        assert again.returncode == 1 and "DuplicateVoterException" in again.stderr

        # kill -9 of the leader: the other two are a majority of three.
        cluster.kill(1)
        new_leader = cluster.wait_for_leader(timeout=15, exclude={1})
        assert new_leader in (2, 3)
        write_on_leader(cluster, "log.retention.ms", "120000", exclude={1})
        cluster.wait_until(
            lambda: all(cluster_config(cluster, n, "log.retention.ms") == "120000" for n in (2, 3)),
            30,
            "the write on both survivors",
        )

        # The dead controller is removed for good; two voters remain and commit.
        survivors = ",".join(f"127.0.0.1:{cluster.nodes[n].port}" for n in (2, 3))
        out = kfast(
            "metadata-quorum",
            "--bootstrap-controller",
            survivors,
            "remove-controller",
            "--controller-id",
            "1",
            "--controller-directory-id",
            cluster.directory_id(1),
        ).stdout
        assert out.strip() == (
            f"Removed  KRaft controller 1 with directory id {cluster.directory_id(1)}"
        )
        assert [v["id"] for v in voters(cluster, survivors)] == [2, 3]
        write_on_leader(cluster, "log.retention.ms", "180000", exclude={1})
        # Node 1 comes back: no longer a voter, it follows as an observer.
        cluster.start_node(1)
        # The leader lists a removed voter among its observers from the
        # removal on (its replica state stays, as Kafka's LeaderState keeps
        # it), so "1 is an observer" can hold before node 1 is even up: wait
        # for its listener before asking it anything. That it really follows
        # is the catch-up check below.
        cluster.wait_listening(1)
        cluster.wait_until(
            lambda: 1 in observer_ids(cluster, survivors), 30, "node 1 as an observer"
        )
        assert [v["id"] for v in voters(cluster, survivors)] == [2, 3]
        cluster.wait_until(
            lambda: cluster_config(cluster, 1, "log.retention.ms") == "180000",
            30,
            "node 1 caught up",
        )


def test_initial_controllers_form_one_quorum_and_a_removed_follower_becomes_an_observer(tmp_path):
    with KfastCluster(controllers=3, base_dir=str(tmp_path), dynamic_quorum="initial") as cluster:
        leader = write_on_leader(cluster, "log.retention.ms", "60000")
        listed = voters(cluster)
        assert [(v["id"], v["directoryId"]) for v in listed] == [
            (n, cluster.directory_id(n)) for n in (1, 2, 3)
        ]
        # Every node holds the bootstrap checkpoint kafka-dump-log.sh prints.
        checkpoint = (
            tmp_path
            / "node-2"
            / "data"
            / "__cluster_metadata-0"
            / "00000000000000000000-0000000000.checkpoint"
        )
        dump = kfast("dump-log", "--deep-iteration", "--files", str(checkpoint)).stdout
        assert ' KRaftVersion {"version":0,"kRaftVersion":1}' in dump
        assert f'"voterDirectoryId":"{cluster.directory_id(3)}"' in dump
        # Remove a follower while it runs: it leaves the voters and stays as
        # an observer; the two left commit on their own.
        follower = next(n for n in (1, 2, 3) if n != leader)
        kfast(
            "metadata-quorum",
            "--bootstrap-controller",
            cluster.controller_bootstrap,
            "remove-controller",
            "--controller-id",
            str(follower),
            "--controller-directory-id",
            cluster.directory_id(follower),
        )
        assert follower not in [v["id"] for v in voters(cluster)]
        cluster.wait_until(
            lambda: follower in observer_ids(cluster), 30, "the removed follower as an observer"
        )
        cluster.kill(follower)
        write_on_leader(cluster, "log.retention.ms", "90000", exclude={follower})
        # A wrong directory id names no voter.
        other = next(n for n in (1, 2, 3) if n not in (leader, follower))
        refused = kfast(
            "metadata-quorum",
            "--bootstrap-controller",
            cluster.controller_bootstrap,
            "remove-controller",
            "--controller-id",
            str(other),
            "--controller-directory-id",
            cluster.directory_id(follower),
            check=False,
        )
        assert refused.returncode == 1 and "VoterNotFoundException" in refused.stderr


def create_topic_via_broker(cluster: KfastCluster, broker: int, name: str) -> int:
    from kfast.client.connection import BlockingConnection
    from kfast.protocol import CreateTopicsRequest

    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        ],
        timeout_ms=10_000,
    )
    with BlockingConnection(
        "127.0.0.1", cluster.nodes[broker].broker_port, request_timeout=15
    ) as connection:
        return connection.send(request).topics[0].error_code


def test_a_broker_finds_a_dynamic_quorum_through_its_bootstrap_servers(tmp_path):
    with KfastCluster(
        controllers=3, brokers=1, base_dir=str(tmp_path), dynamic_quorum="standalone"
    ) as cluster:
        # The broker knew only controller.quorum.bootstrap.servers: it found
        # the leader, registered, and serves.
        assert cluster.brokers() == {4}
        assert create_topic_via_broker(cluster, 4, "before") == 0
        cluster.wait_until(lambda: observer_ids(cluster) == {2, 3, 4}, 30, "the observers")
        for node_id in (2, 3):
            add_controller(cluster, node_id)
        cluster.kill(1)
        cluster.wait_for_leader(timeout=15, exclude={1})
        # Admin requests the broker forwards reach the new active controller,
        # which the broker knows from the voter set in the log.
        cluster.wait_until(
            lambda: create_topic_via_broker(cluster, 4, "after") in (0, 36),
            30,
            "a topic created after the failover",
        )
        cluster.wait_until(
            lambda: getattr(cluster.partition_state("after").get(0), "leader", None) == 4,
            30,
            "the broker leading the new topic",
        )


def test_combined_nodes_of_a_dynamic_quorum_serve_clients_and_survive_kill_9_of_the_leader(
    tmp_path,
):
    """process.roles=broker,controller with controller.quorum.bootstrap.servers
    and a directory formatted with --initial-controllers: each node is a
    voter and a broker of one cluster (not an embedded single node)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with KfastCluster(
        controllers=3, combined=True, base_dir=str(tmp_path), dynamic_quorum="initial"
    ) as cluster:
        assert cluster.brokers() == {1, 2, 3}
        assert [(v["id"], v["directoryId"]) for v in voters(cluster)] == [
            (n, cluster.directory_id(n)) for n in (1, 2, 3)
        ]
        # A dynamic quorum runs kraft.version 1, which brokers finalize.
        from test_api_versions_features import api_versions

        for node in cluster.nodes.values():
            assert api_versions(f"127.0.0.1:{node.broker_port}", 4)[1]["kraft.version"] == 1
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(10):
            producer.produce("orders", value=b"%d" % i)
        assert producer.flush(30) == 0

        leader = cluster.wait_for_leader()
        cluster.kill(leader)
        cluster.wait_for_leader(timeout=15, exclude={leader})
        survivor = next(n for n in (1, 2, 3) if n != leader)
        # A broker's admin request reaches the new active controller.
        cluster.wait_until(
            lambda: create_topic_via_broker(cluster, survivor, "after") in (0, 36),
            30,
            "a topic created after the failover",
        )
        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{cluster.nodes[survivor].broker_port}",
                "group.id": "g",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["orders"])
            values = []
            deadline = time.monotonic() + 60
            while len(values) < 10 and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    values.append(message.value())
        finally:
            consumer.close()
        assert values == [b"%d" % i for i in range(10)]
