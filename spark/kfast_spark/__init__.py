"""kfast's PySpark data sources: Spark's Kafka source schema and options over
kfast topics, decoded with kfast's own record codec.

    from kfast_spark import register
    register(spark)
    spark.read.format("kfast-segments").option("path", log_dir).option("subscribe", "t").load()

``kfast-segments`` reads a broker's log directory offline. The broker-backed
``kfast`` source (Spark's Kafka source over kfast's client) is not registered
yet: its reader needs kfast's Kafka client; its options, schema and planning
are in :mod:`kfast_spark.options`, :mod:`kfast_spark.schema` and
:mod:`kfast_spark.planning`.
"""
from kfast_spark.schema import arrow_schema, kafka_schema
from kfast_spark.segments_source import KafkaSegmentsDataSource

#: Every data source this package registers.
DATA_SOURCES = (KafkaSegmentsDataSource,)


def register(spark) -> None:
    """Register kfast's data sources with a SparkSession."""
    for source in DATA_SOURCES:
        spark.dataSource.register(source)


__all__ = ["DATA_SOURCES", "KafkaSegmentsDataSource", "arrow_schema", "kafka_schema", "register"]
