"""Record batches (Kafka's v2 on-disk and on-wire bytes) to Arrow rows of
Spark's Kafka schema.

Both sources end here: the offline reader with bytes read from segment
files, the broker reader with the records of a Fetch response. Decoding is
kfast's columnar decoder (the broker's own codec, in Cython); this module only
adds what a Kafka *consumer* adds on top of the log:

- control batches (transaction markers) are not records: the decoder leaves
  them out;
- batches straddle the requested range, so rows outside ``[start, end)`` are
  cut off (a zero-copy slice: offsets grow within a partition);
- a record without headers has ``headers = null`` in Spark, not ``[]``;
- ``topic`` and ``partition`` are constant columns.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from kfast.records import decode_columnar, decode_message_set
from kfast_spark.schema import HEADERS_ARROW_TYPE, arrow_schema


def records_to_arrow(
    buffer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    *,
    check_crc: bool = True,
) -> pa.RecordBatch | None:
    """Rows of the records in ``buffer`` (concatenated v2 batches of one
    partition) whose offsets are in ``[start, end)``, or None if there are
    none. A trailing partial batch is ignored, as a consumer ignores one at the
    end of a fetch; corrupt batches raise CorruptRecordException (with
    ``check_crc=False``, the consumer's ``check.crcs=false``, a wrong CRC-32C
    alone is not looked for)."""
    decoded = decode_columnar(
        buffer, arrow=True, include_headers=include_headers, check_crc=check_crc
    )
    offsets = decoded.column("offset")
    first = pc.sum(pc.less(offsets, start)).as_py() or 0
    last = pc.sum(pc.less(offsets, end)).as_py() or 0
    if last <= first:
        return None
    decoded = decoded.slice(first, last - first)
    count = decoded.num_rows
    columns = [
        decoded.column("key"),
        decoded.column("value"),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        decoded.column("offset"),
        decoded.column("timestamp"),
        decoded.column("timestampType"),
    ]
    if include_headers:
        columns.append(_null_when_empty(decoded.column("headers")))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def message_set_to_arrow(
    buffer, topic: str, partition: int, start: int, end: int, include_headers: bool
) -> pa.RecordBatch | None:
    """The same for a legacy message set (magic 0/1, logs written before Kafka
    0.11), record by record: such logs are old and rare, not a hot path.
    Magic 0 messages have no timestamp: -1 and timestampType -1, as a Kafka
    consumer reports them."""
    wanted = [r for r in decode_message_set(buffer) if start <= r.offset < end]
    if not wanted:
        return None
    count = len(wanted)
    columns = [
        pa.array([None if r.key is None else bytes(r.key) for r in wanted], pa.binary()),
        pa.array([None if r.value is None else bytes(r.value) for r in wanted], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array([r.offset for r in wanted], pa.int64()),
        pa.array([r.timestamp * 1000 for r in wanted], pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in wanted], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.nulls(count, HEADERS_ARROW_TYPE))  # legacy messages have none
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _null_when_empty(headers: pa.ListArray) -> pa.ListArray:
    # Spark's Kafka source gives a record without headers a null array.
    lengths = pc.list_value_length(headers)
    empty = pc.equal(lengths, 0)
    if not pc.any(empty).as_py():
        return headers
    return pc.if_else(empty, pa.scalar(None, headers.type), headers)
