"""APIs that read or move a partition log's offsets: ListOffsets (2),
OffsetForLeaderEpoch (23), DeleteRecords (21); and the log dirs holding
partition logs: DescribeLogDirs (35), AlterReplicaLogDirs (34).
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

from kfast.protocol import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_ALTER,
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_TOPIC,
    CLUSTER_RESOURCE_NAME,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.server.partition import READ_COMMITTED
from kfast.server.replica_manager import error_of

if TYPE_CHECKING:
    from kfast.storage.log import Log

LIST_OFFSETS = api_keys.BY_NAME["ListOffsets"].key
OFFSET_FOR_LEADER_EPOCH = api_keys.BY_NAME["OffsetForLeaderEpoch"].key
DELETE_RECORDS = api_keys.BY_NAME["DeleteRecords"].key
DESCRIBE_LOG_DIRS = api_keys.BY_NAME["DescribeLogDirs"].key
ALTER_REPLICA_LOG_DIRS = api_keys.BY_NAME["AlterReplicaLogDirs"].key


def _epoch_for_offset(log: Log, offset: int) -> int:
    """The leader epoch that wrote ``offset`` (-1 if unknown)."""
    entries = log.leader_epoch_cache.entries
    starts = [e.start_offset for e in entries]
    i = bisect.bisect_right(starts, offset)
    return entries[i - 1].epoch if i else -1


def _list_offset(
    ctx: RequestContext,
    request: ListOffsetsRequest,
    topic: str,
    p: ListOffsetsRequest.ListOffsetsPartition,
) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) of the partition's answer."""
    partition = ctx.broker.replica_manager.leader_partition_or_raise(topic, p.partition_index)
    log = partition.leader_log_or_raise(p.current_leader_epoch if ctx.api_version >= 4 else -1)
    isolation = request.isolation_level if ctx.api_version >= 2 else 0
    if request.replica_id < 0 and log.high_watermark < partition.leader_epoch_start_offset:
        # Kafka's Partition.fetchOffsetForTimestamp: a new leader learns the
        # high watermark from its followers' first fetches. Until it reaches
        # the start of the leader's epoch, an answer could be older than
        # what the previous leader already told clients (a latest offset
        # missing acknowledged records); clients retry OFFSET_NOT_AVAILABLE.
        raise errors.OffsetNotAvailableException(
            f"Failed to fetch offsets for partition {topic}-{p.partition_index} with leader "
            f"epoch {partition.leader_epoch} as its high watermark ({log.high_watermark}) is "
            f"lagging behind the start offset of the epoch "
            f"({partition.leader_epoch_start_offset})"
        )
    # Consumers may only see committed offsets; a follower (replica_id >= 0)
    # asks for the leader's log end offset (Kafka: no isolation for it).
    if request.replica_id >= 0:
        bound = log.log_end_offset
    elif isolation == READ_COMMITTED:
        bound = log.last_stable_offset
    else:
        bound = log.high_watermark
    timestamp = p.timestamp
    if timestamp == LATEST_TIMESTAMP:
        return -1, bound, partition.leader_epoch
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        start = log.log_start_offset
        return -1, start, _epoch_for_offset(log, start)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return -1, -1, -1  # no tiered storage: nothing is remote
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    ts, offset = found
    if offset >= bound and timestamp != MAX_TIMESTAMP:
        return -1, -1, -1
    return ts, offset, _epoch_for_offset(log, offset)


def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    version = ctx.api_version
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = []
    for topic in request.topics:
        partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = []
        describable = ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, topic.name)
        for p in topic.partitions:
            out = ListOffsetsResponse.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=0
            )
            try:
                if not describable:
                    raise errors.TopicAuthorizationException()
                if (
                    p.timestamp == MAX_TIMESTAMP
                    and version < 7
                    or p.timestamp == EARLIEST_LOCAL_TIMESTAMP
                    and version < 8
                    or p.timestamp == LATEST_TIERED_TIMESTAMP
                    and version < 9
                ):
                    raise errors.UnsupportedVersionException(
                        f"Timestamp {p.timestamp} needs a newer ListOffsets version"
                    )
                ts, offset, epoch = _list_offset(ctx, request, topic.name, p)
                # Fields a version does not have must keep their defaults.
                if version == 0:
                    out.old_style_offsets = (
                        [offset] if offset >= 0 and p.max_num_offsets > 0 else []
                    )
                else:
                    out.timestamp, out.offset = ts, offset
                if version >= 4:
                    out.leader_epoch = epoch
            except Exception as exc:
                out.error_code = error_of(exc).code
            partitions.append(out)
        topics.append(
            ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions)
        )
    return ListOffsetsResponse(topics=topics)


def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    replica_manager = ctx.broker.replica_manager
    # Replicas need CLUSTER_ACTION; consumers (KIP-320) DESCRIBE on the topic.
    replica = ctx.authorize(
        ACL_OPERATION_CLUSTER_ACTION,
        ACL_RESOURCE_CLUSTER,
        CLUSTER_RESOURCE_NAME,
        audit_denied=False,  # consumers are expected to lack it
    )
    topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult] = []
    for topic in request.topics:
        results: list[OffsetForLeaderEpochResponse.EpochEndOffset] = []
        describable = replica or ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, topic.topic
        )
        for p in topic.partitions:
            out = OffsetForLeaderEpochResponse.EpochEndOffset(
                error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1
            )
            try:
                if not describable:
                    raise errors.TopicAuthorizationException()
                partition = replica_manager.leader_partition_or_raise(topic.topic, p.partition)
                epoch, end = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch if ctx.api_version >= 2 else -1, p.leader_epoch
                )
                out.leader_epoch, out.end_offset = epoch, end
            except Exception as exc:
                out.error_code = error_of(exc).code
            results.append(out)
        topics.append(
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                topic=topic.topic, partitions=results
            )
        )
    return OffsetForLeaderEpochResponse(topics=topics)


def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse | Coroutine[Any, Any, DeleteRecordsResponse]:
    topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = []
    # (topic, partition, offset to delete before, the partition's result)
    entries: list[tuple[str, int, int, DeleteRecordsResponse.DeleteRecordsPartitionResult]] = []
    for topic in request.topics:
        results: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = []
        deletable = ctx.authorize(ACL_OPERATION_DELETE, ACL_RESOURCE_TOPIC, topic.name)
        for p in topic.partitions:
            result = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=0
            )
            results.append(result)
            if not deletable:
                result.error_code = errors.TopicAuthorizationException.code
                continue
            entries.append((topic.name, p.partition_index, p.offset, result))
        topics.append(
            DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=results)
        )
    body = DeleteRecordsResponse(topics=topics)
    waiting: Awaitable[object] | None = ctx.broker.replica_manager.delete_records(
        request.timeout_ms, entries
    )
    if waiting is None:
        return body

    async def answer() -> DeleteRecordsResponse:
        await waiting
        return body

    return answer()


def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    log_manager = ctx.broker.log_manager
    if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME):
        # v3+ says why; older versions get an empty list, as from Kafka.
        return DescribeLogDirsResponse(
            error_code=errors.ClusterAuthorizationException.code if ctx.api_version >= 3 else 0,
            results=[],
        )
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results: list[DescribeLogDirsResponse.DescribeLogDirsResult] = []
    live = log_manager.live_log_dirs
    for log_dir in log_manager.log_dirs:
        if log_dir not in live:
            results.append(
                DescribeLogDirsResponse.DescribeLogDirsResult(
                    error_code=errors.KafkaStorageException.code, log_dir=log_dir, topics=[]
                )
            )
            continue
        by_topic: dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]] = {}

        def add(log: Log, offset_lag: int, is_future: bool) -> None:
            by_topic.setdefault(log.topic, []).append(  # noqa: B023 -- called within this iteration
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=log.partition,
                    partition_size=log.size,
                    offset_lag=max(offset_lag, 0),
                    is_future_key=is_future,
                )
            )

        for log in log_manager.all_logs():
            tp = (log.topic, log.partition)
            if log_manager.log_dir_of(*tp) == log_dir and (wanted is None or tp in wanted):
                add(log, log.high_watermark - log.log_end_offset, False)
        # Future replicas of moves into this dir; their lag is how far they
        # are behind the current log (Kafka's ReplicaManager.getLogDirs).
        for future in log_manager.future_logs():
            tp = (future.topic, future.partition)
            current = log_manager.get_log(*tp)
            if (
                future.parent_dir == log_dir
                and current is not None
                and (wanted is None or tp in wanted)
            ):
                add(future, current.log_end_offset - future.log_end_offset, True)
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=0,
                log_dir=os.path.abspath(log_dir),
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(
                        name=name,
                        partitions=sorted(
                            parts, key=lambda x: (x.partition_index, x.is_future_key)
                        ),
                    )
                    for name, parts in sorted(by_topic.items())
                ],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(error_code=0, results=results)


def _alter_replica_log_dir(ctx: RequestContext, topic: str, index: int, log_dir: str) -> None:
    """Move one hosted partition into ``log_dir`` (Kafka's
    ReplicaManager.alterReplicaLogDirs, its checks in its order)."""
    log_manager = ctx.broker.log_manager
    moves = ctx.broker.replica_alter_log_dirs
    if len(f"{topic}-{index}.{'0' * 32}-future") > 255:
        raise errors.InvalidTopicException("The topic name is too long.")
    if log_dir not in log_manager.log_dirs:
        raise errors.LogDirNotFoundException(f"Log dir {log_dir} is not found in the config.")
    if log_dir not in log_manager.live_log_dirs:
        raise errors.KafkaStorageException(f"Log directory {log_dir} is offline")
    try:
        partition = ctx.broker.replica_manager.partition_or_raise(topic, index)
    except (errors.NotLeaderOrFollowerException, errors.UnknownTopicOrPartitionException):
        # Kafka keeps REPLICA_NOT_AVAILABLE here for compatibility.
        raise errors.ReplicaNotAvailableException(
            f"Broker {ctx.broker.node_id} hosts no replica of {topic}-{index}"
        ) from None
    key = partition.key
    if moves.destination(key) not in (None, log_dir):
        moves.cancel(key)  # a move elsewhere stops
    if log_manager.log_dir_of(topic, index) == log_dir:
        moves.cancel(key)  # already there: nothing to move
    elif moves.destination(key) is None:
        moves.start(partition, log_dir)


def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    Result = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
    PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult
    by_topic: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
    # Kafka: ALTER on the cluster, else every partition is refused.
    allowed = ctx.authorize(ACL_OPERATION_ALTER, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME)
    for entry in request.dirs:
        log_dir = os.path.abspath(entry.path) if os.path.isabs(entry.path) else entry.path
        for topic in entry.topics:
            for index in topic.partitions:
                code = 0
                try:
                    if not allowed:
                        raise errors.ClusterAuthorizationException()
                    _alter_replica_log_dir(ctx, topic.name, index, log_dir)
                except Exception as exc:
                    code = error_of(exc).code
                by_topic.setdefault(topic.name, []).append(
                    PartitionResult(partition_index=index, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        results=[Result(topic_name=name, partitions=parts) for name, parts in by_topic.items()]
    )


def register(apis: ApiRegistry) -> None:
    apis.register(LIST_OFFSETS, handle_list_offsets)
    apis.register(OFFSET_FOR_LEADER_EPOCH, handle_offset_for_leader_epoch)
    apis.register(DELETE_RECORDS, handle_delete_records)
    apis.register(DESCRIBE_LOG_DIRS, handle_describe_log_dirs)
    apis.register(ALTER_REPLICA_LOG_DIRS, handle_alter_replica_log_dirs)
