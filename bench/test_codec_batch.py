"""Record batch v2 codec: kfast vs aiokafka (compiled _crecords) vs kafka-python.

Workload (bench/conftest.py): one uncompressed batch of 1000 records,
10-byte keys, 100-byte values.

  batch_decode    decode and iterate, touching offset, timestamp, key, value
  batch_build     append 1000 records and build the batch
  batch_validate  kfast's full validate() (CRC + every record walked), and
                  validate(check_records=False) (header + CRC), vs the crc32c
                  package's CRC alone over the same bytes 21..end

Run: python3 -m pytest bench/test_codec_batch.py --benchmark-only
"""

import aiokafka.record._crecords as aiokafka_records
import crc32c
import pytest
from conftest import WORKLOAD_BASE_TIMESTAMP, byte_rate, record_rate
from kafka.record.default_records import (
    DefaultRecordBatch as KafkaPythonBatch,
)
from kafka.record.default_records import (
    DefaultRecordBatchBuilder as KafkaPythonBuilder,
)

from kfast.records import RecordBatch, RecordBatchBuilder

assert aiokafka_records.default_records.__file__.endswith(".so"), (
    "aiokafka's compiled codec is required"
)


@pytest.fixture(scope="module")
def batch_bytes(workload):
    builder = RecordBatchBuilder()
    for i, (key, value) in enumerate(workload):
        builder.append(WORKLOAD_BASE_TIMESTAMP + i, key, value)
    return builder.build()


# ---------------------------------------------------------------- decode
def _decode_kfast(data):
    n = 0
    for record in RecordBatch(data):
        record.offset, record.timestamp, record.key, record.value
        n += 1
    return n


def _decode_aiokafka(data):
    n = 0
    for record in aiokafka_records.DefaultRecordBatch(data):
        record.offset, record.timestamp, record.key, record.value
        n += 1
    return n


def _decode_kafka_python(data):
    n = 0
    for record in KafkaPythonBatch(data):
        record.offset, record.timestamp, record.key, record.value
        n += 1
    return n


@pytest.mark.benchmark(group="batch_decode")
def test_batch_decode_kfast(benchmark, batch_bytes, workload):
    assert benchmark(_decode_kfast, batch_bytes) == len(workload)
    record_rate(benchmark, len(workload))


@pytest.mark.benchmark(group="batch_decode")
def test_batch_decode_aiokafka(benchmark, batch_bytes, workload):
    assert benchmark(_decode_aiokafka, batch_bytes) == len(workload)
    record_rate(benchmark, len(workload))


@pytest.mark.benchmark(group="batch_decode")
def test_batch_decode_kafka_python(benchmark, batch_bytes, workload):
    assert benchmark(_decode_kafka_python, batch_bytes) == len(workload)
    record_rate(benchmark, len(workload))


# ---------------------------------------------------------------- build
def _build_kfast(workload):
    builder = RecordBatchBuilder()
    append = builder.append
    ts = WORKLOAD_BASE_TIMESTAMP
    for key, value in workload:
        append(ts, key, value)
    return builder.build()


def _build_aiokafka(workload):
    builder = aiokafka_records.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**30)
    append = builder.append
    ts = WORKLOAD_BASE_TIMESTAMP
    for offset, (key, value) in enumerate(workload):
        append(offset, ts, key, value, [])
    return bytes(builder.build())


def _build_kafka_python(workload):
    builder = KafkaPythonBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    append = builder.append
    ts = WORKLOAD_BASE_TIMESTAMP
    for offset, (key, value) in enumerate(workload):
        append(offset, ts, key, value, [])
    return bytes(builder.build())


@pytest.mark.benchmark(group="batch_build")
def test_batch_build_kfast(benchmark, workload):
    data = benchmark(_build_kfast, workload)
    assert RecordBatch(data).records_count == len(workload)
    record_rate(benchmark, len(workload))


@pytest.mark.benchmark(group="batch_build")
def test_batch_build_aiokafka(benchmark, workload):
    data = benchmark(_build_aiokafka, workload)
    assert RecordBatch(data).records_count == len(workload)
    record_rate(benchmark, len(workload))


@pytest.mark.benchmark(group="batch_build")
def test_batch_build_kafka_python(benchmark, workload):
    data = benchmark(_build_kafka_python, workload)
    assert RecordBatch(data).records_count == len(workload)
    record_rate(benchmark, len(workload))


# ---------------------------------------------------------------- validate
def _validate_kfast(data):
    RecordBatch(data).validate()


@pytest.mark.benchmark(group="batch_validate")
def test_batch_validate_kfast(benchmark, batch_bytes):
    benchmark(_validate_kfast, batch_bytes)
    byte_rate(benchmark, len(batch_bytes) - 21)


def _validate_kfast_header_crc(data):
    RecordBatch(data).validate(check_records=False)


@pytest.mark.benchmark(group="batch_validate")
def test_batch_validate_kfast_header_crc(benchmark, batch_bytes):
    """validate(check_records=False): header rules + CRC (docs/architecture.md: produce)."""
    benchmark(_validate_kfast_header_crc, batch_bytes)
    byte_rate(benchmark, len(batch_bytes) - 21)


@pytest.mark.benchmark(group="batch_validate")
def test_batch_validate_crc32c(benchmark, batch_bytes):
    covered = memoryview(batch_bytes)[21:]
    assert benchmark(crc32c.crc32c, covered) == RecordBatch(batch_bytes).crc
    byte_rate(benchmark, len(covered))
