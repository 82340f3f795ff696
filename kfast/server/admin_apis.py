"""Admin APIs: topics, configs and cluster description (Kafka's
ControllerApis / KafkaApis admin handlers, ConfigHelper, ConfigAdminManager).

Writes (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
UpdateFeatures) go to the QuorumController, which
commits them to the metadata log before answering; the broker's metadata
publisher applies them to the logs (created, deleted, reconfigured).
Reads (DescribeConfigs, DescribeCluster, DescribeTopicPartitions,
ListPartitionReassignments, ListConfigResources) are answered from the broker's current
MetadataImage and its static configuration; DescribeQuorum from the
controller's metadata log.

Errors are per resource, with Kafka's codes and messages; a request only
fails as a whole for what Kafka fails as a whole (DescribeCluster with a
controller endpoint type).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeAlias
from uuid import UUID

from kfast.controller.config_describer import LOG4J_LEVELS, ConfigDescriber
from kfast.controller.feature_control import SAFE_DOWNGRADE, UPGRADE
from kfast.controller.replication_control import ELECTION_PREFERRED, CreatedTopic, TopicSpec
from kfast.controller.topics import is_internal, validate_topic_name
from kfast.protocol import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_ALTER,
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_RESOURCE_NAME,
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_BROKER_LOGGER,
    CONFIG_RESOURCE_CLIENT_METRICS,
    CONFIG_RESOURCE_GROUP,
    CONFIG_RESOURCE_TOPIC,
    ENDPOINT_TYPE_BROKER,
    NO_LEADER,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    SOURCE_DEFAULT_CONFIG,
    ZERO_UUID,
)
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.server.quota import (
    controller_mutation_quota,
    refund_mutation_quota,
    take_mutation_quota,
)
from kfast.storage.manager import CLUSTER_METADATA_TOPIC_NAME

logger = logging.getLogger(__name__)

# A resource of AlterConfigs or of IncrementalAlterConfigs (the same fields
# but for the configs' operation)
_AlterResource: TypeAlias = (
    "AlterConfigsRequest.AlterConfigsResource | IncrementalAlterConfigsRequest.AlterConfigsResource"
)


def _message(error: errors.KafkaError | None) -> str | None:
    if error is None:
        return None
    return str(error) or None


async def _applied(ctx: RequestContext) -> None:
    """Wait until this broker has applied what was committed (logs created,
    deleted, reconfigured), so a client that acts on the response right away
    finds the change in place on this broker."""
    publisher = getattr(ctx.broker, "metadata_publisher", None)
    if publisher is not None:
        await publisher.wait_idle()


def _describer(ctx: RequestContext) -> ConfigDescriber:
    return ConfigDescriber(ctx.broker.config, ctx.broker.node_id)


def _no_room(ctx: RequestContext) -> errors.KafkaError | None:
    """POLICY_VIOLATION when every log dir of this broker is below the
    free-space threshold (kfast.storage.free_space): new partitions are
    refused with the reason. Not KAFKA_STORAGE_ERROR: nothing failed, and an
    admin client does not retry a topic's error anyway. A forwarded request
    is checked by the broker the client sent it to only when that broker
    runs the handler (the embedded node); a cluster's controller does not
    know its brokers' free space."""
    log_manager = getattr(ctx.broker, "log_manager", None)
    message = log_manager.all_dirs_low_message() if log_manager is not None else None
    if message is None:
        return None
    return errors.PolicyViolationException(
        f"Cannot create partitions on broker {ctx.broker.node_id}: {message}"
    )


# -- CreateTopics -------------------------------------------------------------------------
async def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    version = ctx.api_version
    validate_only = request.validate_only if version >= 1 else False
    specs = []
    for topic in request.topics:
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        specs.append(
            TopicSpec(
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                assignments or None,
                {c.name: c.value for c in topic.configs},
            )
        )
    # Kafka: CREATE on the cluster, or else on each topic (the audited check).
    may_create = ctx.authorize(
        ACL_OPERATION_CREATE, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME, audit_denied=False
    )
    denied = {
        spec.name
        for spec in specs
        if not may_create and not ctx.authorize(ACL_OPERATION_CREATE, ACL_RESOURCE_TOPIC, spec.name)
    }
    no_room = _no_room(ctx)
    if no_room is not None:
        return CreateTopicsResponse(
            topics=[
                CreateTopicsResponse.CreatableTopicResult(
                    name=spec.name,
                    error_code=(
                        errors.TopicAuthorizationException.code
                        if spec.name in denied
                        else no_room.code
                    ),
                    error_message="Authorization failed." if spec.name in denied else str(no_room),
                )
                for spec in specs
            ]
        )
    # controller_mutation_rate: partitions created, strict from v6.
    quota = controller_mutation_quota(ctx, 6)
    permits = (
        [
            (
                s.name,
                len(s.assignments)
                if s.assignments
                else s.num_partitions
                if s.num_partitions > 0
                else ctx.broker.config["num.partitions"],
            )
            for s in specs
            if s.name not in denied
        ]
        if quota is not None
        else []
    )
    throttled = take_mutation_quota(ctx, quota, permits)
    created = iter(
        await ctx.broker.controller.create_topics(
            [spec for spec in specs if spec.name not in denied and spec.name not in throttled],
            validate_only,
        )
    )
    results = [
        CreatedTopic(spec.name, errors.TopicAuthorizationException("Authorization failed."))
        if spec.name in denied
        else CreatedTopic(spec.name, throttled[spec.name])
        if spec.name in throttled
        else next(created)
        for spec in specs
    ]
    refund_mutation_quota(
        quota, permits, {r.name for r in results if r.error is not None and r.name not in throttled}
    )
    await _applied(ctx)
    image = ctx.broker.metadata_image
    describer = _describer(ctx)
    out = []
    for spec, result in zip(specs, results):
        entry = CreateTopicsResponse.CreatableTopicResult(
            name=result.name,
            error_code=result.error.code if result.error else 0,
            error_message=_message(result.error),
        )
        if result.error is None:
            entry.topic_id = ZERO_UUID if validate_only else result.topic_id
            entry.num_partitions = result.num_partitions
            entry.replication_factor = result.replication_factor
            if version >= 5:
                entry.configs = [
                    CreateTopicsResponse.CreatableTopicConfigs(
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        config_source=c.source,
                        is_sensitive=c.is_sensitive,
                    )
                    # A created topic has no null value (the controller refuses them).
                    for c in describer.describe_topic(
                        image, {k: v for k, v in spec.configs.items() if v is not None}
                    )
                ]
        out.append(entry)
    return CreateTopicsResponse(topics=out)


# -- DeleteTopics ---------------------------------------------------------------------------
async def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    version = ctx.api_version
    if version >= 6:
        names = [t.name for t in request.topics]
        ids = [t.topic_id for t in request.topics]
    else:
        names = list(request.topic_names)
        ids = [ZERO_UUID] * len(names)
    Result = DeleteTopicsResponse.DeletableTopicResult
    if not ctx.broker.config["delete.topic.enable"]:
        code = (
            errors.TopicDeletionDisabledException.code
            if version >= 3
            else errors.InvalidRequestException.code
        )
        return DeleteTopicsResponse(
            responses=[
                Result(
                    name=name,
                    topic_id=topic_id,
                    error_code=code,
                    error_message="Topic deletion is disabled.",
                )
                for name, topic_id in zip(names, ids)
            ]
        )
    # A name the principal may not DELETE is refused before the controller
    # sees it (topics named by id are checked by their name).
    image = ctx.broker.metadata_image
    allowed = []
    for name, topic_id in zip(names, ids):
        if name is None or topic_id != ZERO_UUID:
            found = image.topics_by_id.get(topic_id)
            name = found.name if found is not None else name
        allowed.append(
            name is None or ctx.authorize(ACL_OPERATION_DELETE, ACL_RESOURCE_TOPIC, name)
        )
    # controller_mutation_rate: partitions deleted, strict from v5.
    quota = controller_mutation_quota(ctx, 5)
    permits = []
    if quota is not None:
        for name, topic_id, ok in zip(names, ids, allowed):
            found = (
                image.topics_by_id.get(topic_id)
                if topic_id != ZERO_UUID
                else image.topics_by_name.get(name)
            )
            if ok and found is not None:
                permits.append((found.name, len(found.partitions)))
    throttled = take_mutation_quota(ctx, quota, permits)

    def refused(name: str | None, topic_id: UUID) -> errors.KafkaError | None:
        found = image.topics_by_id.get(topic_id) if topic_id != ZERO_UUID else None
        key = found.name if found is not None else name
        return None if key is None else throttled.get(key)

    allowed = [ok and refused(n, i) is None for n, i, ok in zip(names, ids, allowed)]
    deleted = iter(
        await ctx.broker.controller.delete_topics(
            [n for n, ok in zip(names, allowed) if ok], [i for i, ok in zip(ids, allowed) if ok]
        )
    )
    results = [
        next(deleted)
        if ok
        else (
            name,
            topic_id,
            refused(name, topic_id) or errors.TopicAuthorizationException("Authorization failed."),
        )
        for name, topic_id, ok in zip(names, ids, allowed)
    ]
    await _applied(ctx)
    return DeleteTopicsResponse(
        responses=[
            Result(
                name=name if name is not None or version >= 6 else "",
                topic_id=topic_id,
                error_code=error.code if error else 0,
                error_message=_message(error),
            )
            for name, topic_id, error in results
        ]
    )


# -- CreatePartitions ---------------------------------------------------------------------
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    topics = [
        (
            t.name,
            t.count,
            [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
        )
        for t in request.topics
    ]
    allowed = [ctx.authorize(ACL_OPERATION_ALTER, ACL_RESOURCE_TOPIC, t[0]) for t in topics]
    no_room = _no_room(ctx)
    if no_room is not None:
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsResponse.CreatePartitionsTopicResult(
                    name=name,
                    error_code=no_room.code if ok else errors.TopicAuthorizationException.code,
                    error_message=str(no_room) if ok else "The topic authorization is failed.",
                )
                for (name, _, _), ok in zip(topics, allowed)
            ]
        )
    # controller_mutation_rate: partitions added, strict from v3.
    quota = controller_mutation_quota(ctx, 3)
    image = ctx.broker.metadata_image
    permits = (
        [
            (name, max(0, count - len(image.topics_by_name[name].partitions)))
            for (name, count, _), ok in zip(topics, allowed)
            if ok and name in image.topics_by_name
        ]
        if quota is not None
        else []
    )
    throttled = take_mutation_quota(ctx, quota, permits)
    changed = iter(
        await ctx.broker.controller.create_partitions(
            [t for t, ok in zip(topics, allowed) if ok and t[0] not in throttled],
            request.validate_only,
        )
    )
    results = [
        throttled[t[0]]
        if t[0] in throttled
        else next(changed)
        if ok
        else errors.TopicAuthorizationException("The topic authorization is failed.")
        for t, ok in zip(topics, allowed)
    ]
    refund_mutation_quota(
        quota,
        permits,
        {t[0] for t, error in zip(topics, results) if error is not None and t[0] not in throttled},
    )
    await _applied(ctx)
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    return CreatePartitionsResponse(
        results=[
            Result(name=name, error_code=error.code if error else 0, error_message=_message(error))
            for (name, _, _), error in zip(topics, results)
        ]
    )


# -- DescribeConfigs ------------------------------------------------------------------------
def _check_broker_name(ctx: RequestContext, name: str, allow_default: bool) -> None:
    if name == "" and allow_default:
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise errors.InvalidRequestException(
            f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != ctx.broker.node_id:
        raise errors.InvalidRequestException(
            f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but received "
            f"{name}"
        )


def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    version = ctx.api_version
    include_synonyms = version >= 1 and request.include_synonyms
    include_docs = version >= 3 and request.include_documentation
    image = ctx.broker.metadata_image
    describer = _describer(ctx)
    Result = DescribeConfigsResponse.DescribeConfigsResult
    Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
    Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
    results = []
    for resource in request.resources:
        # Null or empty: every config (Kafka's ConfigHelper).
        keys = set(resource.configuration_keys) if resource.configuration_keys else None
        name = resource.resource_name
        try:
            _authorize_config(ctx, resource.resource_type, name, ACL_OPERATION_DESCRIBE_CONFIGS)
            if resource.resource_type == CONFIG_RESOURCE_TOPIC:
                validate_topic_name(name)
                if name not in image.topics_by_name:
                    raise errors.UnknownTopicOrPartitionException(
                        f"The topic '{name}' does not exist."
                    )
                described = describer.describe_topic(
                    image, image.topic_configs.get(name, {}), keys, include_synonyms, include_docs
                )
            elif resource.resource_type == CONFIG_RESOURCE_BROKER:
                _check_broker_name(ctx, name, allow_default=True)
                described = describer.describe_broker(
                    image, name, keys, include_synonyms, include_docs
                )
            elif resource.resource_type == CONFIG_RESOURCE_BROKER_LOGGER:
                _check_broker_name(ctx, name, allow_default=False)
                described = describer.describe_loggers(keys)
            elif resource.resource_type == CONFIG_RESOURCE_CLIENT_METRICS:
                if not name:
                    raise errors.InvalidRequestException(
                        "Client metrics subscription name must not be empty"
                    )
                described = describer.describe_client_metrics(image, name, keys, include_docs)
            elif resource.resource_type == CONFIG_RESOURCE_GROUP:
                if not name:
                    raise errors.InvalidRequestException("Group name must not be empty")
                described = describer.describe_group(
                    image.group_configs.get(name, {}), keys, include_synonyms, include_docs
                )
            else:
                raise errors.InvalidRequestException(
                    f"Unsupported resource type: {resource.resource_type}"
                )
        except errors.KafkaError as exc:
            results.append(
                Result(
                    error_code=exc.code,
                    error_message=_message(exc),
                    resource_type=resource.resource_type,
                    resource_name=name,
                    configs=[],
                )
            )
            continue
        configs = []
        for c in described:
            entry = Entry(
                name=c.name,
                value=c.value,
                read_only=c.read_only,
                is_sensitive=c.is_sensitive,
                synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in c.synonyms],
            )
            if version == 0:
                entry.is_default = c.source == SOURCE_DEFAULT_CONFIG
            else:
                entry.config_source = c.source
            if version >= 3:
                entry.config_type = c.config_type
                entry.documentation = c.documentation
            configs.append(entry)
        results.append(
            Result(
                error_code=0,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(results=results)


# -- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------
def _authorize_config(ctx: RequestContext, resource_type: int, name: str, operation: int) -> None:
    """Kafka's config authorization: topics on the topic, groups on the
    group, broker and logger configs on the cluster."""
    if resource_type == CONFIG_RESOURCE_TOPIC:
        if not ctx.authorize(operation, ACL_RESOURCE_TOPIC, name):
            raise errors.TopicAuthorizationException()
    elif resource_type == CONFIG_RESOURCE_GROUP:
        if not ctx.authorize(operation, ACL_RESOURCE_GROUP, name):
            raise errors.GroupAuthorizationException()
    elif not ctx.authorize(operation, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME):
        raise errors.ClusterAuthorizationException()


def _check_alter_resource(ctx: RequestContext, resource_type: int, name: str) -> None:
    if resource_type == CONFIG_RESOURCE_TOPIC:
        validate_topic_name(name)
    elif resource_type == CONFIG_RESOURCE_BROKER:
        if name != "":
            try:
                int(name)
            except ValueError:
                raise errors.InvalidRequestException(
                    f"Broker id must be an integer, but it is: {name}"
                ) from None
    elif resource_type == CONFIG_RESOURCE_GROUP:
        if not name:
            raise errors.InvalidRequestException("Default group resources are not allowed.")
    elif resource_type != CONFIG_RESOURCE_CLIENT_METRICS:  # the controller checks those
        raise errors.InvalidRequestException(f"Unsupported resource type: {resource_type}")


async def _alter(
    ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest
) -> list[dict[str, Any]]:
    """The result of each resource of an AlterConfigs or an
    IncrementalAlterConfigs request (see _alter_results)."""
    controller = ctx.broker.controller
    incremental = isinstance(request, IncrementalAlterConfigsRequest)
    responses: list[errors.KafkaError | None] = [None] * len(request.resources)
    # (resource type, name, [(key, op, value)] or {key: value}) for the controller
    pending: list[tuple[int, str, list[tuple[str, int, str | None]] | dict[str, str | None]]] = []
    positions: list[int] = []
    resources: list[_AlterResource] = list(request.resources)
    for i, resource in enumerate(resources):
        resource_type, name = resource.resource_type, resource.resource_name
        try:
            _authorize_config(ctx, resource_type, name, ACL_OPERATION_ALTER_CONFIGS)
            if (
                isinstance(resource, IncrementalAlterConfigsRequest.AlterConfigsResource)
                and resource_type == CONFIG_RESOURCE_BROKER_LOGGER
            ):
                _check_broker_name(ctx, name, allow_default=False)
                _alter_loggers(resource.configs, request.validate_only)
                responses[i] = None
                continue
            _check_alter_resource(ctx, resource_type, name)
        except errors.KafkaError as exc:
            responses[i] = exc
            continue
        if isinstance(resource, IncrementalAlterConfigsRequest.AlterConfigsResource):
            pending.append(
                (
                    resource_type,
                    name,
                    [(c.name, c.config_operation, c.value) for c in resource.configs],
                )
            )
        else:
            pending.append((resource_type, name, {c.name: c.value for c in resource.configs}))
        positions.append(i)
    if pending:
        alter = (
            controller.incremental_alter_configs if incremental else controller.legacy_alter_configs
        )
        for i, error in zip(positions, await alter(pending, request.validate_only)):
            responses[i] = error
        await _applied(ctx)
    return _alter_results(resources, responses)


def _alter_results(
    resources: Sequence[_AlterResource], results: Sequence[errors.KafkaError | None]
) -> list[dict[str, Any]]:
    """The fields of each resource's AlterConfigsResourceResponse (the same in
    both APIs' responses), from its error (None: altered)."""
    return [
        {
            "error_code": error.code if error else 0,
            "error_message": _message(error),
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        for resource, error in zip(resources, results)
    ]


def _alter_loggers(
    configs: list[IncrementalAlterConfigsRequest.AlterableConfig], validate_only: bool
) -> None:
    """BROKER_LOGGER changes act on this process's Python loggers at once;
    like Kafka's log4j changes they are not persisted."""
    changes: list[tuple[str, int]] = []
    for c in configs:
        if c.config_operation in (OP_APPEND, OP_SUBTRACT):
            raise errors.InvalidRequestException(
                f"{'APPEND' if c.config_operation == OP_APPEND else 'SUBTRACT'} operation is not "
                f"allowed for the BROKER_LOGGER resource"
            )
        if c.config_operation == OP_SET:
            level = LOG4J_LEVELS.get((c.value or "").upper())
            if level is None:
                raise errors.InvalidConfigurationException(
                    f"Cannot set the log level of {c.name} to {c.value} as it is not a supported "
                    f"log level. Valid log levels are {', '.join(LOG4J_LEVELS)}"
                )
        elif c.config_operation == OP_DELETE:
            if c.name == "root":
                raise errors.InvalidRequestException(
                    "Removing the log level of the root logger is not allowed"
                )
            level = logging.NOTSET
        else:
            raise errors.InvalidRequestException(
                f"Unknown alter configs op type {c.config_operation}"
            )
        changes.append((c.name, level))
    if validate_only:
        return
    for name, level in changes:
        (logging.getLogger() if name == "root" else logging.getLogger(name)).setLevel(level)


async def handle_alter_configs(
    ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    Result = AlterConfigsResponse.AlterConfigsResourceResponse
    return AlterConfigsResponse(responses=[Result(**f) for f in await _alter(ctx, request)])


async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    fields = await _alter(ctx, request)
    return IncrementalAlterConfigsResponse(responses=[Result(**f) for f in fields])


# -- DescribeCluster -----------------------------------------------------------------------
def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    version = ctx.api_version
    image = ctx.broker.metadata_image
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    if version >= 1 and request.endpoint_type != ENDPOINT_TYPE_BROKER:
        return DescribeClusterResponse(
            error_code=errors.UnsupportedEndpointTypeException.code,
            error_message="The broker does not serve the controller endpoint type.",
            endpoint_type=request.endpoint_type,
            cluster_id=image.cluster_id,
        )
    include_fenced = version >= 2 and request.include_fenced_brokers
    brokers = []
    for broker_id in sorted(image.brokers):
        registration = image.brokers[broker_id]
        endpoint = registration.listeners.get(ctx.listener_name)
        if endpoint is None or (registration.fenced and not include_fenced):
            continue
        brokers.append(
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=broker_id,
                host=endpoint.host,
                port=endpoint.port,
                rack=registration.rack,
                is_fenced=registration.fenced,
            )
        )
    return DescribeClusterResponse(
        error_code=0,
        endpoint_type=ENDPOINT_TYPE_BROKER,
        cluster_id=image.cluster_id,
        # As for Metadata: KRaft brokers name a live broker as the controller.
        controller_id=ctx.broker.node_id,
        brokers=brokers,
        cluster_authorized_operations=ctx.authorized_operations(
            ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME
        )
        if request.include_cluster_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED,
    )


# -- ElectLeaders --------------------------------------------------------------------------
async def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    election_type = request.election_type if ctx.api_version >= 1 else ELECTION_PREFERRED
    requested: list[tuple[str, int]] | None = None
    if request.topic_partitions is not None:
        requested = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    results: dict[tuple[str, int], errors.KafkaError | None]
    results = await ctx.broker.controller.elect_leaders(election_type, requested)
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = {}
    for (topic, partition), error in results.items():
        if requested is None and isinstance(error, errors.ElectionNotNeededException):
            continue  # an election over all partitions lists only those elected
        by_topic.setdefault(topic, []).append(
            ElectLeadersResponse.PartitionResult(
                partition_id=partition,
                error_code=error.code if error else 0,
                error_message=_message(error),
            )
        )
    return ElectLeadersResponse(
        error_code=0,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


def _elect_leaders_error(
    ctx: RequestContext, request: ElectLeadersRequest, error: errors.KafkaError
) -> ElectLeadersResponse:
    return ElectLeadersResponse(error_code=error.code, replica_election_results=[])


# -- DescribeTopicPartitions (KIP-966) -------------------------------------------------------
def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = ctx.broker.metadata_image
    Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
    Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
    names = (
        sorted({t.name for t in request.topics}) if request.topics else sorted(image.topics_by_name)
    )
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(1, request.response_partition_limit)
    alive = {b for b, r in image.brokers.items() if not r.fenced}
    topics, next_cursor = [], None
    for name in names:
        topic = image.topics_by_name.get(name)
        if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, name):
            if request.topics:  # named: refused; listing all: left out
                topics.append(
                    Topic(
                        error_code=errors.TopicAuthorizationException.code,
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=False,
                        partitions=[],
                    )
                )
            continue
        if topic is None:
            topics.append(
                Topic(
                    error_code=errors.UnknownTopicOrPartitionException.code,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=is_internal(name),
                    partitions=[],
                )
            )
            continue
        if budget <= 0:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
            break
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = []
        for index in sorted(topic.partitions):
            if index < first:
                continue
            if budget <= 0:
                next_cursor = DescribeTopicPartitionsResponse.Cursor(
                    topic_name=name, partition_index=index
                )
                break
            registration = topic.partitions[index]
            partitions.append(
                Partition(
                    error_code=errors.LeaderNotAvailableException.code
                    if registration.leader == NO_LEADER
                    else 0,
                    partition_index=index,
                    leader_id=registration.leader,
                    leader_epoch=registration.leader_epoch,
                    replica_nodes=list(registration.replicas),
                    isr_nodes=list(registration.isr),
                    eligible_leader_replicas=list(registration.eligible_leader_replicas),
                    last_known_elr=list(registration.last_known_elr),
                    offline_replicas=[r for r in registration.replicas if r not in alive],
                )
            )
            budget -= 1
        topics.append(
            Topic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=is_internal(name),
                partitions=partitions,
                topic_authorized_operations=ctx.authorized_operations(ACL_RESOURCE_TOPIC, name),
            )
        )
        if next_cursor is not None:
            break
    return DescribeTopicPartitionsResponse(topics=topics, next_cursor=next_cursor)


# -- ListPartitionReassignments -------------------------------------------------------------
def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """Ongoing reassignments are partitions with adding or removing
    replicas (AlterPartitionReassignments started them, and the new
    replicas have not all joined the ISR yet)."""
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    image = ctx.broker.metadata_image
    # topic: its partitions asked about, None for all
    wanted: dict[str, set[int] | None]
    if request.topics is None:
        wanted = {name: None for name in image.topics_by_name}
    else:
        wanted = {t.name: set(t.partition_indexes) for t in request.topics}
    out = []
    for name, indexes in wanted.items():
        topic = image.topics_by_name.get(name)
        if topic is None:
            continue
        partitions = [
            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=index,
                replicas=list(r.replicas),
                adding_replicas=list(r.adding_replicas),
                removing_replicas=list(r.removing_replicas),
            )
            for index, r in sorted(topic.partitions.items())
            if (indexes is None or index in indexes) and (r.adding_replicas or r.removing_replicas)
        ]
        if partitions:
            out.append(
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(
                    name=name, partitions=partitions
                )
            )
    return ListPartitionReassignmentsResponse(error_code=0, error_message=None, topics=out)


# -- whole-request failures (controller not running, metadata log I/O error) ---------------
def _create_topics_error(
    ctx: RequestContext, request: CreateTopicsRequest, error: errors.KafkaError
) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        topics=[
            CreateTopicsResponse.CreatableTopicResult(
                name=t.name, error_code=error.code, error_message=_message(error)
            )
            for t in request.topics
        ]
    )


def _delete_topics_error(
    ctx: RequestContext, request: DeleteTopicsRequest, error: errors.KafkaError
) -> DeleteTopicsResponse:
    Result = DeleteTopicsResponse.DeletableTopicResult
    if ctx.api_version >= 6:
        entries = [(t.name, t.topic_id) for t in request.topics]
    else:
        entries = [(name, ZERO_UUID) for name in request.topic_names]
    return DeleteTopicsResponse(
        responses=[
            Result(
                name=name, topic_id=topic_id, error_code=error.code, error_message=_message(error)
            )
            for name, topic_id in entries
        ]
    )


def _create_partitions_error(
    ctx: RequestContext, request: CreatePartitionsRequest, error: errors.KafkaError
) -> CreatePartitionsResponse:
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    return CreatePartitionsResponse(
        results=[
            Result(name=t.name, error_code=error.code, error_message=_message(error))
            for t in request.topics
        ]
    )


def _alter_configs_error(
    ctx: RequestContext, request: AlterConfigsRequest, error: errors.KafkaError
) -> AlterConfigsResponse:
    fields = _alter_results(request.resources, [error] * len(request.resources))
    Result = AlterConfigsResponse.AlterConfigsResourceResponse
    return AlterConfigsResponse(responses=[Result(**f) for f in fields])


def _incremental_alter_configs_error(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest, error: errors.KafkaError
) -> IncrementalAlterConfigsResponse:
    results = _alter_results(request.resources, [error] * len(request.resources))
    return IncrementalAlterConfigsResponse(
        responses=[
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(**f) for f in results
        ]
    )


# -- AlterPartitionReassignments -------------------------------------------------------------
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    allow_rf_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    requests = [
        (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for t in request.topics
        for p in t.partitions
    ]
    results = await ctx.broker.controller.alter_partition_reassignments(requests, allow_rf_change)
    await _applied(ctx)
    Response = AlterPartitionReassignmentsResponse
    return Response(
        error_code=0,
        error_message=None,
        responses=[
            Response.ReassignableTopicResponse(
                name=t.name,
                partitions=[
                    Response.ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=results[t.name, p.partition_index].code
                        if results[t.name, p.partition_index]
                        else 0,
                        error_message=_message(results[t.name, p.partition_index]),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _alter_partition_reassignments_error(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest, error: errors.KafkaError
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        error_code=error.code, error_message=_message(error), responses=[]
    )


# -- UpdateFeatures ---------------------------------------------------------------------------
async def handle_update_features(
    ctx: RequestContext, request: UpdateFeaturesRequest
) -> UpdateFeaturesResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    names = [u.feature for u in request.feature_updates]
    if len(set(names)) != len(names):
        return UpdateFeaturesResponse(
            error_code=errors.InvalidRequestException.code,
            error_message="Duplicate feature in the request.",
        )
    version = ctx.api_version
    # v0 says allow_downgrade; v1+ names the upgrade type (1 upgrade, 2 safe
    # downgrade, 3 unsafe downgrade) and may ask to validate only.
    results = await ctx.broker.controller.update_features(
        [
            (
                u.feature,
                u.max_version_level,
                u.upgrade_type
                if version >= 1
                else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE),
            )
            for u in request.feature_updates
        ],
        request.validate_only if version >= 1 else False,
    )
    if ctx.api_version >= 2:
        # v2 has no per-feature results: the first failure answers for all.
        failed = next((e for e in results.values() if e is not None), None)
        return UpdateFeaturesResponse(
            error_code=failed.code if failed else 0, error_message=_message(failed)
        )
    return UpdateFeaturesResponse(
        error_code=0,
        error_message=None,
        results=[
            UpdateFeaturesResponse.UpdatableFeatureResult(
                feature=name, error_code=error.code if error else 0, error_message=_message(error)
            )
            for name, error in results.items()
        ],
    )


def _update_features_error(
    ctx: RequestContext, request: UpdateFeaturesRequest, error: errors.KafkaError
) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(error_code=error.code, error_message=_message(error))


# -- DescribeQuorum ---------------------------------------------------------------------------
def _replica_state(row: tuple[int, int, int]) -> DescribeQuorumResponse.ReplicaState:
    """(node id, log end offset, last fetch time) -> DescribeQuorum's ReplicaState.
    The leader does not yet track when a replica last reached its end
    offset, so the last fetch time stands for the caught-up time too."""
    node_id, end, fetched = row
    return DescribeQuorumResponse.ReplicaState(
        replica_id=node_id,
        log_end_offset=end,
        last_fetch_timestamp=fetched,
        last_caught_up_timestamp=fetched,
    )


def handle_describe_quorum(
    ctx: RequestContext, request: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    """The metadata quorum (__cluster_metadata-0) as its leader sees it
    (a node that does not lead it answers NOT_LEADER_OR_FOLLOWER). ``nodes``
    (v2+) lists the voters without endpoints."""
    Response = DescribeQuorumResponse
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE)
    try:
        state = ctx.broker.controller.quorum_state()
    except errors.NotLeaderOrFollowerException as exc:
        # Kafka answers a non-leader's DescribeQuorum per partition.
        return Response(
            error_code=0,
            topics=[
                Response.TopicData(
                    topic_name=topic.topic_name,
                    partitions=[
                        Response.PartitionData(
                            partition_index=p.partition_index,
                            error_code=exc.code,
                            error_message=str(exc),
                            leader_id=NO_LEADER,
                            leader_epoch=-1,
                            high_watermark=-1,
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ],
        )
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            index = partition.partition_index
            if topic.topic_name != CLUSTER_METADATA_TOPIC_NAME or index != 0:
                partitions.append(
                    Response.PartitionData(
                        partition_index=index,
                        error_code=errors.UnknownTopicOrPartitionException.code,
                        error_message=f"Unknown topic partition {topic.topic_name}-{index}",
                        leader_id=NO_LEADER,
                        leader_epoch=-1,
                        high_watermark=-1,
                    )
                )
                continue
            partitions.append(
                Response.PartitionData(
                    partition_index=0,
                    error_code=0,
                    leader_id=state["leader_id"],
                    leader_epoch=state["leader_epoch"],
                    high_watermark=state["high_watermark"],
                    current_voters=[_replica_state(row) for row in state["voters"]],
                    observers=[_replica_state(row) for row in state["observers"]],
                )
            )
        topics.append(Response.TopicData(topic_name=topic.topic_name, partitions=partitions))
    # ``nodes`` is not ignorable: v0 and v1 cannot carry it, so only v2 fills it.
    nodes = (
        [Response.Node(node_id=voter, listeners=[]) for voter, *_ in state["voters"]]
        if ctx.api_version >= 2
        else []
    )
    return Response(error_code=0, topics=topics, nodes=nodes)


# -- ListConfigResources (KIP-1142; v0 was KIP-714's ListClientMetricsResources) ---------
def _list_config_resource_types(version: int) -> frozenset[int]:
    """ListConfigResourcesRequest.supportedResourceTypes(): v0 knows only
    client-metrics resources."""
    if version == 0:
        return frozenset({CONFIG_RESOURCE_CLIENT_METRICS})
    return frozenset(
        {
            CONFIG_RESOURCE_TOPIC,
            CONFIG_RESOURCE_BROKER,
            CONFIG_RESOURCE_BROKER_LOGGER,
            CONFIG_RESOURCE_CLIENT_METRICS,
            CONFIG_RESOURCE_GROUP,
        }
    )


def handle_list_config_resources(
    ctx: RequestContext, request: ListConfigResourcesRequest
) -> ListConfigResourcesResponse:
    """Names of the resources of the requested types (none: every type the
    version supports), in Kafka's order: groups, client-metrics
    subscriptions, broker loggers, brokers, topics. A type the version does
    not support fails the whole request with UNSUPPORTED_VERSION. kfast has
    no group configs (GROUP resources), so that type lists nothing."""
    version = ctx.api_version
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE_CONFIGS)
    supported = _list_config_resource_types(version)
    requested = set(request.resource_types or ()) if version >= 1 else set()
    if not requested:
        requested = set(supported)
    if not requested <= supported:
        return ListConfigResourcesResponse(
            error_code=errors.UnsupportedVersionException.code, config_resources=[]
        )
    image = ctx.broker.metadata_image
    # getBrokerNodes(listener): live brokers with an endpoint on this listener.
    brokers = [
        str(broker_id)
        for broker_id, registration in sorted(image.brokers.items())
        if ctx.listener_name in registration.listeners and not registration.fenced
    ]
    Resource = ListConfigResourcesResponse.ConfigResource
    resources = []
    for resource_type, names in (
        (CONFIG_RESOURCE_CLIENT_METRICS, sorted(image.client_metrics_configs)),
        (CONFIG_RESOURCE_BROKER_LOGGER, brokers),
        (CONFIG_RESOURCE_BROKER, brokers),
        (CONFIG_RESOURCE_TOPIC, sorted(image.topics_by_name)),
    ):
        if resource_type in requested:
            resources += [
                Resource(resource_name=name, resource_type=resource_type) for name in names
            ]
    return ListConfigResourcesResponse(error_code=0, config_resources=resources)


# -- UnregisterBroker ------------------------------------------------------------------------
async def handle_unregister_broker(
    ctx: RequestContext, request: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER)
    await ctx.broker.controller.unregister_broker(request.broker_id)
    return UnregisterBrokerResponse(error_code=0)


def _unregister_broker_error(
    ctx: RequestContext, request: UnregisterBrokerRequest, error: errors.KafkaError
) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(error_code=error.code, error_message=_message(error))


def register(apis: ApiRegistry) -> None:
    key = api_keys.BY_NAME
    apis.register(
        key["UnregisterBroker"].key,
        handle_unregister_broker,
        error_response=_unregister_broker_error,
    )
    apis.register(
        key["CreateTopics"].key, handle_create_topics, error_response=_create_topics_error
    )
    apis.register(
        key["DeleteTopics"].key, handle_delete_topics, error_response=_delete_topics_error
    )
    apis.register(
        key["CreatePartitions"].key,
        handle_create_partitions,
        error_response=_create_partitions_error,
    )
    apis.register(key["DescribeConfigs"].key, handle_describe_configs)
    apis.register(
        key["AlterConfigs"].key,
        handle_alter_configs,
        error_response=_alter_configs_error,
    )
    apis.register(
        key["IncrementalAlterConfigs"].key,
        handle_incremental_alter_configs,
        error_response=_incremental_alter_configs_error,
    )
    apis.register(key["DescribeCluster"].key, handle_describe_cluster)
    apis.register(
        key["ElectLeaders"].key, handle_elect_leaders, error_response=_elect_leaders_error
    )
    apis.register(key["DescribeTopicPartitions"].key, handle_describe_topic_partitions)
    apis.register(key["ListPartitionReassignments"].key, handle_list_partition_reassignments)
    apis.register(
        key["AlterPartitionReassignments"].key,
        handle_alter_partition_reassignments,
        error_response=_alter_partition_reassignments_error,
    )
    apis.register(key["DescribeQuorum"].key, handle_describe_quorum)
    apis.register(
        key["UpdateFeatures"].key, handle_update_features, error_response=_update_features_error
    )
    apis.register(key["ListConfigResources"].key, handle_list_config_resources)
