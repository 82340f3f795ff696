"""kfast's PySpark data sources: Spark's Kafka source schema and options over
kfast topics, decoded with kfast's own record codec."""
