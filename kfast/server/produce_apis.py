"""Produce (API key 0): KafkaApis.handleProduceRequest.

Per partition: resolve the topic (by name, or by topic id from v13), check
the request's record format, convert magic 0/1 message sets (Produce v0-v2
clients) to v2 batches, then append through the ReplicaManager, which
validates each batch (CRC, record count, size against max.message.bytes,
timestamps) and applies the producer-state rules of idempotence. A
partition whose log dir is below the free-space threshold
(kfast.storage.free_space) answers KAFKA_STORAGE_ERROR with the reason.

acks=0: nothing is sent back; if any partition failed, the connection is
closed instead, as Kafka does, so the producer notices and refreshes its
metadata.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias

from kfast.controller.topics import INTERNAL_TOPICS
from kfast.protocol import ProduceRequest, ProduceResponse, api_keys, errors
from kfast.protocol.constants import (
    ACL_OPERATION_WRITE,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
)
from kfast.records import peek_magic
from kfast.server import leader_hints, transaction_verification
from kfast.server.apis import ApiRegistry, KafkaApis, RequestContext
from kfast.server.quota import throttle_response
from kfast.server.transaction_verification import TransactionalWrite, start_verification

if TYPE_CHECKING:
    from kfast.protocol import RequestRecords

# Kafka lets only its admin tooling write to internal topics directly.
ADMIN_CLIENT_ID = "__admin_client"

logger = logging.getLogger(__name__)

_NOT_LEADER = errors.NotLeaderOrFollowerException.code
_PartitionResponse = ProduceResponse.PartitionProduceResponse
_TopicResponse = ProduceResponse.TopicProduceResponse
_MAX_DECOMPRESSED_BYTES_FACTOR = 64
# A v2 batch's batchLength (int32 at byte 8) counts the bytes after it.
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_LENGTH_OFFSET = 8
_BATCH_LENGTH_END = 12

# (topic, partition, v2 records, the partition's response) of one append
_Entry: TypeAlias = "tuple[str, int, RequestRecords, ProduceResponse.PartitionProduceResponse]"
# What ReplicaManager.append_records returns: None, or what acks=-1 awaits
_Waiting: TypeAlias = "Awaitable[object] | None"


def _check_records(version: int, records: RequestRecords | None) -> RequestRecords:
    """Kafka's ProduceRequest.validateRecords plus the legacy conversion;
    returns the v2 bytes to append."""
    if records is None or len(records) == 0:
        raise errors.InvalidRecordException(
            f"Produce requests with version {version} must have at least one record batch "
            f"per partition"
        )
    if len(records) < 17:
        raise errors.CorruptRecordException(
            f"Record set of {len(records)} bytes is too short for a batch header"
        )
    magic = peek_magic(records, 0)
    if magic >= 2:
        if version >= 3:
            size = _BATCH_LENGTH_END + _BATCH_LENGTH.unpack_from(records, _BATCH_LENGTH_OFFSET)[0]
            if size != len(records):
                raise errors.InvalidRecordException(
                    f"Produce requests with version {version} must have exactly one record "
                    f"batch per partition"
                )
        return records
    if version >= 3:
        raise errors.InvalidRecordException(
            f"Produce requests with version {version} are only allowed to contain record "
            f"batches with magic version 2"
        )
    if magic < 0:
        raise errors.CorruptRecordException(f"Invalid magic {magic}")
    from kfast._ext.legacy import convert_message_set_to_v2

    try:
        return convert_message_set_to_v2(
            records, max_decompressed_bytes=len(records) * _MAX_DECOMPRESSED_BYTES_FACTOR + 65536
        )
    except errors.KafkaError:
        raise
    except Exception as exc:
        raise errors.CorruptRecordException(f"Invalid legacy message set: {exc}") from exc


def checked_records(
    ctx: RequestContext, name: str, index: int, records: RequestRecords | None
) -> RequestRecords:
    """The checks of one partition before its append, after authorization:
    not an internal topic, hosted here, space left in its log dir, a valid
    record set (``_check_records``). Returns the v2 bytes to append; raises
    the partition's error."""
    if name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
        raise errors.InvalidTopicException(f"Cannot append to internal topic {name}")
    broker = ctx.broker
    broker.replica_manager.partition_or_raise(name, index)
    low_space = broker.log_manager.low_space_message(name, index)
    if low_space is not None:
        # Retriable (librdkafka and the Java producer retry it within
        # delivery.timeout.ms), so producers wait for space rather than
        # fail; POLICY_VIOLATION would not be.
        raise errors.KafkaStorageException(low_space)
    return _check_records(ctx.api_version, records)


def verification_guards(ctx: RequestContext) -> dict[tuple[str, int], object] | None:
    """What append_records checks transactional writes against: {} (filled
    by a verification) when transaction.partition.verification.enable is
    on, else None."""
    return {} if ctx.broker.config["transaction.partition.verification.enable"] else None


def handle_produce(
    ctx: RequestContext, request: ProduceRequest
) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    broker = ctx.broker
    replica_manager = broker.replica_manager
    version = ctx.api_version
    by_id = version >= 13
    responses: list[ProduceResponse.TopicProduceResponse] = []
    entries: list[_Entry] = []
    failed = False
    # Kafka refuses a transactional producer without WRITE on its id, then
    # each topic it may not WRITE to.
    # Without an authorizer every check passes: skipped, not asked.
    checked = ctx._authorizer() is not None
    txn_denied = (
        checked
        and request.transactional_id is not None
        and not ctx.authorize(
            ACL_OPERATION_WRITE, ACL_RESOURCE_TRANSACTIONAL_ID, request.transactional_id
        )
    )
    for topic_data in request.topic_data:
        topic_response = _TopicResponse(
            name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=[]
        )
        responses.append(topic_response)
        name = replica_manager.topic_name(topic_data.topic_id) if by_id else topic_data.name
        topic_denied = (
            checked
            and name is not None
            and not ctx.authorize(ACL_OPERATION_WRITE, ACL_RESOURCE_TOPIC, name)
        )
        for data in topic_data.partition_data:
            # error_code 0, log_append_time_ms and log_start_offset -1 are
            # the schema's defaults (class attributes, not set per object).
            response = _PartitionResponse(index=data.index, base_offset=-1)
            topic_response.partition_responses.append(response)
            try:
                if txn_denied:
                    raise errors.TransactionalIdAuthorizationException()
                if name is None:
                    raise errors.UnknownTopicIdException()
                if topic_denied:
                    raise errors.TopicAuthorizationException()
                records = checked_records(ctx, name, data.index, data.records)
            except errors.KafkaError as exc:
                response.error_code = exc.code
                response.error_message = str(exc) or None
                failed = True
                continue
            entries.append((name, data.index, records, response))
    guards = verification_guards(ctx)
    if guards is not None:
        write: TransactionalWrite | None = None
        if request.transactional_id is not None:
            try:
                # Produce v12+ (transaction version 2): the coordinator adds
                # the partitions rather than only verifying them.
                write = start_verification(broker, entries, ctx.api_version)
            except errors.KafkaError as exc:
                for _, _, _, response in entries:
                    response.error_code, response.error_message = exc.code, str(exc) or None
                return _answer(ctx, request, responses, entries, True, None)
        if write is not None:
            # The one await before appending: the coordinator's answer. A
            # pipelined later batch of the producer that appends first is
            # refused as out of order and sent again (check_verified).
            return _verify_then_append(ctx, request, responses, entries, failed, write)
    # Appends happen now, before any await: a producer's pipelined requests
    # reach the log in request order.
    waiting: _Waiting = replica_manager.append_records(
        request.timeout_ms, request.acks, entries, verification_guards=guards
    )
    return _answer(ctx, request, responses, entries, failed, waiting)


async def _verify_then_append(
    ctx: RequestContext,
    request: ProduceRequest,
    responses: list[ProduceResponse.TopicProduceResponse],
    entries: list[_Entry],
    failed: bool,
    write: TransactionalWrite,
) -> ProduceResponse | None:
    broker = ctx.broker
    verified: dict[tuple[str, int], int] = await broker.add_partitions_to_txn_manager.verify(
        request.transactional_id, write
    )
    appending: list[_Entry] = []
    for entry in entries:
        code = verified.get((entry[0], entry[1]), 0)
        if code:
            response = entry[3]
            response.error_code, response.error_message = transaction_verification.answer(
                code, ctx.api_version
            )
            failed = True
        else:
            appending.append(entry)
    waiting: _Waiting = broker.replica_manager.append_records(
        request.timeout_ms, request.acks, appending, verification_guards=write.guards
    )
    body = _answer(ctx, request, responses, entries, failed, waiting)
    if body is None or isinstance(body, ProduceResponse):
        return body
    return await body


def _answer(
    ctx: RequestContext,
    request: ProduceRequest,
    responses: list[ProduceResponse.TopicProduceResponse],
    entries: list[_Entry],
    failed: bool,
    waiting: _Waiting,
) -> ProduceResponse | Coroutine[Any, Any, ProduceResponse] | None:
    """The response once the appends are done (``waiting``: acks=-1 still
    to come), or None for acks=0 (a failed partition closes the connection).
    The request's bytes count against the producer's byte-rate quota."""
    quota = ctx.broker.quotas.produce
    if quota.enabled:
        throttle_response(
            ctx,
            quota.record_and_get_throttle_time_ms(
                ctx.principal.name, ctx.client_id, ctx.request_size
            ),
        )
    if request.acks == 0:
        if failed or any(response.error_code for _, _, _, response in entries):
            ctx.close_connection()
        return None
    body = ProduceResponse(responses=responses)
    if waiting is None:
        return with_leader_hints(ctx, body)
    return _await_acks(ctx, waiting, body)


async def _await_acks(
    ctx: RequestContext, waiting: Awaitable[object], body: ProduceResponse
) -> ProduceResponse:
    await waiting
    return with_leader_hints(ctx, body)


def with_leader_hints(ctx: RequestContext, body: ProduceResponse) -> ProduceResponse:
    """Produce v10+: NOT_LEADER_OR_FOLLOWER names the current leader (KIP-951)."""
    if ctx.api_version >= 10:
        replica_manager = ctx.broker.replica_manager
        hinted = [
            (
                replica_manager.topic_name(topic.topic_id) if ctx.api_version >= 13 else topic.name,
                p.index,
                p,
            )
            for topic in body.responses
            for p in topic.partition_responses
            if p.error_code == _NOT_LEADER
        ]
        if hinted:
            body.node_endpoints = []
            leader_hints.fill(ctx, hinted, ProduceResponse, body.node_endpoints)
    return body


def register(apis: ApiRegistry) -> None:
    apis.register(api_keys.PRODUCE, handle_produce)
    if isinstance(apis, KafkaApis):
        # Imported here: the fast path builds on this module's checks. Its
        # kernel is built with the others (kfast.server.apis already needs
        # request_metrics), so a missing build fails loudly, not slowly.
        from kfast.server.produce_fast import handle_produce_frame

        apis.register_frame_handler(api_keys.PRODUCE, handle_produce_frame)
