"""InitProducerId (API key 22) for idempotent producers, and the broker's
ProducerIdManager (Kafka's RPCProducerIdManager).

An idempotent producer (no transactional id) gets a fresh producer id with
epoch 0; the sequence and epoch checks then happen in the partition logs'
producer state. Producer ids come in blocks the controller allocates
(AllocateProducerIds), so ids stay unique across restarts and brokers.

Transactional ids belong to the transaction coordinator, which registers its
own InitProducerId handler over this one; until then a request with a
transactional id is answered COORDINATOR_NOT_AVAILABLE.
"""
from __future__ import annotations

import asyncio

from kfast.protocol import AllocateProducerIdsResponse, InitProducerIdResponse, api_keys, errors
from kfast.server.apis import KafkaApis, RequestContext

INIT_PRODUCER_ID = api_keys.BY_NAME["InitProducerId"].key


class ProducerIdManager:
    """Hands out producer ids from controller-allocated blocks."""

    def __init__(self, controller, broker_id: int):
        self.controller = controller
        self.broker_id = broker_id
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def generate_producer_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                first, count = await self.controller.allocate_producer_ids(self.broker_id)
                self._next, self._end = first, first + count
            producer_id = self._next
            self._next += 1
            return producer_id


async def handle_init_producer_id(ctx: RequestContext, request):
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=errors.CoordinatorNotAvailableException.code,
                                      producer_id=-1, producer_epoch=-1)
    producer_id = await ctx.broker.producer_id_manager.generate_producer_id()
    return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)


def _error_response(ctx, request, error):
    return InitProducerIdResponse(error_code=error.code, producer_id=-1, producer_epoch=-1)


def register(apis: KafkaApis) -> None:
    apis.register(INIT_PRODUCER_ID, handle_init_producer_id, error_response=_error_response)


async def handle_allocate_producer_ids(ctx: RequestContext, request):
    """AllocateProducerIds on the controller listener: a block of producer
    ids for a broker of the cluster (the active controller's)."""
    first, count = await ctx.broker.controller.allocate_producer_ids(request.broker_id)
    return AllocateProducerIdsResponse(error_code=0, producer_id_start=first,
                                       producer_id_len=count)


def register_controller(apis: KafkaApis) -> None:
    apis.register(api_keys.BY_NAME["AllocateProducerIds"].key, handle_allocate_producer_ids,
                  error_response=lambda ctx, request, error: AllocateProducerIdsResponse(
                      error_code=error.code))
