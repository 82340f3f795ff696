"""AlterPartition on the controller: a leader's ISR change validated as Kafka's
ReplicationControlManager.alterPartition does, the PartitionChangeRecord it
writes (completing a reassignment when it can), and the handler at every
request version."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import kfast.protocol as p
from kfast.controller.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
)
from kfast.controller.replication_control import (
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER_CHANGE,
    AlterPartitionData,
    AlterPartitionTopic,
    BrokerState,
    TopicSpec,
)
from kfast.protocol import errors
from kfast.server import alter_partition_apis
from kfast.server.apis import KafkaApis

from .memory_controller import ENDPOINTS, make_controller, started
from .test_replication_control import Harness


def isr(*broker_ids):
    return tuple(BrokerState(b) for b in broker_ids)


class AlterPartitionHarness(Harness):
    """Brokers 1.. with epochs 1.. (their registration offsets), topic "t"."""

    def __init__(self, broker_ids=(1, 2, 3), assignments=None):
        super().__init__(broker_ids=broker_ids)
        self.create(TopicSpec("t", assignments=assignments or {0: [1, 2, 3]}))
        self.topic = self.manager.topic("t")

    def alter(
        self,
        new_isr,
        partition=0,
        leader_epoch=None,
        partition_epoch=None,
        broker_id=1,
        broker_epoch=None,
        recovery=0,
        version=3,
        topic_id=None,
    ):
        """The first partition result, after replaying the records."""
        current = self.topic.partitions.get(partition) or self.topic.partitions[0]
        data = AlterPartitionData(
            partition,
            current.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr,
            recovery,
            current.partition_epoch if partition_epoch is None else partition_epoch,
        )
        topic = AlterPartitionTopic(
            topic_id or self.topic.topic_id, "t" if version < 2 else None, [data]
        )
        epoch = self.cluster.broker_epoch(broker_id) if broker_epoch is None else broker_epoch
        result = self.manager.alter_partition(broker_id, epoch, [topic], version)
        self.records = result.records
        [[partition_result]] = self.apply(result)
        return partition_result

    def partition(self, index=0):
        return self.topic.partitions[index]


def test_shrink_writes_only_the_isr_and_bumps_only_the_partition_epoch():
    h = AlterPartitionHarness()
    result = h.alter(isr(1, 2))
    assert result.error is None
    [record] = h.records
    assert isinstance(record, PartitionChangeRecord)
    assert record.isr == [1, 2] and record.leader == NO_LEADER_CHANGE
    assert (
        record.replicas is None
        and record.adding_replicas is None
        and record.removing_replicas is None
    )
    registration = result.registration
    assert registration == h.partition()
    assert (registration.leader, registration.isr) == (1, (1, 2))
    assert (registration.leader_epoch, registration.partition_epoch) == (0, 1)


def test_expand_after_shrink_and_a_stale_retry_gets_invalid_update_version():
    h = AlterPartitionHarness()
    h.alter(isr(1, 2))
    expanded = h.alter(isr(1, 2, 3), partition_epoch=1)
    assert expanded.error is None
    assert (expanded.registration.isr, expanded.registration.partition_epoch) == ((1, 2, 3), 2)
    # The same request again was based on partition epoch 1: superseded.
    stale = h.alter(isr(1, 2, 3), partition_epoch=1)
    assert isinstance(stale.error, errors.InvalidUpdateVersionException)
    assert stale.registration is None and h.records == []
    assert h.partition().partition_epoch == 2


def test_the_current_isr_again_writes_nothing_and_answers_the_registration():
    h = AlterPartitionHarness()
    result = h.alter(isr(1, 2, 3))
    assert result.error is None and h.records == []
    assert result.registration == h.partition()
    assert h.partition().partition_epoch == 0


def test_stale_or_unregistered_broker_epoch_fails_the_whole_request():
    h = AlterPartitionHarness()
    with pytest.raises(errors.StaleBrokerEpochException):
        h.alter(isr(1, 2), broker_epoch=h.cluster.broker_epoch(1) + 1)
    with pytest.raises(errors.StaleBrokerEpochException):
        h.alter(isr(1, 2), broker_id=9, broker_epoch=1)
    assert h.partition().isr == (1, 2, 3)


def test_unknown_topic_by_id_and_by_name():
    h = AlterPartitionHarness()
    result = h.alter(isr(1, 2), topic_id=uuid.uuid4())
    assert isinstance(result.error, errors.UnknownTopicIdException)
    # Versions 0-1 name the topic; the id is not looked at.
    by_name = h.manager.alter_partition(
        1,
        h.cluster.broker_epoch(1),
        [
            AlterPartitionTopic(
                None,
                "nope",
                [AlterPartitionData(0, 0, isr(1), 0, 0), AlterPartitionData(1, 0, isr(1), 0, 0)],
            ),
            AlterPartitionTopic(None, "t", [AlterPartitionData(0, 0, isr(1, 3), 0, 0)]),
        ],
        version=1,
    )
    [unknown, known] = by_name.response
    assert [r.partition_index for r in unknown] == [0, 1]
    assert all(isinstance(r.error, errors.UnknownTopicOrPartitionException) for r in unknown)
    assert known[0].error is None and known[0].registration.isr == (1, 3)
    assert len(by_name.records) == 1


@pytest.mark.parametrize(
    "change, version, error",
    [
        (dict(partition=7), 3, errors.UnknownTopicOrPartitionException),
        # A leader that saw newer epochs met a newer controller.
        (dict(leader_epoch=1), 3, errors.NotControllerException),
        (dict(partition_epoch=1), 3, errors.NotControllerException),
        (dict(leader_epoch=1, broker_id=2), 3, errors.NotControllerException),
        (dict(leader_epoch=-1), 3, errors.FencedLeaderEpochException),
        (dict(leader_epoch=-1, broker_id=2), 3, errors.FencedLeaderEpochException),
        (dict(broker_id=2, new_isr=isr(2)), 3, errors.InvalidRequestException),
        (dict(broker_id=2, partition_epoch=-1), 3, errors.InvalidRequestException),
        (dict(partition_epoch=-1), 3, errors.InvalidUpdateVersionException),
        (dict(partition_epoch=-1, new_isr=isr(9)), 3, errors.InvalidUpdateVersionException),
        (dict(new_isr=isr(1, 9)), 3, errors.InvalidRequestException),  # not a replica
        (dict(new_isr=isr(1, 1)), 3, errors.InvalidRequestException),  # duplicate
        (dict(new_isr=isr(1, -1)), 3, errors.InvalidRequestException),
        (dict(new_isr=isr(2, 3)), 3, errors.InvalidRequestException),  # leader missing
        (dict(new_isr=()), 3, errors.InvalidRequestException),
        (
            dict(new_isr=isr(1, 2), recovery=LEADER_RECOVERY_RECOVERING),
            3,
            errors.InvalidRequestException,
        ),
        # RECOVERED (every registration here) never goes back to RECOVERING.
        (
            dict(new_isr=isr(1), recovery=LEADER_RECOVERY_RECOVERING),
            3,
            errors.InvalidRequestException,
        ),
        (dict(new_isr=isr(1), recovery=5), 3, errors.InvalidRequestException),
        # A replica of another registration of broker 2 (KIP-903).
        (
            dict(new_isr=(BrokerState(1), BrokerState(2, 12345))),
            3,
            errors.IneligibleReplicaException,
        ),
    ],
)
def test_validation_errors_write_nothing(change, version, error):
    h = AlterPartitionHarness()
    new_isr = change.pop("new_isr", isr(1, 2))
    before = dict(h.topic.partitions)
    result = h.alter(new_isr, version=version, **change)
    assert type(result.error) is error
    assert result.registration is None and h.records == []
    assert h.topic.partitions == before


def _fenced(h, broker_id):
    for record in h.cluster.fence_broker(broker_id).records:
        h.cluster.replay(record)


@pytest.mark.parametrize(
    "version, error",
    [
        (0, errors.OperationNotAttemptedException),
        (1, errors.OperationNotAttemptedException),
        (2, errors.IneligibleReplicaException),
        (3, errors.IneligibleReplicaException),
    ],
)
def test_a_fenced_replica_may_not_join_the_isr(version, error):
    h = AlterPartitionHarness()
    h.alter(isr(1, 2))
    _fenced(h, 3)
    result = h.alter(isr(1, 2, 3), version=version)
    assert type(result.error) is error and h.records == []


def test_brokers_shutting_down_or_unregistered_are_ineligible():
    h = AlterPartitionHarness()
    h.alter(isr(1))
    h.cluster.replay(
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=2, in_controlled_shutdown=1)
    )
    assert type(h.alter(isr(1, 2)).error) is errors.IneligibleReplicaException
    for record in h.cluster.unregister_broker(3).records:
        h.cluster.replay(record)
    assert type(h.alter(isr(1, 3)).error) is errors.IneligibleReplicaException
    assert h.partition().isr == (1,)


def test_one_partition_failing_does_not_stop_the_others():
    h = AlterPartitionHarness(assignments={0: [1, 2, 3], 1: [1, 2, 3]})
    topic_id = h.topic.topic_id
    result = h.manager.alter_partition(
        1,
        h.cluster.broker_epoch(1),
        [
            AlterPartitionTopic(
                topic_id,
                None,
                [
                    AlterPartitionData(0, 0, isr(2, 3), 0, 0),
                    AlterPartitionData(1, 0, isr(1, 3), 0, 0),
                ],
            )
        ],
    )
    [[bad, good]] = result.response
    assert type(bad.error) is errors.InvalidRequestException
    assert good.error is None and good.registration.isr == (1, 3)
    assert [r.partition_id for r in result.records] == [1]


# -- reassignments ---------------------------------------------------------------


def _reassign(h, target, partition=0):
    results = h.apply(h.manager.alter_partition_reassignments([("t", partition, target)]))
    assert results == {("t", partition): None}


def test_the_isr_that_completes_a_reassignment_away_from_the_leader_elects_a_new_one():
    h = AlterPartitionHarness(assignments={0: [1, 2]})
    _reassign(h, [3, 2])
    p0 = h.partition()
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ((3, 2, 1), (3,), (1,))
    result = h.alter(isr(1, 2, 3))
    # The change is written, but the requester no longer leads.
    assert type(result.error) is errors.NewLeaderElectedException
    [record] = h.records
    assert (record.replicas, record.isr, record.leader) == ([3, 2], [2, 3], 3)
    assert (record.adding_replicas, record.removing_replicas) == ([], [])
    p0 = h.partition()
    assert (p0.replicas, p0.isr, p0.leader) == ((3, 2), (2, 3), 3)
    assert (p0.adding_replicas, p0.removing_replicas) == ((), ())
    # Partition epoch: the reassignment's change, then this one.
    assert (p0.leader_epoch, p0.partition_epoch) == (1, 2)


def test_before_version_2_the_moved_leadership_is_fenced_leader_epoch():
    h = AlterPartitionHarness(assignments={0: [1, 2]})
    _reassign(h, [3, 2])
    assert type(h.alter(isr(1, 2, 3), version=1).error) is errors.FencedLeaderEpochException
    assert h.partition().leader == 3


def test_completing_a_reassignment_that_keeps_the_leader_bumps_its_epoch():
    h = AlterPartitionHarness(broker_ids=(1, 2, 3, 4))
    _reassign(h, [1, 2, 4])
    assert h.partition().replicas == (1, 2, 4, 3)
    result = h.alter(isr(1, 2, 3, 4))
    assert result.error is None
    [record] = h.records
    # The leader field set to the leader itself: removed replicas are fenced.
    assert record.leader == 1 and record.replicas == [1, 2, 4] and record.isr == [1, 2, 4]
    registration = result.registration
    assert (registration.replicas, registration.isr, registration.leader) == (
        (1, 2, 4),
        (1, 2, 4),
        1,
    )
    assert (registration.leader_epoch, registration.partition_epoch) == (1, 2)
    assert (registration.adding_replicas, registration.removing_replicas) == ((), ())


def test_a_reassignment_that_only_adds_completes_without_a_leader_change():
    h = AlterPartitionHarness(assignments={0: [1, 2]})
    _reassign(h, [1, 2, 3])
    result = h.alter(isr(1, 2, 3))
    [record] = h.records
    assert record.replicas is None and record.removing_replicas is None
    assert record.adding_replicas == [] and record.isr == [1, 2, 3]
    assert record.leader == NO_LEADER_CHANGE
    assert result.registration.leader_epoch == 0
    assert (result.registration.replicas, result.registration.adding_replicas) == ((1, 2, 3), ())


def test_a_reassignment_stays_pending_until_every_added_replica_is_in_sync():
    h = AlterPartitionHarness(broker_ids=(1, 2, 3, 4), assignments={0: [1, 2]})
    _reassign(h, [1, 3, 4])
    result = h.alter(isr(1, 2, 3))
    assert result.error is None
    [record] = h.records
    assert record.isr == [1, 2, 3] and record.adding_replicas is None
    p0 = h.partition()
    assert (p0.adding_replicas, p0.removing_replicas) == ((3, 4), (2,))
    result = h.alter(isr(1, 2, 3, 4))
    assert result.registration.replicas == (1, 3, 4)
    assert result.registration.isr == (1, 3, 4)


# -- the controller and the handler ---------------------------------------------


def _alter_partition_request(
    version,
    broker_id,
    broker_epoch,
    topic_id,
    new_isr,
    topic_name="t",
    leader_epoch=0,
    partition_epoch=0,
):
    R = p.AlterPartitionRequest
    partition = R.PartitionData(
        partition_index=0,
        leader_epoch=leader_epoch,
        leader_recovery_state=0,
        partition_epoch=partition_epoch,
    )
    if version >= 3:
        partition.new_isr_with_epochs = [
            R.BrokerState(broker_id=b, broker_epoch=-1) for b in new_isr
        ]
    else:
        partition.new_isr = list(new_isr)
    topic = R.TopicData(partitions=[partition])
    if version >= 2:
        topic.topic_id = topic_id
    else:
        topic.topic_name = topic_name
    return R(broker_id=broker_id, broker_epoch=broker_epoch, topics=[topic])


class _ControllerNode:
    """What the handler reads of a ControllerServer."""

    def __init__(self, controller):
        self.controller = controller


async def _round_trip(apis, version, request):
    frame = p.encode_request(
        p.api_keys.BY_NAME["AlterPartition"].key, version, 5, "broker-1", request
    )
    parts = await apis.handle(None, frame[4:], "CONTROLLER")
    correlation_id, response = p.decode_response(
        p.api_keys.BY_NAME["AlterPartition"].key, version, b"".join(bytes(part) for part in parts)
    )
    assert correlation_id == 5
    return response


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_the_handler_at_every_version(tmp_path, version):
    async def main():
        controller = await started(tmp_path)
        epochs = {
            b: await controller.register_broker(b, uuid.uuid4(), ENDPOINTS, None) for b in (1, 2, 3)
        }
        await controller.create_topics([TopicSpec("t", assignments={0: [1, 2, 3]})])
        topic_id = controller.image.topics_by_name["t"].topic_id
        apis = KafkaApis(_ControllerNode(controller), listener_type="controller")
        alter_partition_apis.register(apis)
        try:
            shrunk = await _round_trip(
                apis, version, _alter_partition_request(version, 1, epochs[1], topic_id, [1, 3])
            )
            stale = await _round_trip(
                apis, version, _alter_partition_request(version, 1, epochs[1], topic_id, [1, 2, 3])
            )
            wrong_epoch = await _round_trip(
                apis, version, _alter_partition_request(version, 1, epochs[1] + 1, topic_id, [1])
            )
            unknown = await _round_trip(
                apis,
                version,
                _alter_partition_request(
                    version, 1, epochs[1], uuid.uuid4(), [1], topic_name="nope"
                ),
            )
            image = controller.image
        finally:
            await controller.shutdown()
        return shrunk, stale, wrong_epoch, unknown, image, topic_id

    shrunk, stale, wrong_epoch, unknown, image, topic_id = asyncio.run(main())
    assert shrunk.error_code == 0
    [topic] = shrunk.topics
    # The topic as the request named it; the other field is absent ("" / zero id).
    assert (topic.topic_id, topic.topic_name) == (
        (topic_id, "") if version >= 2 else (p.constants.ZERO_UUID, "t")
    )
    [partition] = topic.partitions
    assert (
        partition.partition_index,
        partition.error_code,
        partition.leader_id,
        partition.leader_epoch,
        partition.isr,
        partition.leader_recovery_state,
        partition.partition_epoch,
    ) == (0, 0, 1, 0, [1, 3], 0, 1)
    assert image.topics_by_name["t"].partitions[0].isr == (1, 3)
    assert stale.topics[0].partitions[0].error_code == errors.InvalidUpdateVersionException.code
    assert (wrong_epoch.error_code, wrong_epoch.topics) == (
        errors.StaleBrokerEpochException.code,
        [],
    )
    assert (
        unknown.topics[0].partitions[0].error_code
        == (
            errors.UnknownTopicIdException
            if version >= 2
            else errors.UnknownTopicOrPartitionException
        ).code
    )


def test_a_controller_that_is_not_running_answers_not_controller(tmp_path):
    async def main():
        apis = KafkaApis(_ControllerNode(make_controller(tmp_path)), listener_type="controller")
        alter_partition_apis.register(apis)
        return await _round_trip(apis, 3, _alter_partition_request(3, 1, 1, uuid.uuid4(), [1]))

    response = asyncio.run(main())
    assert response.error_code == errors.NotControllerException.code


def test_the_change_is_committed_and_survives_a_restart(tmp_path):
    async def first():
        controller = await started(tmp_path)
        epoch = await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        await controller.register_broker(2, uuid.uuid4(), ENDPOINTS, None)
        await controller.create_topics([TopicSpec("t", assignments={0: [1, 2]})])
        topic_id = controller.image.topics_by_name["t"].topic_id
        [[result]] = await controller.alter_partition(
            1,
            epoch,
            [AlterPartitionTopic(topic_id, None, [AlterPartitionData(0, 0, isr(1), 0, 0)])],
        )
        image = controller.image
        await controller.shutdown()
        return result, image, controller.log

    async def second(log):
        controller = await started(tmp_path, log)
        image = controller.image
        await controller.shutdown()
        return image

    result, before, log = asyncio.run(first())
    assert result.error is None and result.registration.isr == (1,)
    assert before.topics_by_name["t"].partitions[0] == result.registration
    after = asyncio.run(second(log))
    assert after.topics_by_name["t"].partitions[0] == result.registration
