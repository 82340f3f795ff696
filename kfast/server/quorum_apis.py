"""The KRaft quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch (of ``__cluster_metadata-0``) and FetchSnapshot; the
voter changes of KIP-853 (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter),
which kafka-metadata-quorum.sh sends to a controller; DescribeQuorum as the
leader sees the quorum (voters with directory ids and endpoints); and
DescribeCluster for the controller endpoint type (KIP-919), which tools that
bootstrap from the controllers (``--bootstrap-controller``) send first.

Each handler hands the request to the node's RaftManager
(``ctx.broker.raft_manager``), which answers as the Raft core decides; a
Fetch may be held until the leader has new records or the high watermark
moves (up to the request's max_wait_ms). A Fetch for any other partition is
not a quorum member's and is refused with INVALID_REQUEST: the controller
listener serves no data partitions.
"""

from __future__ import annotations

import time
from uuid import UUID

from kfast.protocol import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_DESCRIBE,
    ENDPOINT_TYPE_BROKER,
    ENDPOINT_TYPE_CONTROLLER,
    NO_LEADER,
    ZERO_UUID,
)
from kfast.protocol.schema import Message
from kfast.raft import wire
from kfast.raft.manager import FETCH, QUORUM_API_KEYS, RaftManager
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.storage.manager import CLUSTER_METADATA_TOPIC_NAME


async def handle_quorum_request(ctx: RequestContext, request: Message) -> Message:
    """Any of the quorum's RPCs (QUORUM_API_KEYS) but Fetch: the Raft core answers."""
    # Kafka's ControllerApis: only nodes of the cluster (CLUSTER_ACTION).
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    raft: RaftManager = ctx.broker.raft_manager
    response: Message = await raft.handle_request(ctx.api_key, request)
    return response


async def handle_quorum_fetch(ctx: RequestContext, request: FetchRequest) -> Message:
    """A Fetch on the controller listener: the Raft core answers one of
    ``__cluster_metadata-0``; any other is refused."""
    if not wire.is_quorum_fetch(request):
        ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
        return FetchResponse(error_code=errors.InvalidRequestException.code)
    return await handle_quorum_request(ctx, request)


def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    """The controllers, as a controller listener describes the cluster: each
    voter with its configured endpoint; controller_id is the active one."""
    server = ctx.broker
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    if ctx.api_version < 1 or request.endpoint_type != ENDPOINT_TYPE_CONTROLLER:
        return DescribeClusterResponse(
            error_code=errors.UnsupportedEndpointTypeException.code,
            error_message="The controller listener only describes controllers.",
            endpoint_type=ENDPOINT_TYPE_BROKER,
            cluster_id=server.cluster_id or "",
        )
    controller = server.controller
    return DescribeClusterResponse(
        error_code=0,
        endpoint_type=ENDPOINT_TYPE_CONTROLLER,
        cluster_id=server.cluster_id,
        controller_id=controller.leader_id if controller is not None else -1,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=node_id, host=address[0], port=address[1]
            )
            for node_id, address in sorted(server.voters.items())
            if address
        ],
    )


def handle_describe_quorum(
    ctx: RequestContext, request: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    """``__cluster_metadata-0`` as its leader sees it: every voter of the set
    in force and every observer, with directory ids (v2), log end offsets,
    fetch and caught-up times; ``nodes`` (v2) the voters' endpoints. A
    replica that does not lead answers NOT_LEADER_OR_FOLLOWER per partition."""
    Response = DescribeQuorumResponse
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    raft: RaftManager | None = ctx.broker.raft_manager
    client = raft.client if raft is not None else None

    def refused(
        p: DescribeQuorumRequest.PartitionData, code: int, message: str
    ) -> DescribeQuorumResponse.PartitionData:
        return Response.PartitionData(
            partition_index=p.partition_index,
            error_code=code,
            error_message=message,
            leader_id=NO_LEADER,
            leader_epoch=-1,
            high_watermark=-1,
        )

    topics: list[DescribeQuorumResponse.TopicData] = []
    for topic in request.topics:
        partitions: list[DescribeQuorumResponse.PartitionData] = []
        for p in topic.partitions:
            if topic.topic_name != CLUSTER_METADATA_TOPIC_NAME or p.partition_index != 0:
                partitions.append(
                    refused(
                        p,
                        errors.UnknownTopicOrPartitionException.code,
                        f"Unknown topic partition {topic.topic_name}-{p.partition_index}",
                    )
                )
            elif raft is None or client is None or not client.is_leader:
                leader = client.leader_id if client is not None else NO_LEADER
                partitions.append(
                    refused(
                        p,
                        errors.NotLeaderOrFollowerException.code,
                        f"Node {ctx.broker.node_id} is not the quorum leader "
                        f"(the leader is {leader}).",
                    )
                )
            else:
                partitions.append(_quorum_partition(raft))
        topics.append(Response.TopicData(topic_name=topic.topic_name, partitions=partitions))
    nodes: list[DescribeQuorumResponse.Node] = []
    if ctx.api_version >= 2 and client is not None and client.is_leader:
        for voter in client.quorum.voter_set.nodes:
            # A static voter's address has no listener name to publish.
            nodes.append(
                Response.Node(
                    node_id=voter.voter_id,
                    listeners=[
                        Response.Listener(name=e.name, host=e.host, port=e.port)
                        for e in voter.endpoints
                        if e.name
                    ],
                )
            )
    return Response(error_code=0, topics=topics, nodes=nodes)


def _quorum_partition(raft: RaftManager) -> DescribeQuorumResponse.PartitionData:
    Response = DescribeQuorumResponse
    client = raft.client
    now_ms = raft.now_ms()
    replicas = client.leader_replica_states(now_ms)
    voter_set = client.quorum.voter_set
    # The Raft layer's clock is the loop's; DescribeQuorum reports wall time.
    wall_minus_loop = int(time.time() * 1000) - now_ms

    def row(node_id: int, directory_id: UUID | None) -> DescribeQuorumResponse.ReplicaState:
        state = replicas.get(node_id)
        fetched = caught_up = -1
        end = -1
        if state is not None and state.last_fetch_ms >= 0:
            end = state.end_offset
            fetched = state.last_fetch_ms + wall_minus_loop
            caught_up = (
                state.last_caught_up_ms + wall_minus_loop if state.last_caught_up_ms >= 0 else -1
            )
            directory_id = state.directory_id if directory_id is None else directory_id
        if node_id == client.node_id:
            caught_up = fetched
        return Response.ReplicaState(
            replica_id=node_id,
            replica_directory_id=directory_id or ZERO_UUID,
            log_end_offset=end,
            last_fetch_timestamp=fetched,
            last_caught_up_timestamp=caught_up,
        )

    voters = [row(n.voter_id, n.directory_id) for n in voter_set.nodes]
    observers = [row(node_id, None) for node_id in sorted(replicas) if node_id not in voter_set]
    return Response.PartitionData(
        partition_index=0,
        error_code=0,
        leader_id=client.node_id,
        leader_epoch=client.epoch,
        high_watermark=client.high_watermark,
        current_voters=voters,
        observers=observers,
    )


def register_describe_quorum(apis: ApiRegistry) -> None:
    apis.register(api_keys.BY_NAME["DescribeQuorum"].key, handle_describe_quorum)


def register(apis: ApiRegistry) -> None:
    for api_key in QUORUM_API_KEYS:
        if api_key == FETCH:
            apis.register(api_key, handle_quorum_fetch)
        else:
            apis.register(api_key, handle_quorum_request)
    apis.register(api_keys.BY_NAME["DescribeCluster"].key, handle_describe_cluster)
