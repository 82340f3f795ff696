"""The KRaft quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch (of ``__cluster_metadata-0``) and FetchSnapshot.

Each handler hands the request to the node's RaftManager
(``ctx.broker.raft_manager``), which answers as the Raft core decides; a
Fetch may be held until the leader has new records or the high watermark
moves (up to the request's max_wait_ms). A Fetch for any other partition is
not a quorum member's and is refused with INVALID_REQUEST: the controller
listener serves no data partitions.
"""
from __future__ import annotations

from kfast.protocol import FetchResponse, errors
from kfast.raft import wire
from kfast.raft.manager import FETCH, QUORUM_API_KEYS
from kfast.server.apis import KafkaApis, RequestContext


async def handle_quorum_request(ctx: RequestContext, request):
    if ctx.api_key == FETCH and not wire.is_quorum_fetch(request):
        return FetchResponse(error_code=errors.InvalidRequestException.code)
    return await ctx.broker.raft_manager.handle_request(ctx.api_key, request)


def register(apis: KafkaApis) -> None:
    for api_key in QUORUM_API_KEYS:
        apis.register(api_key, handle_quorum_request)
