"""Metadata snapshots: file format, and restart from snapshot + log tail."""

from __future__ import annotations

import asyncio
import os
import uuid

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import Endpoint
from kfast.controller.metadata.records import TopicRecord
from kfast.controller.metadata_log import METADATA_PARTITION_DIR
from kfast.controller.quorum_controller import QuorumController
from kfast.controller.snapshot import (
    list_snapshots,
    read_snapshot,
    snapshot_name,
    write_snapshot,
)
from kfast.records import iter_batches

ENDPOINTS = [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]


def controller(path, snapshot_max_bytes=1) -> QuorumController:
    config = KafkaConfig(
        {
            "node.id": 1,
            "log.dirs": str(path),
            "num.partitions": 2,
            "metadata.log.max.record.bytes.between.snapshots": snapshot_max_bytes,
        }
    )
    return QuorumController(config, 1, "cluster-id-for-tests00", str(path))


def test_snapshot_file_layout(tmp_path):
    records = [TopicRecord(name=f"t{i}", topic_id=uuid.UUID(int=i + 1)) for i in range(1500)]
    path = write_snapshot(str(tmp_path), 42, 1, records)
    assert (
        os.path.basename(path)
        == snapshot_name(42, 1)
        == "00000000000000000042-0000000001.checkpoint"
    )
    batches = list(iter_batches(open(path, "rb").read()))
    assert [b.is_control for b in batches] == [True, False, False, True]
    header = next(iter(batches[0]))
    assert bytes(header.key) == b"\x00\x00\x00\x03"  # key version 0, SNAPSHOT_HEADER
    assert bytes(next(iter(batches[-1])).key) == b"\x00\x00\x00\x04"
    assert read_snapshot(path) == records
    assert list_snapshots(str(tmp_path)) == [(42, 1, path)]


def test_incomplete_snapshot_is_ignored(tmp_path):
    path = write_snapshot(str(tmp_path), 7, 1, [TopicRecord(name="a", topic_id=uuid.uuid4())])
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-10])  # torn footer
    assert read_snapshot(path) is None


def test_restart_from_snapshot_and_log_tail(tmp_path):
    async def first():
        c = controller(tmp_path, snapshot_max_bytes=1)  # snapshot after every commit
        await c.start()
        await c.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        await c.auto_create_topics(["a", "b"], configs={"retention.ms": "10"})
        await c.incremental_alter_configs([(4, "", [("log.retention.ms", 0, "99")])])
        await c.allocate_producer_ids(1)
        await c.shutdown()
        snapshot_end = c.snapshot_end_offset
        # More changes that only the log holds.
        c = controller(tmp_path, snapshot_max_bytes=1 << 30)
        await c.start()
        await c.delete_topics(["a"], [uuid.UUID(int=0)])
        await c.create_partitions([("b", 4, None)])
        image = c.image
        await c.shutdown()
        return snapshot_end, image

    async def second():
        c = controller(tmp_path, snapshot_max_bytes=1 << 30)
        await c.start()
        image, loaded = c.image, c.snapshot_end_offset
        ids = await c.allocate_producer_ids(1)
        await c.shutdown()
        return image, loaded, ids

    snapshot_end, before = asyncio.run(first())
    after, loaded, ids = asyncio.run(second())
    assert snapshot_end > 0 and loaded == snapshot_end
    assert after == before
    assert set(after.topics_by_name) == {"b"} and len(after.topics_by_name["b"].partitions) == 4
    assert after.broker_configs == {"": {"log.retention.ms": "99"}}
    assert ids == (1000, 1000)  # the snapshot kept the allocation point
    # Only the newest snapshot is kept.
    assert len(list_snapshots(str(tmp_path / METADATA_PARTITION_DIR))) == 1


def test_snapshot_beyond_the_log_is_not_used(tmp_path):
    async def run():
        c = controller(tmp_path, snapshot_max_bytes=1 << 30)
        await c.start()
        await c.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        assert await c.auto_create_topics(["x"]) == {"x": 0}
        await c.shutdown()
        directory = str(tmp_path / METADATA_PARTITION_DIR)
        write_snapshot(directory, 10_000, 1, [TopicRecord(name="ghost", topic_id=uuid.uuid4())])
        c = controller(tmp_path, snapshot_max_bytes=1 << 30)
        await c.start()
        names = set(c.image.topics_by_name)
        await c.shutdown()
        return names

    assert asyncio.run(run()) == {"x"}
