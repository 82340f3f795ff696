"""Replication throttles on a real ReplicaManager and LogManager: the leader
holds back records from an out-of-sync follower of a throttled partition
while its quota is exceeded (never from an in-sync one), the topic configs
reach the quotas through the metadata publisher, and the follower side
leaves out what it should (shouldFollowerThrottle)."""

from __future__ import annotations

import asyncio
import types
import uuid

import pytest

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import (
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kfast.records import RecordBatchBuilder
from kfast.server.metadata_publisher import BrokerMetadataPublisher
from kfast.server.quota import ClientQuotas
from kfast.server.replica_fetcher import PartitionFetchState, should_follower_throttle
from kfast.server.replica_manager import FetchParams, PartitionFetchRequest, ReplicaManager
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

LEADER, OUT_OF_SYNC, IN_SYNC = 1, 2, 3


@pytest.fixture
def log_manager(tmp_path):
    config = KafkaConfig({"node.id": str(LEADER), "log.dirs": str(tmp_path)})
    manager = LogManager(config, cluster_id="c")
    manager.startup()
    yield config, manager
    manager.shutdown()


def batch(size: int) -> bytes:
    builder = RecordBatchBuilder(0)
    builder.append(1_700_000_000_000, None, b"x" * size)
    return builder.build()


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def leader_with_data(config, log_manager, loop) -> ReplicaManager:
    manager = ReplicaManager(LEADER, log_manager, SystemTimer(loop), config)
    registration = PartitionRegistration(
        replicas=(LEADER, OUT_OF_SYNC, IN_SYNC),
        isr=(LEADER, IN_SYNC),
        leader=LEADER,
        leader_epoch=0,
        partition_epoch=0,
    )
    manager.apply_partition(
        "t", uuid.uuid4(), 0, registration, log_manager.get_or_create_log("t", 0)
    )
    manager.get_partition("t", 0).log.append_as_leader(batch(1000), 0)
    return manager


def follower_fetch(manager: ReplicaManager, replica_id: int):
    params = FetchParams(
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, replica_id=replica_id
    )
    [(_, data)] = manager.fetch_messages(params, [PartitionFetchRequest(("t", 0), 0, 1 << 20)])
    return data


def test_the_leader_holds_back_records_only_from_out_of_sync_throttled_followers(log_manager):
    config, logs = log_manager

    async def main():
        manager = leader_with_data(config, logs, asyncio.get_running_loop())
        assert follower_fetch(manager, OUT_OF_SYNC).size > 1000  # no throttle yet
        manager.update_replication_throttles(
            "t", {"leader.replication.throttled.replicas": "0:1,0:2,0:3"}
        )
        manager.update_replication_rates(100, 100)
        assert follower_fetch(manager, OUT_OF_SYNC).size > 1000  # quota not used yet
        manager.leader_quota.record(10_000)
        held_back = follower_fetch(manager, OUT_OF_SYNC)
        assert (held_back.error_code, held_back.records, held_back.high_watermark) == (0, None, 0)
        assert follower_fetch(manager, IN_SYNC).size > 1000  # the ISR never waits
        # Another broker's entry does not throttle this one's leadership.
        manager.update_replication_throttles("t", {"leader.replication.throttled.replicas": "0:2"})
        assert follower_fetch(manager, OUT_OF_SYNC).size > 1000
        manager.update_replication_throttles("t", {"leader.replication.throttled.replicas": "*"})
        assert follower_fetch(manager, OUT_OF_SYNC).records is None
        manager.update_replication_rates(2**63 - 1, 2**63 - 1)  # throttle removed
        assert follower_fetch(manager, OUT_OF_SYNC).size > 1000

    run(main())


def test_the_publisher_applies_throttled_replicas_and_forgets_deleted_topics(log_manager):
    config, logs = log_manager

    async def main():
        broker = types.SimpleNamespace(
            node_id=LEADER,
            log_manager=logs,
            config=config,
            metadata_image=None,
            quotas=ClientQuotas(config),
        )
        manager = broker.replica_manager = ReplicaManager(
            LEADER, logs, SystemTimer(asyncio.get_running_loop()), config
        )
        publisher = BrokerMetadataPublisher(broker)
        registration = PartitionRegistration((LEADER,), (LEADER,), LEADER, 0, 0)
        topic = TopicImage("t", uuid.uuid4(), {0: registration, 1: registration})
        throttles = {
            "leader.replication.throttled.replicas": "1:1,0:2",
            "follower.replication.throttled.replicas": "*",
        }
        image = MetadataImage(
            cluster_id="c",
            topics_by_name={"t": topic},
            topics_by_id={topic.topic_id: topic},
            topic_configs={"t": throttles},
        )
        publisher.on_metadata_update(MetadataDelta(), image)  # the replayed image
        assert not manager.leader_quota.is_throttled("t", 0)
        assert manager.leader_quota.is_throttled("t", 1)
        assert manager.follower_quota.is_throttled("t", 0)
        cleared = MetadataImage(
            cluster_id="c",
            topics_by_name={"t": topic},
            topics_by_id={topic.topic_id: topic},
            topic_configs={},
        )
        publisher.on_metadata_update(MetadataDelta(changed_topic_configs=frozenset({"t"})), cleared)
        assert manager.leader_quota.throttled_topics == {}
        assert manager.follower_quota.throttled_topics == {}
        publisher.on_metadata_update(MetadataDelta(changed_topic_configs=frozenset({"t"})), image)
        assert manager.follower_quota.is_throttled("t", 1)
        publisher.on_metadata_update(
            MetadataDelta(deleted_topics={"t": topic}), MetadataImage(cluster_id="c")
        )
        assert manager.follower_quota.throttled_topics == {}
        await publisher.wait_idle()

    run(main())


def test_a_follower_leaves_out_only_throttled_partitions_it_has_not_caught_up_on(log_manager):
    config, logs = log_manager

    async def main():
        manager = ReplicaManager(OUT_OF_SYNC, logs, SystemTimer(asyncio.get_running_loop()), config)
        quota = manager.follower_quota
        partition = types.SimpleNamespace(topic="t", partition=0)
        state = PartitionFetchState(partition, LEADER, 0)
        manager.update_replication_throttles(
            "t", {"follower.replication.throttled.replicas": "0:2"}
        )
        manager.update_replication_rates(2**63 - 1, 100)
        assert not should_follower_throttle(quota, state)  # quota not used yet
        quota.record(10_000)
        assert state.lag is None and should_follower_throttle(quota, state)
        state.lag = 5
        assert should_follower_throttle(quota, state)
        state.lag = 0  # caught up: in sync
        assert not should_follower_throttle(quota, state)
        state.lag = 5
        manager.update_replication_throttles("t", {})
        assert not should_follower_throttle(quota, state)

    run(main())
