"""The row schema of Spark's Kafka source, as Spark and as Arrow see it.

Spark's Kafka source (KafkaRecordToRowConverter.kafkaSchema) produces exactly

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int
    [, headers array<struct<key:string, value:binary>>]   (includeHeaders=true)

with every field nullable. A job written for that source reads kfast's rows
unchanged only if this schema matches it field for field, so it is written
out here once and everything else (the data sources, the decoders that build
Arrow batches on the executors) takes it from this module.

The Arrow schema is what a Python data source's ``read()`` must yield when it
yields ``pyarrow.RecordBatch``es: PySpark compares each batch's schema with
the Arrow form of the declared Spark schema (timestamps as
``timestamp[us, tz=UTC]``), so the two are kept side by side.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: ``timestampType`` values, as Kafka's ``TimestampType.id`` (Spark exposes the id).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

KAFKA_SCHEMA_WITH_HEADERS = StructType(
    KAFKA_SCHEMA.fields + [StructField("headers", HEADERS_SPARK_TYPE)]
)

HEADER_ARROW_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
# PySpark names the list item "element"; Arrow ignores item names when it
# compares types, so the name only matters to someone printing the schema.
HEADERS_ARROW_TYPE = pa.list_(pa.field("element", HEADER_ARROW_TYPE))

ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)

ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", HEADERS_ARROW_TYPE))


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, with or without the ``headers`` column."""
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the batches a reader yields for ``kafka_schema``."""
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA


def validate_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Check the columns of rows written to Kafka as Spark's Kafka sink does
    (KafkaWriter.validateQuery): ``value`` string or binary (required),
    ``key`` string or binary, ``topic`` string (required unless the ``topic``
    option is set, which then wins), ``partition`` int, ``headers``
    array<struct<key:string,value:binary>>. Names are case-sensitive."""
    columns = {f.name: f.dataType for f in schema.fields}
    if topic_option is None and "topic" not in columns:
        raise ValueError(
            "topic option required when no 'topic' attribute is present. "
            "Use the topic option for setting a topic."
        )
    if "value" not in columns:
        raise ValueError("Required attribute 'value' not found")
    allowed = {
        "topic": () if topic_option is not None else (StringType(),),
        "key": (StringType(), BinaryType()),
        "value": (StringType(), BinaryType()),
        "headers": (HEADERS_SPARK_TYPE,),
        "partition": (IntegerType(),),
    }
    for name, types in allowed.items():
        if name not in columns or not types:
            continue
        # Nullability does not matter (Spark's DataTypeUtils.sameType).
        if columns[name].simpleString() not in {t.simpleString() for t in types}:
            raise ValueError(
                f"{name} attribute unsupported type {columns[name].simpleString()}. {name} "
                f"must be a(n) {' or '.join(t.simpleString() for t in types)}"
            )
