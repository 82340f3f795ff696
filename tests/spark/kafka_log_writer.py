"""Test fixture: write Kafka-layout partition logs, independently of kfast.

Batches are built by kafka-python's DefaultRecordBatchBuilder (an independent
implementation of the v2 format), then patched here the way a broker patches
them (base offset; LogAppendTime) or compressed with kfast.compression (whose
codecs have their own tests), the CRC-32C recomputed with the crc32c package.
Each append returns the rows Spark's Kafka source would give for it.
"""

import os
import struct
from dataclasses import dataclass, field

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kfast.compression import compress

ATTRIBUTES_AT, CRC_AT, MAX_TIMESTAMP_AT, RECORDS_AT = 21, 17, 35, 61
TIMESTAMP_TYPE_BIT, CONTROL_BIT = 0x08, 0x20


def _recrc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(bytes(batch[ATTRIBUTES_AT:])))
    return batch


def build_batch(
    base_offset, records, *, codec=0, log_append_time=None, transactional=False, control=False
) -> bytearray:
    """records: (timestamp, key, value, headers) tuples."""
    builder = DefaultRecordBatchBuilder(
        2,
        0,
        1 if transactional or control else 0,
        1000 if transactional or control else -1,
        0 if transactional or control else -1,
        -1 if control else 0,
        1 << 30,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records):
        builder.append(delta, timestamp, key, value, headers)
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES_AT)[0]
    if codec:
        payload = compress(codec, bytes(batch[RECORDS_AT:]))
        batch = batch[:RECORDS_AT] + payload
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        attributes |= codec
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_BIT
        struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, log_append_time)
    if control:
        attributes |= CONTROL_BIT
    struct.pack_into(">h", batch, ATTRIBUTES_AT, attributes)
    return _recrc(batch)


@dataclass
class PartitionLogWriter:
    """Appends batches to ``<log_dir>/<topic>-<partition>/`` segment by segment."""

    log_dir: str
    topic: str
    partition: int
    next_offset: int = 0
    rows: list[dict] = field(default_factory=list)  # every data record written
    _segment_base: int | None = None
    _segment_size: int = 0
    _index: bytearray = field(default_factory=bytearray)

    def __post_init__(self):
        self.dir = os.path.join(self.log_dir, f"{self.topic}-{self.partition}")
        os.makedirs(self.dir, exist_ok=True)
        self.roll()

    def _path(self, suffix):
        return os.path.join(self.dir, f"{self._segment_base:020d}{suffix}")

    def roll(self, *, preallocated_index_tail: int = 0):
        """Close the current segment (writing its index) and start another."""
        if self._segment_base is not None:
            with open(self._path(".index"), "wb") as f:
                f.write(self._index + bytes(8 * preallocated_index_tail))
        self._segment_base = self.next_offset
        self._segment_size = 0
        self._index = bytearray()
        open(self._path(".log"), "wb").close()

    def _write(self, batch: bytes, last_offset: int):
        # Index every batch but the first of a segment (Kafka never indexes the
        # first), so that reads seek through the index.
        if self._segment_size:
            self._index += struct.pack(">ii", last_offset - self._segment_base, self._segment_size)
        with open(self._path(".log"), "ab") as f:
            f.write(batch)
        self._segment_size += len(batch)

    def append(
        self, records, *, codec=0, log_append_time=None, transactional=False, offset_gap=0
    ) -> list[dict]:
        """Append one batch; ``offset_gap`` skips offsets first (as compaction leaves)."""
        self.next_offset += offset_gap
        base = self.next_offset
        batch = build_batch(
            base, records, codec=codec, log_append_time=log_append_time, transactional=transactional
        )
        self._write(batch, base + len(records) - 1)
        rows = [
            {
                "key": key,
                "value": value,
                "topic": self.topic,
                "partition": self.partition,
                "offset": base + i,
                "timestamp_ms": log_append_time if log_append_time is not None else timestamp,
                "timestampType": 1 if log_append_time is not None else 0,
                "headers": [(k, v) for k, v in headers] or None,
            }
            for i, (timestamp, key, value, headers) in enumerate(records)
        ]
        self.rows.extend(rows)
        self.next_offset = base + len(records)
        return rows

    def append_legacy(self, magic, records, *, codec=0) -> list[dict]:
        """Append legacy messages (magic 0/1, Kafka before 0.11): one message
        per record, or with ``codec`` one compressed wrapper message whose
        offset is its last inner message's (inner offsets relative in v1)."""
        base = self.next_offset
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
        for i, (timestamp, key, value, _) in enumerate(records):
            builder.append(i if codec else base + i, timestamp if magic else None, key, value)
        entry = bytearray(builder.build())
        if codec:
            struct.pack_into(">q", entry, 0, base + len(records) - 1)  # not CRC-covered
        self._write(bytes(entry), base + len(records) - 1)
        rows = [
            {
                "key": key,
                "value": value,
                "topic": self.topic,
                "partition": self.partition,
                "offset": base + i,
                "timestamp_ms": timestamp if magic else -1,
                "timestampType": 0 if magic else -1,
                "headers": None,
            }
            for i, (timestamp, key, value, _) in enumerate(records)
        ]
        self.rows.extend(rows)
        self.next_offset = base + len(records)
        return rows

    def append_control(self, commit=True):
        """A transaction marker: takes an offset, is no record for consumers."""
        key = struct.pack(">hh", 0, 1 if commit else 0)
        value = struct.pack(">hi", 0, 7)
        self._write(
            build_batch(self.next_offset, [(0, key, value, [])], control=True), self.next_offset
        )
        self.next_offset += 1

    def close(self):
        with open(self._path(".index"), "wb") as f:
            f.write(self._index)

    def append_torn_tail(self, records):
        """Half a batch at the end, as an unclean shutdown leaves one."""
        batch = build_batch(self.next_offset, records)
        with open(self._path(".log"), "ab") as f:
            f.write(batch[: len(batch) // 2])


def records(
    n,
    *,
    start=0,
    key=lambda i: f"k{i}".encode(),
    headers=lambda i: [],
    timestamp=lambda i: 1_700_000_000_000 + i,
):
    return [
        (timestamp(start + i), key(start + i), f"value-{start + i}".encode(), headers(start + i))
        for i in range(n)
    ]
