"""``kfast storage`` and ``kfast metadata-quorum`` against real processes,
with kafka-storage.sh's and kafka-metadata-quorum.sh's output."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from test_controller_quorum import write_on_leader

from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def kfast(*args, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "kfast", *args], capture_output=True, text=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_random_uuid_is_a_kafka_uuid():
    first, second = (
        kfast("storage", "random-uuid").stdout.split()[0],
        kfast("storage", "random-uuid").stdout.split()[0],
    )
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", first) and first != second


def test_format_writes_meta_properties_once_and_the_node_starts_with_its_cluster_id(tmp_path):
    cluster_id = kfast("storage", "random-uuid").stdout.strip()
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(f"node.id=3\nlog.dirs={data}\n")
    out = kfast("storage", "format", "--cluster-id", cluster_id, "--config", str(config)).stdout
    assert f"Formatting {data} with cluster id {cluster_id}." in out
    meta = (data / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta and "node.id=3" in meta and "version=1" in meta
    assert re.search(r"directory.id=[A-Za-z0-9_-]{22}", meta)
    again = kfast(
        "storage", "format", "--cluster-id", cluster_id, "--config", str(config), check=False
    )
    assert again.returncode == 1
    assert f"Log directory {data} is already formatted" in again.stderr
    assert (
        kfast(
            "storage",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(config),
            "--ignore-formatted",
        ).returncode
        == 0
    )
    refused = kfast(
        "storage",
        "format",
        "--cluster-id",
        cluster_id,
        "--config",
        str(config),
        "--standalone",
        check=False,
    )
    # A dynamic quorum's first voter must be a controller with a controller listener.
    assert refused.returncode == 1 and "No controller listeners found" in refused.stderr


def test_a_formatted_controller_quorum_starts_on_its_directories(tmp_path):
    cluster = KfastCluster(controllers=3, base_dir=str(tmp_path))
    try:
        for node in cluster.nodes.values():
            kfast(
                "storage",
                "format",
                "--cluster-id",
                cluster.cluster_id,
                "--config",
                node.config_path,
            )
        metas = {
            n: (tmp_path / f"node-{n}" / "data" / "meta.properties").read_text()
            for n in cluster.nodes
        }
        cluster.start()
        leader = write_on_leader(cluster, "log.retention.ms", "60000")
        assert leader in cluster.nodes
        # The nodes took the formatted directories as they were.
        for n, text in metas.items():
            assert (tmp_path / f"node-{n}" / "data" / "meta.properties").read_text() == text
    finally:
        cluster.close()


def test_metadata_quorum_describe_status_and_replication(tmp_path):
    with KfastCluster(controllers=3, base_dir=str(tmp_path)) as cluster:
        leader = write_on_leader(cluster, "log.retention.ms", "60000")
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
        status = kfast(
            "metadata-quorum", "--bootstrap-controller", bootstrap, "describe", "--status"
        ).stdout
        fields = dict(line.split(":", 1) for line in status.strip().splitlines())
        fields = {k: v.strip() for k, v in fields.items()}
        assert list(fields) == [
            "ClusterId",
            "LeaderId",
            "LeaderEpoch",
            "HighWatermark",
            "MaxFollowerLag",
            "MaxFollowerLagTimeMs",
            "CurrentVoters",
            "CurrentObservers",
        ]
        assert fields["ClusterId"] == cluster.cluster_id
        assert int(fields["LeaderId"]) == leader
        assert int(fields["HighWatermark"]) > 0
        assert fields["CurrentVoters"] == (
            '[{"id": 1, "directoryId": null}, '
            '{"id": 2, "directoryId": null}, '
            '{"id": 3, "directoryId": null}]'
        )
        table = (
            kfast(
                "metadata-quorum", "--bootstrap-controller", bootstrap, "describe", "--replication"
            )
            .stdout.strip()
            .splitlines()
        )
        assert table[0].split() == [
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        ]
        rows = [line.split() for line in table[1:]]
        assert [r[-1] for r in rows] == ["Leader", "Follower", "Follower"]
        assert int(rows[0][0]) == leader and rows[0][3] == "0"
        # A stopped quorum: the tool says so and exits 1.
        for node_id in cluster.nodes:
            cluster.kill(node_id)
        failed = kfast(
            "metadata-quorum",
            "--bootstrap-controller",
            bootstrap,
            "describe",
            "--status",
            check=False,
        )
        assert failed.returncode == 1 and "cannot describe the quorum" in failed.stderr


@pytest.mark.kfast_cluster_config(
    controllers=3,
    brokers=2,
    overrides={"broker.session.timeout.ms": 1500, "broker.heartbeat.interval.ms": 200},
)
def test_cluster_id_and_unregister_like_kafka_cluster_sh(kfast_cluster):
    cluster = kfast_cluster
    out = kfast("cluster", "cluster-id", "--bootstrap-server", cluster.bootstrap_servers).stdout
    assert out.strip() == f"Cluster ID: {cluster.cluster_id}"
    # Through a broker: DescribeQuorum is forwarded to the active controller,
    # which lists the brokers as observers.
    cluster.wait_until(
        lambda: (
            '"id": 5'
            in kfast(
                "metadata-quorum",
                "--bootstrap-server",
                f"127.0.0.1:{cluster.nodes[4].broker_port}",
                "describe",
                "--status",
            ).stdout
        ),
        10,
        "the brokers as observers",
    )
    status = kfast(
        "metadata-quorum",
        "--bootstrap-server",
        f"127.0.0.1:{cluster.nodes[4].broker_port}",
        "describe",
        "--status",
    ).stdout
    fields = {
        k.strip(): v.strip()
        for k, v in (line.split(":", 1) for line in status.strip().splitlines())
    }
    assert fields["ClusterId"] == cluster.cluster_id
    assert int(fields["LeaderId"]) in (1, 2, 3)
    assert fields["CurrentObservers"] == (
        '[{"id": 4, "directoryId": null}, {"id": 5, "directoryId": null}]'
    )
    # A registered broker cannot simply vanish: stop it, unregister it, and
    # the cluster no longer lists it (a fenced broker stays registered).
    cluster.kill(5)
    cluster.wait_for_brokers({4})
    out = kfast(
        "cluster",
        "unregister",
        "--bootstrap-server",
        f"127.0.0.1:{cluster.nodes[4].broker_port}",
        "--id",
        "5",
    ).stdout
    assert out.strip() == "Broker 5 is no longer registered."
    again = kfast(
        "cluster",
        "unregister",
        "--bootstrap-server",
        f"127.0.0.1:{cluster.nodes[4].broker_port}",
        "--id",
        "5",
        check=False,
    )
    assert again.returncode == 1 and "BrokerIdNotRegistered" in again.stderr
