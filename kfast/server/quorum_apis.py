"""The KRaft quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch (of ``__cluster_metadata-0``) and FetchSnapshot; and
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

from kfast.protocol import DescribeClusterResponse, FetchResponse, api_keys, errors
from kfast.protocol.constants import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER
from kfast.raft import wire
from kfast.raft.manager import FETCH, QUORUM_API_KEYS
from kfast.server.apis import KafkaApis, RequestContext


async def handle_quorum_request(ctx: RequestContext, request):
    if ctx.api_key == FETCH and not wire.is_quorum_fetch(request):
        return FetchResponse(error_code=errors.InvalidRequestException.code)
    return await ctx.broker.raft_manager.handle_request(ctx.api_key, request)


def handle_describe_cluster(ctx: RequestContext, request):
    """The controllers, as a controller listener describes the cluster: each
    voter with its configured endpoint; controller_id is the active one."""
    server = ctx.broker
    if ctx.api_version < 1 or request.endpoint_type != ENDPOINT_TYPE_CONTROLLER:
        return DescribeClusterResponse(
            error_code=errors.UnsupportedEndpointTypeException.code,
            error_message="The controller listener only describes controllers.",
            endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=server.cluster_id or "")
    controller = server.controller
    return DescribeClusterResponse(
        error_code=0, endpoint_type=ENDPOINT_TYPE_CONTROLLER, cluster_id=server.cluster_id,
        controller_id=controller.leader_id if controller is not None else -1,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=node_id, host=host,
                                                               port=port)
                 for node_id, (host, port) in sorted(server.voters.items())])


def register(apis: KafkaApis) -> None:
    for api_key in QUORUM_API_KEYS:
        apis.register(api_key, handle_quorum_request)
    apis.register(api_keys.BY_NAME["DescribeCluster"].key, handle_describe_cluster)
