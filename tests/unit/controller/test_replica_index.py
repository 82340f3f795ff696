"""ReplicationControlManager's per-broker replica index (Kafka's
BrokersToIsrs job): after any sequence of topic creations, replica changes
and deletions replayed, a broker's indexed partitions are exactly those a
scan of every partition finds, and fencing answers as if it had scanned."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.controller.metadata.records import PartitionChangeRecord, RemoveTopicRecord
from kfast.controller.replication_control import TopicSpec

from .test_replication_control import Harness

BROKERS = (1, 2, 3, 4)

steps = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(
            st.just("reassign"),
            st.integers(0, 5),
            st.integers(0, 2),
            st.permutations(BROKERS),
            st.integers(1, 4),
        ),
        st.tuples(st.just("delete"), st.integers(0, 5)),
    ),
    max_size=25,
)


def scanned(manager, broker_id: int) -> list:
    return sorted(
        (topic.name, index)
        for topic in manager.topics.values()
        for index, registration in topic.partitions.items()
        if broker_id in registration.replicas
    )


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(steps)
def test_the_index_matches_a_scan(plan):
    h = Harness(broker_ids=BROKERS)
    created = 0
    for step in plan:
        names = sorted(h.manager.topics_by_name)
        if step[0] == "create":
            h.create(TopicSpec(f"t{created}", step[1], step[2]))
            created += 1
        elif step[0] == "reassign" and names:
            topic = h.manager.topic(names[step[1] % len(names)])
            index = step[2] % len(topic.partitions)
            replicas = list(step[3][: step[4]])
            h.manager.replay(
                PartitionChangeRecord(
                    partition_id=index,
                    topic_id=topic.topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
        elif step[0] == "delete" and names:
            h.manager.replay(
                RemoveTopicRecord(topic_id=h.manager.topic(names[step[1] % len(names)]).topic_id)
            )
        for broker_id in BROKERS:
            indexed = [
                (topic.name, index) for topic, index, _ in h.manager._partitions_of(broker_id)
            ]
            assert indexed == scanned(h.manager, broker_id)
            assert h.manager.leaderships(broker_id) == sum(
                1
                for topic in h.manager.topics.values()
                for registration in topic.partitions.values()
                if registration.leader == broker_id
            )


def test_fencing_visits_only_the_brokers_partitions():
    h = Harness(broker_ids=BROKERS)
    h.create(TopicSpec("a", 4, 2), TopicSpec("b", 2, 1))
    fenced = h.manager.broker_fenced(1)
    touched = {(c.topic_id, c.partition_id) for c in fenced}
    expected = {
        (topic.topic_id, index)
        for topic in h.manager.topics.values()
        for index, r in topic.partitions.items()
        if 1 in r.isr or r.leader == 1
    }
    assert touched == expected and touched
