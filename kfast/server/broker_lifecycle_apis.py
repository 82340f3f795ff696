"""Broker membership on the controller listener (KIP-631): BrokerRegistration
and BrokerHeartbeat, answered by the active controller (Kafka's ControllerApis).

A broker registers with its incarnation id, listeners, supported features
and rack, and gets a broker epoch; it then heartbeats every
broker.heartbeat.interval.ms with the metadata offset it has replayed. The
controller unfences it once it has caught up, fences it when its session
(broker.session.timeout.ms) lapses or it asks, and tells it to shut down
after it asked to. Any other controller answers NOT_CONTROLLER, and the
broker tries the next.
"""

from __future__ import annotations

from uuid import UUID

from kfast.controller.cluster_control import SECURITY_PROTOCOLS
from kfast.controller.feature_control import KRAFT_VERSION
from kfast.controller.metadata.image import Endpoint
from kfast.protocol import (
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import ACL_OPERATION_CLUSTER_ACTION
from kfast.server.apis import ApiRegistry, RequestContext

_PROTOCOL_NAMES = {code: name for name, code in SECURITY_PROTOCOLS.items()}


async def handle_broker_registration(
    ctx: RequestContext, request: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    server = ctx.broker
    if request.cluster_id != server.cluster_id:
        return BrokerRegistrationResponse(
            error_code=errors.InconsistentClusterIdException.code, broker_epoch=-1
        )
    listeners: list[Endpoint] = []
    for listener in request.listeners:
        protocol = _PROTOCOL_NAMES.get(listener.security_protocol)
        if protocol is None:
            raise errors.InvalidRegistrationException(
                f"Unknown security protocol {listener.security_protocol} for listener "
                f"{listener.name}"
            )
        listeners.append(Endpoint(listener.name, listener.host, listener.port, protocol))
    # Every finalized feature, kraft.version included, must be in the
    # broker's range; a feature it does not list it supports at 0 only
    # (Kafka's ClusterControlManager.processRegistrationFeature).
    finalized = {
        **server.controller.feature_control.finalized,
        KRAFT_VERSION: server.controller.kraft_version(),
    }
    ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in request.features}
    for name, level in finalized.items():
        low, high = ranges.get(name, (0, 0))
        if not low <= level <= high:
            raise errors.UnsupportedVersionException(
                f"Unable to register because the broker does not support finalized version "
                f"{level} of {name}. The broker wants a version between {low} and {high}, "
                f"inclusive."
            )
    features = [
        (f.name, f.min_supported_version, f.max_supported_version) for f in request.features
    ]
    epoch = await server.controller.register_broker(
        request.broker_id,
        request.incarnation_id,
        listeners,
        request.rack,
        features,
        log_dirs=list(request.log_dirs or ()),
    )
    return BrokerRegistrationResponse(error_code=0, broker_epoch=epoch)


async def handle_broker_heartbeat(
    ctx: RequestContext, request: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    caught_up, fenced, shut_down = await ctx.broker.controller.broker_heartbeat(
        request.broker_id,
        request.broker_epoch,
        request.current_metadata_offset,
        request.want_fence,
        request.want_shut_down,
        offline_log_dirs=list(request.offline_log_dirs or ()),
    )
    return BrokerHeartbeatResponse(
        error_code=0, is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down
    )


async def handle_assign_replicas_to_dirs(
    ctx: RequestContext, request: AssignReplicasToDirsRequest
) -> AssignReplicasToDirsResponse:
    """AssignReplicasToDirs (KIP-858): a broker with several log dirs says
    which dir holds each of its replicas, so that when a dir fails the
    controller knows which replicas went with it."""
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    assignments = {
        d.id: [(t.topic_id, p.partition_index) for t in d.topics for p in t.partitions]
        for d in request.directories
    }
    # (directory id, topic id, partition): error code
    results: dict[tuple[UUID, UUID, int], int]
    results = await ctx.broker.controller.assign_replicas_to_dirs(
        request.broker_id, request.broker_epoch, assignments
    )
    Dir = AssignReplicasToDirsResponse.DirectoryData
    Topic = AssignReplicasToDirsResponse.TopicData
    Partition = AssignReplicasToDirsResponse.PartitionData
    return AssignReplicasToDirsResponse(
        error_code=0,
        directories=[
            Dir(
                id=d.id,
                topics=[
                    Topic(
                        topic_id=t.topic_id,
                        partitions=[
                            Partition(
                                partition_index=p.partition_index,
                                error_code=results[(d.id, t.topic_id, p.partition_index)],
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in d.topics
                ],
            )
            for d in request.directories
        ],
    )


def _assign_error(
    ctx: RequestContext, request: AssignReplicasToDirsRequest, error: errors.KafkaError
) -> AssignReplicasToDirsResponse:
    return AssignReplicasToDirsResponse(error_code=error.code, directories=[])


def _heartbeat_error(
    ctx: RequestContext, request: BrokerHeartbeatRequest, error: errors.KafkaError
) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(
        error_code=error.code, is_caught_up=False, is_fenced=True, should_shut_down=False
    )


def _registration_error(
    ctx: RequestContext, request: BrokerRegistrationRequest, error: errors.KafkaError
) -> BrokerRegistrationResponse:
    return BrokerRegistrationResponse(error_code=error.code, broker_epoch=-1)


def register(apis: ApiRegistry) -> None:
    apis.register(
        api_keys.BY_NAME["BrokerRegistration"].key,
        handle_broker_registration,
        error_response=_registration_error,
    )
    apis.register(
        api_keys.BY_NAME["BrokerHeartbeat"].key,
        handle_broker_heartbeat,
        error_response=_heartbeat_error,
    )
    apis.register(
        api_keys.BY_NAME["AssignReplicasToDirs"].key,
        handle_assign_replicas_to_dirs,
        error_response=_assign_error,
    )
