"""Reading Kafka records into Spark: kfast's sources vs Python peers.

``--broker N``: a Spark batch read of N records (100-byte values, no keys)
from one kfast broker (in this process, 2 partitions), ``count(*),
sum(length(value))`` on local[2]: ``format("kfast")`` (kfast's client fetches
raw batches, the columnar decoder builds Arrow) vs the baseline a Python
user writes without kfast: kafka-python consumers fetch the same offset
ranges and decode them in ``mapInPandas``. Both sides read exactly the same
ranges, warm (best of ``--runs``, 3 by default; the baseline is ~20x slower,
so ``--baseline-runs`` bounds its share of the run). The offline reader,
``format("kfast-segments")`` over the same broker's log directory, is timed
with the same query.

    python3 bench/spark_read.py --broker 10000000 --baseline-runs 1

The rest reads a log directory with kfast-segments vs a naive Python decoder.

Workload: a Kafka-layout log directory written here with kfast's batch
builder: ``--partitions`` partitions of ``--records`` records each (10-byte
keys, 100-byte values), 500 records per batch, ``--codec`` compression,
segments of about 64 MiB.

Peer: the same files decoded by kafka-python's DefaultRecordBatch (pure
Python, record by record), what a Python data source without kfast's codec
would do.

  decode   (no Spark) rows per second turning one partition's segment bytes
           into Arrow batches of Spark's Kafka schema: kfast-segments'
           read_range vs kafka-python + pyarrow.array
  spark    (--spark) wall time of ``count(*), sum(length(value))`` over the
           whole directory on local[2]: format("kfast-segments") vs a Python
           data source yielding kafka-python-decoded tuples

    python3 bench/spark_read.py --records 200000 --codec gzip [--spark]

Prints rows/s and the ratio kfast / peer. Figures depend on the machine's
load; run both sides in the same run, as this script does.
"""

import argparse
import os
import pathlib
import struct
import sys
import tempfile
import time

import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "spark"), str(REPO)]

from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

from kfast.compression import CODEC_NAMES  # noqa: E402
from kfast.records import RecordBatchBuilder, patch_batch  # noqa: E402
from kfast_spark.options import TopicPartition  # noqa: E402
from kfast_spark.schema import arrow_schema  # noqa: E402
from kfast_spark.segments import list_segments, read_range  # noqa: E402

RECORDS_PER_BATCH = 500
SEGMENT_BYTES = 64 * 1024 * 1024
TOPIC = "bench"


def write_log_dir(log_dir, partitions, records, codec):
    for partition in range(partitions):
        directory = os.path.join(log_dir, f"{TOPIC}-{partition}")
        os.makedirs(directory)
        segment, size = None, 0
        for base in range(0, records, RECORDS_PER_BATCH):
            builder = RecordBatchBuilder(codec)
            for i in range(base, min(base + RECORDS_PER_BATCH, records)):
                builder.append(
                    1_700_000_000_000 + i,
                    b"key-%06d" % (i % 1_000_000),
                    (b"%08d" % i) * 12 + b"....",
                )
            batch = bytearray(builder.build())
            patch_batch(batch, 0, base, 0)
            if segment is None or size + len(batch) > SEGMENT_BYTES:
                if segment:
                    segment.close()
                segment = open(os.path.join(directory, f"{base:020d}.log"), "wb")
                size = 0
            segment.write(batch)
            size += len(batch)
        segment.close()


def naive_rows(partition_dir, topic_partition):
    """Arrow batches of one partition, decoded record by record by kafka-python."""
    for segment in list_segments(partition_dir):
        data = pathlib.Path(segment.log_path).read_bytes()
        position = 0
        while position + 12 <= len(data):
            length = struct.unpack_from(">i", data, position + 8)[0]
            batch = DefaultRecordBatch(data[position : position + 12 + length])
            position += 12 + length
            if batch.is_control_batch:
                continue
            keys, values, offsets, timestamps, types = [], [], [], [], []
            for record in batch:
                keys.append(record.key)
                values.append(record.value)
                offsets.append(record.offset)
                timestamps.append(record.timestamp * 1000)
                types.append(record.timestamp_type)
            n = len(offsets)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(keys, pa.binary()),
                    pa.array(values, pa.binary()),
                    pa.array([topic_partition.topic] * n, pa.string()),
                    pa.array([topic_partition.partition] * n, pa.int32()),
                    pa.array(offsets, pa.int64()),
                    pa.array(timestamps, pa.timestamp("us", tz="UTC")),
                    pa.array(types, pa.int32()),
                ],
                schema=arrow_schema(False),
            )


def time_rows(batches):
    started = time.perf_counter()
    rows = sum(batch.num_rows for batch in batches)
    return rows, time.perf_counter() - started


def bench_decode(log_dir, records):
    tp = TopicPartition(TOPIC, 0)
    directory = os.path.join(log_dir, f"{TOPIC}-0")
    kfast_rows, kfast_s = time_rows(read_range(directory, tp, 0, records, False))
    peer_rows, peer_s = time_rows(naive_rows(directory, tp))
    assert kfast_rows == peer_rows == records, (kfast_rows, peer_rows)
    print(
        f"decode  kfast-segments {kfast_rows / kfast_s:>12,.0f} rows/s   "
        f"kafka-python {peer_rows / peer_s:>10,.0f} rows/s   "
        f"ratio {peer_s / kfast_s:.1f}x"
    )


def bench_spark(log_dir, partitions, records):
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kfast_spark import register
    from kfast_spark.schema import KAFKA_SCHEMA
    from kfast_spark.segments import list_partition_dirs

    class NaiveReader(DataSourceReader):
        def __init__(self, path):
            self.path = path

        def partitions(self):
            return [
                InputPartition((tp.topic, tp.partition, d))
                for tp, d in sorted(list_partition_dirs(self.path).items())
            ]

        def read(self, partition):
            topic, number, directory = partition.value
            for batch in naive_rows(directory, TopicPartition(topic, number)):
                yield from zip(*(column.to_pylist() for column in batch.columns))

    class NaiveSegments(DataSource):
        @classmethod
        def name(cls):
            return "naive-segments"

        def schema(self):
            return KAFKA_SCHEMA

        def reader(self, schema):
            return NaiveReader(self.options["path"])

    os.environ["PYTHONPATH"] = os.pathsep.join(
        p
        for p in (str(REPO / "spark"), str(REPO), str(REPO / "bench"), os.environ.get("PYTHONPATH"))
        if p
    )
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(NaiveSegments)
    query = ["count(*)", "sum(length(value))"]
    timings = {}
    for name, extra in (("kfast-segments", {"subscribe": TOPIC}), ("naive-segments", {})):
        reader = spark.read.format(name).option("path", log_dir)
        for key, value in extra.items():
            reader = reader.option(key, value)
        df = reader.load().selectExpr(*query)
        # The first run pays for starting Python workers and imports; time the best of three.
        for _ in range(3):
            started = time.perf_counter()
            row = df.first()
            timings[name] = min(timings.get(name, float("inf")), time.perf_counter() - started)
            assert row[0] == partitions * records, row
    spark.stop()
    total = partitions * records
    print(
        f"spark   kfast-segments {total / timings['kfast-segments']:>12,.0f} rows/s   "
        f"naive-segments {total / timings['naive-segments']:>8,.0f} rows/s   "
        f"ratio {timings['naive-segments'] / timings['kfast-segments']:.1f}x"
    )


BROKER_TOPIC = "bench-read"
BROKER_PARTITIONS = 2


def load_broker(bootstrap_servers, records):
    """Produce ``records`` 100-byte values with kfast's producer (large lz4-free
    batches: loading is not what is measured)."""
    import asyncio

    from kfast.client import KafkaAdmin, KafkaProducer, NewTopic

    async def load():
        async with KafkaAdmin(bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(BROKER_TOPIC, BROKER_PARTITIONS, 1)])
        async with KafkaProducer(
            bootstrap_servers, acks=1, linger_ms=50, batch_size=1024 * 1024
        ) as producer:
            value = b"x" * 100
            for i in range(records):
                await producer.send(
                    BROKER_TOPIC,
                    value,
                    partition=i % BROKER_PARTITIONS,
                    timestamp_ms=1_700_000_000_000 + i,
                )
            await producer.flush()

    asyncio.run(load())


def kafka_python_read(rows):
    """mapInPandas body of the baseline: each row names a (topic, partition,
    from, until) range; kafka-python fetches and decodes it, one pandas frame
    of Spark's Kafka columns per poll."""
    import pandas as pd
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    for spec in rows:
        for topic, partition, start, end, servers in spec.itertuples(index=False):
            consumer = KafkaConsumer(
                bootstrap_servers=servers,
                enable_auto_commit=False,
                max_partition_fetch_bytes=8 * 1024 * 1024,
                fetch_max_bytes=50 * 1024 * 1024,
            )
            tp = KafkaTopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, start)
            position = start
            while position < end:
                for records in consumer.poll(timeout_ms=1000, max_records=100_000).values():
                    records = [r for r in records if r.offset < end]
                    if not records:
                        continue
                    position = records[-1].offset + 1
                    yield pd.DataFrame(
                        {
                            "key": [r.key for r in records],
                            "value": [r.value for r in records],
                            "topic": topic,
                            "partition": partition,
                            "offset": [r.offset for r in records],
                            "timestamp": pd.to_datetime(
                                [r.timestamp for r in records], unit="ms", utc=True
                            ),
                            "timestampType": [r.timestamp_type for r in records],
                        }
                    )
            consumer.close()


def best_of(runs, df, records):
    """Best wall time of ``runs`` executions of a ``count(*), sum(length(value))``
    query (the first run also pays for starting Python workers and imports)."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        row = df.first()
        best = min(best, time.perf_counter() - started)
        assert row[0] == records and row[1] == 100 * records, row
    return best


def bench_broker(records, runs=3, baseline_runs=3):
    from pyspark.sql import SparkSession

    from kfast.testing import KfastBroker
    from kfast_spark import register
    from kfast_spark.schema import KAFKA_SCHEMA

    os.environ["PYTHONPATH"] = os.pathsep.join(
        p
        for p in (str(REPO / "spark"), str(REPO), str(REPO / "bench"), os.environ.get("PYTHONPATH"))
        if p
    )
    # Retention off: the records carry 2023 timestamps, so the default 7-day
    # retention would delete them at the first retention check (5 minutes
    # in), in the middle of a 10 M-record run.
    with KfastBroker({"num.partitions": BROKER_PARTITIONS, "log.retention.ms": -1}) as broker:
        started = time.perf_counter()
        load_broker(broker.bootstrap_servers, records)
        print(f"loaded {records:,} records in {time.perf_counter() - started:.1f}s")
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        query = ["count(*)", "sum(length(value))"]
        kfast_df = (
            spark.read.format("kfast")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", BROKER_TOPIC)
            .load()
            .selectExpr(*query)
        )
        per_partition = [
            (
                BROKER_TOPIC,
                p,
                0,
                len(range(p, records, BROKER_PARTITIONS)),
                broker.bootstrap_servers,
            )
            for p in range(BROKER_PARTITIONS)
        ]
        baseline_df = (
            spark.createDataFrame(
                per_partition, "topic string, partition int, start long, end long, servers string"
            )
            .repartition(BROKER_PARTITIONS)
            .mapInPandas(kafka_python_read, KAFKA_SCHEMA)
            .selectExpr(*query)
        )
        segments_df = (
            spark.read.format("kfast-segments")
            .option("path", broker.data_dir)
            .option("subscribe", BROKER_TOPIC)
            .load()
            .selectExpr(*query)
        )
        timings = {}
        for name, df, n in (
            ("kfast", kfast_df, runs),
            ("kfast-segments", segments_df, runs),
            ("baseline", baseline_df, baseline_runs),
        ):
            timings[name] = best_of(n, df, records)
            print(f"{name}: {timings[name]:.2f}s (best of {n})", flush=True)
        spark.stop()
    rates = {name: records / seconds for name, seconds in timings.items()}
    print(
        f"broker  format(kfast) {rates['kfast']:>12,.0f} records/s "
        f"({timings['kfast']:.2f}s, best of {runs})   "
        f"kafka-python + mapInPandas {rates['baseline']:>10,.0f} records/s "
        f"({timings['baseline']:.2f}s, best of {baseline_runs})   "
        f"ratio {rates['kfast'] / rates['baseline']:.1f}x"
    )
    print(
        f"offline format(kfast-segments) over the broker's log dir "
        f"{rates['kfast-segments']:>12,.0f} records/s ({timings['kfast-segments']:.2f}s, "
        f"best of {runs})   ratio to the baseline "
        f"{rates['kfast-segments'] / rates['baseline']:.1f}x"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--broker",
        type=int,
        metavar="N",
        help="read N records from a kfast broker in Spark (kfast vs "
        "kafka-python + mapInPandas) and nothing else",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="--broker: timed runs of the kfast reads (best is reported)",
    )
    parser.add_argument(
        "--baseline-runs",
        type=int,
        default=3,
        help="--broker: timed runs of the kafka-python baseline",
    )
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--records", type=int, default=200_000, help="per partition")
    # kafka-python decodes snappy, lz4 and zstd only with extra packages; the
    # peer must read the same files, so the codecs are those it always has.
    parser.add_argument("--codec", choices=("none", "gzip"), default="none")
    parser.add_argument("--spark", action="store_true", help="also time reads in Spark")
    args = parser.parse_args()
    if args.broker:
        bench_broker(args.broker, args.runs, args.baseline_runs)
        return
    codec = {name: codec_id for codec_id, name in CODEC_NAMES.items()}[args.codec]
    with tempfile.TemporaryDirectory() as log_dir:
        write_log_dir(log_dir, args.partitions, args.records, codec)
        print(f"{args.partitions} partitions x {args.records:,} records, codec {args.codec}")
        bench_decode(log_dir, args.records)
        if args.spark:
            bench_spark(log_dir, args.partitions, args.records)


if __name__ == "__main__":
    main()
