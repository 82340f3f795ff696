"""TxnOffsetCommit (API key 28): a transactional producer's
sendOffsetsToTransaction, answered by the group coordinator
(Kafka's KafkaApis.handleTxnOffsetCommitRequest).

The offsets are written to the group's __consumer_offsets partition in a
transactional batch of the producer (producer id and epoch from the
request) and stay pending until the transaction's marker reaches that
partition (kfast.coordinator.group.offsets). Per partition: the
coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION for a partition the
metadata lacks, else the group's validation (v3+ carries the member and
generation: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).

Before the offsets are written the transaction coordinator is asked, as for
a transactional Produce (KIP-890, transaction.partition.verification.enable):
unless the producer already has a transaction ongoing (at its epoch) on the
group's __consumer_offsets partition, v0-4 verify that partition is in the
transaction (the client sent AddOffsetsToTxn) and v5+ -- transaction version
2 clients, which send no AddOffsetsToTxn -- have the coordinator add it
(Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation).
The answer, mapped as Kafka's group coordinator maps it, goes to every
partition: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE
as INVALID_TXN_STATE below v4, and a retriable coordinator error as
COORDINATOR_NOT_AVAILABLE (the client finds the coordinator and retries).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.protocol import TxnOffsetCommitRequest, api_keys
from kfast.protocol import errors as E
from kfast.protocol.constants import (
    ACL_OPERATION_READ,
    ACL_OPERATION_WRITE,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
)
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.server.transaction_verification import (
    RETRIABLE_VERIFICATION_ERRORS,
    TransactionalWrite,
    needs_verification,
)

# The first TxnOffsetCommit version that may receive TRANSACTION_ABORTABLE,
# and the first from transaction version 2 clients (the partition is added).
_FIRST_ABORTABLE_VERSION = 4
_FIRST_ADDING_VERSION = 5


async def _verify_offsets_partition(ctx: RequestContext, request: TxnOffsetCommitRequest) -> int:
    """0, or the error of every partition of the request: the transaction
    coordinator's answer for the group's __consumer_offsets partition."""
    broker = ctx.broker
    index = broker.group_coordinator.partition_for(request.group_id)
    partition = broker.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, index)
    if (
        partition is None
        or not partition.is_leader
        or not needs_verification(
            partition.log.producer_state, request.producer_id, request.producer_epoch
        )
    ):
        return 0
    write = TransactionalWrite(
        request.producer_id, request.producer_epoch, ctx.api_version >= _FIRST_ADDING_VERSION
    )
    # The partition to verify, with no guard: verify() reads only the keys,
    # and the group coordinator's offsets append checks none.
    write.guards[(GROUP_METADATA_TOPIC_NAME, index)] = None  # type: ignore[assignment]
    answers: dict[tuple[str, int], int] = await broker.add_partitions_to_txn_manager.verify(
        request.transactional_id, write
    )
    code = answers.get((GROUP_METADATA_TOPIC_NAME, index), 0)
    if code == E.ProducerFencedException.code:
        return E.InvalidProducerEpochException.code
    if code == E.TransactionAbortableException.code and ctx.api_version < _FIRST_ABORTABLE_VERSION:
        return E.InvalidTxnStateException.code
    if code in RETRIABLE_VERIFICATION_ERRORS:
        return E.CoordinatorNotAvailableException.code
    return code


async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    image = ctx.broker.metadata_image
    # Kafka: WRITE on the transactional id, READ on the group, READ per topic.
    if not ctx.authorize(
        ACL_OPERATION_WRITE, ACL_RESOURCE_TRANSACTIONAL_ID, request.transactional_id or ""
    ):
        code = E.TransactionalIdAuthorizationException.code
    elif not ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_GROUP, request.group_id):
        code = E.GroupAuthorizationException.code
    else:
        code = runtime.check_coordinator(request.group_id)
    results: dict[tuple[str, int], int] = {}
    # (topic, partition): (offset, leader epoch, metadata)
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    layout: list[tuple[str, list[tuple[str, int]]]] = []
    for topic in request.topics:
        rows: list[tuple[str, int]] = []
        partitions = image.topics_by_name.get(topic.name)
        readable = ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            rows.append(tp)
            if code:
                results[tp] = code
            elif not readable:
                results[tp] = E.TopicAuthorizationException.code
            elif partitions is None or p.partition_index not in partitions.partitions:
                results[tp] = E.UnknownTopicOrPartitionException.code
            else:
                offsets[tp] = (
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 2 else -1,
                    p.committed_metadata,
                )
        layout.append((topic.name, rows))
    if offsets and ctx.broker.config["transaction.partition.verification.enable"]:
        code = await _verify_offsets_partition(ctx, request)
        if code:
            results.update(dict.fromkeys(offsets, code))
            offsets = {}
    if offsets:
        future: asyncio.Future[dict[tuple[str, int], int]]
        future = asyncio.get_running_loop().create_future()

        def committed(found: dict[tuple[str, int], int]) -> None:
            if not future.done():
                future.set_result(found)

        runtime.coordinator.commit_transactional_offsets(
            request.group_id,
            request.member_id if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            request.generation_id if version >= 3 else -1,
            request.producer_id,
            request.producer_epoch,
            offsets,
            committed,
        )
        results.update(future.result() if future.done() else await future)
    return {
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": tp[1], "error_code": results[tp]} for tp in rows
                ],
            }
            for name, rows in layout
        ]
    }


def register(apis: ApiRegistry) -> None:
    apis.register(api_keys.BY_NAME["TxnOffsetCommit"].key, handle_txn_offset_commit)
