"""kfast's PySpark data sources: Spark's Kafka source schema and options over
kfast topics, decoded with kfast's own record codec.

    from kfast_spark import register
    register(spark)
    spark.read.format("kfast-segments").option("path", log_dir).option("subscribe", "t").load()

``kfast`` is Spark's Kafka source and sink (batch and streaming) over a
broker, through kfast's client (:mod:`kfast_spark.source`);
``kfast-segments`` reads a broker's log directory offline.
"""

from kfast_spark.schema import arrow_schema, kafka_schema
from kfast_spark.segments_source import KafkaSegmentsDataSource
from kfast_spark.source import KafkaDataSource

#: Every data source this package registers.
DATA_SOURCES = (KafkaDataSource, KafkaSegmentsDataSource)


def register(spark) -> None:
    """Register kfast's data sources with a SparkSession."""
    for source in DATA_SOURCES:
        spark.dataSource.register(source)


__all__ = [
    "DATA_SOURCES",
    "KafkaDataSource",
    "KafkaSegmentsDataSource",
    "arrow_schema",
    "kafka_schema",
    "register",
]
