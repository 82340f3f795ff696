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
"""
from __future__ import annotations

import asyncio

from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.server.apis import KafkaApis, RequestContext


async def handle_txn_offset_commit(ctx: RequestContext, request):
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    image = ctx.broker.metadata_image
    code = runtime.check_coordinator(request.group_id)
    results: dict[tuple, int] = {}
    offsets = {}
    layout = []
    for topic in request.topics:
        rows = []
        partitions = image.topics_by_name.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            rows.append(tp)
            if code:
                results[tp] = code
            elif partitions is None or p.partition_index not in partitions.partitions:
                results[tp] = E.UnknownTopicOrPartitionException.code
            else:
                offsets[tp] = (p.committed_offset,
                               p.committed_leader_epoch if version >= 2 else -1,
                               p.committed_metadata)
        layout.append((topic.name, rows))
    if offsets:
        future = asyncio.get_running_loop().create_future()
        runtime.coordinator.commit_transactional_offsets(
            request.group_id, request.member_id if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            request.generation_id if version >= 3 else -1,
            request.producer_id, request.producer_epoch, offsets,
            lambda found: future.done() or future.set_result(found))
        results.update(future.result() if future.done() else await future)
    return {"topics": [{"name": name, "partitions": [
        {"partition_index": tp[1], "error_code": results[tp]} for tp in rows]}
        for name, rows in layout]}


def register(apis: KafkaApis) -> None:
    apis.register(api_keys.BY_NAME["TxnOffsetCommit"].key, handle_txn_offset_commit)
