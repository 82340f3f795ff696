"""InitProducerId (API key 22) for idempotent producers, and the broker's
ProducerIdManager (Kafka's RPCProducerIdManager).

An idempotent producer (no transactional id) gets a fresh producer id with
epoch 0; the sequence and epoch checks then happen in the partition logs'
producer state. Producer ids come in blocks the controller allocates
(AllocateProducerIds), so ids stay unique across restarts and brokers.

Transactional ids belong to the transaction coordinator: its InitProducerId
handler (kfast.server.transaction_apis) is registered over this one and
hands requests without a transactional id back here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from kfast.protocol import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_IDEMPOTENT_WRITE,
    ACL_OPERATION_WRITE,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_TOPIC,
    CLUSTER_RESOURCE_NAME,
)
from kfast.server.apis import ApiRegistry, RequestContext

logger = logging.getLogger(__name__)

INIT_PRODUCER_ID = api_keys.BY_NAME["InitProducerId"].key


class ProducerIdAllocator(Protocol):
    """Where blocks of producer ids come from: the active controller, in
    process or over the controller channel."""

    async def allocate_producer_ids(self, broker_id: int) -> tuple[int, int]: ...


class ProducerIdManager:
    """Hands out producer ids from controller-allocated blocks (Kafka's
    RPCProducerIdManager): the next block is requested once the current
    one is 90% used, so that a caller rarely waits for the controller."""

    # Kafka's PRODUCER_ID_PREFETCH_THRESHOLD: ask for the next block when
    # this share of the current one is handed out.
    PREFETCH_THRESHOLD = 0.9

    def __init__(self, controller: ProducerIdAllocator, broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self._next = 0
        self._end = 0
        self._prefetch_at = 0
        self._next_block: tuple[int, int] | None = None
        self._fetching: asyncio.Future[None] | None = None

    def generate_producer_id_now(self) -> int:
        """A producer id without waiting (the transaction coordinator's
        allocator, which must answer synchronously): from the block at
        hand, else COORDINATOR_LOAD_IN_PROGRESS (clients retry) while the
        next block is requested."""
        if self._next >= self._end and self._next_block is not None:
            first, count = self._next_block
            self._next_block = None
            self._next, self._end = first, first + count
            self._prefetch_at = first + int(count * self.PREFETCH_THRESHOLD)
        if self._next >= self._end:
            self._request_next_block()
            raise errors.CoordinatorLoadInProgressException(
                "Producer ID block is still being allocated"
            )
        producer_id = self._next
        self._next += 1
        if self._next >= self._prefetch_at:
            self._request_next_block()
        return producer_id

    async def generate_producer_id(self) -> int:
        """A producer id, waiting for the controller when no block is at hand."""
        while True:
            try:
                return self.generate_producer_id_now()
            except errors.CoordinatorLoadInProgressException:
                # Raised only once _request_next_block has a fetch under way.
                assert self._fetching is not None
                await asyncio.shield(self._fetching)

    def _request_next_block(self) -> None:
        if self._next_block is not None or (
            self._fetching is not None and not self._fetching.done()
        ):
            return
        self._fetching = asyncio.ensure_future(self._fetch_block())
        self._fetching.add_done_callback(_log_failed_fetch)

    async def _fetch_block(self) -> None:
        first, count = await self.controller.allocate_producer_ids(self.broker_id)
        self._next_block = (first, count)


def _log_failed_fetch(future: asyncio.Future[None]) -> None:
    # Retrieved here so that a failure nobody awaited is logged once; the
    # next request for an id asks again.
    if not future.cancelled() and future.exception() is not None:
        logger.warning("allocating a producer id block failed: %s", future.exception())


async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    """An idempotent producer's id (the transaction coordinator's handler
    takes the requests with a transactional id). Kafka: IDEMPOTENT_WRITE on
    the cluster, or WRITE on some topic (authorizeByResourceType)."""
    if not ctx.authorize(
        ACL_OPERATION_IDEMPOTENT_WRITE, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME
    ) and not ctx.authorize_by_resource_type(ACL_OPERATION_WRITE, ACL_RESOURCE_TOPIC):
        return _error_response(ctx, request, errors.ClusterAuthorizationException())
    manager: ProducerIdManager = ctx.broker.producer_id_manager
    producer_id = await manager.generate_producer_id()
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)


def _error_response(
    ctx: RequestContext, request: InitProducerIdRequest, error: errors.KafkaError
) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error.code, producer_id=-1, producer_epoch=-1)


def register(apis: ApiRegistry) -> None:
    apis.register(INIT_PRODUCER_ID, handle_init_producer_id, error_response=_error_response)


async def handle_allocate_producer_ids(
    ctx: RequestContext, request: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    """AllocateProducerIds on the controller listener: a block of producer
    ids for a broker of the cluster (the active controller's)."""
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    controller: ProducerIdAllocator = ctx.broker.controller
    first, count = await controller.allocate_producer_ids(request.broker_id)
    return AllocateProducerIdsResponse(error_code=0, producer_id_start=first, producer_id_len=count)


def _allocate_error_response(
    ctx: RequestContext, request: AllocateProducerIdsRequest, error: errors.KafkaError
) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(error_code=error.code)


def register_controller(apis: ApiRegistry) -> None:
    apis.register(
        api_keys.BY_NAME["AllocateProducerIds"].key,
        handle_allocate_producer_ids,
        error_response=_allocate_error_response,
    )
