"""RecordBatchCodec: Raft Batches as Kafka v2 record batches, and back.

One Batch is one v2 record batch: base offset = Batch.base_offset,
partition leader epoch = Batch.epoch, one record per element of
``records``. A data record has a null key and its value is the serde's
encoding of the record (the raft layer does not know what metadata records
are); a control batch holds LeaderChangeMessage control records
(kfast.raft.control_records). The same bytes are what the metadata log
stores and what a quorum Fetch response carries.

    codec = RecordBatchCodec(serde)           # serde.encode(record) -> bytes,
    data = codec.encode(batches)              # serde.decode(bytes) -> record
    codec.decode(data) == tuple(batches)
"""
from __future__ import annotations

import time
from typing import NamedTuple, Sequence

from kfast.raft.control_records import (
    LEADER_CHANGE,
    control_key,
    control_type_of,
    decode_leader_change,
    encode_leader_change,
)
from kfast.raft.log import Batch, LeaderChangeMessage
from kfast.records import RecordBatchBuilder, iter_batches


class RecordSerde(NamedTuple):
    """How data records become record values and back (Kafka's RecordSerde)."""
    encode: object
    decode: object


class RecordBatchCodec:
    def __init__(self, serde):
        self.serde = serde

    def encode_batch(self, batch: Batch, now_ms: int | None = None) -> bytes:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        builder = RecordBatchBuilder(base_offset=batch.base_offset,
                                     partition_leader_epoch=batch.epoch,
                                     is_control=batch.is_control)
        if batch.is_control:
            for record in batch.records:
                if not isinstance(record, LeaderChangeMessage):
                    raise ValueError(f"a control batch holds LeaderChangeMessages, not {record!r}")
                builder.append(now, control_key(LEADER_CHANGE), encode_leader_change(record))
        else:
            encode = self.serde.encode
            for record in batch.records:
                builder.append(now, None, encode(record))
        return builder.build()

    def decode_batch(self, record_batch) -> Batch:
        """A kfast.records batch (CRC already checked by the reader) as a Batch."""
        if record_batch.is_control:
            records = []
            for record in record_batch:
                control_type = control_type_of(record.key)
                if control_type != LEADER_CHANGE:
                    raise ValueError(f"control type {control_type} at offset {record.offset} "
                                     f"of the metadata log")
                records.append(decode_leader_change(record.value))
        else:
            decode = self.serde.decode
            records = [decode(bytes(record.value)) for record in record_batch]
        return Batch(record_batch.base_offset, record_batch.partition_leader_epoch,
                     tuple(records), record_batch.is_control)

    def encode(self, batches: Sequence[Batch]) -> bytes:
        now = int(time.time() * 1000)
        return b"".join(self.encode_batch(batch, now) for batch in batches)

    def decode(self, data: bytes) -> tuple[Batch, ...]:
        """Every whole batch of ``data``; a batch whose CRC does not match
        raises (a quorum member never appends damaged records)."""
        out = []
        for record_batch in iter_batches(data):
            if not record_batch.is_valid():
                raise ValueError(f"record batch at offset {record_batch.base_offset} fails its "
                                 f"CRC check")
            out.append(self.decode_batch(record_batch))
        return tuple(out)
