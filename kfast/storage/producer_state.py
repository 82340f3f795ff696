"""Producer state for idempotence and transactions (Kafka's ProducerStateManager).

Per producer id the log keeps the epoch, the last five batches' sequence
ranges and offsets (to answer a retried batch with its original offsets), the
coordinator epoch of the last transaction marker and the first offset of the
open transaction. Ongoing transactions bound the last stable offset.

Appends follow Kafka's ProducerAppendInfo rules:
- an epoch lower than the known one -> INVALID_PRODUCER_EPOCH (client appends;
  replicated appends are taken as the leader wrote them);
- a new epoch must start at sequence 0 unless the producer had no epoch;
- the same epoch must continue the sequence (last + 1, wrapping at int32 max),
  else OUT_OF_ORDER_SEQUENCE_NUMBER; with no known epoch (state removed by
  retention or DeleteRecords) any sequence is accepted, which is why, as in
  Kafka since 2.5, UNKNOWN_PRODUCER_ID is not raised here;
- a non-transactional batch inside an open transaction -> INVALID_TXN_STATE;
- a marker with a coordinator epoch below the last one ->
  TRANSACTION_COORDINATOR_FENCED.

Snapshot file ``<offset:020d>.snapshot`` (state as of that offset):

    snapshot := version int16 (= 1), crc uint32 (CRC-32C of everything after
                it), count int32, entry*
    entry    := producerId int64, producerEpoch int16, lastSequence int32,
                lastOffset int64, offsetDelta int32, timestamp int64,
                coordinatorEpoch int32, currentTxnFirstOffset int64 (-1: none)
                                                               (46 bytes)
"""

from __future__ import annotations

import bisect
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import CONTROL_RECORD_KEY, END_TXN_MARKER_VALUE

# Who appends (the log's append kernel defines them): ORIGIN_CLIENT,
# ORIGIN_REPLICATION, ORIGIN_COORDINATOR; re-exported from here (the `as`).
from kfast._ext.log_append import ORIGIN_CLIENT as ORIGIN_CLIENT
from kfast._ext.log_append import ORIGIN_COORDINATOR as ORIGIN_COORDINATOR
from kfast._ext.log_append import ORIGIN_REPLICATION as ORIGIN_REPLICATION
from kfast._ext.log_append import LogState
from kfast.protocol.constants import INT32_MAX
from kfast.protocol.errors import (
    CorruptRecordException,
    InvalidProducerEpochException,
    InvalidTxnStateException,
    OutOfOrderSequenceException,
    TransactionCoordinatorFencedException,
)
from kfast.records import CONTROL_TYPE_ABORT, NO_PRODUCER_EPOCH, NO_SEQUENCE
from kfast.storage.atomic_file import write_atomically
from kfast.storage.file_records import BatchHeaderView, BytesLike
from kfast.storage.records_access import first_record_key_value
from kfast.storage.segment import PRODUCER_SNAPSHOT_FILE_SUFFIX, filename_prefix_from_offset

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN),
        )

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[0].first_seq

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[-1].last_seq

    @property
    def last_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[-1].last_offset

    @property
    def last_offset_delta(self) -> int:
        return 0 if self.is_empty else self.batch_metadata[-1].offset_delta

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, header: BatchHeaderView) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for meta in self.batch_metadata:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


class TxnMetadata:
    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int | None = None):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class EndTransactionMarker(NamedTuple):
    """A control record: CONTROL_TYPE_ABORT or CONTROL_TYPE_COMMIT
    (kfast.records) and the coordinator epoch."""

    control_type: int
    coordinator_epoch: int


def parse_end_txn_marker(batch_view: BytesLike) -> EndTransactionMarker:
    """The COMMIT/ABORT marker of a control batch (its one record):

    key   := version int16, type int16
    value := version int16, coordinatorEpoch int32
    """
    key, value = first_record_key_value(batch_view)
    if key is None or len(key) < CONTROL_RECORD_KEY.size:
        raise CorruptRecordException("invalid control record key")
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise CorruptRecordException("invalid end transaction marker value")
    _, control_type = CONTROL_RECORD_KEY.unpack_from(key, 0)
    _, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value, 0)
    return EndTransactionMarker(control_type, coordinator_epoch)


class ProducerAppendInfo:
    """Validates and accumulates one producer's batches of one append."""

    def __init__(
        self,
        topic_partition: str,
        producer_id: int,
        current: ProducerStateEntry | None,
        origin: str,
    ):
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.origin = origin
        self.current = current or ProducerStateEntry(producer_id)
        self.updated = self.current.copy()
        # The batches of this append only; merged into the entry by to_entry().
        self.updated.batch_metadata = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch and self.origin != ORIGIN_REPLICATION:
            raise InvalidProducerEpochException(
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {epoch}, which is smaller than the last seen epoch "
                f"{self.updated.producer_epoch}"
            )

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceException(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.topic_partition}: {epoch} (request "
                    f"epoch), {first_seq} (seq. number), {self.updated.producer_epoch} "
                    f"(current producer epoch)"
                )
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        if not (
            self.current.producer_epoch == NO_PRODUCER_EPOCH
            or in_sequence(current_last_seq, first_seq)
        ):
            raise OutOfOrderSequenceException(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {first_seq} (incoming seq. "
                f"number), {current_last_seq} (current end sequence number)"
            )

    def append(
        self, header: BatchHeaderView, batch_view: BytesLike | None = None
    ) -> CompletedTxn | None:
        """Apply one batch (offsets already assigned); returns the completed
        transaction when the batch is a COMMIT/ABORT marker."""
        if header.is_control:
            if batch_view is None:
                raise ValueError("a control batch needs its bytes")
            marker = parse_end_txn_marker(batch_view)
            return self.append_end_txn_marker(
                marker, header.producer_epoch, header.base_offset, header.max_timestamp
            )
        self.append_data_batch(
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            header.max_timestamp,
            header.base_offset,
            header.last_offset,
            header.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if is_transactional:
            if self.updated.current_txn_first_offset is None:
                self.updated.current_txn_first_offset = first_offset
                self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))
        elif self.updated.current_txn_first_offset is not None:
            raise InvalidTxnStateException(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}"
            )

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn:
        self._check_producer_epoch(epoch, offset)
        if (
            self.updated.coordinator_epoch > marker.coordinator_epoch
            and self.origin != ORIGIN_REPLICATION
        ):
            raise TransactionCoordinatorFencedException(
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset} "
                f"in partition {self.topic_partition}: {marker.coordinator_epoch} (zombie), "
                f"{self.updated.coordinator_epoch} (current)"
            )
        first_offset = self.updated.current_txn_first_offset
        if first_offset is None:
            first_offset = offset
        if epoch != self.updated.producer_epoch:
            self.updated.batch_metadata.clear()
            self.updated.producer_epoch = epoch
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = timestamp
        return CompletedTxn(
            self.producer_id,
            first_offset,
            offset,
            marker.control_type == CONTROL_TYPE_ABORT,
        )

    def to_entry(self) -> ProducerStateEntry:
        """The producer's state after this append (earlier batches kept)."""
        entry = self.updated.copy()
        if self.current.producer_epoch == entry.producer_epoch:
            merged = deque(self.current.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)
            merged.extend(entry.batch_metadata)
            entry.batch_metadata = merged
        return entry


class VerificationGuard:
    """A token for one verification of one producer's first transactional
    write to a partition (KIP-890): the append goes ahead only with the
    guard the partition still holds, so a verification answered after the
    transaction ended (its marker cleared the state) cannot let a stale
    write start a transaction no coordinator knows. Compared by identity."""

    __slots__ = ()


class VerificationStateEntry:
    """A producer's verification in progress (Kafka's VerificationStateEntry):
    its guard, and the lowest sequence (of the newest epoch) asking, so that
    pipelined later batches cannot be written before it."""

    __slots__ = ("timestamp", "guard", "lowest_sequence", "epoch")

    def __init__(self, timestamp: int, sequence: int, epoch: int):
        self.timestamp = timestamp
        self.guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def update(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch, or any of a newer epoch, is
        the one to be written first now."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerStateManager:
    def __init__(
        self,
        log_dir: str,
        topic_partition: str = "",
        producer_id_expiration_ms: int = 86400000,
        log_state: LogState | None = None,
    ):
        """``log_state``: the log's C fields, whose _first_unstable_offset
        this keeps equal to first_unstable_offset() (LogState.last_stable_offset
        reads it there, without a Python object per partition read)."""
        self.log_state = log_state
        self.log_dir = log_dir
        self.topic_partition = topic_partition
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # first offset -> TxnMetadata, for open transactions and for completed
        # ones the high watermark has not passed yet.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, CompletedTxn] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        # producer id -> its transaction verification in progress (KIP-890).
        self.verification_states: dict[int, VerificationStateEntry] = {}

    # -- transaction verification (KIP-890) -----------------------------------
    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """Whether the producer has a transaction open here -- at
        ``producer_epoch`` when given: with transaction version 2 a batch at
        a newer epoch belongs to the next transaction, whose previous one may
        still wait for its marker (Kafka's UnifiedLog.hasOngoingTransaction)."""
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and (producer_epoch is None or entry.producer_epoch == producer_epoch)
        )

    def maybe_create_verification_state(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(
                now_ms, sequence, epoch
            )
        else:
            entry.update(sequence, epoch)
        return entry

    def clear_verification_state(self, producer_id: int) -> None:
        """A transactional batch or marker of the producer was written: its
        transaction is ongoing, or over."""
        self.verification_states.pop(producer_id, None)

    # -- appends ------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def find_duplicate(self, header: BatchHeaderView) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return None if entry is None else entry.find_duplicate_batch(header)

    def prepare_update(self, producer_id: int, origin: str = ORIGIN_CLIENT) -> ProducerAppendInfo:
        return ProducerAppendInfo(
            self.topic_partition, producer_id, self.producers.get(producer_id), origin
        )

    def update(self, info: ProducerAppendInfo) -> None:
        self.producers[info.producer_id] = info.to_entry()
        if info.started_transactions:
            for txn in info.started_transactions:
                self._ongoing[txn.first_offset] = txn
            self._publish_first_unstable()

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def complete_txn(self, txn: CompletedTxn) -> None:
        if self._ongoing.pop(txn.first_offset, None) is None:
            return  # a marker with no data (e.g. an empty aborted transaction)
        # Complete but not yet below the high watermark: still unstable.
        self._unreplicated[txn.first_offset] = txn
        self._publish_first_unstable()

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first offset of another
        open transaction, else the offset after its marker (for .txnindex)."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if not self._unreplicated:
            return  # the common case: every append of a non-transactional producer
        for first in [f for f, t in self._unreplicated.items() if t.last_offset < high_watermark]:
            del self._unreplicated[first]
        self._publish_first_unstable()

    def first_unstable_offset(self) -> int | None:
        if not self._ongoing and not self._unreplicated:
            return None  # the common case, asked by every read_committed fetch
        candidates = list(self._ongoing) + list(self._unreplicated)
        return min(candidates) if candidates else None

    def _publish_first_unstable(self) -> None:
        """After every change to the two maps: the log's copy (log_state)."""
        if self.log_state is not None:
            first = self.first_unstable_offset()
            self.log_state._first_unstable_offset = -1 if first is None else first

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    @property
    def ongoing_transactions(self) -> dict[int, TxnMetadata]:
        return dict(self._ongoing)

    def remove_expired_producers(self, now_ms: int) -> None:
        for pid in [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]:
            del self.producers[pid]
        # Verifications never answered (Kafka expires them with the producers).
        for pid in [
            pid
            for pid, e in self.verification_states.items()
            if now_ms - e.timestamp >= self.producer_id_expiration_ms
        ]:
            del self.verification_states[pid]

    # -- snapshots ------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(
            self.log_dir, filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX
        )

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.log_dir):
            if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    offsets.append(int(name[: -len(PRODUCER_SNAPSHOT_FILE_SUFFIX)]))
                except ValueError:
                    continue
        return sorted(offsets)

    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write the state at map_end_offset (if not written yet)."""
        if self.map_end_offset <= self.last_snapshot_offset and os.path.exists(
            self.snapshot_path(self.map_end_offset)
        ):
            return None
        path = self.snapshot_path(self.map_end_offset)
        write_snapshot(path, self.producers.values(), sync=sync)
        self.last_snapshot_offset = self.map_end_offset
        return path

    def load_snapshot(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for entry in read_snapshot(self.snapshot_path(offset)):
            self.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                first = entry.current_txn_first_offset
                self._ongoing[first] = TxnMetadata(entry.producer_id, first)
        self._publish_first_unstable()
        self.map_end_offset = offset
        self.last_snapshot_offset = offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int | None:
        """Drop snapshots outside [log_start_offset, log_end_offset] and load
        the latest remaining one; returns its offset (None: start empty at
        log_start_offset). The caller replays the log from there."""
        for offset in self.snapshot_offsets():
            if offset < log_start_offset or offset > log_end_offset:
                _unlink(self.snapshot_path(offset))
        while True:
            offsets = self.snapshot_offsets()
            if not offsets:
                self.truncate_fully_and_start_at(log_start_offset)
                return None
            try:
                self.load_snapshot(offsets[-1])
                return offsets[-1]
            except CorruptRecordException:
                _unlink(self.snapshot_path(offsets[-1]))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._publish_first_unstable()
        for snapshot in self.snapshot_offsets():
            _unlink(self.snapshot_path(snapshot))
        self.map_end_offset = offset
        self.last_snapshot_offset = offset

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                _unlink(self.snapshot_path(snapshot))

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget producers whose last write is below the new log start."""
        for pid in [
            p
            for p, e in self.producers.items()
            if e.current_txn_first_offset is None and e.last_data_offset < log_start_offset
        ]:
            del self.producers[pid]
        for first in [f for f, t in self._unreplicated.items() if t.last_offset < log_start_offset]:
            del self._unreplicated[first]
        self._publish_first_unstable()
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def snapshot_offset_at_or_before(self, offset: int) -> int | None:
        offsets = self.snapshot_offsets()
        i = bisect.bisect_right(offsets, offset)
        return offsets[i - 1] if i else None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = [struct.pack(">i", 0)]
    count = 0
    for entry in entries:
        last = entry.batch_metadata[-1] if entry.batch_metadata else None
        body.append(
            _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                last.offset_delta if last else 0,
                entry.last_timestamp,
                entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
        )
        count += 1
    body[0] = struct.pack(">i", count)
    payload = b"".join(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(payload)) + payload


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerStateEntry]:
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptRecordException(f"Snapshot file {path} is truncated")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordException(f"Snapshot contained an unknown file version {version}")
    if crc32c(memoryview(data)[6:]) != crc:
        raise CorruptRecordException(f"Snapshot is corrupt (CRC is no longer valid) {path}")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size != len(data):
        raise CorruptRecordException(f"Snapshot file {path} has a bad entry count {count}")
    entries = []
    for i in range(count):
        (
            pid,
            epoch,
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
            coordinator_epoch,
            txn_first,
        ) = _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
        entry = ProducerStateEntry(
            pid, epoch, coordinator_epoch, timestamp, None if txn_first < 0 else txn_first
        )
        if last_offset >= 0:
            entry.batch_metadata.append(
                BatchMetadata(last_seq, last_offset, offset_delta, timestamp)
            )
        entries.append(entry)
    return entries


def write_snapshot(path: str, entries: Iterable[ProducerStateEntry], sync: bool = True) -> None:
    write_atomically(path, encode_snapshot(entries), sync)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        return decode_snapshot(f.read(), path)
