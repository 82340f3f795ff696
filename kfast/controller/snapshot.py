"""Metadata snapshots: the whole cluster state as of one metadata offset.

KRaft snapshots live next to the metadata log segments, named
``<end offset %020d>-<epoch %010d>.checkpoint`` (the end offset is exclusive:
the snapshot holds every record below it). A snapshot file is a sequence of
v2 record batches, as the log::

    control batch   SnapshotHeaderRecord   (key: int16 version 0, int16 type 3)
    data batches    metadata records that rebuild the state (TopicRecord,
                    PartitionRecord, ConfigRecord, RegisterBrokerRecord, ...)
    control batch   SnapshotFooterRecord   (type 4)

A snapshot is written to ``.checkpoint.part``, fsynced and renamed
(kfast.storage.atomic_file), so a crash leaves either the whole file or
none; one without its footer is ignored. At start the controller replays
the newest snapshot and then only the log records from its end offset on,
so a restart does not re-read every change since the cluster was formatted.
"""
from __future__ import annotations

import os
import re
import struct
import time

from kfast.controller.cluster_control import SECURITY_PROTOCOLS
from kfast.controller.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from kfast.records import RecordBatchBuilder, iter_batches
from kfast.storage.atomic_file import atomic_writer

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
_CONTROL_KEY = struct.Struct(">hh")            # version 0, control type
# SnapshotHeaderRecord v0 (flexible): Version int16, LastContainedLogTimestamp
# int64, no tagged fields; SnapshotFooterRecord v0: Version int16.
_HEADER_VALUE = struct.Struct(">hqB")
_FOOTER_VALUE = struct.Struct(">hB")
_RECORDS_PER_BATCH = 1000


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def image_records(image, next_producer_id: int) -> list:
    """Records whose replay, into empty control managers, rebuilds ``image``
    (and the producer id allocation point)."""
    records: list = [FeatureLevelRecord(name=name, feature_level=level)
                     for name, level in sorted(image.features.items())]
    for broker_id in sorted(image.brokers):
        registration = image.brokers[broker_id]
        records.append(RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=registration.incarnation_id,
            broker_epoch=registration.epoch, rack=registration.rack,
            fenced=registration.fenced, in_controlled_shutdown=registration.in_controlled_shutdown,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(
                name=e.name, host=e.host, port=e.port,
                security_protocol=SECURITY_PROTOCOLS[e.security_protocol])
                for e in registration.listeners.values()]))
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        records.append(TopicRecord(name=name, topic_id=topic.topic_id))
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            records.append(PartitionRecord(
                partition_id=index, topic_id=topic.topic_id, replicas=list(p.replicas),
                isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas), leader=p.leader,
                leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch))
    for resource_type, configs in ((CONFIG_RESOURCE_TOPIC, image.topic_configs),
                                   (CONFIG_RESOURCE_BROKER, image.broker_configs)):
        for resource in sorted(configs):
            for key, value in sorted(configs[resource].items()):
                records.append(ConfigRecord(resource_type=resource_type, resource_name=resource,
                                            name=key, value=value))
    if next_producer_id > 0:
        records.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                         next_producer_id=next_producer_id))
    return records


def _control_batch(control_type: int, value: bytes, offset: int, epoch: int, now: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=offset, partition_leader_epoch=epoch,
                                 is_control=True)
    builder.append(now, _CONTROL_KEY.pack(0, control_type), value)
    return builder.build()


def write_snapshot(directory: str, end_offset: int, epoch: int, records: list,
                   last_timestamp: int | None = None) -> str:
    """Write, fsync and publish a snapshot file; returns its path. Blocking."""
    now = int(time.time() * 1000)
    path = os.path.join(directory, snapshot_name(end_offset, epoch))
    offset = 0
    with atomic_writer(path, temp_suffix=PARTIAL_SUFFIX) as f:
        f.write(_control_batch(CONTROL_SNAPSHOT_HEADER,
                               _HEADER_VALUE.pack(0, last_timestamp or now, 0), offset, epoch, now))
        offset += 1
        for start in range(0, len(records), _RECORDS_PER_BATCH):
            builder = RecordBatchBuilder(base_offset=offset, partition_leader_epoch=epoch)
            for record in records[start:start + _RECORDS_PER_BATCH]:
                builder.append(now, None, encode_record(record))
            f.write(builder.build())
            offset += builder.records_count
        f.write(_control_batch(CONTROL_SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0, 0), offset, epoch,
                               now))
    return path


def list_snapshots(directory: str) -> list[tuple[int, int, str]]:
    """(end offset, epoch, path) of every complete snapshot file, oldest first."""
    out = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match:
            out.append((int(match.group(1)), int(match.group(2)), os.path.join(directory, name)))
    return sorted(out)


def read_snapshot(path: str) -> list | None:
    """The metadata records of a snapshot, or None if the file is not a
    whole snapshot (bad CRC, no header, no footer)."""
    with open(path, "rb") as f:
        data = f.read()
    records, header, footer = [], False, False
    try:
        for batch in iter_batches(data):
            if not batch.is_valid() or footer:
                return None
            if batch.is_control:
                for record in batch:
                    _, control_type = _CONTROL_KEY.unpack(bytes(record.key)[:4])
                    if control_type == CONTROL_SNAPSHOT_HEADER:
                        header = True
                    elif control_type == CONTROL_SNAPSHOT_FOOTER:
                        footer = True
                continue
            if not header:
                return None
            for record in batch:
                records.append(decode_record(bytes(record.value))[0])
    except Exception:
        return None
    return records if header and footer else None


def delete_snapshots_before(directory: str, end_offset: int) -> None:
    """Remove snapshots older than the one ending at ``end_offset`` and any
    unfinished ``.part`` file."""
    for offset, _, path in list_snapshots(directory):
        if offset < end_offset:
            os.unlink(path)
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX + PARTIAL_SUFFIX):
            os.unlink(os.path.join(directory, name))
