"""Metadata snapshots: the file format of a snapshot of metadata records
(kfast.raft.snapshots' framing, the controller's record serde), and the
records that rebuild an image."""

from __future__ import annotations

import asyncio
import os
import uuid

from kfast.controller.metadata.image import Endpoint
from kfast.controller.metadata.records import TopicRecord, decode_record, encode_record
from kfast.controller.snapshot import image_records
from kfast.raft.snapshots import (
    list_snapshots,
    read_snapshot_file,
    snapshot_bytes,
    snapshot_name,
    write_snapshot_file,
)
from kfast.records import iter_batches

from .memory_controller import started

ENDPOINTS = [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]


def _decode(value: bytes) -> object:
    return decode_record(value)[0]


def _write(directory: str, end_offset: int, epoch: int, records: list) -> str:
    path = os.path.join(directory, snapshot_name(end_offset, epoch))
    write_snapshot_file(path, [snapshot_bytes(records, epoch, encode_record)])
    return path


def test_snapshot_file_layout(tmp_path):
    records = [TopicRecord(name=f"t{i}", topic_id=uuid.UUID(int=i + 1)) for i in range(1500)]
    path = _write(str(tmp_path), 42, 1, records)
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
    assert read_snapshot_file(path, _decode) == records
    assert list_snapshots(str(tmp_path)) == [(42, 1, path)]


def test_incomplete_snapshot_is_ignored(tmp_path):
    path = _write(str(tmp_path), 7, 1, [TopicRecord(name="a", topic_id=uuid.uuid4())])
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-10])  # torn footer
    assert read_snapshot_file(path, _decode) is None


def test_the_image_records_replayed_rebuild_the_image(tmp_path):
    async def main():
        c = await started(tmp_path, **{"num.partitions": 2})
        await c.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        await c.auto_create_topics(["a", "b"], configs={"retention.ms": "10"})
        await c.incremental_alter_configs([(4, "", [("log.retention.ms", 0, "99")])])
        await c.allocate_producer_ids(1)
        await c.delete_topics(["a"], [uuid.UUID(int=0)])
        await c.shutdown()
        records = image_records(c.image, c.producer_id_control.next_producer_id)
        again = await started(tmp_path, records)
        ids = await again.allocate_producer_ids(1)
        await again.shutdown()
        return c.image, again.image, ids

    before, after, ids = asyncio.run(main())
    assert after.topics_by_name == before.topics_by_name
    assert after.brokers == before.brokers and after.features == before.features
    assert after.broker_configs == {"": {"log.retention.ms": "99"}}
    assert after.topic_configs == before.topic_configs == {"b": {"retention.ms": "10"}}
    assert ids == (1000, 1000)  # the snapshot kept the allocation point
