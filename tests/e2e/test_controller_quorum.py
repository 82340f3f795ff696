"""A KRaft controller quorum of three real ``kfast serve`` processes on 127.0.0.1.

The nodes talk Kafka's quorum RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch,
Fetch, FetchSnapshot) to each other through FaultProxy links, so the tests
kill processes with SIGKILL and cut the network between them while they run.
What a client sees is checked with Kafka's own RPCs: DescribeQuorum (the
leader, the voters' log end offsets) and CreateTopics sent to the active
controller (TOPIC_ALREADY_EXISTS after a failover proves the metadata
survived it).
"""

from __future__ import annotations

import os
import time

import pytest

from kfast.protocol import (
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    errors,
)
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER
from kfast.testing.cluster import RESET, KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

NOT_CONTROLLER = errors.NotControllerException.code
INVALID_REPLICATION_FACTOR = errors.InvalidReplicationFactorException.code
RETENTION = "log.retention.ms"


def create_topic(cluster: KfastCluster, node_id: int, name: str) -> int:
    """CreateTopics on one node; its error code for the topic."""
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        ],
        timeout_ms=10_000,
    )
    with cluster.connect(node_id, request_timeout=15) as connection:
        response = connection.send(request)
    return response.topics[0].error_code


def set_cluster_config(cluster: KfastCluster, node_id: int, name: str, value: str) -> int:
    """IncrementalAlterConfigs of a cluster-wide broker default on one node:
    a metadata write (ConfigRecord) a controller-only quorum can commit.
    Its error code."""
    Request = IncrementalAlterConfigsRequest
    request = Request(
        resources=[
            Request.AlterConfigsResource(
                resource_type=CONFIG_RESOURCE_BROKER,
                resource_name="",
                configs=[Request.AlterableConfig(name=name, config_operation=0, value=value)],
            )
        ]
    )
    with cluster.connect(node_id, request_timeout=15) as connection:
        response = connection.send(request)
    return response.responses[0].error_code


def cluster_config(cluster: KfastCluster, node_id: int, name: str) -> str | None:
    """The cluster-wide default of ``name`` as ``node_id``'s image holds it."""
    Request = DescribeConfigsRequest
    request = Request(
        resources=[
            Request.DescribeConfigsResource(
                resource_type=CONFIG_RESOURCE_BROKER, resource_name="", configuration_keys=[name]
            )
        ]
    )
    with cluster.connect(node_id, request_timeout=15) as connection:
        response = connection.send(request)
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return next((c.value for c in result.configs if c.name == name), None)


def write_on_leader(
    cluster: KfastCluster, name: str, value: str, timeout: float = 30.0, exclude=()
) -> int:
    """Set a cluster config on whichever node is the active controller,
    retrying while leadership moves; the node that took it."""
    deadline = time.monotonic() + timeout
    while True:
        leader = cluster.leader(exclude)
        if leader is not None:
            try:
                code = set_cluster_config(cluster, leader, name, value)
            except Exception:
                code = NOT_CONTROLLER
            if code == 0:
                return leader
        assert time.monotonic() < deadline, cluster_logs(cluster)
        time.sleep(0.05)


def cluster_logs(cluster: KfastCluster) -> str:
    return "\n".join(f"--- node {n} ---\n{cluster.log_tail(n)}" for n in cluster.nodes)


@pytest.fixture
def cluster(kfast_cluster):
    """The plugin's fixture, as a user's suite would take it."""
    return kfast_cluster


def caught_up(cluster: KfastCluster, leader: int, node_id: int) -> bool:
    state = cluster.describe_quorum(leader)
    ends = {v.replica_id: v.log_end_offset for v in state.current_voters}
    return ends[node_id] >= state.high_watermark


def test_three_controllers_elect_one_leader_and_replicate(cluster):
    # A new leader takes writes once its first batch (LeaderChange) has
    # committed: until then it answers NOT_CONTROLLER, and clients retry.
    leader = write_on_leader(cluster, RETENTION, "3600000")
    state = cluster.describe_quorum(leader)
    assert state.leader_id == leader and state.leader_epoch >= 1
    assert sorted(v.replica_id for v in state.current_voters) == [1, 2, 3]
    # The followers catch up to the leader's high watermark and hold the
    # write in their images (hot standbys).
    for node_id in cluster.nodes:
        cluster.wait_until(
            lambda: caught_up(cluster, leader, node_id), 10, f"node {node_id} caught up"
        )
        cluster.wait_until(
            lambda: cluster_config(cluster, node_id, RETENTION) == "3600000",
            10,
            f"node {node_id} applied the write",
        )
    # Only the leader describes the quorum and takes writes; the standbys
    # answer NOT_CONTROLLER. With no broker registered, a topic cannot be
    # placed (Kafka answers the same).
    for node_id in cluster.nodes:
        if node_id != leader:
            assert cluster.describe_quorum(node_id) is None
            assert set_cluster_config(cluster, node_id, RETENTION, "1") == NOT_CONTROLLER
            assert create_topic(cluster, node_id, "orders") == NOT_CONTROLLER
    assert create_topic(cluster, leader, "orders") == INVALID_REPLICATION_FACTOR


def test_kill_9_of_the_active_controller_elects_another_with_the_metadata(cluster):
    leader = write_on_leader(cluster, RETENTION, "7200000")
    cluster.kill(leader)
    began = time.monotonic()
    new_leader = write_on_leader(cluster, "log.retention.bytes", "1048576")
    failover = time.monotonic() - began
    assert new_leader != leader
    assert cluster_config(cluster, new_leader, RETENTION) == "7200000", (
        "the committed write was lost in the failover"
    )
    # The bound: admin requests succeed again within 2 s.
    assert failover < 2.0, f"failover took {failover:.2f} s\n{cluster_logs(cluster)}"
    # The killed node comes back as a follower, catches up, and has both writes.
    cluster.restart(leader)
    cluster.wait_until(
        lambda: caught_up(cluster, new_leader, leader), 15, "the restarted node caught up"
    )
    cluster.wait_until(
        lambda: cluster_config(cluster, leader, "log.retention.bytes") == "1048576",
        10,
        "the restarted node applied the new write",
    )
    assert cluster_config(cluster, leader, RETENTION) == "7200000"
    assert cluster.leader() == new_leader


def test_a_cut_off_leader_cannot_commit_and_the_majority_moves_on(cluster):
    leader = write_on_leader(cluster, RETENTION, "1000")
    cluster.isolate(leader)
    new_leader = cluster.wait_for_leader(timeout=30, exclude=(leader,))
    new_leader = write_on_leader(cluster, RETENTION, "2000", exclude=(leader,))
    # The old leader, alone, commits nothing: it resigned (check quorum) or
    # its write fails without a majority.
    try:
        code = set_cluster_config(cluster, leader, RETENTION, "lost")
    except Exception:
        code = NOT_CONTROLLER
    assert code != 0
    cluster.heal()
    # Healed, it follows the new leader and holds what the majority committed.
    cluster.wait_until(
        lambda: caught_up(cluster, new_leader, leader), 20, "the old leader caught up"
    )
    cluster.wait_until(
        lambda: cluster_config(cluster, leader, RETENTION) == "2000",
        10,
        "the old leader applied the majority's write",
    )
    assert cluster.leader() == new_leader


@pytest.mark.kfast_cluster_config(controllers=5)
def test_a_five_voter_quorum_survives_two_failures(cluster):
    leader = write_on_leader(cluster, RETENTION, "5")
    others = [n for n in cluster.nodes if n != leader]
    cluster.kill(leader)
    cluster.kill(others[0])
    new_leader = write_on_leader(cluster, RETENTION, "6", exclude=(leader, others[0]))
    assert new_leader in others[1:]
    assert all(cluster_config(cluster, n, RETENTION) in ("5", "6") for n in others[1:])
    # A third failure leaves no majority: through several election timeouts,
    # no survivor takes a write.
    cluster.kill(new_leader)
    survivors = [n for n in others[1:] if n != new_leader]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for node_id in survivors:
            try:
                code = set_cluster_config(cluster, node_id, RETENTION, "7")
            except Exception:
                code = NOT_CONTROLLER
            assert code != 0


@pytest.mark.kfast_cluster_config(
    overrides={"metadata.log.max.record.bytes.between.snapshots": 300}
)
def test_a_node_far_behind_catches_up_from_a_snapshot_and_restarts_from_one(cluster):
    """Every node snapshots its state every few hundred bytes of records and
    its log drops what the snapshot covers; a node that was down while that
    happened gets the leader's snapshot (FetchSnapshot), and a restarted node
    rebuilds its image from its snapshot plus the log after it."""
    leader = write_on_leader(cluster, RETENTION, "0")
    behind = next(n for n in cluster.nodes if n != leader)
    cluster.kill(behind)
    for i in range(1, 40):
        assert set_cluster_config(cluster, leader, RETENTION, str(i)) == 0
    partition_dir = os.path.join(cluster.nodes[leader].data_dir, "data", "__cluster_metadata-0")
    assert any(f.endswith(".checkpoint") for f in os.listdir(partition_dir)), (
        "the leader wrote no snapshot"
    )
    assert "loaded metadata snapshot" not in cluster.log_tail(behind, 1000)
    cluster.restart(behind)
    cluster.wait_until(lambda: caught_up(cluster, leader, behind), 20, "the node caught up")
    cluster.wait_until(
        lambda: cluster_config(cluster, behind, RETENTION) == "39",
        10,
        "the node applied the snapshot and the records after it",
    )
    # It had applied nearly nothing of its own: the snapshot came from the leader.
    assert "loaded metadata snapshot" in cluster.log_tail(behind, 1000)
    behind_dir = os.path.join(cluster.nodes[behind].data_dir, "data", "__cluster_metadata-0")
    assert any(f.endswith(".checkpoint") for f in os.listdir(behind_dir))
    # Every node restarted: state rebuilt from snapshot + log, writes go on.
    for node_id in cluster.nodes:
        cluster.restart(node_id)
    leader = write_on_leader(cluster, RETENTION, "40")
    for node_id in cluster.nodes:
        cluster.wait_until(
            lambda: cluster_config(cluster, node_id, RETENTION) == "40",
            15,
            f"node {node_id} rebuilt its image",
        )


@pytest.mark.kfast_cluster_config(overrides={"metadata.log.max.snapshot.interval.ms": 300})
def test_snapshots_are_also_taken_by_time(cluster):
    leader = write_on_leader(cluster, RETENTION, "0")
    partition_dir = os.path.join(cluster.nodes[leader].data_dir, "data", "__cluster_metadata-0")
    writes = iter(range(1, 10_000))

    def snapshotted():
        # Records keep being applied; a few hundred bytes never reach the
        # 20 MiB byte threshold, so only the interval can take a snapshot.
        assert set_cluster_config(cluster, leader, RETENTION, str(next(writes))) == 0
        return any(f.endswith(".checkpoint") for f in os.listdir(partition_dir))

    cluster.wait_until(snapshotted, 10, "a snapshot taken by time")


def test_followers_that_see_the_leaders_connections_reset_elect_at_once(cluster):
    """Closed connections (a peer's port refusing) instead of silent drops:
    followers learn of the loss at once and elect without the fetch timeout."""
    leader = cluster.wait_for_leader()
    cluster.isolate(leader, mode=RESET)
    began = time.monotonic()
    new_leader = cluster.wait_for_leader(timeout=30, exclude=(leader,))
    assert new_leader != leader
    assert time.monotonic() - began < 10


def test_a_node_of_another_cluster_refuses_to_start(tmp_path):
    with KfastCluster(controllers=1, base_dir=str(tmp_path)) as cluster:
        cluster.wait_for_leader()
        cluster.stop(1)
    other = KfastCluster(controllers=1, base_dir=str(tmp_path))
    try:
        other.start_node(1)
        status = other.nodes[1].process.wait(30)
        assert status != 0
        assert "cluster id" in other.log_tail(1).lower()
    finally:
        other.close()


def test_quorum_requests_from_another_cluster_are_refused(cluster):
    """A voter of another cluster (or a misconfigured one) gets
    INCONSISTENT_CLUSTER_ID and changes nothing here."""
    from kfast.raft import wire
    from kfast.raft.messages import VoteRequest

    leader = write_on_leader(cluster, RETENTION, "1")
    epoch = cluster.describe_quorum(leader).leader_epoch
    request = wire.vote_request(VoteRequest(epoch + 5, 9, epoch + 5, 10**6, False), "other", 1)
    with cluster.connect(leader) as connection:
        response = connection.send(request)
    assert response.error_code == errors.InconsistentClusterIdException.code
    state = cluster.describe_quorum(leader)
    assert (state.leader_id, state.leader_epoch) == (leader, epoch)
