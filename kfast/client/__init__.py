"""kfast's own Kafka client (asyncio; runs on uvloop too).

Used by the command-line tools, the Spark data source and, later, by
replication. Layers, each importing only the ones before it:

- ``connection``: one TCP connection, correlation ids, ApiVersions
  (``BrokerConnection``; ``BlockingConnection`` for synchronous tools).
- ``cluster``: bootstrap, Metadata (with topic ids), leaders, one connection
  per broker, refresh with backoff on stale-metadata errors.
- ``admin`` (``KafkaAdmin``), ``producer`` (``KafkaProducer``, with
  ``partitioner``), ``fetcher`` (``Fetcher``): what users call.
- ``blocking``: ``BlockingFetcher``, the fetcher for synchronous callers.

    async with Fetcher("127.0.0.1:9092") as fetcher:
        part = await fetcher.fetch_raw("t", 0, offset, max_bytes=1 << 20)
        part.records, part.high_watermark, part.log_start_offset, part.next_offset
        async for part in fetcher.iter_raw("t", 0, start_offset, end_offset): ...

Every broker error surfaces as the ``kfast.protocol.errors`` exception of its code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kfast.client.admin import EARLIEST, LATEST, MAX_TIMESTAMP, KafkaAdmin, NewTopic
    from kfast.client.blocking import BlockingFetcher
    from kfast.client.cluster import Cluster
    from kfast.client.connection import BlockingConnection, BrokerConnection
    from kfast.client.fetcher import (
        READ_COMMITTED,
        READ_UNCOMMITTED,
        ConsumerRecord,
        FetchedPartition,
        Fetcher,
        decode_records,
    )
    from kfast.client.producer import KafkaProducer, RecordMetadata

#: Name -> the module that defines it. Imported on first use (PEP 562): the
#: broker imports only ``connection`` and ``security`` for its own links, and
#: should not pay for the admin, producer and fetcher layers at start-up.
_HOMES = {
    "EARLIEST": "admin",
    "LATEST": "admin",
    "MAX_TIMESTAMP": "admin",
    "KafkaAdmin": "admin",
    "NewTopic": "admin",
    "BlockingFetcher": "blocking",
    "Cluster": "cluster",
    "BlockingConnection": "connection",
    "BrokerConnection": "connection",
    "READ_COMMITTED": "fetcher",
    "READ_UNCOMMITTED": "fetcher",
    "ConsumerRecord": "fetcher",
    "FetchedPartition": "fetcher",
    "Fetcher": "fetcher",
    "decode_records": "fetcher",
    "KafkaProducer": "producer",
    "RecordMetadata": "producer",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kfast.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kfast.client.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "BlockingConnection",
    "BlockingFetcher",
    "BrokerConnection",
    "Cluster",
    "ConsumerRecord",
    "EARLIEST",
    "FetchedPartition",
    "Fetcher",
    "KafkaAdmin",
    "KafkaProducer",
    "LATEST",
    "MAX_TIMESTAMP",
    "NewTopic",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "RecordMetadata",
    "decode_records",
]
