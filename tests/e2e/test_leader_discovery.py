"""Leader discovery in error responses (KIP-951) on a 3-broker cluster of
real processes: a Produce v10+ or Fetch v16+ sent to a follower (or, for
Fetch, with a stale leader epoch) answers with the partition's current
leader and epoch and the leader's endpoint on the listener the request came
in on; older versions carry no hint (the fields do not exist there)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from replication_support import create

from kfast.client.connection import BlockingConnection
from kfast.protocol import FetchRequest, MetadataRequest, ProduceRequest, errors
from kfast.records import RecordBatchBuilder

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

ONE_CONTROLLER = pytest.mark.kfast_cluster_config(controllers=1, brokers=3)
_NOT_LEADER = errors.NotLeaderOrFollowerException.code
_FENCED = errors.FencedLeaderEpochException.code


def produce_to(cluster, node: int, topic: str, version: int):
    builder = RecordBatchBuilder()
    builder.append(0, None, b"v")
    request = ProduceRequest(
        # acks=1: the hint does not depend on acks, and acks=-1 on a topic
        # just created would also wait for the followers to start fetching
        # (REQUEST_TIMED_OUT after 5 s on a loaded machine: seen once).
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=builder.build())
                ],
            )
        ],
    )
    with BlockingConnection("127.0.0.1", cluster.nodes[node].broker_port) as connection:
        return connection.send(request, version=version)


@ONE_CONTROLLER
def test_produce_to_a_follower_names_the_current_leader(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "hinted")
    state = cluster.partition_state("hinted")[0]
    follower = next(n for n in state.replicas if n != state.leader)
    # A new partition is in every broker's metadata a moment apart.
    cluster.wait_until(
        lambda: cluster.partition_state("hinted", via=follower),
        10,
        "the follower knowing the partition",
    )
    response = produce_to(cluster, follower, "hinted", 12)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == _NOT_LEADER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        state.leader,
        state.leader_epoch,
    )
    [endpoint] = response.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port) == (
        state.leader,
        "127.0.0.1",
        cluster.nodes[state.leader].broker_port,
    )
    # The leader itself accepts it and names nobody.
    response = produce_to(cluster, state.leader, "hinted", 12)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == 0 and response.node_endpoints == []
    # Produce v9 has no such fields: the error alone.
    response = produce_to(cluster, follower, "hinted", 9)
    assert response.responses[0].partition_responses[0].error_code == _NOT_LEADER


def fetch_from(cluster, node: int, topic: str, version: int, leader_epoch: int = -1):
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=cluster_topic_id(cluster, topic),
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0,
                        current_leader_epoch=leader_epoch,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with BlockingConnection("127.0.0.1", cluster.nodes[node].broker_port) as connection:
        return connection.send(request, version=version)


def cluster_topic_id(cluster, topic: str):
    with BlockingConnection("127.0.0.1", cluster.nodes[2].broker_port) as connection:
        metadata = connection.send(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), version=12
        )
    return metadata.topics[0].topic_id


@ONE_CONTROLLER
def test_fetch_from_a_non_replica_or_with_a_stale_epoch_names_the_current_leader(kfast_cluster):
    """Fetch v16+: NOT_LEADER_OR_FOLLOWER (a broker that knows the
    partition but hosts no replica of it, as Kafka's getPartitionOrError)
    and FENCED_LEADER_EPOCH (the consumer's leader epoch is older than the
    leader's) carry the current leader. (A follower serves a v11+
    consumer's fetch itself, KIP-392, so it is not the case to test.)"""
    cluster = kfast_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("fetched", 1, 2)])["fetched"].result(30)
    cluster.wait_until(
        lambda: all(
            cluster.partition_state("fetched", via=n).get(0)
            and cluster.partition_state("fetched", via=n)[0].leader >= 0
            for n in (2, 3, 4)
        ),
        15,
        "every broker knowing the leader",
    )
    state = cluster.partition_state("fetched")[0]
    outsider = next(n for n in (2, 3, 4) if n not in state.replicas)
    leader_endpoint = (state.leader, "127.0.0.1", cluster.nodes[state.leader].broker_port)
    # Leader epochs start at 0: bump it with a preferred election to have
    # an older epoch to send.
    cluster.kill(state.leader)
    cluster.wait_until(
        lambda: cluster.partition_state("fetched")[0].leader not in (-1, state.leader),
        20,
        "a new leader",
    )
    cluster.restart(state.leader)
    state = cluster.partition_state("fetched")[0]
    leader_endpoint = (state.leader, "127.0.0.1", cluster.nodes[state.leader].broker_port)
    for node, epoch, error in (
        (outsider, -1, _NOT_LEADER),
        (state.leader, state.leader_epoch - 1, _FENCED),
    ):
        response = fetch_from(cluster, node, "fetched", 16, epoch)
        [partition] = response.responses[0].partitions
        assert partition.error_code == error
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
            state.leader,
            state.leader_epoch,
        )
        [endpoint] = response.node_endpoints
        assert (endpoint.node_id, endpoint.host, endpoint.port) == leader_endpoint
    # Fetch v15 has no node_endpoints: the error alone.
    response = fetch_from(cluster, outsider, "fetched", 15)
    assert response.responses[0].partitions[0].error_code == _NOT_LEADER
