"""Leader discovery in error responses (KIP-951) on a 3-broker cluster of
real processes: a Produce v10+ sent to a follower answers
NOT_LEADER_OR_FOLLOWER with the partition's current leader and epoch and
the leader's endpoint on the listener the request came in on; older
versions carry no hint (the fields do not exist there)."""
from __future__ import annotations

import pytest

from kfast.client.connection import BlockingConnection
from kfast.protocol import ProduceRequest, errors
from kfast.records import RecordBatchBuilder

from replication_support import create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

ONE_CONTROLLER = pytest.mark.kfast_cluster_config(controllers=1, brokers=3)
_NOT_LEADER = errors.NotLeaderOrFollowerException.code


def produce_to(cluster, node: int, topic: str, version: int):
    builder = RecordBatchBuilder()
    builder.append(0, None, b"v")
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=builder.build())])])
    with BlockingConnection("127.0.0.1", cluster.nodes[node].broker_port) as connection:
        return connection.send(request, version=version)


@ONE_CONTROLLER
def test_produce_to_a_follower_names_the_current_leader(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "hinted")
    state = cluster.partition_state("hinted")[0]
    follower = next(n for n in state.replicas if n != state.leader)
    # A new partition is in every broker's metadata a moment apart.
    cluster.wait_until(lambda: cluster.partition_state("hinted", via=follower), 10,
                       "the follower knowing the partition")
    response = produce_to(cluster, follower, "hinted", 12)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == _NOT_LEADER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == \
        (state.leader, state.leader_epoch)
    [endpoint] = response.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port) == \
        (state.leader, "127.0.0.1", cluster.nodes[state.leader].broker_port)
    # The leader itself accepts it and names nobody.
    response = produce_to(cluster, state.leader, "hinted", 12)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == 0 and response.node_endpoints == []
    # Produce v9 has no such fields: the error alone.
    response = produce_to(cluster, follower, "hinted", 9)
    assert response.responses[0].partition_responses[0].error_code == _NOT_LEADER
