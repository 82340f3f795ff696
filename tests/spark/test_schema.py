"""The kfast sources' schema is Spark's Kafka source schema, in Spark and in Arrow."""

from inspect import signature

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kfast_spark.schema import HEADERS_SPARK_TYPE, arrow_schema, kafka_schema, validate_sink_schema

pytestmark = pytest.mark.spark

SPARK_KAFKA_COLUMNS = (
    "struct<key:binary,value:binary,topic:string,partition:int,"
    "offset:bigint,timestamp:timestamp,timestampType:int"
)


@pytest.mark.parametrize("include_headers", [False, True])
def test_spark_schema_is_the_kafka_sources(include_headers):
    expected = SPARK_KAFKA_COLUMNS + (
        ",headers:array<struct<key:string,value:binary>>>" if include_headers else ">"
    )
    schema = kafka_schema(include_headers)
    assert schema.simpleString() == expected
    assert all(f.nullable for f in schema.fields)


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_pyspark_checks_batches_against(include_headers):
    # PySpark (4.1+) compares each yielded RecordBatch's schema with this
    # conversion; 4.0's to_arrow_schema has no timezone argument (always UTC).
    kwargs = {"timezone": "UTC"} if "timezone" in signature(to_arrow_schema).parameters else {}
    expected = to_arrow_schema(kafka_schema(include_headers), **kwargs)
    assert arrow_schema(include_headers).equals(expected)
    assert str(arrow_schema(include_headers).field("timestamp").type) == "timestamp[us, tz=UTC]"


def sink_schema(ddl_fields):
    return StructType([StructField(name, data_type) for name, data_type in ddl_fields])


def test_sink_schema_accepts_what_sparks_kafka_sink_accepts():
    validate_sink_schema(sink_schema([("value", StringType())]), "t")
    validate_sink_schema(
        sink_schema(
            [
                ("topic", StringType()),
                ("key", BinaryType()),
                ("value", BinaryType()),
                ("partition", IntegerType()),
                ("headers", HEADERS_SPARK_TYPE),
                ("extra", IntegerType()),
            ]
        ),
        None,
    )


@pytest.mark.parametrize(
    "fields, topic, message",
    [
        ([("value", "binary")], None, "topic option required when no 'topic' attribute is present"),
        ([("key", "binary")], "t", "Required attribute 'value' not found"),
        (
            [("value", "int")],
            "t",
            "value attribute unsupported type int. value must be a\\(n\\) string or binary",
        ),
        ([("value", "binary"), ("key", "bigint")], "t", "key attribute unsupported type bigint"),
        (
            [("value", "binary"), ("topic", "binary")],
            None,
            "topic attribute unsupported type binary",
        ),
        ([("value", "binary"), ("partition", "bigint")], "t", "partition must be a\\(n\\) int"),
        (
            [("value", "binary"), ("headers", "array<string>")],
            "t",
            "headers must be a\\(n\\) array<struct<key:string,value:binary>>",
        ),
    ],
)
def test_sink_schema_refusals(fields, topic, message):
    types = {
        "binary": BinaryType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "array<string>": ArrayType(StringType()),
    }
    with pytest.raises(ValueError, match=message):
        validate_sink_schema(sink_schema([(n, types[t]) for n, t in fields]), topic)
