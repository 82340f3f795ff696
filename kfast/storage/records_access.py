"""Record-level reads storage needs: timestamp lookup, control markers, dump-log.

Storage works on batch headers; only ListOffsets-by-timestamp, transaction
markers and the dump-log tool look inside a batch. They go through the codec
(``kfast.records``), the one implementation of the record grammar.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from kfast._ext.layout import CURRENT_MAGIC, MAGIC_OFFSET
from kfast.records import RecordBatch, decode_message_set
from kfast.storage.file_records import BytesLike

if TYPE_CHECKING:
    from typing_extensions import Buffer


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _bytes(value: Buffer | None) -> bytes | None:
    return None if value is None else bytes(value)


def iter_records(batch_view: BytesLike) -> Iterator[Record]:
    """Records of one whole batch (``batch_view`` starts at its baseOffset),
    decompressed if needed; a legacy (magic 0/1) message is unwrapped. The
    codec raises CorruptRecordException on bad bytes."""
    if batch_view[MAGIC_OFFSET] < CURRENT_MAGIC:
        for message in decode_message_set(batch_view):
            yield Record(
                message.offset, message.timestamp, _bytes(message.key), _bytes(message.value), []
            )
        return
    for record in RecordBatch(batch_view, 0):
        yield Record(
            record.offset,
            record.timestamp,
            _bytes(record.key),
            _bytes(record.value),
            [(k, _bytes(v)) for k, v in record.headers],
        )


def first_record_at_or_after(
    batch_view: BytesLike, timestamp: int, starting_offset: int
) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record of the batch with
    timestamp >= ``timestamp`` and offset >= ``starting_offset``, or None."""
    records = (
        iter_records(batch_view)
        if batch_view[MAGIC_OFFSET] < CURRENT_MAGIC
        else RecordBatch(batch_view, 0)
    )
    for record in records:
        if record.timestamp >= timestamp and record.offset >= starting_offset:
            return record.timestamp, record.offset
    return None


def first_record_key_value(batch_view: BytesLike) -> tuple[bytes | None, bytes | None]:
    """Key and value of a batch's first record (control batches hold one)."""
    for record in RecordBatch(batch_view, 0):
        return _bytes(record.key), _bytes(record.value)
    return None, None
