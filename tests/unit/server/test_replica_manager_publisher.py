"""BrokerMetadataPublisher applying hand-built metadata changes to a real
LogManager and ReplicaManager: creation, leadership changes, config
changes, deletion, and a topic deleted and re-created under the same name."""

from __future__ import annotations

import asyncio
import os
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
from kfast.server.metadata_publisher import BrokerMetadataPublisher
from kfast.server.partition import kafka_uuid_string
from kfast.server.quota import ClientQuotas
from kfast.server.replica_manager import ReplicaManager
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

NODE = 1


def registration(leader=NODE, epoch=0, replicas=(NODE,)):
    return PartitionRegistration(tuple(replicas), tuple(replicas), leader, epoch, epoch)


def topic(name, partitions=2, topic_id=None, **kwargs):
    return TopicImage(
        name, topic_id or uuid.uuid4(), {i: registration(**kwargs) for i in range(partitions)}
    )


def image_of(*topics, configs=None):
    return MetadataImage(
        cluster_id="c",
        topics_by_name={t.name: t for t in topics},
        topics_by_id={t.topic_id: t for t in topics},
        topic_configs=configs or {},
    )


@pytest.fixture
def env(tmp_path):
    config = KafkaConfig(
        {"node.id": str(NODE), "log.dirs": str(tmp_path), "log.segment.delete.delay.ms": "0"}
    )
    log_manager = LogManager(config, cluster_id="c")
    log_manager.startup()
    yield config, log_manager, tmp_path
    log_manager.shutdown()


def run(env, scenario):
    config, log_manager, tmp_path = env

    async def main():
        broker = types.SimpleNamespace(
            node_id=NODE,
            log_manager=log_manager,
            config=config,
            metadata_image=None,
            quotas=ClientQuotas(config),
        )
        broker.replica_manager = ReplicaManager(
            NODE, log_manager, SystemTimer(asyncio.get_running_loop()), config
        )
        publisher = BrokerMetadataPublisher(broker)
        await scenario(broker, publisher, tmp_path)

    asyncio.run(asyncio.wait_for(main(), 10))


def test_create_change_leadership_and_delete(env):
    async def scenario(broker, publisher, tmp_path):
        orders = topic("orders")
        publisher.on_metadata_update(MetadataDelta(), image_of(orders))
        await publisher.wait_idle()
        manager = broker.replica_manager
        partition = manager.get_partition("orders", 1)
        assert partition.is_leader and partition.leader_epoch == 0
        with open(os.path.join(partition.log.dir, "partition.metadata")) as f:
            assert kafka_uuid_string(orders.topic_id) in f.read()
        # A new leader epoch applies at once (the log exists).
        moved = TopicImage(
            "orders", orders.topic_id, {0: registration(epoch=4), 1: registration(epoch=0)}
        )
        publisher.on_metadata_update(
            MetadataDelta(changed_topics={"orders": moved}), image_of(moved)
        )
        assert manager.get_partition("orders", 0).leader_epoch == 4
        # Deletion: partitions leave at once, the directories afterwards.
        publisher.on_metadata_update(MetadataDelta(deleted_topics={"orders": moved}), image_of())
        assert manager.get_partition("orders", 0) is None
        await publisher.wait_idle()
        assert broker.log_manager.get_log("orders", 0) is None
        assert not os.path.exists(os.path.join(str(tmp_path), "orders-0"))

    run(env, scenario)


def test_delete_then_recreate_same_name(env):
    async def scenario(broker, publisher, tmp_path):
        first = topic("again", partitions=1)
        publisher.on_metadata_update(
            MetadataDelta(changed_topics={"again": first}), image_of(first)
        )
        await publisher.wait_idle()
        old_log = broker.replica_manager.get_partition("again", 0).log
        second = topic("again", partitions=1)
        # Both changes are published before any disk work has run.
        publisher.on_metadata_update(MetadataDelta(deleted_topics={"again": first}), image_of())
        publisher.on_metadata_update(
            MetadataDelta(changed_topics={"again": second}), image_of(second)
        )
        assert broker.replica_manager.get_partition("again", 0) is None
        await publisher.wait_idle()
        partition = broker.replica_manager.get_partition("again", 0)
        assert partition.topic_id == second.topic_id and partition.log is not old_log
        assert partition.log.topic_id == kafka_uuid_string(second.topic_id)

    run(env, scenario)


def test_partition_moved_off_this_broker_and_config_change(env):
    async def scenario(broker, publisher, tmp_path):
        t = topic("cfg", partitions=2)
        publisher.on_metadata_update(MetadataDelta(), image_of(t))
        await publisher.wait_idle()
        elsewhere = TopicImage(
            "cfg", t.topic_id, {0: t.partitions[0], 1: registration(leader=2, replicas=(2,))}
        )
        image = image_of(elsewhere, configs={"cfg": {"retention.ms": "1000"}})
        publisher.on_metadata_update(
            MetadataDelta(
                changed_topics={"cfg": elsewhere}, changed_topic_configs=frozenset({"cfg"})
            ),
            image,
        )
        assert broker.replica_manager.get_partition("cfg", 1) is None
        await publisher.wait_idle()
        assert broker.log_manager.get_log("cfg", 1) is None
        assert broker.log_manager.get_log("cfg", 0).config.retention_ms == 1000

    run(env, scenario)
