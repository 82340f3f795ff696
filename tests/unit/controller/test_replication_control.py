"""ReplicationControlManager as a state machine: operations return records,
replaying them changes the state, errors write nothing."""

from __future__ import annotations

import uuid

import pytest

from kfast.controller.cluster_control import ClusterControlManager
from kfast.controller.metadata.image import Endpoint
from kfast.controller.metadata.records import (
    ConfigRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kfast.controller.replication_control import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    ReplicationControlManager,
    TopicSpec,
)
from kfast.protocol import errors


def make_cluster(broker_ids=(1,), racks=None):
    cluster = ClusterControlManager()
    for broker_id in broker_ids:
        result = cluster.register_broker(
            broker_id,
            uuid.uuid4(),
            [Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")],
            (racks or {}).get(broker_id),
            next_offset=broker_id,
        )
        for record in result.records:
            cluster.replay(record)
    return cluster


class Harness:
    def __init__(self, broker_ids=(1,), defaults=(1, 1)):
        self.cluster = make_cluster(broker_ids)
        self.manager = ReplicationControlManager(self.cluster, lambda: defaults)
        self.log: list = []

    def apply(self, result):
        for record in result.records:
            if not isinstance(record, ConfigRecord):
                self.manager.replay(record)
        self.log += result.records
        return result.response

    def create(self, *specs):
        return self.apply(self.manager.create_topics(list(specs)))


def test_create_topic_records_and_state():
    h = Harness(broker_ids=(1, 2, 3), defaults=(4, 2))
    [created] = h.create(TopicSpec("orders", configs={"retention.ms": "1000"}))
    assert created.error is None and created.num_partitions == 4
    assert created.replication_factor == 2
    kinds = [type(r) for r in h.log]
    assert kinds == [ConfigRecord, TopicRecord] + [PartitionRecord] * 4
    topic = h.manager.topic("orders")
    assert topic.topic_id == created.topic_id
    for _index, registration in topic.partitions.items():
        assert len(registration.replicas) == 2
        assert registration.isr == registration.replicas
        assert registration.leader == registration.replicas[0]
        assert (registration.leader_epoch, registration.partition_epoch) == (0, 0)


def test_replay_of_the_records_rebuilds_the_same_state():
    h = Harness(broker_ids=(1, 2))
    h.create(TopicSpec("a", 3, 2), TopicSpec("b"))
    replayed = ReplicationControlManager(h.cluster, lambda: (1, 1))
    for record in h.log:
        if not isinstance(record, ConfigRecord):
            replayed.replay(record)
    assert {
        n: t.image() for n, t in ((name, replayed.topic(name)) for name in replayed.topics_by_name)
    } == {n: h.manager.topic(n).image() for n in h.manager.topics_by_name}


@pytest.mark.parametrize(
    "spec, error",
    [
        (TopicSpec(""), errors.InvalidTopicException),
        (TopicSpec(".."), errors.InvalidTopicException),
        (TopicSpec("a" * 250), errors.InvalidTopicException),
        (TopicSpec("bad name"), errors.InvalidTopicException),
        (TopicSpec("__cluster_metadata"), errors.InvalidRequestException),
        (TopicSpec("t", num_partitions=0), errors.InvalidPartitionsException),
        (TopicSpec("t", num_partitions=-2), errors.InvalidPartitionsException),
        (TopicSpec("t", replication_factor=0), errors.InvalidReplicationFactorException),
        (TopicSpec("t", replication_factor=2), errors.InvalidReplicationFactorException),
        (TopicSpec("t", configs={"retention.ms": "abc"}), errors.InvalidConfigurationException),
        (TopicSpec("t", configs={"no.such.config": "1"}), errors.InvalidConfigurationException),
        (TopicSpec("t", configs={"retention.ms": None}), errors.InvalidRequestException),
        (TopicSpec("t", num_partitions=2, assignments={0: [1]}), errors.InvalidRequestException),
        (
            TopicSpec("t", replication_factor=1, assignments={0: [1]}),
            errors.InvalidRequestException,
        ),
        (TopicSpec("t", assignments={1: [1]}), errors.InvalidReplicaAssignmentException),
        (TopicSpec("t", assignments={0: []}), errors.InvalidReplicaAssignmentException),
        (TopicSpec("t", assignments={0: [1, 1]}), errors.InvalidReplicaAssignmentException),
        (TopicSpec("t", assignments={0: [7]}), errors.InvalidReplicaAssignmentException),
    ],
)
def test_create_errors_write_nothing(spec, error):
    h = Harness()
    result = h.manager.create_topics([spec])
    assert isinstance(result.response[0].error, error)
    assert result.records == []


def test_mixed_assignment_sizes_are_rejected():
    h = Harness(broker_ids=(1, 2))
    [result] = h.create(TopicSpec("t", assignments={0: [1, 2], 1: [2]}))
    assert isinstance(result.error, errors.InvalidReplicaAssignmentException)


def test_explicit_assignment_is_used():
    h = Harness(broker_ids=(1, 2, 3))
    [created] = h.create(TopicSpec("t", assignments={0: [3, 1], 1: [2, 3]}))
    assert created.error is None and created.replication_factor == 2
    assert h.manager.topic("t").partitions[0].replicas == (3, 1)
    assert h.manager.topic("t").partitions[1].leader == 2


def test_existing_duplicate_and_colliding_names():
    h = Harness()
    h.create(TopicSpec("a.b"))
    results = h.create(
        TopicSpec("a.b"),
        TopicSpec("a_b"),
        TopicSpec("dup"),
        TopicSpec("dup"),
        TopicSpec("x.y"),
        TopicSpec("x_y"),
    )
    assert [type(r.error) for r in results] == [
        errors.TopicExistsException,
        errors.InvalidTopicException,
        errors.InvalidRequestException,
        errors.InvalidRequestException,
        type(None),
        errors.InvalidTopicException,
    ]
    assert "collides" in str(results[1].error)
    assert set(h.manager.topics_by_name) == {"a.b", "x.y"}


def test_delete_by_name_and_id():
    h = Harness()
    h.create(TopicSpec("a"), TopicSpec("b"))
    b_id = h.manager.topics_by_name["b"]
    missing = uuid.uuid4()
    results = h.apply(
        h.manager.delete_topics(
            ["a", None, "nope", None], [uuid.UUID(int=0), b_id, uuid.UUID(int=0), missing]
        )
    )
    assert [(n, type(e)) for n, _, e in results] == [
        ("a", type(None)),
        ("b", type(None)),
        ("nope", errors.UnknownTopicOrPartitionException),
        (None, errors.UnknownTopicIdException),
    ]
    assert [type(r) for r in h.log[-2:]] == [RemoveTopicRecord, RemoveTopicRecord]
    assert h.manager.topics == {} and h.manager.topics_by_name == {}
    # A deleted name no longer collides.
    [created] = h.create(TopicSpec("a"))
    assert created.error is None


def test_delete_rejects_duplicates_and_name_plus_id():
    h = Harness()
    h.create(TopicSpec("a"))
    a_id = h.manager.topics_by_name["a"]
    results = h.manager.delete_topics(["a", "a", "a"], [uuid.UUID(int=0)] * 2 + [a_id]).response
    assert all(isinstance(e, errors.InvalidRequestException) for _, _, e in results)


def test_create_partitions():
    h = Harness(broker_ids=(1, 2, 3))
    h.create(TopicSpec("t", 2, 2))
    assert h.apply(h.manager.create_partitions("t", 5, None)) is None
    topic = h.manager.topic("t")
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in topic.partitions.values())
    h.apply(h.manager.create_partitions("t", 6, [[3, 2]]))
    assert topic.partitions[5].replicas == (3, 2)


@pytest.mark.parametrize(
    "name, count, assignments, error",
    [
        ("nope", 3, None, errors.UnknownTopicOrPartitionException),
        ("t", 1, None, errors.InvalidPartitionsException),
        ("t", 2, None, errors.InvalidPartitionsException),
        ("t", 4, [[1, 2]], errors.InvalidReplicaAssignmentException),
        ("t", 3, [[1]], errors.InvalidReplicaAssignmentException),
        ("t", 3, [[1, 9]], errors.InvalidReplicaAssignmentException),
    ],
)
def test_create_partitions_errors(name, count, assignments, error):
    h = Harness(broker_ids=(1, 2))
    h.create(TopicSpec("t", 2, 2))
    with pytest.raises(error):
        h.manager.create_partitions(name, count, assignments)


def test_preferred_election_moves_leadership_back():
    h = Harness(broker_ids=(1, 2))
    h.create(TopicSpec("t", assignments={0: [1, 2]}))
    topic = h.manager.topic("t")
    results = h.apply(h.manager.elect_leaders(ELECTION_PREFERRED, [("t", 0), ("t", 9)]))
    assert isinstance(results["t", 0], errors.ElectionNotNeededException)
    assert isinstance(results["t", 9], errors.UnknownTopicOrPartitionException)
    # Make broker 2 the leader through a change record, then elect back.
    from kfast.controller.metadata.records import PartitionChangeRecord

    h.manager.replay(PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=2))
    assert topic.partitions[0].leader == 2 and topic.partitions[0].leader_epoch == 1
    results = h.apply(h.manager.elect_leaders(ELECTION_PREFERRED, None))
    assert results["t", 0] is None
    assert topic.partitions[0].leader == 1
    assert (topic.partitions[0].leader_epoch, topic.partitions[0].partition_epoch) == (2, 2)


def test_unclean_election_needs_no_leader():
    h = Harness()
    h.create(TopicSpec("t"))
    results = h.manager.elect_leaders(ELECTION_UNCLEAN, [("t", 0)]).response
    assert isinstance(results["t", 0], errors.ElectionNotNeededException)


def _fence(h, broker_id):
    """Fence through the managers as the controller does: records first, then replay."""
    fence = h.cluster.fence_broker(broker_id).records
    changes = h.manager.broker_fenced(broker_id)
    for record in fence:
        h.cluster.replay(record)
    for record in changes:
        h.manager.replay(record)
    return fence + changes


def test_fencing_moves_leadership_and_shrinks_the_isr():
    h = Harness(broker_ids=(1, 2, 3))
    h.create(TopicSpec("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]}))
    topic = h.manager.topic("t")
    _fence(h, 1)
    p0, p1 = topic.partitions[0], topic.partitions[1]
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2, 3), 1)
    assert (p1.leader, p1.isr, p1.leader_epoch) == (2, (2, 3), 0)  # only the ISR changed
    assert p1.partition_epoch == 1
    _fence(h, 2)
    _fence(h, 3)
    # The last in-sync replica stays in the ISR; nobody leads.
    assert (topic.partitions[0].leader, topic.partitions[0].isr) == (-1, (3,))
    # Broker 3 returns: it leads again, from the ISR it never left.
    records = h.manager.broker_unfenced(3)
    for record in records:
        h.manager.replay(record)
    assert topic.partitions[0].leader == 3 and topic.partitions[1].leader == 3
    # Broker 1 is not in sync: nothing to elect for it.
    assert h.manager.broker_unfenced(1) == []


def test_unclean_election_picks_an_out_of_sync_replica():
    h = Harness(broker_ids=(1, 2))
    h.manager.unclean_election_enabled = lambda topic: True
    h.create(TopicSpec("t", assignments={0: [1, 2]}))
    topic = h.manager.topic("t")
    from kfast.controller.metadata.records import PartitionChangeRecord

    h.manager.replay(PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=[1]))
    _fence(h, 1)
    assert (topic.partitions[0].leader, topic.partitions[0].isr) == (2, (2,))


def test_reassignment_that_adds_a_replica_stays_pending_and_can_be_cancelled():
    h = Harness(broker_ids=(1, 2, 3))
    h.create(TopicSpec("t", assignments={0: [1, 2]}))
    topic = h.manager.topic("t")
    results = h.apply(h.manager.alter_partition_reassignments([("t", 0, [3, 2])]))
    assert results == {("t", 0): None}
    p = topic.partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 2, 1), (3,), (1,))
    assert p.isr == (1, 2) and p.leader == 1
    # Cancelling drops the replicas being added (the others keep the
    # pending order, as Kafka's PartitionReassignmentRevert).
    h.apply(h.manager.alter_partition_reassignments([("t", 0, None)]))
    p = topic.partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 1), (), ())
    assert p.leader == 1 and p.isr == (1, 2)
    [error] = h.manager.alter_partition_reassignments([("t", 0, None)]).response.values()
    assert isinstance(error, errors.NoReassignmentInProgressException)


def test_reassignment_that_only_drops_in_sync_replicas_completes():
    h = Harness(broker_ids=(1, 2, 3))
    h.create(TopicSpec("t", assignments={0: [1, 2, 3]}))
    h.apply(h.manager.alter_partition_reassignments([("t", 0, [3, 2])]))
    p = h.manager.topic("t").partitions[0]
    assert (p.replicas, p.isr, p.leader) == ((3, 2), (2, 3), 2)
    assert p.adding_replicas == () and p.removing_replicas == ()
    # The same target again changes nothing.
    assert h.manager.alter_partition_reassignments([("t", 0, [3, 2])]).records == []


@pytest.mark.parametrize(
    "target, allow_rf_change, error",
    [
        ([], True, errors.InvalidReplicaAssignmentException),
        ([1, 1], True, errors.InvalidReplicaAssignmentException),
        ([9], True, errors.InvalidReplicaAssignmentException),
        ([1, 2], False, errors.InvalidReplicationFactorException),
    ],
)
def test_reassignment_errors(target, allow_rf_change, error):
    h = Harness(broker_ids=(1, 2))
    h.create(TopicSpec("t", assignments={0: [1]}))
    result = h.manager.alter_partition_reassignments(
        [("t", 0, target), ("u", 0, [1])], allow_rf_change
    )
    assert isinstance(result.response["t", 0], error)
    assert isinstance(result.response["u", 0], errors.UnknownTopicOrPartitionException)
    assert result.records == []


def test_count_elections_clean_unclean_and_not_elections():
    """ControllerStats' inputs: a leadership moving inside the ISR is a clean
    election, to a replica outside it an unclean one; an ISR-only change, a
    partition losing its leader and a new partition are no elections."""
    h = Harness(broker_ids=(1, 2, 3))
    h.create(TopicSpec("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]}))
    from kfast.controller.metadata.records import PartitionChangeRecord

    topic = h.manager.topic("t")
    assert h.manager.count_elections(h.log) == (0, 0)  # TopicRecord, PartitionRecords
    fenced = h.cluster.fence_broker(1).records + h.manager.broker_fenced(1)
    # p0 moves 1 -> 2 (in sync); p1 only shrinks its ISR.
    assert h.manager.count_elections(fenced) == (1, 0)
    h.manager.unclean_election_enabled = lambda name: True
    h.manager.replay(PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=[1]))
    unclean = [
        PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=3, isr=[3]),
        PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=-1),
        PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=2),
    ]
    assert h.manager.count_elections(unclean) == (1, 1)
