"""kfast's own Kafka client (asyncio; runs on uvloop too).

Used by the command-line tools, the Spark data source and, later, by
replication. Layers, each importing only the ones before it:

- ``connection``: one TCP connection, correlation ids, ApiVersions.
- ``cluster``: bootstrap, Metadata, leaders, one connection per broker.
- ``admin``, ``producer``, ``fetcher``: what users call.
"""
from kfast.client.connection import BlockingConnection, BrokerConnection

__all__ = ["BlockingConnection", "BrokerConnection"]
