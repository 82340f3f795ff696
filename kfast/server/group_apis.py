"""KafkaApis handlers of the group coordinator: FindCoordinator (for the
transaction coordinator too), JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete,
ListGroups, DescribeGroups, DeleteGroups, ConsumerGroupHeartbeat,
ConsumerGroupDescribe.

They translate between the wire (every version) and the GroupCoordinator
(kfast.coordinator.group) the broker runs as ``broker.group_coordinator``.
A request for a group this broker does not coordinate is answered with the
runtime's NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.

ConsumerGroupHeartbeat and ConsumerGroupDescribe serve KIP-848 groups
(server-side assignment; kfast.coordinator.group.consumer_group_manager).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    encode_assignment,
    encode_subscription,
)
from kfast.coordinator.group.records import NO_EXPIRE_TIMESTAMP
from kfast.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    api_keys,
)
from kfast.protocol import errors as E
from kfast.protocol.constants import (
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_READ,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
    CLUSTER_RESOURCE_NAME,
)
from kfast.server.apis import KafkaApis, RequestContext
from kfast.server.metadata_apis import internal_topic_settings

if TYPE_CHECKING:
    from kfast.coordinator.group.consumer_group import ConsumerGroup
    from kfast.coordinator.group.runtime import GroupCoordinatorRuntime

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
_CLASSIC = "classic"
_CONSUMER = "consumer"


def _callback_future() -> tuple[asyncio.Future[Any], Callable[[Any], None]]:
    """A future and the callback that completes it. The group coordinator's
    callbacks give results of its own making (dicts, tuples): Any here."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def callback(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    return future, callback


async def _await_if_pending(future: asyncio.Future[Any]) -> Any:
    return future.result() if future.done() else await future


def _group_denied(ctx: RequestContext, group_id: str, operation: int) -> int:
    """GROUP_AUTHORIZATION_FAILED's code unless the principal may perform
    ``operation`` on the group, else 0."""
    if ctx.authorize(operation, ACL_RESOURCE_GROUP, group_id):
        return 0
    return E.GroupAuthorizationException.code


def _client_host(ctx: RequestContext) -> str:
    address = ctx.client_address
    return f"/{address[0]}" if address else ""


# -- FindCoordinator -------------------------------------------------------------------
async def ensure_internal_topic(ctx: RequestContext, name: str) -> int:
    """Create __consumer_offsets or __transaction_state on first use, as
    Kafka's FindCoordinator does; 0 once its partitions exist here."""
    broker = ctx.broker
    if name in broker.metadata_image.topics_by_name:
        # Created by a concurrent request: answer once its logs exist.
        if not broker.replica_manager.get_partition(name, 0):
            await broker.metadata_publisher.wait_idle()
        return 0
    partitions, replication, configs = internal_topic_settings(broker.config, name)
    result = await broker.controller.auto_create_topics([name], partitions, replication, configs)
    await broker.metadata_publisher.wait_idle()
    code = result.get(name, 0)
    return 0 if code in (0, E.TopicExistsException.code) else code


async def _find_coordinator(
    ctx: RequestContext, topic_name: str, index: int
) -> tuple[int, int, str, int]:
    """(error, node_id, host, port) of the leader of partition ``index`` of
    the coordinator's internal topic."""
    if await ensure_internal_topic(ctx, topic_name):
        return E.CoordinatorNotAvailableException.code, -1, "", -1
    image = ctx.broker.metadata_image
    topic = image.topics_by_name.get(topic_name)
    registration = topic.partitions.get(index) if topic is not None else None
    broker = image.brokers.get(registration.leader) if registration is not None else None
    endpoint = broker.listeners.get(ctx.listener_name) if broker is not None else None
    if broker is None or endpoint is None or broker.fenced:
        return E.CoordinatorNotAvailableException.code, -1, "", -1
    return 0, broker.broker_id, endpoint.host, endpoint.port


async def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> dict[str, Any]:
    keys = request.coordinator_keys if ctx.api_version >= 4 else [request.key]
    results: list[tuple[str, int, int, str, int]] = []  # (key, error, node, host, port)
    for key in keys:
        if request.key_type == GROUP_KEY_TYPE and not ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_GROUP, key
        ):
            results.append((key, E.GroupAuthorizationException.code, -1, "", -1))
        elif request.key_type == TRANSACTION_KEY_TYPE and not ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TRANSACTIONAL_ID, key
        ):
            results.append((key, E.TransactionalIdAuthorizationException.code, -1, "", -1))
        elif request.key_type == GROUP_KEY_TYPE:
            results.append(
                (key,)
                + await _find_coordinator(
                    ctx, GROUP_METADATA_TOPIC_NAME, ctx.broker.group_coordinator.partition_for(key)
                )
            )
        elif request.key_type == TRANSACTION_KEY_TYPE:
            results.append(
                (key,)
                + await _find_coordinator(
                    ctx,
                    TRANSACTION_STATE_TOPIC_NAME,
                    ctx.broker.transaction_coordinator.partition_for(key),
                )
            )
        else:
            raise E.InvalidRequestException(f"Unknown coordinator type {request.key_type}")
    if ctx.api_version >= 4:
        return {
            "coordinators": [
                {
                    "key": key,
                    "node_id": node,
                    "host": host,
                    "port": port,
                    "error_code": code,
                    "error_message": E.for_code(code)().message if code else None,
                }
                for key, code, node, host, port in results
            ]
        }
    _, code, node, host, port = results[0]
    return {
        "error_code": code,
        "error_message": E.for_code(code)().message if code else None,
        "node_id": node,
        "host": host,
        "port": port,
    }


def _find_coordinator_error(
    ctx: RequestContext, request: FindCoordinatorRequest, error: E.KafkaError
) -> dict[str, Any]:
    if ctx.api_version >= 4:
        return {
            "coordinators": [
                {
                    "key": key,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": error.code,
                    "error_message": error.message,
                }
                for key in request.coordinator_keys
            ]
        }
    return {"error_code": error.code, "node_id": -1, "host": "", "port": -1}


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or (
        runtime.check_coordinator(request.group_id) if request.group_id else 0
    )
    if code:
        return {
            "error_code": code,
            "member_id": request.member_id,
            "leader": "",
            "protocol_name": None if version >= 7 else "",
        }
    instance_id = request.group_instance_id if version >= 5 else None
    previous_member_id = None
    if version < 9 and instance_id is not None and not request.member_id:
        # A static member restarting; if it led a Stable group, v0-8 answer
        # it as a follower (below), naming the leader id it had before.
        group = runtime.coordinator.group_or_none(request.group_id)
        previous_member_id = group.static_member_id(instance_id) if group else None
    future, callback = _callback_future()
    runtime.coordinator.join_group(
        request.group_id,
        request.member_id,
        instance_id,
        ctx.client_id or "",
        _client_host(ctx),
        request.session_timeout_ms,
        request.rebalance_timeout_ms if version >= 1 else -1,
        request.protocol_type,
        [(p.name, bytes(p.metadata)) for p in request.protocols],
        version >= 4,
        callback,
    )
    result = await _await_if_pending(future)
    protocol_name = result["protocol_name"]
    if protocol_name is None and version < 7:
        protocol_name = ""
    leader, members = result["leader"], result["members"]
    if result["skip_assignment"] and version < 9:
        # KIP-345 without KIP-814's skip_assignment: as in Kafka, the static
        # leader that rejoined a Stable group gets no members and its old
        # member id as leader. It then sees itself as a follower and takes
        # the current assignment from SyncGroup; told it leads, a client
        # assigns with whatever metadata it has so far, and kafka-python,
        # for one, rebalances the group as soon as its metadata changes.
        leader, members = previous_member_id or leader, []
    return {
        "error_code": result["error_code"],
        "generation_id": result["generation_id"],
        "protocol_type": result["protocol_type"],
        "protocol_name": protocol_name,
        "leader": leader,
        "skip_assignment": result["skip_assignment"] and version >= 9,
        "member_id": result["member_id"],
        "members": [
            {"member_id": m, "group_instance_id": i, "metadata": meta} for m, i, meta in members
        ],
    }


async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or runtime.check_coordinator(
        request.group_id
    )
    if code:
        return {"error_code": code, "assignment": b""}
    future, callback = _callback_future()
    runtime.coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
        callback,
    )
    code, protocol_type, protocol_name, assignment = await _await_if_pending(future)
    return {
        "error_code": code,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignment": assignment,
    }


def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or runtime.check_coordinator(
        request.group_id
    )
    if not code:
        code = runtime.coordinator.heartbeat(
            request.group_id,
            request.member_id,
            request.group_instance_id if ctx.api_version >= 3 else None,
            request.generation_id,
        )
    return {"error_code": code}


def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or runtime.check_coordinator(
        request.group_id
    )
    results = []
    if not code:
        code, results = runtime.coordinator.leave_group(request.group_id, members)
    if ctx.api_version < 3:
        return {"error_code": code or (results[0] if results else 0)}
    return {
        "error_code": code,
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": e}
            for (m, i), e in zip(members, results)
        ],
    }


# -- offsets ---------------------------------------------------------------------------
def _topic_name(
    ctx: RequestContext,
    topic: OffsetCommitRequest.OffsetCommitRequestTopic
    | OffsetFetchRequest.OffsetFetchRequestTopics
    | OffsetFetchRequest.OffsetFetchRequestTopic,
    by_id: bool,
) -> str | None:
    # OffsetFetch v0-7 topics (OffsetFetchRequestTopic) have no id.
    if not by_id or isinstance(topic, OffsetFetchRequest.OffsetFetchRequestTopic):
        return topic.name
    found = ctx.broker.metadata_image.topics_by_id.get(topic.topic_id)
    return None if found is None else found.name


async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    by_id = version >= 10
    image = ctx.broker.metadata_image
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or (
        runtime.check_coordinator(request.group_id) if request.group_id else 0
    )
    expire = NO_EXPIRE_TIMESTAMP
    if 2 <= version <= 4 and request.retention_time_ms != -1:
        expire = int(time.time() * 1000) + request.retention_time_ms
    results: dict[tuple[str | None, int], int] = {}
    # (topic, partition): (offset, leader epoch, metadata)
    offsets: dict[tuple[str | None, int], tuple[int, int, str | None]] = {}
    layout: list[tuple[OffsetCommitRequest.OffsetCommitRequestTopic, list[tuple[str | None, int]]]]
    layout = []
    for topic in request.topics:
        name = _topic_name(ctx, topic, by_id)
        readable = name is not None and ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, name)
        rows: list[tuple[str | None, int]] = []
        for p in topic.partitions:
            tp = (name, p.partition_index)
            rows.append(tp)
            known = (
                name is not None
                and name in image.topics_by_name
                and p.partition_index in image.topics_by_name[name].partitions
            )
            if code:
                results[tp] = code
            elif name is not None and not readable:
                results[tp] = E.TopicAuthorizationException.code
            elif not known:
                results[tp] = (
                    E.UnknownTopicIdException.code
                    if by_id and name is None
                    else E.UnknownTopicOrPartitionException.code
                )
            else:
                offsets[tp] = (
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.committed_metadata,
                )
        layout.append((topic, rows))
    if offsets:
        future, callback = _callback_future()
        runtime.coordinator.commit_offsets(
            request.group_id,
            request.member_id if version >= 1 else "",
            request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch if version >= 1 else -1,
            offsets,
            expire,
            callback,
        )
        results.update(await _await_if_pending(future))
    return {
        "topics": [
            {
                "name": topic.name if not by_id else "",
                "topic_id": topic.topic_id if by_id else None,
                "partitions": [
                    {"partition_index": tp[1], "error_code": results[tp]} for tp in rows
                ],
            }
            for topic, rows in layout
        ]
    }


def _fetch_group_offsets(
    ctx: RequestContext,
    runtime: GroupCoordinatorRuntime,
    group_id: str,
    topics: Iterable[
        OffsetFetchRequest.OffsetFetchRequestTopics | OffsetFetchRequest.OffsetFetchRequestTopic
    ]
    | None,
    by_id: bool,
    require_stable: bool = False,
) -> tuple[int, list[tuple[UUID | None, str | None, list[tuple[int, Any]]]]]:
    """(group error, [(topic entry, name, [(partition, value)])]); ``topics``
    None = every committed partition. With ``require_stable`` a value may be
    UNSTABLE_OFFSET_COMMIT's code (a transaction may still change it)."""
    code = _group_denied(ctx, group_id, ACL_OPERATION_DESCRIBE) or runtime.check_coordinator(
        group_id
    )
    if code:
        return code, []
    coordinator = runtime.coordinator
    out: list[tuple[UUID | None, str | None, list[tuple[int, Any]]]] = []
    if topics is None:
        grouped: dict[str, list[tuple[int, Any]]] = {}
        for name, partition, value in coordinator.fetch_offsets(group_id, None, require_stable):
            grouped.setdefault(name, []).append((partition, value))
        image = ctx.broker.metadata_image
        for name, rows in grouped.items():
            # Every committed offset: topics the principal may not describe are left out.
            if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, name):
                continue
            found = image.topics_by_name.get(name)
            out.append((found.topic_id if found is not None else None, name, rows))
        return 0, out
    for topic in topics:
        topic_name = _topic_name(ctx, topic, by_id)
        if topic_name is not None and not ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, topic_name
        ):
            out.append(
                (
                    getattr(topic, "topic_id", None),
                    topic_name,
                    [(p, E.TopicAuthorizationException.code) for p in topic.partition_indexes],
                )
            )
            continue
        if topic_name is None:
            # An unknown topic id: no offset is committed under it.
            rows = [(p, None) for p in topic.partition_indexes]
        else:
            rows = [
                (p, v)
                for _, p, v in coordinator.fetch_offsets(
                    group_id, [(topic_name, p) for p in topic.partition_indexes], require_stable
                )
            ]
        out.append((getattr(topic, "topic_id", None), topic_name, rows))
    return 0, out


def _partition_rows(rows: Iterable[tuple[int, Any]], code: int = 0) -> list[dict[str, Any]]:
    """(partition, committed offset, None, or an int: the partition's own
    error, UNSTABLE_OFFSET_COMMIT) rows as OffsetFetch partitions."""
    out: list[dict[str, Any]] = []
    for p, v in rows:
        error = v if isinstance(v, int) else code
        v = None if isinstance(v, int) else v
        out.append(
            {
                "partition_index": p,
                "committed_offset": v.offset if v else -1,
                "committed_leader_epoch": v.leader_epoch if v else -1,
                "metadata": v.metadata if v else "",
                "error_code": error,
            }
        )
    return out


def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    version = ctx.api_version
    if version >= 8:
        by_id = version >= 10
        groups: list[dict[str, Any]] = []
        for group in request.groups:
            code, topics = _fetch_group_offsets(
                ctx, runtime, group.group_id, group.topics, by_id, request.require_stable
            )
            groups.append(
                {
                    "group_id": group.group_id,
                    "error_code": code,
                    "topics": [
                        {
                            "name": name or "",
                            "topic_id": topic_id,
                            "partitions": _partition_rows(rows),
                        }
                        for topic_id, name, rows in topics
                    ],
                }
            )
        return {"groups": groups}
    code, topics = _fetch_group_offsets(
        ctx,
        runtime,
        request.group_id,
        request.topics,
        False,
        version >= 7 and request.require_stable,
    )
    if code and version < 2:
        # v0-1 have no top-level error: every requested partition carries it.
        return {
            "topics": [
                {
                    "name": t.name,
                    "partitions": _partition_rows([(p, None) for p in t.partition_indexes], code),
                }
                for t in request.topics or ()
            ]
        }
    return {
        "error_code": code,
        "topics": [{"name": name, "partitions": _partition_rows(rows)} for _, name, rows in topics],
    }


async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_DELETE) or runtime.check_coordinator(
        request.group_id
    )
    if code:
        return {"error_code": code, "topics": []}
    readable = {
        t.name
        for t in request.topics
        if ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, t.name)
    }
    partitions = [
        (t.name, p.partition_index)
        for t in request.topics
        for p in t.partitions
        if t.name in readable
    ]
    future, callback = _callback_future()
    runtime.coordinator.delete_offsets(
        request.group_id, partitions, lambda top, results: callback((top, results))
    )
    code, results = await _await_if_pending(future)
    if code:
        return {"error_code": code, "topics": []}
    return {
        "error_code": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": results.get((t.name, p.partition_index), 0)
                        if t.name in readable
                        else E.TopicAuthorizationException.code,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }


# -- ListGroups / DescribeGroups / DeleteGroups ----------------------------------------
def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    states = {s.lower() for s in request.states_filter} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if ctx.api_version >= 5 else set()
    runtime.load_all()
    listed: list[dict[str, Any]] = []
    if not types or _CONSUMER in types:
        for group_id, group in sorted(runtime.coordinator.consumer_groups.items()):
            if states and group.state.lower() not in states:
                continue
            listed.append(
                {
                    "group_id": group_id,
                    "protocol_type": "consumer",
                    "group_state": group.state,
                    "group_type": _CONSUMER,
                }
            )
    if types and _CLASSIC not in types:
        return {"error_code": 0, "groups": _describable_groups(ctx, listed)}
    for group_id, group in sorted(runtime.coordinator.groups.items()):
        if (
            group.is_(ClassicGroupState.DEAD)
            or runtime.partition_for(group_id) not in runtime.loaded
        ):
            continue
        if states and group.state.lower() not in states:
            continue
        listed.append(
            {
                "group_id": group_id,
                "protocol_type": group.protocol_type or "",
                "group_state": group.state,
                "group_type": _CLASSIC,
            }
        )
    return {"error_code": 0, "groups": _describable_groups(ctx, listed)}


def _describable_groups(ctx: RequestContext, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """DESCRIBE on the cluster lists every group, else those the principal
    may describe (Kafka's handleListGroupsRequest). Both are filters: their
    denials are not audited at INFO (logIfDenied = false)."""
    if ctx.authorize(
        ACL_OPERATION_DESCRIBE, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME, audit_denied=False
    ):
        return listed
    return [
        g
        for g in listed
        if ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_GROUP, g["group_id"], audit_denied=False
        )
    ]


def _describe_consumer_group(
    runtime: GroupCoordinatorRuntime, group: ConsumerGroup, names: dict[UUID, str]
) -> dict[str, Any]:
    """A KIP-848 group through the classic DescribeGroups, as Kafka shows
    it: subscriptions and assignments in the consumer protocol's format."""
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": encode_subscription(list(m.subscribed_topic_names)),
            "member_assignment": encode_assignment(
                {names.get(t, str(t)): sorted(ps) for t, ps in m.assigned.items()}
            ),
        }
        for m in group.members.values()
    ]
    return {
        "error_code": 0,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": CONSUMER_PROTOCOL_TYPE,
        "protocol_data": group.assignor_name or runtime.coordinator.consumer_assignors[0],
        "members": members,
    }


def _describe(
    runtime: GroupCoordinatorRuntime, group_id: str, version: int, names: dict[UUID, str]
) -> dict[str, Any]:
    code = runtime.check_coordinator(group_id)
    if code:
        return {
            "error_code": code,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }
    consumer_group = runtime.coordinator.consumer_groups.get(group_id)
    if consumer_group is not None:
        return _describe_consumer_group(runtime, consumer_group, names)
    group = runtime.coordinator.group_or_none(group_id)
    if group is None:
        if version >= 6:
            return {
                "error_code": E.GroupIdNotFoundException.code,
                "error_message": f"Group {group_id} not found.",
                "group_id": group_id,
                "group_state": ClassicGroupState.DEAD,
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
        return {
            "error_code": 0,
            "group_id": group_id,
            "group_state": ClassicGroupState.DEAD,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }
    stable = group.is_(ClassicGroupState.STABLE)
    members: list[dict[str, Any]] = []
    for member in group.members.values():
        metadata = b""
        # A Stable group has chosen its protocol.
        if stable and group.protocol_name is not None:
            try:
                metadata = member.metadata(group.protocol_name)
            except KeyError:
                pass
        members.append(
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_metadata": metadata,
                "member_assignment": member.assignment if stable else b"",
            }
        )
    return {
        "error_code": 0,
        "group_id": group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type or "",
        "protocol_data": (group.protocol_name or "") if stable else "",
        "members": members,
    }


def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    names = {
        topic.topic_id: name for name, topic in ctx.broker.metadata_image.topics_by_name.items()
    }
    groups: list[dict[str, Any]] = []
    for group_id in request.groups:
        if _group_denied(ctx, group_id, ACL_OPERATION_DESCRIBE):
            groups.append(
                {
                    "error_code": E.GroupAuthorizationException.code,
                    "group_id": group_id,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
            )
            continue
        group = _describe(runtime, group_id, ctx.api_version, names)
        if ctx.api_version >= 3 and request.include_authorized_operations:
            group["authorized_operations"] = ctx.authorized_operations(ACL_RESOURCE_GROUP, group_id)
        groups.append(group)
    return {"groups": groups}


async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    results: dict[str, int] = {}
    owned: list[str] = []
    for group_id in request.groups_names:
        code = _group_denied(ctx, group_id, ACL_OPERATION_DELETE) or runtime.check_coordinator(
            group_id
        )
        if code:
            results[group_id] = code
        else:
            owned.append(group_id)
    if owned:
        future, callback = _callback_future()
        runtime.coordinator.delete_groups(owned, callback)
        results.update(await _await_if_pending(future))
    return {
        "results": [
            {"group_id": g, "error_code": results[g]} for g in dict.fromkeys(request.groups_names)
        ]
    }


# -- KIP-848 ---------------------------------------------------------------------------
def _topics_view(ctx: RequestContext) -> dict[str, tuple[UUID, int]]:
    """{name: (topic_id, partition count)} of the cluster's topics."""
    return {
        name: (topic.topic_id, len(topic.partitions))
        for name, topic in ctx.broker.metadata_image.topics_by_name.items()
    }


async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    code = _group_denied(ctx, request.group_id, ACL_OPERATION_READ) or (
        runtime.check_coordinator(request.group_id) if request.group_id else 0
    )
    if not code and any(
        not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, name)
        for name in request.subscribed_topic_names or ()
    ):
        # Kafka: a subscription to a topic the member may not describe.
        code = E.TopicAuthorizationException.code
    if code:
        return {"error_code": code, "member_id": request.member_id or None, "member_epoch": -1}
    # topic id: the partitions the member owns (None: the request does not say)
    owned: dict[UUID, set[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for topic in request.topic_partitions:
            owned.setdefault(topic.topic_id, set()).update(topic.partitions)
    # The response goes out once the records of the change are appended
    # (at once on one node; after replication with replicas).
    future, callback = _callback_future()
    runtime.coordinator.consumer_group_heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        request.instance_id,
        request.rack_id,
        request.rebalance_timeout_ms,
        request.subscribed_topic_names,
        request.server_assignor,
        owned,
        ctx.client_id or "",
        _client_host(ctx),
        _topics_view(ctx),
        request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        callback=callback,
        # A regex filters topics: no audit line per topic left out (Kafka's
        # logIfDenied=false).
        may_describe=lambda topic: ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, topic, audit_denied=False
        ),
    )
    response: dict[str, Any] = await _await_if_pending(future)
    return response


def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> dict[str, Any]:
    runtime = ctx.broker.group_coordinator
    names = {
        topic.topic_id: name for name, topic in ctx.broker.metadata_image.topics_by_name.items()
    }
    groups: list[dict[str, Any]] = []
    for group_id in request.group_ids:
        code = _group_denied(ctx, group_id, ACL_OPERATION_DESCRIBE) or runtime.check_coordinator(
            group_id
        )
        if code:
            groups.append(
                {
                    "error_code": code,
                    "group_id": group_id,
                    "group_state": "",
                    "group_epoch": -1,
                    "assignment_epoch": -1,
                    "assignor_name": "",
                    "members": [],
                }
            )
        else:
            group = runtime.coordinator.consumer_group_describe(group_id, names)
            if request.include_authorized_operations and not group.get("error_code"):
                group["authorized_operations"] = ctx.authorized_operations(
                    ACL_RESOURCE_GROUP, group_id
                )
            groups.append(group)
    return {"groups": groups}


def register(apis: KafkaApis) -> None:
    by_name = api_keys.BY_NAME
    apis.register(
        by_name["FindCoordinator"].key,
        handle_find_coordinator,
        error_response=_find_coordinator_error,
    )
    apis.register(by_name["JoinGroup"].key, handle_join_group)
    apis.register(by_name["SyncGroup"].key, handle_sync_group)
    apis.register(by_name["Heartbeat"].key, handle_heartbeat)
    apis.register(by_name["LeaveGroup"].key, handle_leave_group)
    apis.register(by_name["OffsetCommit"].key, handle_offset_commit)
    apis.register(by_name["OffsetFetch"].key, handle_offset_fetch)
    apis.register(by_name["OffsetDelete"].key, handle_offset_delete)
    apis.register(by_name["ListGroups"].key, handle_list_groups)
    apis.register(by_name["DescribeGroups"].key, handle_describe_groups)
    apis.register(by_name["DeleteGroups"].key, handle_delete_groups)
    # Kafka advertises the KIP-848 APIs only with the consumer protocol enabled.
    config = getattr(apis.broker, "config", None)
    if config is None or "consumer" in config["group.coordinator.rebalance.protocols"]:
        apis.register(by_name["ConsumerGroupHeartbeat"].key, handle_consumer_group_heartbeat)
        apis.register(by_name["ConsumerGroupDescribe"].key, handle_consumer_group_describe)
