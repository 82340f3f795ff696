"""Writing rows to Kafka topics, as Spark's Kafka sink (KafkaWriteTask).

Each row becomes one record: ``value`` (string or binary, may be null: a
tombstone), ``key``, ``headers`` and ``partition`` when those columns exist,
into the ``topic`` option's topic, else the row's ``topic`` column (a null
topic then fails the task with Spark's message). Strings are written as
UTF-8. Without a ``partition``, keyed records go to murmur2(key) mod
partitions and unkeyed ones to a sticky partition, as Kafka's producer
partitions them.

Each task sends its rows through one kfast KafkaProducer (records collect
into per-partition batches; one Produce request per leader) and waits for
every acknowledgement before it reports success, so a committed Spark job
has all its records in the log. Like Spark's sink this is at-least-once: a
retried task writes its rows again.

Producer properties (``kafka.*`` options) are read with kfast's client
property table (``acks``, ``linger.ms``, ``batch.size``, ``compression.type``,
``enable.idempotence``, ``retries``, ``delivery.timeout.ms``, ``buffer.memory``,
``client.id``, ``request.timeout.ms``, ``retry.backoff.ms`` ...); as with
Spark's sink and Kafka's producer, an unknown name is logged and ignored,
an invalid value is refused. As Kafka's producer, a failed send is retried without a count until
``delivery.timeout.ms`` (120 s): a leader killed with -9 stays the leader in
Metadata until its session times out, and the task must outlast that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kfast.client import KafkaProducer
from kfast.client.properties import Client, parse_client_properties
from kfast.config import ConfigException
from kfast.protocol.constants import INT32_MAX
from kfast_spark.options import KafkaSinkOptions

#: Kafka's producer defaults where kfast's producer has others: acks=all
#: since 3.0; retries without a count, bounded by delivery.timeout.ms.
_PRODUCER_DEFAULTS = {"acks": -1, "retries": INT32_MAX, "delivery_timeout_ms": 120_000}


def producer_arguments(options: KafkaSinkOptions) -> dict:
    """KafkaProducer keyword arguments from the ``kafka.*`` options, read
    with the client property table (kfast.client.properties) leniently, as
    Spark's sink hands them to Kafka's producer: a name the producer does not
    define is logged and ignored; an invalid value, or a TLS / SASL setting
    kfast's client does not apply, fails the write when it is planned. Each
    task parses the options again (TLS and SASL included: an SSL context does
    not travel to executors)."""
    try:
        parsed = parse_client_properties(options.kafka_params, Client.PRODUCER, strict=False)
    except ConfigException as exc:
        raise ValueError(
            f"Kafka option 'kafka.{exc.name}' refused by the kfast sink: {exc}"
        ) from None
    return {**_PRODUCER_DEFAULTS, **parsed.producer_arguments()}


@dataclass
class KafkaWriterCommitMessage(WriterCommitMessage):
    records: int


def _bytes(value) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)  # bytearray


def write_rows(options: KafkaSinkOptions, columns: list[str], rows: Iterator[Row]) -> int:
    """Send every row as a record and wait until all are acknowledged;
    returns how many were written."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_write_rows(options, set(columns), rows))
    finally:
        loop.close()


async def _write_rows(options: KafkaSinkOptions, columns: set, rows: Iterator[Row]) -> int:
    has_key, has_headers = "key" in columns, "headers" in columns
    has_partition = "partition" in columns
    topic_column = options.topic is None
    futures = []
    async with KafkaProducer(
        options.kafka_params["bootstrap.servers"], **producer_arguments(options)
    ) as producer:
        for row in rows:
            topic = row["topic"] if topic_column else options.topic
            if topic is None:
                raise ValueError(
                    "Null topic present in the data. Use the topic option for setting a topic."
                )
            headers = None
            if has_headers and row["headers"] is not None:
                headers = [(header["key"], _bytes(header["value"])) for header in row["headers"]]
            futures.append(
                await producer.send(
                    topic,
                    _bytes(row["value"]),
                    key=_bytes(row["key"]) if has_key else None,
                    partition=row["partition"] if has_partition else None,
                    headers=headers,
                )
            )
        await producer.flush()
    # Surface the first failed record, as Spark's task fails on a send error.
    for future in futures:
        future.result()
    return len(futures)


class KafkaBatchWriter(DataSourceWriter):
    def __init__(self, options: KafkaSinkOptions, schema: StructType):
        self.options = options
        self.columns = schema.names

    def write(self, iterator: Iterator[Row]) -> KafkaWriterCommitMessage:
        return KafkaWriterCommitMessage(write_rows(self.options, self.columns, iterator))

    def commit(self, messages) -> None:
        # Every task waited for its acknowledgements; nothing is left to publish.
        pass

    def abort(self, messages) -> None:
        # Records of the tasks that succeeded stay in the log (Kafka has no
        # rollback outside transactions): Spark's sink is at-least-once too.
        pass


class KafkaStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: KafkaSinkOptions, schema: StructType):
        self.options = options
        self.columns = schema.names

    def write(self, iterator: Iterator[Row]) -> KafkaWriterCommitMessage:
        return KafkaWriterCommitMessage(write_rows(self.options, self.columns, iterator))

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass
