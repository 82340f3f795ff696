"""Columnar decode of one uncompressed v2 batch vs aiokafka's compiled codec.

Workload (bench/conftest.py make_workload): 1000 records, 10-byte keys,
100-byte values, in one uncompressed batch built by kfast.

  batch_columnar_kfast         decode_columnar: every record's offset,
                               timestamp, timestamp type, key/value position
                               and length as columns (CRC-32C checked)
  batch_columnar_kfast_arrow   the same, as a pyarrow.RecordBatch of Spark's
                               Kafka types (keys and values gathered into
                               Arrow binary columns)
  batch_columnar_aiokafka      aiokafka's Cython DefaultRecordBatch: iterate
                               and touch offset, timestamp, key, value

    python3 -m pytest bench/test_codec_columnar.py --benchmark-only -k batch_columnar

extra_info["records_per_s"] is records per second of the fastest round
(bench/conftest.py record_rate).
"""

import aiokafka.record._crecords as aiokafka_records
import pytest
from conftest import WORKLOAD_BASE_TIMESTAMP, record_rate

from kfast._ext.columnar import decode_columnar
from kfast.records import RecordBatchBuilder

assert aiokafka_records.default_records.__file__.endswith(".so"), (
    "aiokafka's compiled codec is required"
)


@pytest.fixture(scope="module")
def batch(workload):
    builder = RecordBatchBuilder()
    for i, (key, value) in enumerate(workload):
        builder.append(WORKLOAD_BASE_TIMESTAMP + i, key, value)
    return builder.build()


def test_batch_columnar_kfast(benchmark, batch, workload):
    result = benchmark(decode_columnar, batch)
    assert len(result) == len(workload) and result.value(len(workload) - 1) == workload[-1][1]
    record_rate(benchmark, len(result))


def test_batch_columnar_kfast_arrow(benchmark, batch, workload):
    table = benchmark(decode_columnar, batch, arrow=True)
    assert table.column("key").to_pylist() == [key for key, _ in workload]
    record_rate(benchmark, table.num_rows)


def test_batch_columnar_aiokafka(benchmark, batch, workload):
    def decode_and_iterate():
        count = 0
        for record in aiokafka_records.DefaultRecordBatch(batch):
            record.offset, record.timestamp, record.key, record.value
            count += 1
        return count

    assert benchmark(decode_and_iterate) == len(workload)
    record_rate(benchmark, len(workload))
