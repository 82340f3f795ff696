"""Produce's fast path: from the request frame to the response bytes without
the generic codec's message objects (issue 21 items 1 and 3).

``handle_produce_frame`` decodes the body with kfast._ext.produce_codec,
runs the same per-partition checks as ``handle_produce``
(``produce_apis.checked_records``), appends through the same
``ReplicaManager.append_records`` (record validation, max.message.bytes,
idempotence and producer state, BytesIn/MessagesIn, the acks=-1 purgatory)
and encodes the response from the append results. It serves only requests
where that is the whole of Kafka's handling, and returns None -- before
anything has happened -- for every other one, which KafkaApis then gives to
``handle_produce``:

- Produce v0-v2 (legacy message sets) and acks=0 (a failure closes the
  connection instead of answering);
- an authorizer configured (ACL checks and their audit log), a produce or
  request quota enabled (throttling), a transactional producer while
  transaction.partition.verification.enable is on (a coordinator round trip);
- a partition that fails a check before its append (unknown topic id,
  internal topic, not hosted, low space, bad record set): the generic path
  builds its error answer;
- a body the fast decoder leaves to the generic one (tagged fields, a null
  topic name); a malformed body, so the generic decoder's error closes the
  connection, as it does for every API.

An append that fails (a validation or producer-state error) is answered
here; a NOT_LEADER_OR_FOLLOWER partition from Produce v10 on needs the
KIP-951 leader hint, which the generic encoder writes.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from kfast._ext.produce_codec import (
    PartitionResult,
    decode_produce_request,
    encode_produce_response,
)
from kfast.protocol import ProduceResponse, encode_response_parts, errors
from kfast.protocol.api_keys import PRODUCE
from kfast.server.produce_apis import (
    checked_records,
    verification_guards,
    with_leader_hints,
)

if TYPE_CHECKING:
    import asyncio
    import uuid

    from kfast.server.apis import RequestContext, ResponseParts

# Produce v3+: one v2 batch per partition (v0-v2 carry legacy message sets).
FAST_FROM_VERSION = 3
# KIP-951's leader hint in NOT_LEADER_OR_FOLLOWER answers, Produce v10+.
_LEADER_HINT_FROM = 10
_NOT_LEADER = errors.NotLeaderOrFollowerException.code

# The response's topics: (name, or topic id from v13, partition results).
_Topics = list[tuple["str | uuid.UUID", list[PartitionResult]]]


class FastPathStats:
    """Requests the fast path answered, and those it handed to the generic
    handler (tests check the plain case does not fall back)."""

    __slots__ = ("answered", "fell_back")

    def __init__(self) -> None:
        self.answered = 0
        self.fell_back = 0

    def leave_to_handler(self) -> ResponseParts | None:
        """None, counted: not served here (nothing done yet), so KafkaApis
        gives the request to the API's generic handler."""
        self.fell_back += 1
        return None


STATS = FastPathStats()


def handle_produce_frame(
    ctx: RequestContext, frame: memoryview | bytearray
) -> ResponseParts | Coroutine[Any, Any, ResponseParts] | None:
    """The response parts (after the size prefix), a coroutine of them
    (acks=-1 waiting for followers), or None: not served here, nothing done."""
    version = ctx.api_version
    broker = ctx.broker
    if (
        version < FAST_FROM_VERSION
        or ctx._authorizer() is not None
        or broker.quotas.produce.enabled
    ):
        return STATS.leave_to_handler()
    decoded = _decode(frame, ctx.header.header_length, version)
    if decoded is None:
        return STATS.leave_to_handler()
    transactional_id, acks, timeout_ms, topics = decoded
    guards = verification_guards(ctx)
    if acks == 0 or (transactional_id is not None and guards is not None):
        return STATS.leave_to_handler()
    replica_manager = broker.replica_manager
    by_id = version >= 13
    entries = []
    responses: _Topics = []
    for topic, partitions in topics:
        name = replica_manager.topic_name(topic) if by_id else topic
        if name is None:
            return STATS.leave_to_handler()
        results = []
        for index, records in partitions:
            try:
                checked = checked_records(ctx, name, index, records)
            except errors.KafkaError:
                return STATS.leave_to_handler()
            result = PartitionResult(index)
            results.append(result)
            entries.append((name, index, checked, result))
        responses.append((topic, results))
    STATS.answered += 1
    waiting = replica_manager.append_records(timeout_ms, acks, entries, verification_guards=guards)
    if waiting is None:
        return _encode(ctx, responses)
    return _encode_when_acked(ctx, waiting, responses)


def _decode(
    frame: memoryview | bytearray, offset: int, version: int
) -> tuple[str | None, int, int, list[tuple[Any, list[tuple[int, memoryview | None]]]]] | None:
    try:
        return decode_produce_request(frame, offset, version)
    except errors.MalformedRequestException:
        # The generic decoder raises its own error for it and KafkaApis
        # closes the connection, as for every API.
        return None


async def _encode_when_acked(
    ctx: RequestContext, waiting: asyncio.Future[None], responses: _Topics
) -> ResponseParts:
    await waiting
    return _encode(ctx, responses)


def _encode(ctx: RequestContext, responses: _Topics) -> ResponseParts:
    header = ctx.header
    version = header.api_version
    if version >= _LEADER_HINT_FROM and _any_not_leader(responses):
        body = with_leader_hints(ctx, _generic_body(responses, version))
        return encode_response_parts(PRODUCE, version, header.correlation_id, body)[1:]
    return [encode_produce_response(version, header.correlation_id, 0, responses)]


def _any_not_leader(responses: _Topics) -> bool:
    # Loops, not any() over a generator: asked of every v10+ answer.
    for _, results in responses:
        for result in results:
            if result.error_code == _NOT_LEADER:
                return True
    return False


def _generic_body(responses: _Topics, version: int) -> ProduceResponse:
    """The results as the generic encoder's message objects."""
    body = ProduceResponse()
    for topic, results in responses:
        topic_response = ProduceResponse.TopicProduceResponse(
            partition_responses=[
                ProduceResponse.PartitionProduceResponse(
                    index=result.index,
                    error_code=result.error_code,
                    base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time_ms,
                    log_start_offset=result.log_start_offset,
                    record_errors=result.record_errors,
                    error_message=result.error_message,
                )
                for result in results
            ]
        )
        if isinstance(topic, str):
            topic_response.name = topic
        else:
            topic_response.topic_id = topic
        body.responses.append(topic_response)
    return body
