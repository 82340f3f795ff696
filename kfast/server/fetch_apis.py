"""Fetch (API key 1): KafkaApis.handleFetchRequest for consumers and for
followers (a replica id >= 0).

The request goes through the fetch session cache (KIP-227) to get the
partitions to read, the ReplicaManager reads them (waiting in the fetch
purgatory for min_bytes / max_wait_ms), and the session picks which
partitions the response carries. Record bytes stay FileRegions all the way
to the socket, except for Fetch v0-v3, whose clients only read magic 0/1
message sets: those responses are down-converted (which means reading the
bytes, as Kafka does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

from kfast.protocol import FetchRequest, FetchResponse, api_keys, errors
from kfast.protocol.constants import (
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_READ,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_TOPIC,
    CLUSTER_RESOURCE_NAME,
    INT32_MAX,
    ZERO_UUID,
)
from kfast.protocol.file_region import FileRegion
from kfast.server import leader_hints
from kfast.server.apis import ApiRegistry, KafkaApis, RequestContext
from kfast.server.fetch_session import (
    FINAL_EPOCH,
    CachedPartition,
    FetchContext,
    FullFetchContext,
    IncrementalFetchContext,
)
from kfast.server.futures import then
from kfast.server.quota import throttle_response
from kfast.server.replica_manager import FetchParams, FetchPartitionData, PartitionFetchRequest

if TYPE_CHECKING:
    from kfast.metrics.broker_stats import BrokerTopicStats
    from kfast.server.delayed_fetch import FetchResults
    from kfast.server.quota import ClientQuotaManager
    from kfast.server.replica_manager import ReplicaManager
    from kfast.server.replication_quota import ReplicationQuotaManager

logger = logging.getLogger(__name__)

_TopicResponse = FetchResponse.FetchableTopicResponse
_PartitionData = FetchResponse.PartitionData
_AbortedTransaction = FetchResponse.AbortedTransaction
_EpochEndOffset = FetchResponse.EpochEndOffset
_MAX_DECOMPRESSED = 64 * 1024 * 1024
_LEADER_MOVED = (errors.NotLeaderOrFollowerException.code, errors.FencedLeaderEpochException.code)
# A consumer's PartitionFetchRequest built with tuple.__new__, not the named
# tuple's generated Python __new__ (a frame per partition of every fetch);
# the follower-only fields keep their declared defaults.
_new_tuple = tuple.__new__
_NO_LAST_FETCHED_EPOCH: int = PartitionFetchRequest._field_defaults["last_fetched_epoch"]
_NO_LOG_START_OFFSET: int = PartitionFetchRequest._field_defaults["log_start_offset"]
# (topic id, partition) of a topic id no topic has
_UnknownId: TypeAlias = "tuple[UUID, int]"
# (topic, topic id, partition) the principal may not READ
_Denied: TypeAlias = "tuple[str, UUID, int]"


def _down_convert(region: FileRegion | bytes | bytearray | memoryview, version: int) -> bytes:
    """Fetch v0-v1 read magic 0, v2-v3 magic 1 (KIP-31/32)."""
    from kfast._ext.legacy import convert_v2_to_message_set
    from kfast.records import complete_batches_size

    data = region.read() if isinstance(region, FileRegion) else bytes(region)
    # A trailing partial batch cannot be converted; old clients skip it anyway.
    whole = complete_batches_size(data)
    if whole == 0:
        return b""
    return convert_v2_to_message_set(
        memoryview(data)[:whole], 0 if version <= 1 else 1, max_decompressed_bytes=_MAX_DECOMPRESSED
    )


def handle_fetch(
    ctx: RequestContext, request: FetchRequest
) -> FetchResponse | asyncio.Future[FetchResponse]:
    broker = ctx.broker
    replica_manager = broker.replica_manager
    version = ctx.api_version
    replica_id = _replica_id(request, version)
    if replica_id >= 0:
        return handle_follower_fetch(ctx, request, replica_id)
    by_id = version >= 13
    # A sessionless fetch (Fetch v0-v6, or session epoch FINAL: librdkafka's
    # every fetch) reads a fixed list of partition requests, built here once;
    # a session fetch's partitions are CachedPartitions the session keeps.
    sessionless = version < 7 or request.session_epoch == FINAL_EPOCH
    partitions: list[CachedPartition] = []
    requests: list[PartitionFetchRequest] = []
    topic_ids: dict[str, UUID | None] = {}  # a sessionless fetch's topics
    unknown_ids: list[_UnknownId] = []  # answered UNKNOWN_TOPIC_ID
    denied: list[_Denied] = []  # no READ on the topic
    for topic in request.topics:
        name = replica_manager.topic_name(topic.topic_id) if by_id else topic.topic
        readable = name is not None and ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, name)
        if name is None or not readable:
            for p in topic.partitions:
                if name is None:
                    unknown_ids.append((topic.topic_id, p.partition))
                else:
                    denied.append((name, topic.topic_id if by_id else ZERO_UUID, p.partition))
            continue
        topic_id = topic.topic_id if by_id else None
        if sessionless:
            topic_ids[name] = topic_id
            requests += [
                _new_tuple(
                    PartitionFetchRequest,
                    (
                        (name, p.partition),
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.current_leader_epoch,
                        _NO_LAST_FETCHED_EPOCH,
                        _NO_LOG_START_OFFSET,
                    ),
                )
                for p in topic.partitions
            ]
            continue
        partitions += [
            CachedPartition(
                name,
                topic_id,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
                p.log_start_offset,
            )
            for p in topic.partitions
        ]
    forgotten: list[tuple[str, int]] = []
    for forgotten_topic in request.forgotten_topics_data:
        name = (
            replica_manager.topic_name(forgotten_topic.topic_id) if by_id else forgotten_topic.topic
        )
        if name is not None:
            forgotten.extend((name, index) for index in forgotten_topic.partitions)
    context: FetchContext = broker.fetch_session_cache.new_context(
        request.session_id, request.session_epoch, partitions, forgotten, sessionless=version < 7
    )
    if context.error_code:
        return FetchResponse(error_code=context.error_code, session_id=0, responses=[])
    max_bytes = request.max_bytes if version >= 3 else INT32_MAX
    # A consumer: the broker's cap applies (KIP-541), and a consumer byte-rate
    # quota's: no more than the quota lets through in one window.
    max_bytes = min(max_bytes, broker.config["fetch.max.bytes"])
    if broker.quotas.fetch.enabled:
        max_bytes = int(
            min(
                max_bytes,
                broker.quotas.fetch.max_value_in_quota_window(ctx.principal.name, ctx.client_id),
            )
        )
    params = FetchParams(
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=max_bytes,
        isolation_level=request.isolation_level if version >= 4 else 0,
        hard_max_bytes_limit=version <= 2,
        client_rack=request.rack_id if version >= 11 else None,
    )
    if unknown_ids or denied:
        params = params._replace(max_wait_ms=0)  # an error to report: answer now
    # Read through partitions_to_read at each (re-)read: an incremental
    # session fetch reads its ready partitions, and a session learns when
    # each read began. A session fetch that waits is watched under its one
    # key (watch_key), any other under each partition it read.
    results: FetchResults | asyncio.Future[FetchResults] = replica_manager.fetch_messages(
        params,
        requests if sessionless else lambda: _requests(context.partitions_to_read()),
        context.watch_key,
    )
    ids = topic_ids if sessionless else None
    if isinstance(results, list):
        return _response(ctx, context, results, unknown_ids, denied, ids)
    return then(results, lambda waited: _response(ctx, context, waited, unknown_ids, denied, ids))


def _requests(partitions: list[CachedPartition]) -> list[PartitionFetchRequest]:
    return [
        PartitionFetchRequest(c.key, c.fetch_offset, c.max_bytes, c.current_leader_epoch)
        for c in partitions
    ]


def handle_follower_fetch(
    ctx: RequestContext, request: FetchRequest, replica_id: int
) -> FetchResponse | asyncio.Future[FetchResponse]:
    """A follower's fetch (Kafka's replica fetcher protocol): sessionless
    (kfast's fetchers send full requests; a session id is ignored), read up
    to each log end offset, last_fetched_epoch checked for divergence, and
    the fetch offsets recorded as the follower's progress. The record bytes
    of partitions the leader quota throttles count against it."""
    replica_manager: ReplicaManager = ctx.broker.replica_manager
    version = ctx.api_version
    if version < 12:
        # Without last_fetched_epoch a follower could not learn where its log
        # diverges; kfast's followers use v12+ (Kafka's since 2.7).
        raise errors.UnsupportedVersionException(
            f"Follower fetches need Fetch v12 or later, got v{version}"
        )
    by_id = version >= 13
    if not ctx.authorize(ACL_OPERATION_CLUSTER_ACTION, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME):
        # Kafka: a replica without CLUSTER_ACTION reads nothing.
        return FetchResponse(
            error_code=0,
            session_id=0,
            responses=_denied_topics(
                [
                    (
                        # v13+ answers by topic id: an unknown one's name is not sent.
                        topic.topic
                        if not by_id
                        else replica_manager.topic_name(topic.topic_id) or "",
                        topic.topic_id if by_id else ZERO_UUID,
                        p.partition,
                    )
                    for topic in request.topics
                    for p in topic.partitions
                ]
            ),
        )
    requests: list[PartitionFetchRequest] = []
    named: list[tuple[str, UUID]] = []  # (topic, topic_id) per request
    unknown_ids: list[_UnknownId] = []
    for topic in request.topics:
        name = replica_manager.topic_name(topic.topic_id) if by_id else topic.topic
        for p in topic.partitions:
            if name is None:
                unknown_ids.append((topic.topic_id, p.partition))
                continue
            requests.append(
                PartitionFetchRequest(
                    (name, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                )
            )
            named.append((name, topic.topic_id if by_id else ZERO_UUID))
    params = FetchParams(
        max_wait_ms=0 if unknown_ids else request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=0,
        replica_id=replica_id,
    )
    results: FetchResults | asyncio.Future[FetchResults] = replica_manager.fetch_messages(
        params, requests
    )
    if isinstance(results, list):
        return _follower_response(named, results, unknown_ids, replica_manager)
    return then(
        results, lambda waited: _follower_response(named, waited, unknown_ids, replica_manager)
    )


def _record_throttled(quota: ReplicationQuotaManager, results: FetchResults) -> None:
    """Count what this response sends for throttled partitions, to in-sync
    followers too (Kafka's sizeOfThrottledPartitions; kfast counts the
    record bytes, which are all but a few dozen bytes per partition)."""
    throttled = sum(
        data.size for request, data in results if data.size and quota.is_throttled(*request.key)
    )
    if throttled:
        quota.record(throttled)


def _follower_response(
    named: list[tuple[str, UUID]],
    results: FetchResults,
    unknown_ids: list[_UnknownId],
    replica_manager: ReplicaManager,
) -> FetchResponse:
    _record_throttled(replica_manager.leader_quota, results)
    responses: list[FetchResponse.FetchableTopicResponse] = []
    current: FetchResponse.FetchableTopicResponse | None = None
    replicated = 0
    for (name, topic_id), (request, data) in zip(named, results):
        replicated += data.size
        if current is None or current.topic != name:
            current = _TopicResponse(topic=name, topic_id=topic_id, partitions=[])
            responses.append(current)
        partition = _PartitionData(
            partition_index=request.key[1],
            error_code=data.error_code,
            high_watermark=data.high_watermark,
            last_stable_offset=data.last_stable_offset,
            log_start_offset=data.log_start_offset,
            records=data.records if data.records is not None else b"",
        )
        if data.diverging_epoch is not None:
            epoch, end_offset = data.diverging_epoch
            partition.diverging_epoch = _EpochEndOffset(epoch=epoch, end_offset=end_offset)
        current.partitions.append(partition)
    # BrokerTopicMetrics ReplicationBytesOutPerSec (all topics only, as Kafka).
    replica_manager.replica_stats.replication_bytes_out += replicated
    responses.extend(_unknown_topic_ids(unknown_ids))
    return FetchResponse(error_code=0, session_id=0, responses=responses)


def _unknown_topic_ids(
    unknown_ids: list[_UnknownId],
) -> list[FetchResponse.FetchableTopicResponse]:
    """UNKNOWN_TOPIC_ID for each (topic id, partition) no topic has."""
    return [
        _TopicResponse(
            topic_id=topic_id,
            partitions=[
                _PartitionData(
                    partition_index=index,
                    error_code=errors.UnknownTopicIdException.code,
                    high_watermark=-1,
                    records=b"",
                )
            ],
        )
        for topic_id, index in unknown_ids
    ]


def _replica_id(request: FetchRequest, version: int) -> int:
    """The fetching replica's id; -1 for a consumer (v15+ moved it into the
    ReplicaState tagged field)."""
    if version >= 15:
        # Read from the decoded fields: reading the attribute of a request
        # that did not send the tag (every consumer's) builds a default
        # ReplicaState, whose replica_id is -1 too.
        state = vars(request).get("replica_state")
        return -1 if state is None else state.replica_id
    return request.replica_id


def _denied_topics(
    denied: Sequence[_Denied],
) -> list[FetchResponse.FetchableTopicResponse]:
    """TOPIC_AUTHORIZATION_FAILED for each (topic, topic id, partition)."""
    return [
        _TopicResponse(
            topic=name,
            topic_id=topic_id,
            partitions=[
                _PartitionData(
                    partition_index=index,
                    error_code=errors.TopicAuthorizationException.code,
                    high_watermark=-1,
                    records=b"",
                )
            ],
        )
        for name, topic_id, index in denied
    ]


def _response(
    ctx: RequestContext,
    context: FetchContext,
    results: FetchResults,
    unknown_ids: list[_UnknownId],
    denied: Sequence[_Denied] = (),
    topic_ids: dict[str, UUID | None] | None = None,
) -> FetchResponse:
    """``topic_ids``: a sessionless fetch's topics (its results are the
    response's partitions, in request order); None: the context picks them."""
    version = ctx.api_version
    quota = ctx.broker.quotas.fetch
    if quota.enabled and _throttled(ctx, quota, results):
        # Kafka's getThrottledResponse: no partitions, the session unchanged
        # (a full fetch's new session is not kept).
        if isinstance(context, FullFetchContext) and context.session_id:
            ctx.broker.fetch_session_cache.remove(context.session_id)
        return FetchResponse(
            error_code=0,
            session_id=context.session_id if isinstance(context, IncrementalFetchContext) else 0,
            responses=[],
        )
    selected: list[tuple[str, UUID | None, int, FetchPartitionData]]
    if topic_ids is None:
        selected = [
            (c.topic, c.topic_id, c.partition, data)
            for c, data in context.select(context.pair(results))
        ]
    else:
        selected = [(r.key[0], topic_ids[r.key[0]], r.key[1], data) for r, data in results]

    # Partitions and topics are plain dicts, which the codec encodes as it
    # does messages (fields left out take their defaults): a message per
    # partition is most of an empty long poll's response cost. A partition
    # whose error names a moved leader is a message, for the KIP-951 hint.
    count_fetched(ctx.broker.replica_manager.topic_stats, [(s[0], s[3]) for s in selected])
    responses: list[Any] = []
    current: dict[str, Any] | None = None
    partitions: list[Any] = []
    hinted: list[tuple[str, int, FetchResponse.PartitionData]] = []
    for topic, topic_id, index, data in selected:
        if current is None or current["topic"] != topic:
            # A topic id is None below v13, which send no id.
            partitions = []
            current = {"topic": topic, "partitions": partitions}
            if topic_id is not None:
                current["topic_id"] = topic_id
            responses.append(current)
        error_code = data.error_code
        records: FileRegion | bytes | None = data.records
        if records is None:
            records = b""
        elif version <= 3:
            records = _down_convert(records, version)
        aborted = data.aborted_transactions
        fields: dict[str, Any] = {
            "partition_index": index,
            "error_code": error_code,
            "high_watermark": data.high_watermark,
            "last_stable_offset": data.last_stable_offset,
            "log_start_offset": data.log_start_offset,
            "aborted_transactions": None
            if aborted is None
            else [
                _AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in aborted
            ],
            "records": records,
            "preferred_read_replica": data.preferred_read_replica,
        }
        if error_code in _LEADER_MOVED and version >= 16:
            partition = _PartitionData(**fields)
            hinted.append((topic, index, partition))
            partitions.append(partition)
        else:
            partitions.append(fields)
    responses.extend(_unknown_topic_ids(unknown_ids))
    responses.extend(_denied_topics(denied))
    body = FetchResponse(error_code=0, session_id=context.session_id, responses=responses)
    if hinted:
        # Fetch v16+: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH name the
        # current leader (KIP-951).
        body.node_endpoints = []
        leader_hints.fill(ctx, hinted, FetchResponse, body.node_endpoints)
    return body


def count_fetched(
    topic_stats: BrokerTopicStats, fetched: Iterable[tuple[str, FetchPartitionData]]
) -> None:
    """BrokerTopicMetrics of the partitions a consumer's fetch answers:
    (topic, data) in response order. A topic this broker never had gets no
    meters for an error answer."""
    stats = None
    last = None
    for topic, data in fetched:
        if topic != last:
            stats = topic_stats.topics.get(topic)
            last = topic
        error_code = data.error_code
        if stats is None and not error_code:
            stats = topic_stats.topic(topic)
        if stats is not None:
            stats.total_fetch_requests += 1
            if error_code:
                stats.failed_fetch_requests += 1
            stats.bytes_out += data.size


def sessionless_response(
    ctx: RequestContext, results: FetchResults, topic_ids: dict[str, UUID | None]
) -> FetchResponse:
    """The response to a sessionless consumer fetch that read ``results``
    (kfast.server.fetch_fast hands the ones that need a KIP-951 hint here)."""
    return _response(ctx, FullFetchContext([], None), results, [], (), topic_ids)


def _throttled(ctx: RequestContext, quota: ClientQuotaManager, results: FetchResults) -> bool:
    """Count the response's record bytes against the consumer's byte-rate
    quota; over it, take them back (nothing is sent) and throttle."""
    size = sum(data.size for _, data in results)
    user, client_id = ctx.principal.name, ctx.client_id
    throttle = quota.record_and_get_throttle_time_ms(user, client_id, size)
    if not throttle:
        return False
    quota.unrecord(user, client_id, size)
    throttle_response(ctx, throttle)
    return True


def register(apis: ApiRegistry) -> None:
    apis.register(api_keys.FETCH, handle_fetch)
    if isinstance(apis, KafkaApis):
        # Imported here: the fast path builds on this module's response
        # builder and metrics (as Produce's on produce_apis).
        from kfast.server.fetch_fast import handle_fetch_frame

        apis.register_frame_handler(api_keys.FETCH, handle_fetch_frame)
