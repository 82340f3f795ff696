"""Record batches for storage tests, built by an independent codec (kafka-python)."""

import struct
import time

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder


def now_ms() -> int:
    return int(time.time() * 1000)


def make_batch(
    count: int = 1,
    value_size: int = 10,
    *,
    timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: int = 0,
    values=None,
    timestamps=None,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    ts = now_ms() if timestamp is None else timestamp
    for i in range(count):
        value = values[i] if values is not None else (b"v%d-" % i).ljust(value_size, b"x")
        builder.append(
            i,
            timestamp=timestamps[i] if timestamps else ts,
            key=b"k%d" % i,
            value=value,
            headers=[],
        )
    return bytes(builder.build())


def make_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    builder.append(
        0,
        timestamp=now_ms() if timestamp is None else timestamp,
        key=struct.pack(">hh", 0, 1 if commit else 0),
        value=struct.pack(">hi", 0, coordinator_epoch),
        headers=[],
    )
    data = bytearray(builder.build())
    attributes = struct.unpack_from(">h", data, 21)[0] | 0x20
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def batch_offsets(data: bytes):
    """(base_offset, last_offset) of each batch in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        delta = struct.unpack_from(">i", data, pos + 23)[0]
        out.append((base, base + delta))
        pos += 12 + length
    return out


def record_values(data: bytes):
    """[(offset, value)] of every record in ``data`` (decoded by kafka-python)."""
    from kafka.record.default_records import DefaultRecordBatch

    out = []
    pos = 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if pos + 12 + length > len(data):
            break  # partial trailing batch, as fetch responses may have
        batch = DefaultRecordBatch(data[pos : pos + 12 + length])
        for record in batch:
            out.append((record.offset, record.value))
        pos += 12 + length
    return out
