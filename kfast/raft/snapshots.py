"""KRaft snapshot files: naming, writing and reading (Kafka's raft snapshot package).

Snapshots live next to the log segments of ``__cluster_metadata-0``, named
``<end offset %020d>-<epoch %010d>.checkpoint``: the snapshot holds the
state made by every record below its end offset, and ``epoch`` is the
epoch of the last batch it covers. A snapshot file is a sequence of v2
record batches, as a log segment, with offsets counted from 0 in the file::

    control batch   SnapshotHeaderRecord   (control type 3, kfast.raft.control_records)
                    [KRaftVersionRecord    (type 5)   with kraft.version 1 (KIP-853):
                     VotersRecord]         (type 6)   the voter set at the end offset
    data batches    the state machine's records, encoded by the caller's serde
    control batch   SnapshotFooterRecord   (control type 4)

(Kafka's RecordsSnapshotWriter: the KRaft records share the header's batch.)
The bootstrap checkpoint ``kafka-storage.sh format`` writes for a dynamic
quorum is such a file with no data batches, named for offset 0, epoch 0.

A snapshot is written to ``.checkpoint.part``, fsynced and renamed
(kfast.storage.atomic_file), so a crash leaves either the whole file or
none; a file without its header or footer is not a snapshot.
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from kfast.raft.control_records import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    control_batch,
    control_key,
    control_type_of,
    decode_control_record,
    encode_control_record,
    encode_snapshot_footer,
    encode_snapshot_header,
)
from kfast.raft.log import OffsetAndEpoch
from kfast.records import RecordBatchBuilder, iter_batches
from kfast.storage.atomic_file import atomic_writer

if TYPE_CHECKING:
    from typing_extensions import Buffer

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
# Records per data batch: bounds the size of one batch (Kafka's snapshot
# writer batches by bytes, metadata.max.batch.size.bytes).
RECORDS_PER_BATCH = 1000
# The snapshot a dynamic quorum's storage is formatted with (Kafka's
# Snapshots.BOOTSTRAP_SNAPSHOT_ID).
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)
_KRAFT_TYPES = (KRAFT_VERSION, KRAFT_VOTERS)
_BASE_OFFSET = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_LENGTH_OFFSET = 8
_BATCH_OVERHEAD = 12  # baseOffset + batchLength precede the counted bytes


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> OffsetAndEpoch | None:
    match = _NAME.match(name)
    return OffsetAndEpoch(int(match.group(1)), int(match.group(2))) if match else None


def list_snapshots(directory: str) -> list[tuple[int, int, str]]:
    """(end offset, epoch, path) of every published snapshot file, oldest first."""
    out = []
    for name in os.listdir(directory):
        snapshot_id = parse_snapshot_name(name)
        if snapshot_id is not None:
            out.append((snapshot_id.offset, snapshot_id.epoch, os.path.join(directory, name)))
    return sorted(out)


def header_batch(
    epoch: int, last_contained_log_timestamp: int, now: int, kraft_records: Iterable = ()
) -> bytes:
    """The first batch of a snapshot: SnapshotHeaderRecord, then the KRaft
    records (KRaftVersionRecord, VotersRecord) if any, at offsets 0, 1, 2."""
    builder = RecordBatchBuilder(base_offset=0, partition_leader_epoch=epoch, is_control=True)
    builder.append(
        now, control_key(SNAPSHOT_HEADER), encode_snapshot_header(last_contained_log_timestamp)
    )
    for record in kraft_records:
        control_type, value = encode_control_record(record)
        builder.append(now, control_key(control_type), value)
    return builder.build()


# The state machine's record type: the snapshot functions frame records
# they never look into.
R = TypeVar("R")


def iter_snapshot_batches(
    records: Iterable[R],
    epoch: int,
    encode: Callable[[R], bytes],
    last_contained_log_timestamp: int | None = None,
    kraft_records: tuple = (),
) -> Iterator[bytes]:
    """The batches of a snapshot file holding ``records``, one after another
    (a writer streams them into the file; a whole snapshot is their join)."""
    now = int(time.time() * 1000)
    yield header_batch(epoch, last_contained_log_timestamp or now, now, kraft_records)
    offset = 1 + len(kraft_records)
    builder = None
    for record in records:
        if builder is None:
            builder = RecordBatchBuilder(base_offset=offset, partition_leader_epoch=epoch)
        builder.append(now, None, encode(record))
        if builder.records_count == RECORDS_PER_BATCH:
            yield builder.build()
            offset += builder.records_count
            builder = None
    if builder is not None:
        yield builder.build()
        offset += builder.records_count
    yield control_batch(SNAPSHOT_FOOTER, encode_snapshot_footer(), offset, epoch, now)


def snapshot_bytes(
    records: Iterable[R],
    epoch: int,
    encode: Callable[[R], bytes],
    last_contained_log_timestamp: int | None = None,
    kraft_records: tuple = (),
) -> bytes:
    """A whole snapshot file's bytes (what ReplicatedLog.create_snapshot takes)."""
    return b"".join(
        iter_snapshot_batches(records, epoch, encode, last_contained_log_timestamp, kraft_records)
    )


def snapshot_kraft_records(data) -> tuple:
    """The KRaftVersionRecord and VotersRecord of a snapshot's header batch,
    decoded, in file order (none for a kraft.version 0 snapshot)."""
    for batch in iter_batches(data):
        if not batch.is_control:
            return ()
        found = [
            decode_control_record(control_type_of(r.key), r.value)
            for r in batch
            if control_type_of(r.key) in _KRAFT_TYPES
        ]
        return tuple(found)
    return ()


def with_kraft_records(data: bytes, kraft_records: tuple) -> bytes:
    """``data``, a whole snapshot without KRaft records, with
    ``kraft_records`` put in its header batch as Kafka's snapshot writer
    places them. Later batches move up by as many offsets; only their
    baseOffset changes, which the batch CRC does not cover."""
    if not kraft_records:
        return data
    view = memoryview(data)
    first = next(iter_batches(data))
    header = next(iter(first))
    if not first.is_control or control_type_of(header.key) != SNAPSHOT_HEADER:
        raise ValueError("a snapshot starts with its SnapshotHeaderRecord batch")
    if first.records_count != 1:
        raise ValueError("the snapshot's header batch already holds more than its header")
    epoch = first.partition_leader_epoch
    if header.value is None:
        raise ValueError("the snapshot's SnapshotHeaderRecord has no value")
    _, last_timestamp = struct.unpack_from(">hq", bytes(header.value))
    out = bytearray(header_batch(epoch, last_timestamp, header.timestamp, kraft_records))
    position = first.size_in_bytes
    rest = bytearray(view[position:])
    shift = len(kraft_records)
    at = 0
    while at + _BATCH_OVERHEAD <= len(rest):
        base = _BASE_OFFSET.unpack_from(rest, at)[0]
        _BASE_OFFSET.pack_into(rest, at, base + shift)
        at += _BATCH_OVERHEAD + _BATCH_LENGTH.unpack_from(rest, at + _BATCH_LENGTH_OFFSET)[0]
    return bytes(out + rest)


def write_snapshot_file(path: str, chunks: Iterable[bytes]) -> None:
    """Publish a snapshot file atomically (blocking: write, fsync, rename)."""
    with atomic_writer(path, temp_suffix=PARTIAL_SUFFIX) as f:
        for chunk in chunks:
            f.write(chunk)


def snapshot_records(data: Buffer, decode: Callable[[bytes], R]) -> list[R] | None:
    """The data records of a snapshot file's bytes, decoded; None if the
    bytes are not a whole snapshot (bad CRC, no header first, no footer last)."""
    records: list[R] = []
    header = footer = False
    try:
        for batch in iter_batches(data):
            if not batch.is_valid() or footer:
                return None
            if batch.is_control:
                for record in batch:
                    control_type = control_type_of(record.key)
                    if control_type == SNAPSHOT_HEADER and not header:
                        header = True
                    elif control_type in _KRAFT_TYPES and header and not records:
                        continue
                    elif control_type == SNAPSHOT_FOOTER and header:
                        footer = True
                    else:
                        return None
                continue
            if not header:
                return None
            for record in batch:
                if record.value is None:
                    return None  # a data record without a value holds no state
                records.append(decode(bytes(record.value)))
    except Exception:
        # Whatever the damage (truncated batch, undecodable record), the
        # file is not a snapshot the state can be rebuilt from.
        return None
    return records if footer else None


def is_whole_snapshot(data: Buffer) -> bool:
    """Header first, footer last, every CRC right; records are not decoded."""
    return snapshot_records(data, _skip) is not None


def _skip(value: bytes) -> None:
    return None


def read_snapshot_file(path: str, decode: Callable[[bytes], R]) -> list[R] | None:
    with open(path, "rb") as f:
        return snapshot_records(f.read(), decode)
