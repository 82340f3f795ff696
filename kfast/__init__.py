"""kfast: a Kafka-compatible message broker with Cython hot paths."""

__version__ = "0.1.0.dev0"
