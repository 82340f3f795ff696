"""What the client knows about the cluster: brokers, topics, leaders.

    cluster = Cluster("127.0.0.1:9092")
    await cluster.start()                       # bootstrap + Metadata for all topics
    node = await cluster.leader_for("t", 0)     # refreshes while no leader is known
    response = await cluster.send(node, FetchRequest(...))
    await cluster.close()

Metadata is cached per topic. A caller that gets an error meaning "your
metadata is stale" (``STALE_METADATA_ERRORS``) calls ``invalidate(topic)``;
the next ``leader_for`` / ``topic`` refreshes, retrying with backoff while the
broker answers with a retriable error (a topic just created has no leader for
a moment), until ``metadata_timeout``.

One BrokerConnection per broker, opened on first use and reopened after it
dies. Requests that any broker can answer (Metadata, admin APIs, which a
KRaft broker forwards to the controller) go to ``any_node``.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
import uuid
from dataclasses import dataclass, field

from kfast.client.connection import DEFAULT_CLIENT_ID, DEFAULT_REQUEST_TIMEOUT, BrokerConnection
from kfast.protocol import MetadataRequest, errors

__all__ = [
    "BrokerMetadata",
    "Cluster",
    "PartitionMetadata",
    "TopicMetadata",
    "STALE_METADATA_ERRORS",
    "parse_bootstrap_servers",
    "topic_id_string",
    "parse_topic_id",
]

# Errors after which a client refreshes metadata and retries (Kafka's
# producer and consumer treat these as "leader moved or not there yet").
STALE_METADATA_ERRORS = (
    errors.NotLeaderOrFollowerException,
    errors.UnknownTopicOrPartitionException,
    errors.LeaderNotAvailableException,
    errors.FencedLeaderEpochException,
    errors.UnknownLeaderEpochException,
    errors.UnknownTopicIdException,
    errors.InconsistentTopicIdException,
    errors.NotControllerException,
)
STALE_METADATA_CODES = frozenset(e.code for e in STALE_METADATA_ERRORS)


def parse_bootstrap_servers(servers) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' (or a list of such) -> [(host, port), ...]."""
    if isinstance(servers, str):
        servers = servers.split(",")
    out = []
    for item in servers:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error_code: int = 0
    # Eligible leader replicas (KIP-966): only DescribeTopicPartitions
    # reports them; None when the answer came from Metadata.
    eligible_leader_replicas: list[int] | None = None
    last_known_elr: list[int] | None = None


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    is_internal: bool = False
    error_code: int = 0

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


class Cluster:
    def __init__(
        self,
        bootstrap_servers,
        client_id: str | None = DEFAULT_CLIENT_ID,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retry_backoff: float = 0.1,
        retry_backoff_max: float = 1.0,
        metadata_timeout: float = 30.0,
        allow_auto_topic_creation: bool = False,
        security=None,
    ):
        self.bootstrap = parse_bootstrap_servers(bootstrap_servers)
        # kfast.client.security.ClientSecurity for every connection (None: PLAINTEXT).
        self.security = security
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.metadata_timeout = metadata_timeout
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        # Topics whose cached metadata is fresh and names every leader: the
        # fast path of ``topic`` (called once per produced record).
        self._usable: set[str] = set()
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future] = {}
        # Until the first Metadata answer names the brokers, requests go
        # through a connection to a bootstrap address (node id unknown).
        self._bootstrap_connection: BrokerConnection | None = None

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> Cluster:
        await self.refresh_metadata(None)
        return self

    async def close(self) -> None:
        connections = list(self._connections.values())
        if self._bootstrap_connection is not None:
            connections.append(self._bootstrap_connection)
        self._connections.clear()
        self._bootstrap_connection = None
        for connection in connections:
            await connection.close()

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # ---- connections -----------------------------------------------------------------

    def _new_connection(self) -> BrokerConnection:
        return BrokerConnection(
            client_id=self.client_id, request_timeout=self.request_timeout, security=self.security
        )

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id`` (opened or reopened as needed)."""
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected:
            return existing
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        broker = self.brokers.get(node_id)
        if broker is None:
            raise errors.LeaderNotAvailableException(f"unknown broker {node_id}")
        future = asyncio.get_running_loop().create_future()
        self._connecting[node_id] = future
        try:
            connection = self._new_connection()
            await connection.connect(broker.host, broker.port)
            if existing is not None:
                await existing.close()
            self._connections[node_id] = connection
            future.set_result(connection)
            return connection
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            del self._connecting[node_id]

    async def _any_connection(self) -> BrokerConnection:
        for connection in self._connections.values():
            if connection.connected:
                return connection
        if self.brokers:
            nodes = list(self.brokers)
            random.shuffle(nodes)
            for node_id in nodes:
                try:
                    return await self.connection(node_id)
                except errors.NetworkException:
                    continue
        if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
            return self._bootstrap_connection
        last_error: Exception | None = None
        for host, port in self.bootstrap:
            connection = self._new_connection()
            try:
                await connection.connect(host, port)
            except errors.KafkaError as exc:
                last_error = exc
                continue
            self._bootstrap_connection = connection
            return connection
        raise errors.NetworkException(
            f"no broker reachable at {','.join(f'{h}:{p}' for h, p in self.bootstrap)}: {last_error}"
        )

    async def send(self, node_id: int | None, body, **kwargs):
        """Send to a broker (None: any broker) and return the response body."""
        connection = await (self._any_connection() if node_id is None else self.connection(node_id))
        return await connection.send(body, **kwargs)

    async def version_for(
        self, node_id: int | None, key: int, max_version: int | None = None
    ) -> int:
        connection = await (self._any_connection() if node_id is None else self.connection(node_id))
        return connection.version_for(key, max_version)

    # ---- metadata --------------------------------------------------------------------

    async def refresh_metadata(self, topics: list[str] | None) -> dict[str, TopicMetadata]:
        """One Metadata request (None = all topics); updates the cache and
        returns the topics it answered about (with their error codes)."""
        if topics is not None:
            request_topics = [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
        else:
            request_topics = None
        request = MetadataRequest(
            topics=request_topics, allow_auto_topic_creation=self.allow_auto_topic_creation
        )
        # Any broker can answer. A connection can look open until a request
        # finds its broker gone (killed while this client's loop was not
        # running, so the close went unread): that connection is now marked
        # dead, and the next try picks another broker, as Kafka's client
        # asks the least loaded node that is up.
        tries = len(self.brokers) + len(self.bootstrap) + 1
        for attempt in range(tries):
            try:
                response = await self.send(None, request)
                break
            except errors.NetworkException:
                if attempt == tries - 1:
                    raise
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        self.brokers = {
            b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        answered = {}
        for entry in response.topics:
            topic = TopicMetadata(
                name=entry.name,
                topic_id=entry.topic_id,
                is_internal=entry.is_internal,
                error_code=entry.error_code,
                partitions={
                    p.partition_index: PartitionMetadata(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                        list(p.offline_replicas),
                        p.error_code,
                    )
                    for p in entry.partitions
                },
            )
            answered[entry.name] = topic
            if entry.error_code == 0:
                self.topics[entry.name] = topic
            else:
                self.topics.pop(entry.name, None)
            if entry.error_code == 0 and self._leaders_known(topic):
                self._usable.add(entry.name)
            else:
                self._usable.discard(entry.name)
        if topics is None:
            for name in set(self.topics) - set(answered):
                del self.topics[name]
                self._usable.discard(name)
        return answered

    def forget(self, topic: str) -> None:
        """Drop ``topic`` from the cache (it was deleted)."""
        self.topics.pop(topic, None)
        self._usable.discard(topic)

    def invalidate(self, topic: str) -> None:
        """Forget what we know about ``topic``'s leaders (after a stale-metadata error)."""
        self._usable.discard(topic)

    async def backoff(self, attempt: int) -> None:
        """Sleep before retry number ``attempt`` (0-based): exponential, capped, jittered."""
        # The exponent is capped: retries bounded by time rather than count
        # can run up attempts whose power of two no float can hold.
        delay = min(self.retry_backoff * (2 ** min(attempt, 32)), self.retry_backoff_max)
        await asyncio.sleep(delay * random.uniform(0.8, 1.2))

    async def topic(self, name: str) -> TopicMetadata:
        """Metadata of ``name``, refreshed if missing or stale; retries
        retriable errors (e.g. UNKNOWN_TOPIC_OR_PARTITION right after
        creation, LEADER_NOT_AVAILABLE) until ``metadata_timeout``."""
        if name in self._usable:
            return self.topics[name]
        deadline = time.monotonic() + self.metadata_timeout
        attempt = 0
        while True:
            answered = await self.refresh_metadata([name])
            topic = answered.get(name)
            error: type[errors.KafkaError]
            if topic is None:
                error = errors.UnknownTopicOrPartitionException
            elif topic.error_code:
                error = errors.for_code(topic.error_code)
            elif self._leaders_known(topic):
                return topic
            else:
                error = errors.LeaderNotAvailableException
            if not error.retriable or time.monotonic() >= deadline:
                if topic is not None and topic.error_code == 0:
                    # a topic without leaders past the deadline: say so but return it
                    return topic
                raise error(f"topic {name!r}")
            await self.backoff(attempt)
            attempt += 1

    @staticmethod
    def _leaders_known(topic: TopicMetadata) -> bool:
        return bool(topic.partitions) and all(p.leader >= 0 for p in topic.partitions.values())

    async def partitions_for(self, topic: str) -> list[int]:
        return sorted((await self.topic(topic)).partitions)

    async def leader_for(self, topic: str, partition: int) -> int:
        metadata = await self.topic(topic)
        found = metadata.partitions.get(partition)
        if found is None:
            # Maybe partitions were added since we looked.
            self.invalidate(topic)
            metadata = await self.topic(topic)
            found = metadata.partitions.get(partition)
            if found is None:
                raise errors.UnknownTopicOrPartitionException(f"{topic}-{partition}")
        if found.leader < 0:
            raise errors.LeaderNotAvailableException(f"{topic}-{partition}")
        return found.leader

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic.name
        return None


class ClusterClient:
    """Base of the clients built on a Cluster (admin, producer, fetcher):
    given a ``cluster``, they share it and leave its life cycle to the
    caller; otherwise they own one made from ``bootstrap_servers`` and
    start and close it with themselves."""

    def __init__(self, bootstrap_servers=None, cluster: Cluster | None = None, **cluster_options):
        self._own_cluster = cluster is None
        self.cluster = cluster or Cluster(bootstrap_servers, **cluster_options)

    async def start(self):
        if self._own_cluster:
            await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._own_cluster:
            await self.cluster.close()

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.close()
