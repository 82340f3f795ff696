"""KIP-858 in the controller: replicas' log dirs (PartitionRecord
directories), AssignReplicasToDirs, and a failed dir reported in a broker's
heartbeat moving only that dir's leaderships (Kafka's
ReplicationControlManager.handleDirectoriesOffline)."""

from __future__ import annotations

import uuid

from kfast.controller.cluster_control import ClusterControlManager
from kfast.controller.metadata.image import Endpoint
from kfast.controller.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
)
from kfast.controller.replication_control import ReplicationControlManager, TopicSpec
from kfast.protocol import errors
from kfast.protocol.constants import DIRECTORY_UNASSIGNED

# Broker 1 has two log dirs, brokers 2 and 3 one each.
A, B = uuid.UUID(int=101), uuid.UUID(int=102)
DIRS = {1: [A, B], 2: [uuid.UUID(int=201)], 3: [uuid.UUID(int=301)]}
CLUSTER_RECORDS = (
    RegisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
)


class Controller:
    def __init__(self) -> None:
        self.cluster = ClusterControlManager()
        for broker_id, dirs in DIRS.items():
            result = self.cluster.register_broker(
                broker_id,
                uuid.uuid4(),
                [Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")],
                None,
                next_offset=broker_id,
                log_dirs=dirs,
            )
            self.apply(result.records)
        self.manager = ReplicationControlManager(self.cluster, lambda: (1, 3))

    def apply(self, records) -> None:
        for record in records:
            # Through Kafka's bytes: what a replay of the log would read.
            record = decode_record(encode_record(record))[0]
            if isinstance(record, CLUSTER_RECORDS):
                self.cluster.replay(record)
            else:
                self.manager.replay(record)

    def run(self, result):
        self.apply(result.records)
        return result.response

    def partition(self, index: int):
        return self.manager.topic("t").partitions[index]


def _controller_with_topic() -> tuple[Controller, uuid.UUID]:
    c = Controller()
    c.run(
        c.manager.create_topics(
            [TopicSpec("t", assignments={0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3]})]
        )
    )
    return c, c.manager.topic("t").topic_id


def test_new_replicas_get_their_brokers_only_dir_or_unassigned():
    c, _ = _controller_with_topic()
    assert c.partition(0).directories == (DIRECTORY_UNASSIGNED, DIRS[2][0], DIRS[3][0])
    assert c.partition(2).directories == (DIRS[2][0], DIRECTORY_UNASSIGNED, DIRS[3][0])


def test_assign_replicas_to_dirs_records_each_moved_replica_once():
    c, topic_id = _controller_with_topic()
    epoch = c.cluster.broker_epoch(1)
    result = c.manager.assign_replicas_to_dirs(
        1, epoch, {A: [(topic_id, 0), (topic_id, 2)], B: [(topic_id, 1), (uuid.uuid4(), 0)]}
    )
    c.apply(result.records)
    assert [type(r) for r in result.records] == [PartitionChangeRecord] * 3
    assert c.partition(0).directories[0] == A and c.partition(1).directories[0] == B
    assert c.partition(2).directories[1] == A
    unknown = [code for (d, t, _), code in result.response.items() if t != topic_id]
    assert unknown == [errors.UnknownTopicIdException.code]
    # Again: nothing changes, nothing is written.
    again = c.manager.assign_replicas_to_dirs(1, epoch, {A: [(topic_id, 0)]})
    assert again.records == [] and again.response == {(A, topic_id, 0): 0}
    # Broker 2 is not told about dirs it does not have, nor about others' replicas.
    refused = c.manager.assign_replicas_to_dirs(
        2, c.cluster.broker_epoch(2), {A: [(topic_id, 0)], DIRS[2][0]: [(topic_id, 99)]}
    )
    assert refused.records == []
    assert refused.response == {
        (A, topic_id, 0): errors.LogDirNotFoundException.code,
        (DIRS[2][0], topic_id, 99): errors.UnknownTopicOrPartitionException.code,
    }
    try:
        c.manager.assign_replicas_to_dirs(1, epoch - 1, {A: [(topic_id, 0)]})
    except errors.StaleBrokerEpochException:
        pass
    else:
        raise AssertionError("a stale broker epoch was accepted")


def test_an_offline_dir_moves_only_its_replicas_and_they_are_not_elected_again():
    c, topic_id = _controller_with_topic()
    epoch = c.cluster.broker_epoch(1)
    c.run(
        c.manager.assign_replicas_to_dirs(
            1, epoch, {A: [(topic_id, 0)], B: [(topic_id, 1), (topic_id, 2)]}
        )
    )
    records = c.manager.handle_directories_offline(1, epoch, [A])
    c.apply(records)
    # p0 (in A, led by 1): leadership to 2, 1 out of the ISR. p1 (in B, led
    # by 1) and p2 (in B) are untouched.
    assert (c.partition(0).leader, c.partition(0).isr) == (2, (2, 3))
    assert (c.partition(1).leader, c.partition(1).isr) == (1, (1, 2, 3))
    assert c.partition(2).isr == (2, 1, 3)
    assert c.cluster.brokers[1].directories == (B,)
    assert isinstance(records[-1], BrokerRegistrationChangeRecord)
    # Reported again with the next heartbeat: nothing new.
    assert c.manager.handle_directories_offline(1, epoch, [A]) == []
    # 1 in A is not electable: with 2 and 3 gone p0 has no leader, even
    # with unclean election.
    c.manager.unclean_election_enabled = lambda topic: True
    for broker_id in (2, 3):
        c.apply(c.cluster.fence_broker(broker_id).records + c.manager.broker_fenced(broker_id))
    assert c.partition(0).leader == -1
    assert c.partition(1).leader == 1


def test_replicas_moved_by_a_reassignment_keep_or_lose_their_dirs():
    c, topic_id = _controller_with_topic()
    c.run(c.manager.assign_replicas_to_dirs(1, c.cluster.broker_epoch(1), {B: [(topic_id, 0)]}))
    c.apply([PartitionChangeRecord(partition_id=0, topic_id=topic_id, replicas=[3, 1], isr=[3, 1])])
    assert c.partition(0).directories == (DIRS[3][0], B)
