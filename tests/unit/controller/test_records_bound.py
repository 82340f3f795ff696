"""One controller operation writes at most MAX_RECORDS_PER_USER_OP records
(Kafka's QuorumController): CreateTopics asking for more partitions than that
fails as a whole with POLICY_VIOLATION before anything is placed
(KAFKA-17870), and an operation whose records would exceed the bound fails
with Kafka's "excessively large batch" policy violation."""

from __future__ import annotations

import uuid

import pytest

from kfast.controller.cluster_control import ClusterControlManager
from kfast.controller.controller_result import (
    MAX_RECORDS_PER_USER_OP,
    BoundedListTooLongException,
)
from kfast.controller.metadata.image import Endpoint
from kfast.controller.replication_control import ReplicationControlManager, TopicSpec
from kfast.protocol import errors


class Harness:
    """One registered broker; ``defaults``: (num.partitions, replication factor)."""

    def __init__(self, defaults=(1, 1)):
        cluster = ClusterControlManager()
        registered = cluster.register_broker(
            1, uuid.uuid4(), [Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")], None, next_offset=1
        )
        for record in registered.records:
            cluster.replay(record)
        self.manager = ReplicationControlManager(cluster, lambda: defaults)

    def create(self, *specs):
        result = self.manager.create_topics(list(specs))
        for record in result.records:
            self.manager.replay(record)
        return result.response


def test_more_partitions_than_the_bound_fail_the_whole_request():
    h = Harness(defaults=(3, 1))
    specs = [
        TopicSpec("small", 1),
        TopicSpec("big", MAX_RECORDS_PER_USER_OP - 3),
        TopicSpec("default"),
    ]  # 1 + 9,997 + 3 = 10,001 partitions
    with pytest.raises(
        errors.PolicyViolationException,
        match=r"^Excessively large number of partitions per request\.$",
    ):
        h.manager.create_topics(specs)
    assert h.manager.topics == {}


def test_manual_assignments_count_as_partitions():
    h = Harness()
    assignments = {i: [1] for i in range(MAX_RECORDS_PER_USER_OP + 1)}
    with pytest.raises(errors.PolicyViolationException):
        h.manager.create_topics([TopicSpec("manual", assignments=assignments)])


def test_records_beyond_the_bound_fail_the_batch():
    h = Harness()
    # 10,000 partitions pass the partition check; with the TopicRecord they
    # are 10,001 records.
    with pytest.raises(BoundedListTooLongException):
        h.manager.create_topics([TopicSpec("exactly", MAX_RECORDS_PER_USER_OP)])
    result = h.manager.create_topics([TopicSpec("fits", MAX_RECORDS_PER_USER_OP - 1)])
    assert len(result.records) == MAX_RECORDS_PER_USER_OP
    assert result.response[0].error is None


def test_create_partitions_beyond_the_bound():
    h = Harness()
    h.create(TopicSpec("grows", 1))
    with pytest.raises(BoundedListTooLongException):
        h.manager.create_partitions("grows", MAX_RECORDS_PER_USER_OP + 2, None)
    result = h.manager.create_partitions("grows", MAX_RECORDS_PER_USER_OP + 1, None)
    assert len(result.records) == MAX_RECORDS_PER_USER_OP
