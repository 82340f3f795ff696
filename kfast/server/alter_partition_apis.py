"""AlterPartition (API key 56) on the controller listener (KIP-497, KIP-841,
KIP-903), answered by the active controller (Kafka's ControllerApis).

A partition leader asks the controller to shrink or expand the ISR of the
partitions it leads; the controller validates each partition against its
registration (kfast.controller.replication_control.alter_partition) and
answers with the registration after the change, which the leader adopts.

Versions: 0-1 name topics, 2+ identify them by topic id; 0-2 send the new
ISR as broker ids (``new_isr``), 3 as (broker id, broker epoch) pairs
(``new_isr_with_epochs``) so a replica of an older registration cannot join.
A whole-request error (STALE_BROKER_EPOCH, or NOT_CONTROLLER from a node
that is not the active controller, which sends the leader to the next) is
the top-level ``error_code`` of an empty response: KafkaApis' generic error
response, as Kafka's AlterPartitionRequest.getErrorResponse builds it.
"""

from __future__ import annotations

from kfast.controller.replication_control import (
    LEADER_RECOVERY_RECOVERED,
    AlterPartitionData,
    AlterPartitionResult,
    AlterPartitionTopic,
    BrokerState,
)
from kfast.protocol import AlterPartitionRequest, AlterPartitionResponse, api_keys
from kfast.protocol.constants import ACL_OPERATION_CLUSTER_ACTION
from kfast.server.apis import ApiRegistry, RequestContext

ALTER_PARTITION = api_keys.BY_NAME["AlterPartition"].key


def _new_isr(
    partition: AlterPartitionRequest.PartitionData, version: int
) -> tuple[BrokerState, ...]:
    if version >= 3:
        return tuple(
            BrokerState(m.broker_id, m.broker_epoch) for m in partition.new_isr_with_epochs
        )
    return tuple(BrokerState(broker_id) for broker_id in partition.new_isr)


def _partition_response(result: AlterPartitionResult) -> AlterPartitionResponse.PartitionData:
    if result.error is not None:
        return AlterPartitionResponse.PartitionData(
            partition_index=result.partition_index, error_code=result.error.code
        )
    registration = result.registration
    # A result without an error carries the registration after the change.
    assert registration is not None
    return AlterPartitionResponse.PartitionData(
        partition_index=result.partition_index,
        error_code=0,
        leader_id=registration.leader,
        leader_epoch=registration.leader_epoch,
        isr=list(registration.isr),
        # kfast's registrations are always RECOVERED.
        leader_recovery_state=LEADER_RECOVERY_RECOVERED,
        partition_epoch=registration.partition_epoch,
    )


async def handle_alter_partition(
    ctx: RequestContext, request: AlterPartitionRequest
) -> AlterPartitionResponse:
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    version = ctx.api_version
    topics = [
        AlterPartitionTopic(
            topic.topic_id if version > 1 else None,
            topic.topic_name if version < 2 else None,
            [
                AlterPartitionData(
                    p.partition_index,
                    p.leader_epoch,
                    _new_isr(p, version),
                    p.leader_recovery_state,
                    p.partition_epoch,
                )
                for p in topic.partitions
            ],
        )
        for topic in request.topics
    ]
    results: list[list[AlterPartitionResult]] = await ctx.broker.controller.alter_partition(
        request.broker_id, request.broker_epoch, topics, version
    )
    # Each topic is echoed as the request named it (the field the version
    # lacks is ignorable and left out of the encoding).
    return AlterPartitionResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            AlterPartitionResponse.TopicData(
                topic_name=topic.topic_name,
                topic_id=topic.topic_id,
                partitions=[_partition_response(r) for r in partitions],
            )
            for topic, partitions in zip(request.topics, results)
        ],
    )


def register(apis: ApiRegistry) -> None:
    apis.register(ALTER_PARTITION, handle_alter_partition)
