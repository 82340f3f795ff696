"""MetadataLog: the ``__cluster_metadata-0`` partition on disk.

KRaft keeps cluster metadata in a log partition like any other: v2 record
batches in ``%020d.log`` segments with their indexes, so kfast uses
kfast.storage's Log for it. Each committed change is one batch (written by
the single voter, partition leader epoch = the quorum epoch) whose records
have a null key and a framed metadata record as value
(kfast.controller.metadata.records). Retention never deletes from it: the
metadata log is the cluster's source of truth.

Every append is fsynced before the change is applied, so only a torn tail
(a batch being written when the process died) can need recovery. A clean
``close()`` leaves Kafka's clean-shutdown marker (``.kafka_cleanshutdown``)
in the partition directory; ``open()`` trusts the whole log when it finds
it (no batch-by-batch recovery) and removes it durably before anything is
appended, so a crash after that leaves no marker.

All methods block on the disk; the QuorumController calls them in an
executor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from kfast.config import SERVER_CONFIGS
from kfast.controller.metadata.records import decode_record, encode_record
from kfast.raft.file_log import (
    METADATA_PARTITION_DIR,
    close_metadata_partition,
    open_metadata_partition,
)
from kfast.records import RecordBatchBuilder, iter_batches
from kfast.storage.log import Log
from kfast.storage.producer_state import ORIGIN_COORDINATOR

_READ_CHUNK_BYTES = 1 << 20


class MetadataLog:
    def __init__(
        self,
        metadata_log_dir: str,
        *,
        segment_bytes: int = SERVER_CONFIGS["metadata.log.segment.bytes"].default,
        segment_ms: int = SERVER_CONFIGS["metadata.log.segment.ms"].default,
    ):
        self.dir = os.path.join(metadata_log_dir, METADATA_PARTITION_DIR)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.log: Log | None = None
        self.had_clean_shutdown = False

    def open(self) -> None:
        self.log, self.had_clean_shutdown = open_metadata_partition(
            self.dir, self.segment_bytes, self.segment_ms
        )

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def read_all(self, start_offset: int = 0) -> Iterator[tuple[int, object]]:
        """(offset, record) of every record from ``start_offset`` on, in order."""
        offset = max(start_offset, self.log.log_start_offset)
        end = self.log.log_end_offset
        while offset < end:
            info = self.log.read(offset, _READ_CHUNK_BYTES)
            if info.records is None or not len(info.records):
                raise RuntimeError(f"cannot read the metadata log at offset {offset}")
            data = info.records.read()
            for batch in iter_batches(data):
                if batch.is_control:
                    offset = batch.last_offset + 1
                    continue
                for record in batch:
                    if record.offset >= offset:
                        yield record.offset, decode_record(bytes(record.value))[0]
                offset = batch.last_offset + 1

    def append(self, records: list, epoch: int) -> tuple[int, int]:
        """Append one batch holding ``records`` and fsync it; returns the
        offset of its first record and the batch's size in bytes."""
        builder = RecordBatchBuilder(partition_leader_epoch=epoch)
        now = int(time.time() * 1000)
        for record in records:
            builder.append(now, None, encode_record(record))
        batch = bytearray(builder.build())
        info = self.log.append_as_leader(batch, leader_epoch=epoch, origin=ORIGIN_COORDINATOR)
        self.log.flush()
        return info.first_offset, len(batch)

    def close(self) -> None:
        if self.log is not None:
            close_metadata_partition(self.log)
            self.log = None
