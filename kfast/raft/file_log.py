"""FileReplicatedLog: the ReplicatedLog of ``__cluster_metadata-0`` on disk (Kafka's KafkaMetadataLog).

The partition is a kfast.storage Log like any other, so its directory reads
like one Kafka wrote (``kfast dump-log`` / ``kafka-dump-log.sh`` print it)::

    <metadata log dir>/__cluster_metadata-0/
        %020d.log .index .timeindex        segments of v2 record batches
        leader-epoch-checkpoint            the epoch cache (epoch, start offset)
        partition.metadata                 the fixed topic id (Uuid.METADATA_TOPIC_ID)
        %020d-%010d.checkpoint             snapshots (kfast.raft.snapshots)
        .kafka_cleanshutdown               while closed cleanly

One Raft Batch is one v2 record batch (kfast.raft.record_batches: data
records with a null key and the caller's serde's encoding as value;
LeaderChangeMessage control records), the same bytes a quorum Fetch
response carries.

The log start offset is not checkpointed (the metadata partition is not in
the log directory's log-start-offset-checkpoint, which the LogManager
keeps for the partitions it owns): it is the oldest snapshot's end offset,
which delete_before_snapshot makes so by deleting the older snapshots.
Opening therefore also finishes a delete_before_snapshot that a crash
interrupted, and (Kafka's truncateToLatestSnapshot) an install_snapshot
whose log truncation a crash prevented.

The caller fsyncs through ``flush``; RaftClient acknowledges (commits as
leader, fetches past as follower) only what is flushed, so only a torn tail
(a batch being written when the process died) needs recovery, and open()
drops it. All methods block on the disk. ``flush`` runs on RaftManager's
I/O thread while the event loop appends; the rest run on the loop, and
those that remove data (truncation, snapshots, close) wait for a running
flush, so it never fsyncs a file being deleted.
"""

from __future__ import annotations

import base64
import json
import os
import threading

from kfast.config import LONG_MAX, SERVER_CONFIGS, LogConfig
from kfast.protocol.errors import OffsetOutOfRangeException
from kfast.raft.log import AppendRules, Batch, OffsetAndEpoch, base_epochs, end_offset_for_epoch
from kfast.raft.record_batches import RecordBatchCodec, RecordSerde
from kfast.raft.snapshots import (
    PARTIAL_SUFFIX,
    SNAPSHOT_SUFFIX,
    is_whole_snapshot,
    list_snapshots,
    snapshot_kraft_records,
    snapshot_name,
    snapshot_records,
    with_kraft_records,
    write_snapshot_file,
)
from kfast.storage.atomic_file import fsync_dir, write_atomically
from kfast.storage.checkpoint import PARTITION_METADATA_FILE
from kfast.storage.log import Log
from kfast.storage.manager import (
    CLEAN_SHUTDOWN_FILE,
    CLUSTER_METADATA_TOPIC_NAME,
    METADATA_TOPIC_ID,
)

METADATA_PARTITION_DIR = f"{CLUSTER_METADATA_TOPIC_NAME}-0"
# One batch holds one whole change (a topic with all its partitions).
MAX_BATCH_BYTES = 1 << 30
_READ_CHUNK_BYTES = 1 << 20


def _kafka_uuid(value) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def open_metadata_partition(
    partition_dir: str, segment_bytes: int, segment_ms: int, log_start_offset: int = 0
) -> tuple[Log, bool]:
    """The Log of ``__cluster_metadata-0`` and whether it was closed cleanly.
    The log starts at ``log_start_offset`` or its first segment, the later.

    Without the clean-shutdown marker, recovery re-reads every batch
    (CRC-checked) and drops a torn tail; with it, everything up to the end
    was fsynced. The marker is removed durably before anything is
    appended, so a crash after this leaves no marker."""
    config = LogConfig(
        {
            "retention.ms": -1,
            "retention.bytes": -1,
            "max.message.bytes": MAX_BATCH_BYTES,
            "segment.bytes": segment_bytes,
            "segment.ms": segment_ms,
            # Nothing schedules a delayed delete for this log;
            # segments below a snapshot go when it is taken.
            "file.delete.delay.ms": 0,
        }
    )
    marker = os.path.join(partition_dir, CLEAN_SHUTDOWN_FILE)
    clean = os.path.exists(marker)
    # The fixed topic id is written once (the Log fsyncs it on every open
    # it is given).
    known = os.path.exists(os.path.join(partition_dir, PARTITION_METADATA_FILE))
    log = Log(
        partition_dir,
        config,
        recovery_point=LONG_MAX if clean else 0,
        log_start_offset=log_start_offset,
        had_clean_shutdown=clean,
        topic_id=None if known else _kafka_uuid(METADATA_TOPIC_ID),
    )
    if clean:
        os.unlink(marker)
        fsync_dir(partition_dir)
    return log, clean


def close_metadata_partition(log: Log) -> None:
    """fsync, close, and leave the clean-shutdown marker."""
    log.flush()
    log.close()
    write_atomically(
        os.path.join(log.dir, CLEAN_SHUTDOWN_FILE),
        json.dumps({"version": 0, "brokerEpoch": -1}).encode(),
    )


class FileReplicatedLog(AppendRules):
    """A ReplicatedLog (kfast.raft.log) in ``<directory>/__cluster_metadata-0``;
    same semantics as MemoryReplicatedLog, durable once ``flush`` returns.

        log = FileReplicatedLog(metadata_log_dir, serde)
        log.open()
        log.append_as_leader([record], epoch=3); log.flush()
        log.close()
    """

    def __init__(
        self,
        directory: str,
        serde: RecordSerde,
        *,
        segment_bytes: int = SERVER_CONFIGS["metadata.log.segment.bytes"].default,
        segment_ms: int = SERVER_CONFIGS["metadata.log.segment.ms"].default,
    ):
        self.dir = os.path.join(directory, METADATA_PARTITION_DIR)
        self.serde = serde
        self._codec = RecordBatchCodec(serde)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.log: Log | None = None
        self.had_clean_shutdown = False
        self._snapshots: dict[OffsetAndEpoch, str] = {}
        self._start_epoch = 0
        # Held by flush (another thread) and by what removes data.
        self._flush_lock = threading.Lock()

    # -- life cycle ------------------------------------------------------------------------
    def open(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX + PARTIAL_SUFFIX):
                os.unlink(os.path.join(self.dir, name))  # a write a crash cut short
        self._snapshots = {
            OffsetAndEpoch(offset, epoch): path for offset, epoch, path in list_snapshots(self.dir)
        }
        oldest = min(self._snapshots) if self._snapshots else None
        self.log, self.had_clean_shutdown = open_metadata_partition(
            self.dir,
            self.segment_bytes,
            self.segment_ms,
            log_start_offset=oldest.offset if oldest else 0,
        )
        latest = self.latest_snapshot_id()
        last_epoch = self.log.latest_epoch
        if latest is not None and (
            latest.offset > self.log.log_end_offset
            or (last_epoch is not None and latest.epoch > last_epoch)
        ):
            # An install_snapshot that wrote the snapshot and died before
            # replacing the log (Kafka's truncateToLatestSnapshot).
            self.log.truncate_fully_and_start_at(latest.offset)
        self._start_epoch = max(
            (s.epoch for s in self._snapshots if s.offset == self.log.log_start_offset), default=0
        )

    def close(self) -> None:
        with self._flush_lock:
            if self.log is not None:
                close_metadata_partition(self.log)
                self.log = None

    @property
    def _log(self) -> Log:
        """The partition's Log, between open() and close()."""
        log = self.log
        if log is None:
            raise RuntimeError(f"the metadata log {self.dir} is not open")
        return log

    # -- offsets and epochs ----------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        log = self._log
        epoch = log.latest_epoch
        if log.log_end_offset > log.log_start_offset and epoch is not None:
            return epoch
        return self._start_epoch

    @property
    def epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, as MemoryReplicatedLog.epochs: the
        leader-epoch-checkpoint's, with the snapshot the log starts at first."""
        start = self._log.log_start_offset
        cached = [(e.epoch, e.start_offset) for e in self._log.leader_epoch_cache.entries]
        base = base_epochs(start, self._start_epoch)
        if not base:
            return cached
        # The cache's entry for the epoch the snapshot ends in was moved up
        # to the log start (truncate_from_start); the snapshot stands for it.
        return base + [
            (e, o) for e, o in cached if o > start or (o == start and e > self._start_epoch)
        ]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return end_offset_for_epoch(self.epochs, self.start_offset, self.end_offset, epoch)

    # -- append ----------------------------------------------------------------------------
    def _append(self, batch: Batch) -> None:
        if not len(batch):
            raise ValueError("empty batch")
        # The offsets are the Batch's, so the log takes it as a replica's
        # append (no offset assignment); it adds the epoch to its cache.
        self._log.append_as_follower(bytearray(self._codec.encode_batch(batch)))

    # -- read and truncate -----------------------------------------------------------------
    def read(self, start_offset: int, max_batches: int) -> tuple[Batch, ...]:
        out: list[Batch] = []
        offset, end = start_offset, self.end_offset
        while len(out) < max_batches and offset < end:
            try:
                info = self._log.read(offset, _READ_CHUNK_BYTES)
            except OffsetOutOfRangeException:
                return ()  # below the log start
            if info.records is None or not len(info.records):
                break
            for record_batch, batch in self._codec.read_batches(
                info.records.read(), allow_partial=True
            ):
                if not out and record_batch.base_offset != start_offset:
                    raise ValueError(f"offset {start_offset} is not a batch boundary")
                out.append(batch)
                offset = record_batch.last_offset + 1
                if len(out) == max_batches:
                    break
        return tuple(out)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"truncation to {offset} below the log start {self.start_offset}")
        self.read(offset, 1)  # raises unless a batch boundary
        with self._flush_lock:
            self._log.truncate_to(offset)

    def flush(self, offset: int | None = None) -> None:
        with self._flush_lock:
            self._log.flush(offset)

    # -- snapshots -------------------------------------------------------------------------
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self._snapshots) if self._snapshots else None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        path = self._snapshots.get(snapshot_id)
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    def snapshot_records(self, snapshot_id: OffsetAndEpoch) -> list | None:
        """The data records of a snapshot, decoded by the serde (what the
        state machine replays to load it)."""
        data = self.read_snapshot(snapshot_id)
        return None if data is None else snapshot_records(data, self.serde.decode)

    def _write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        if not is_whole_snapshot(data):
            raise ValueError(f"snapshot {snapshot_id} is not a whole snapshot file")
        path = os.path.join(self.dir, snapshot_name(snapshot_id.offset, snapshot_id.epoch))
        write_snapshot_file(path, (data,))
        self._snapshots[snapshot_id] = path

    def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, data: bytes, kraft_records: tuple = ()
    ) -> None:
        """A snapshot of the state below ``snapshot_id.offset`` (``data``: a
        whole snapshot file, kfast.raft.snapshots.snapshot_bytes).
        ``kraft_records`` (kraft.version 1: the KRaftVersionRecord and
        VotersRecord in force there) go into its header batch."""
        if not self.start_offset <= snapshot_id.offset <= self.end_offset:
            raise ValueError(
                f"snapshot {snapshot_id} outside the log [{self.start_offset}, {self.end_offset}]"
            )
        if kraft_records and not snapshot_kraft_records(data):
            data = with_kraft_records(data, kraft_records)
        self._write_snapshot(snapshot_id, data)

    def snapshot_kraft_records(self, snapshot_id: OffsetAndEpoch) -> tuple:
        """The KRaftVersionRecord and VotersRecord of a snapshot's header batch."""
        path = self._snapshots.get(snapshot_id)
        if path is None:
            return ()
        with open(path, "rb") as f:
            # The header batch holds the header and at most the two KRaft
            # records; one voter set fits well within the first read.
            data = f.read(_READ_CHUNK_BYTES)
        return snapshot_kraft_records(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A follower replaces its whole log with a snapshot fetched from the
        leader. The snapshot is published first: a crash before the log is
        replaced is finished by open()."""
        self._write_snapshot(snapshot_id, data)
        with self._flush_lock:
            self._log.truncate_fully_and_start_at(snapshot_id.offset)
        self._start_epoch = snapshot_id.epoch

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Move the log start to the snapshot; delete the segments wholly
        below it and the older snapshots."""
        if snapshot_id not in self._snapshots or snapshot_id.offset <= self.start_offset:
            return
        if snapshot_id.offset < self.end_offset:
            self.read(snapshot_id.offset, 1)  # raises unless a batch boundary
        log = self._log
        # The storage Log moves its start only up to its high watermark,
        # which Raft tracks itself; the snapshot is committed by definition.
        log.update_high_watermark(log.log_end_offset)
        with self._flush_lock:
            log.maybe_increment_log_start_offset(snapshot_id.offset)
            log.delete_segments_below_log_start()
        self._start_epoch = snapshot_id.epoch
        for old in [s for s in self._snapshots if s < snapshot_id]:
            os.unlink(self._snapshots.pop(old))
