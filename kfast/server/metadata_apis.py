"""Metadata (API key 3): KafkaApis.handleTopicMetadataRequest, answered from
the current MetadataImage.

Requested topics that do not exist are auto-created through the controller
when the request allows it (v4+ ``allow_auto_topic_creation``; always for
v0-v3) and auto.create.topics.enable is on; such a topic is reported with
LEADER_NOT_AVAILABLE until its partitions are live on this broker, so the
client retries. Names that are not legal topic names get
INVALID_TOPIC_EXCEPTION (Kafka's Topic.validate).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from kfast.controller.metadata.image import MetadataImage
from kfast.controller.topics import (
    GROUP_METADATA_TOPIC_NAME,
    INTERNAL_TOPICS,
    validate_topic_name,
)
from kfast.protocol import MetadataRequest, MetadataResponse, api_keys, errors
from kfast.protocol.constants import (
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DESCRIBE,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_TOPIC,
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_RESOURCE_NAME,
    NO_LEADER,
    ZERO_UUID,
)
from kfast.server.apis import ApiRegistry, RequestContext

if TYPE_CHECKING:
    from kfast.config import KafkaConfig

logger = logging.getLogger(__name__)

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = MetadataResponse.MetadataResponsePartition

METADATA = api_keys.BY_NAME["Metadata"].key


def internal_topic_settings(config: KafkaConfig, name: str) -> tuple[int, int, dict[str, str]]:
    """Partitions, replication factor and configs Kafka gives an internal
    topic it creates on demand (AutoTopicCreationManager): the offsets and
    transaction topics are compacted and sized by their own properties."""
    if name == GROUP_METADATA_TOPIC_NAME:
        return (
            config["offsets.topic.num.partitions"],
            config["offsets.topic.replication.factor"],
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(config["offsets.topic.segment.bytes"]),
            },
        )
    return (
        config["transaction.state.log.num.partitions"],
        config["transaction.state.log.replication.factor"],
        {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
        },
    )


def _brokers(
    image: MetadataImage, listener_name: str, self_id: int
) -> list[MetadataResponse.MetadataResponseBroker]:
    """The live brokers: unfenced ones, and always the answering broker
    itself. A broker fenced by its own controlled shutdown still answers
    until its listeners close; Kafka's broker stops applying metadata when
    that shutdown begins, so it keeps listing itself. Listing no broker at
    all makes librdkafka (>= 2.10) decommission the only one it knows and
    never connect again once it is back."""
    out: list[MetadataResponse.MetadataResponseBroker] = []
    for broker_id in sorted(image.brokers):
        registration = image.brokers[broker_id]
        endpoint = registration.listeners.get(listener_name)
        if endpoint is None or (registration.fenced and broker_id != self_id):
            continue
        out.append(
            _Broker(
                node_id=broker_id, host=endpoint.host, port=endpoint.port, rack=registration.rack
            )
        )
    return out


def _topic_response(
    ctx: RequestContext, image: MetadataImage, name: str, include_ops: bool
) -> MetadataResponse.MetadataResponseTopic:
    topic = image.topics_by_name[name]
    replica_manager = ctx.broker.replica_manager
    alive = {b for b, r in image.brokers.items() if not r.fenced}
    partitions: list[MetadataResponse.MetadataResponsePartition] = []
    for index in sorted(topic.partitions):
        registration = topic.partitions[index]
        error = 0
        if registration.leader == NO_LEADER:
            error = errors.LeaderNotAvailableException.code
        elif (
            registration.leader == ctx.broker.node_id
            and replica_manager.get_partition(name, index) is None
        ):
            # Committed in the image but not yet applied to this broker.
            error = errors.LeaderNotAvailableException.code
        partitions.append(
            _Partition(
                error_code=error,
                partition_index=index,
                leader_id=registration.leader,
                leader_epoch=registration.leader_epoch,
                replica_nodes=list(registration.replicas),
                isr_nodes=list(registration.isr),
                offline_replicas=[r for r in registration.replicas if r not in alive],
            )
        )
    return _Topic(
        error_code=0,
        name=name,
        topic_id=topic.topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=ctx.authorized_operations(ACL_RESOURCE_TOPIC, name)
        if include_ops
        else AUTHORIZED_OPERATIONS_OMITTED,
    )


def _error_topic(
    name: str | None, code: int, topic_id: uuid.UUID = ZERO_UUID
) -> MetadataResponse.MetadataResponseTopic:
    return _Topic(
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS if name else False,
        partitions=[],
    )


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    image: MetadataImage = broker.metadata_image
    include_ops = version >= 8 and request.include_topic_authorized_operations
    requested = request.topics
    # v0: an empty list means all topics; v1+: null means all, [] none.
    topics: list[MetadataResponse.MetadataResponseTopic] = []
    if requested is None or (version == 0 and not requested):
        for name in sorted(image.topics_by_name):
            # Topics the principal may not describe are left out: a filter,
            # so its denials are not audited at INFO (Kafka's logIfDenied =
            # !isAllTopics).
            if ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, name, audit_denied=False):
                topics.append(_topic_response(ctx, image, name, include_ops))
    else:
        allow_auto = (
            request.allow_auto_topic_creation if version >= 4 else True
        ) and broker.config["auto.create.topics.enable"]
        names: list[str] = []
        for entry in requested:
            entry_name = entry.name
            # A topic id, when set, names the topic whatever the name says: the
            # Java client sends its ids with name "" (the field's default), and
            # Kafka looks up every non-zero id (KafkaApis.handleTopicMetadataRequest).
            if version >= 10 and (entry_name is None or entry.topic_id != ZERO_UUID):
                found = image.topics_by_id.get(entry.topic_id)
                if found is None:
                    topics.append(
                        _error_topic(None, errors.UnknownTopicIdException.code, entry.topic_id)
                    )
                    continue
                entry_name = found.name
                # Ids are not secret: an unauthorized one is answered by id.
                if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, entry_name):
                    topics.append(
                        _error_topic(None, errors.TopicAuthorizationException.code, entry.topic_id)
                    )
                    continue
            # Null only from v10 on, where the branch above named the topic.
            assert entry_name is not None
            if entry_name not in names:
                names.append(entry_name)
        to_create: list[str] = []
        errors_by_name: dict[str, int] = {}
        unauthorized: set[str] = set()
        for name in names:
            # Kafka does not even say whether a topic it hides exists.
            if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, name):
                unauthorized.add(name)
                continue
            if name in image.topics_by_name:
                continue
            try:
                validate_topic_name(name)
            except errors.InvalidTopicException as exc:
                errors_by_name[name] = exc.code
                continue
            if (
                allow_auto
                and not ctx.authorize(
                    ACL_OPERATION_CREATE,
                    ACL_RESOURCE_CLUSTER,
                    CLUSTER_RESOURCE_NAME,
                    audit_denied=False,  # the per-topic check is the audited one
                )
                and not ctx.authorize(ACL_OPERATION_CREATE, ACL_RESOURCE_TOPIC, name)
            ):
                unauthorized.add(name)
            elif allow_auto:
                to_create.append(name)
            else:
                errors_by_name[name] = errors.UnknownTopicOrPartitionException.code
        if to_create:
            created: dict[str, int] = {}
            internal = [name for name in to_create if name in INTERNAL_TOPICS]
            plain = [name for name in to_create if name not in INTERNAL_TOPICS]
            if plain:
                created.update(await broker.controller.auto_create_topics(plain))
            for name in internal:
                partitions, replication, configs = internal_topic_settings(broker.config, name)
                created.update(
                    await broker.controller.auto_create_topics(
                        [name], partitions, replication, configs
                    )
                )
            # Answer with the new partitions when their logs are ready (a
            # few ms); clients would otherwise just retry.
            await broker.metadata_publisher.wait_idle()
            for name, code in created.items():
                if code in (0, errors.TopicExistsException.code):
                    code = errors.LeaderNotAvailableException.code
                errors_by_name[name] = code
            image = broker.metadata_image
        for name in names:
            if name in unauthorized:
                topics.append(_error_topic(name, errors.TopicAuthorizationException.code))
            elif name in image.topics_by_name:
                response = _topic_response(ctx, image, name, include_ops)
                if name in to_create and any(p.error_code for p in response.partitions):
                    response = _error_topic(
                        name,
                        errors.LeaderNotAvailableException.code,
                        image.topics_by_name[name].topic_id,
                    )
                topics.append(response)
            else:
                topics.append(
                    _error_topic(
                        name, errors_by_name.get(name, errors.UnknownTopicOrPartitionException.code)
                    )
                )
    return MetadataResponse(
        brokers=_brokers(image, ctx.listener_name, broker.node_id),
        cluster_id=image.cluster_id,
        # KRaft brokers name a live broker as "controller": clients cannot
        # reach the quorum controllers and only use it for admin requests.
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=_cluster_operations(ctx, request),
    )


def _cluster_operations(ctx: RequestContext, request: MetadataRequest) -> int:
    """v8-v10's cluster bitfield: 0 without DESCRIBE on the cluster."""
    if not 8 <= ctx.api_version <= 10 or not request.include_cluster_authorized_operations:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME):
        return 0
    return ctx.authorized_operations(ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME)


def register(apis: ApiRegistry) -> None:
    apis.register(METADATA, handle_metadata)
