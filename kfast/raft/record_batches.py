"""RecordBatchCodec: Raft Batches as Kafka v2 record batches, and back.

One Batch is one v2 record batch: base offset = Batch.base_offset,
partition leader epoch = Batch.epoch, one record per element of
``records``. A data record has a null key and its value is the serde's
encoding of the record (the raft layer does not know what metadata records
are); a control batch holds KRaft's control records
(kfast.raft.control_records): LeaderChangeMessage, and with KIP-853
KRaftVersionRecord and VotersRecord. The same bytes are what the metadata log
stores and what a quorum Fetch response carries.

    codec = RecordBatchCodec(serde)           # serde.encode(record) -> bytes,
    data = codec.encode(batches)              # serde.decode(bytes) -> record
    codec.decode(data) == tuple(batches)

Batches read back (``decode``, ``read_batches``) keep their bytes
(``Batch.raw``) and decode their records on first use; ``encode`` and
``encode_batch`` give a batch's own bytes back untouched when it has them,
so bytes that came from a log or a fetch leave again without a decode and
re-encode.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kfast.raft.control_records import (
    control_key,
    control_type_of,
    decode_control_record,
    encode_control_record,
)
from kfast.raft.log import Batch
from kfast.records import RecordBatchBuilder, iter_batches


class RecordSerde(NamedTuple):
    """How data records become record values and back (Kafka's RecordSerde)."""

    # The state machine's records are opaque to Raft (Any): the serde is
    # the one place that knows them.
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


class RecordBatchCodec:
    def __init__(self, serde: RecordSerde):
        self.serde = serde

    def encode_batch(self, batch: Batch, now_ms: int | None = None) -> bytes:
        if batch.raw is not None:
            return batch.raw
        now = int(time.time() * 1000) if now_ms is None else now_ms
        builder = RecordBatchBuilder(
            base_offset=batch.base_offset,
            partition_leader_epoch=batch.epoch,
            is_control=batch.is_control,
        )
        if batch.is_control:
            for record in batch.records:
                control_type, value = encode_control_record(record)
                builder.append(now, control_key(control_type), value)
        else:
            encode = self.serde.encode
            for record in batch.records:
                builder.append(now, None, encode(record))
        return builder.build()

    def decode_batch(self, record_batch) -> Batch:
        """A kfast.records batch (CRC already checked by the reader) as a
        Batch with its records decoded."""
        return Batch(
            record_batch.base_offset,
            record_batch.partition_leader_epoch,
            self._records_of(record_batch),
            record_batch.is_control,
        )

    def lazy_batch(self, record_batch, raw: bytes) -> Batch:
        """The same Batch holding ``raw`` (the record batch's bytes), its
        records decoded when first read."""
        return Batch.of_raw(
            record_batch.base_offset,
            record_batch.partition_leader_epoch,
            record_batch.is_control,
            record_batch.last_offset_delta + 1,
            raw,
            self._records_of_raw,
        )

    def _records_of_raw(self, raw: bytes) -> tuple:
        [record_batch] = iter_batches(raw)
        return self._records_of(record_batch)

    def _records_of(self, record_batch) -> tuple:
        if record_batch.is_control:
            records = []
            for record in record_batch:
                records.append(decode_control_record(control_type_of(record.key), record.value))
        else:
            decode = self.serde.decode
            records = [decode(bytes(record.value)) for record in record_batch]
        return tuple(records)

    def read_batches(self, data, allow_partial: bool = False):
        """(record batch, Batch holding its bytes) for each whole batch of ``data``."""
        view = memoryview(data)
        position = 0
        for record_batch in iter_batches(data, allow_partial=allow_partial):
            size = record_batch.size_in_bytes
            raw = bytes(view[position : position + size])
            position += size
            yield record_batch, self.lazy_batch(record_batch, raw)

    def encode(self, batches: Sequence[Batch]) -> bytes:
        now = int(time.time() * 1000)
        return b"".join(self.encode_batch(batch, now) for batch in batches)

    def decode(self, data: bytes) -> tuple[Batch, ...]:
        """Every whole batch of ``data``; a batch whose CRC does not match
        raises (a quorum member never appends damaged records)."""
        out = []
        for record_batch, batch in self.read_batches(data):
            if not record_batch.is_valid():
                raise ValueError(
                    f"record batch at offset {record_batch.base_offset} fails its CRC check"
                )
            out.append(batch)
        return tuple(out)
