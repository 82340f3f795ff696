"""The kfast sources' schema is Spark's Kafka source schema, in Spark and in Arrow."""
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from kfast_spark.schema import arrow_schema, kafka_schema

SPARK_KAFKA_COLUMNS = ("struct<key:binary,value:binary,topic:string,partition:int,"
                       "offset:bigint,timestamp:timestamp,timestampType:int")


@pytest.mark.parametrize("include_headers", [False, True])
def test_spark_schema_is_the_kafka_sources(include_headers):
    expected = SPARK_KAFKA_COLUMNS + (
        ",headers:array<struct<key:string,value:binary>>>" if include_headers else ">")
    schema = kafka_schema(include_headers)
    assert schema.simpleString() == expected
    assert all(f.nullable for f in schema.fields)


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_pyspark_checks_batches_against(include_headers):
    # PySpark compares each yielded RecordBatch's schema with this conversion.
    expected = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
    assert arrow_schema(include_headers).equals(expected)
    assert str(arrow_schema(include_headers).field("timestamp").type) == "timestamp[us, tz=UTC]"
