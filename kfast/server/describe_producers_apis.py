"""DescribeProducers (API key 61, KIP-664): the producers a partition
replica's producer state holds, for finding and aborting hanging
transactions (``kfast transactions describe-producers|find-hanging|abort``).

As Kafka's KafkaApis.handleDescribeProducersRequest: a topic name that is
illegal is INVALID_TOPIC_EXCEPTION and one the metadata lacks is
UNKNOWN_TOPIC_OR_PARTITION, for each partition asked (with the message);
then per partition ReplicaManager.activeProducerState: a partition the
metadata lacks is UNKNOWN_TOPIC_OR_PARTITION, one this broker hosts no
replica of NOT_LEADER_OR_FOLLOWER. Any replica answers, not only the
leader: clients send the request to the leader, and the tool's
``--broker-id`` asks a follower for the state it replicated.

Every producer the state keeps is listed (Kafka's activeProducers), also
one whose transaction is not open: ``current_txn_start_offset`` is -1 then,
``coordinator_epoch`` is -1 until a marker of the producer was written and
``last_sequence`` is -1 for a producer that wrote only markers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfast.controller.topics import validate_topic_name
from kfast.protocol import DescribeProducersRequest, DescribeProducersResponse, api_keys
from kfast.protocol import errors as E
from kfast.protocol.constants import ACL_OPERATION_READ, ACL_RESOURCE_TOPIC
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.server.replica_manager import ReplicaManager, error_of

if TYPE_CHECKING:
    from kfast.storage.producer_state import ProducerStateManager

DESCRIBE_PRODUCERS = api_keys.BY_NAME["DescribeProducers"].key
R = DescribeProducersResponse


def _topic_error(ctx: RequestContext, name: str) -> E.KafkaError | None:
    """The error of every partition of topic ``name``, if the topic has one."""
    try:
        validate_topic_name(name)
    except E.InvalidTopicException as exc:
        return exc
    if ctx.broker.metadata_image.topic(name) is None:
        return E.UnknownTopicOrPartitionException()
    return None


def _active_producers(
    producer_state: ProducerStateManager,
) -> list[DescribeProducersResponse.ProducerState]:
    return [
        R.ProducerState(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=(
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
            ),
        )
        for entry in producer_state.producers.values()
    ]


def _partition_response(
    ctx: RequestContext, topic: str, index: int
) -> DescribeProducersResponse.PartitionResponse:
    try:
        replica_manager: ReplicaManager = ctx.broker.replica_manager
        partition = replica_manager.partition_or_raise(topic, index)
    except Exception as exc:
        # Kafka's activeProducerState answers these without a message.
        return R.PartitionResponse(
            partition_index=index, error_code=error_of(exc).code, active_producers=[]
        )
    return R.PartitionResponse(
        partition_index=index,
        error_code=0,
        active_producers=_active_producers(partition.log.producer_state),
    )


def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics: list[DescribeProducersResponse.TopicResponse] = []
    for topic in request.topics:
        error = (
            E.TopicAuthorizationException()
            if not ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, topic.name)
            else _topic_error(ctx, topic.name)
        )
        if error is None:
            partitions = [
                _partition_response(ctx, topic.name, index) for index in topic.partition_indexes
            ]
        else:
            partitions = _error_partitions(topic.partition_indexes, error)
        topics.append(R.TopicResponse(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def _error_partitions(
    indexes: list[int], error: E.KafkaError
) -> list[DescribeProducersResponse.PartitionResponse]:
    return [
        R.PartitionResponse(
            partition_index=index,
            error_code=error.code,
            error_message=error.message,
            active_producers=[],
        )
        for index in indexes
    ]


def _error_response(
    ctx: RequestContext, request: DescribeProducersRequest, error: E.KafkaError
) -> DescribeProducersResponse:
    return R(
        throttle_time_ms=0,
        topics=[
            R.TopicResponse(
                name=topic.name, partitions=_error_partitions(topic.partition_indexes, error)
            )
            for topic in request.topics
        ],
    )


def register(apis: ApiRegistry) -> None:
    apis.register(DESCRIBE_PRODUCERS, handle_describe_producers, error_response=_error_response)
