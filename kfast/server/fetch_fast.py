"""Fetch's fast path: from the request frame to the response parts without
the generic codec's message objects (issue 21 items 3 and 5).

A caught-up consumer's long poll is most of what 100 librdkafka consumers
send an idle broker (sessionless Fetch v16, 10 partitions, 200 a second), and
a woken one is on the produce-to-consume latency path. ``handle_fetch_frame``
decodes the body with kfast._ext.fetch_codec, reads through the same
``ReplicaManager.fetch_messages`` as ``handle_fetch`` (leadership and epoch
fencing, offline logs, the offset range, isolation level and aborted
transactions, KIP-392's preferred read replica, the purgatory and its
wake-ups), counts the same BrokerTopicMetrics (``fetch_apis.count_fetched``)
and encodes the response from the read's results: the partitions' offsets
and their record regions, which stay FileRegions for sendfile.

It serves only the requests where that is the whole of Kafka's handling, and
returns None -- before anything has happened -- for every other one, which
KafkaApis then gives to ``handle_fetch``:

- Fetch v0-v3 (down-converted message sets), a follower's fetch (replica id
  >= 0, or the replica_state tag), and a fetch in a session (KIP-227: the
  session cache picks the partitions; a sessionless fetch naming a session
  id closes it);
- an authorizer configured (READ checks and their audit log), a fetch
  quota enabled (its byte budget and throttling);
- a topic id no topic has (UNKNOWN_TOPIC_ID answers);
- a body the fast decoder leaves to the generic one (tagged fields, a null
  topic name); a malformed body, so the generic decoder's error closes the
  connection, as it does for every API.

A partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH from
Fetch v16 needs the KIP-951 leader hint, which the generic response builder
and encoder write.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast
from uuid import UUID

from kfast._ext.fetch_codec import (
    decode_fetch_request,
    encode_fetch_response,
    partition_requests,
)
from kfast.protocol import encode_response_parts, errors
from kfast.protocol.api_keys import FETCH
from kfast.server.fetch_apis import count_fetched, sessionless_response
from kfast.server.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID
from kfast.server.produce_fast import FastPathStats
from kfast.server.replica_manager import FetchParams, PartitionFetchRequest

if TYPE_CHECKING:
    import asyncio

    from kfast.server.apis import RequestContext, ResponseParts
    from kfast.server.delayed_fetch import FetchResults

# Fetch v4+: isolation levels; v0-v3 answers are down-converted.
FAST_FROM_VERSION = 4
# Fetch sessions (KIP-227) from v7; before, every fetch is sessionless.
_SESSIONS_FROM = 7
# The rack id (KIP-392) from v11.
_RACK_FROM = 11
# KIP-951's leader hint in these partition errors, Fetch v16+.
_LEADER_HINT_FROM = 16
_LEADER_MOVED = (errors.NotLeaderOrFollowerException.code, errors.FencedLeaderEpochException.code)
# A consumer's PartitionFetchRequest: the follower-only fields keep their
# declared defaults (as handle_fetch's).
_NO_LAST_FETCHED_EPOCH: int = PartitionFetchRequest._field_defaults["last_fetched_epoch"]
_NO_LOG_START_OFFSET: int = PartitionFetchRequest._field_defaults["log_start_offset"]

# Requests answered here, and those handed to handle_fetch (tests check the
# plain caught-up consumer's fetch does not fall back).
STATS = FastPathStats()


def handle_fetch_frame(
    ctx: RequestContext, frame: memoryview | bytearray
) -> ResponseParts | asyncio.Future[ResponseParts] | None:
    """The response parts (after the size prefix), a future of them (the
    fetch waits in the purgatory), or None: not served here, nothing done."""
    version = ctx.api_version
    broker = ctx.broker
    if version < FAST_FROM_VERSION or ctx._authorizer() is not None or broker.quotas.fetch.enabled:
        return STATS.leave_to_handler()
    try:
        decoded = decode_fetch_request(frame, ctx.header.header_length, version)
    except errors.MalformedRequestException:
        # The generic decoder raises its own error for it and KafkaApis
        # closes the connection, as for every API.
        return STATS.leave_to_handler()
    if decoded is None:
        return STATS.leave_to_handler()
    (
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        _forgotten,  # a sessionless fetch has no session to forget partitions of
        rack_id,
    ) = decoded
    if replica_id >= 0 or (
        version >= _SESSIONS_FROM
        and (session_epoch != FINAL_EPOCH or session_id != INVALID_SESSION_ID)
    ):
        return STATS.leave_to_handler()
    replica_manager = broker.replica_manager
    requests: list[PartitionFetchRequest] = []
    topic_ids: dict[str, UUID | None] = {}
    for topic, partitions in topics:
        # A topic id from v13 (the decoder gives a UUID), a name before.
        if isinstance(topic, UUID):
            name = replica_manager.topic_name(topic)
            if name is None:
                return STATS.leave_to_handler()
            topic_ids[name] = topic
        else:
            name = topic
            topic_ids[name] = None
        requests += partition_requests(
            PartitionFetchRequest, name, partitions, _NO_LAST_FETCHED_EPOCH, _NO_LOG_START_OFFSET
        )
    STATS.answered += 1
    params = FetchParams(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        # A consumer: the broker's cap applies (KIP-541).
        max_bytes=min(max_bytes, broker.config["fetch.max.bytes"]),
        isolation_level=isolation_level,
        client_rack=rack_id if version >= _RACK_FROM else None,
    )
    # A waiting fetch's future is of its encoded response (respond).
    results = replica_manager.fetch_messages(
        params, requests, respond=partial(_encode, ctx, topic_ids)
    )
    if isinstance(results, list):
        return _encode(ctx, topic_ids, results)
    return cast("asyncio.Future[ResponseParts]", results)


def _encode(
    ctx: RequestContext, topic_ids: dict[str, UUID | None], results: FetchResults
) -> ResponseParts:
    header = ctx.header
    version = header.api_version
    if version >= _LEADER_HINT_FROM and _any_leader_moved(results):
        # The generic builder names the new leader (and counts the metrics).
        body = sessionless_response(ctx, results, topic_ids)
        return encode_response_parts(FETCH, version, header.correlation_id, body)[1:]
    count_fetched(ctx.broker.replica_manager.topic_stats, [(r.key[0], data) for r, data in results])
    return encode_fetch_response(version, header.correlation_id, 0, 0, results, topic_ids)


def _any_leader_moved(results: FetchResults) -> bool:
    # A loop, not any() over a generator: asked of every v16+ answer.
    for _, data in results:
        if data.error_code in _LEADER_MOVED:
            return True
    return False
