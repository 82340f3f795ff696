"""Admin operations: topics, partitions, configs, offsets, records, cluster.

    async with KafkaAdmin("127.0.0.1:9092") as admin:
        await admin.create_topics([NewTopic("t", 3, 1, {"cleanup.policy": "compact"})])
        await admin.describe_topics(["t"])      # [TopicMetadata]
        await admin.list_offsets({("t", 0): EARLIEST})

Errors come back as ``kfast.protocol.errors`` exceptions: a request about
several topics raises the first failure, with the topic (or resource) named
in the message and set on the exception as ``.resource``. Requests that any
broker can answer go to any broker (a KRaft broker forwards them to the
controller); ListOffsets and DeleteRecords go to each partition's leader.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kfast.client.cluster import (
    STALE_METADATA_CODES,
    Cluster,
    ClusterClient,
    PartitionMetadata,
    TopicMetadata,
)
from kfast.protocol import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeTopicPartitionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    ListOffsetsRequest,
    api_key,
    errors,
)
from kfast.protocol.constants import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
)

__all__ = [
    "KafkaAdmin",
    "NewTopic",
    "CreatedTopic",
    "ConfigEntry",
    "ListedOffset",
    "ClusterDescription",
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "RESOURCE_TOPIC",
    "RESOURCE_BROKER",
    "OP_SET",
    "OP_DELETE",
    "OP_APPEND",
    "OP_SUBTRACT",
    "SOURCE_DYNAMIC_TOPIC_CONFIG",
    "SOURCE_DEFAULT_CONFIG",
]

# The admin API's names for the wire constants of ListOffsets and the
# config APIs.
EARLIEST, LATEST = EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
RESOURCE_TOPIC, RESOURCE_BROKER = CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER
CONSUMER_REPLICA_ID = -1
DELETE_TOPICS = api_key("DeleteTopics").key
DESCRIBE_TOPIC_PARTITIONS = api_key("DescribeTopicPartitions").key


def _error_for(code: int, message: str | None, resource: str) -> errors.KafkaError:
    exc = errors.for_code(code)(f"{resource}: {message or errors.for_code(code).default_message}")
    exc.resource = resource
    return exc


def _raise_for(code: int, message: str | None, resource: str) -> None:
    if code:
        raise _error_for(code, message, resource)


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Mapping[int, list[int]] | None = None  # partition -> broker ids


@dataclass
class CreatedTopic:
    name: str
    topic_id: object
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None]


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    # (name, value, source) of each synonym, when asked for.
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT_CONFIG


@dataclass
class ListedOffset:
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]


class KafkaAdmin(ClusterClient):
    def __init__(
        self, bootstrap_servers=None, *, cluster: Cluster | None = None, **cluster_options
    ):
        super().__init__(bootstrap_servers, cluster, **cluster_options)

    # ---- topics ----------------------------------------------------------------------

    async def create_topics(
        self, topics: Iterable[NewTopic], validate_only: bool = False, timeout_ms: int = 60000
    ) -> dict[str, CreatedTopic]:
        request = CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=validate_only)
        for topic in topics:
            entry = CreateTopicsRequest.CreatableTopic(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in topic.configs.items()
                ],
            )
            if topic.assignments:
                entry.num_partitions, entry.replication_factor = -1, -1
                entry.assignments = [
                    CreateTopicsRequest.CreatableReplicaAssignment(
                        partition_index=p, broker_ids=list(ids)
                    )
                    for p, ids in topic.assignments.items()
                ]
            request.topics.append(entry)
        response = await self.cluster.send(None, request)
        created = {}
        for result in response.topics:
            _raise_for(result.error_code, result.error_message, result.name)
            created[result.name] = CreatedTopic(
                result.name,
                result.topic_id,
                result.num_partitions,
                result.replication_factor,
                {c.name: c.value for c in (result.configs or ())},
            )
            self.cluster.invalidate(result.name)
        return created

    async def delete_topics(self, names: Iterable[str], timeout_ms: int = 30000) -> None:
        names = list(names)
        version = await self.cluster.version_for(None, DELETE_TOPICS)
        request = DeleteTopicsRequest(timeout_ms=timeout_ms)
        if version >= 6:
            request.topics = [DeleteTopicsRequest.DeleteTopicState(name=n) for n in names]
        else:
            request.topic_names = names
        response = await self.cluster.send(None, request, version=version)
        for result in response.responses:
            _raise_for(result.error_code, result.error_message, result.name)
        for name in names:
            self.cluster.forget(name)

    async def create_partitions(
        self, new_counts: Mapping[str, int], validate_only: bool = False, timeout_ms: int = 30000
    ) -> None:
        """Grow topics to the given total partition counts."""
        request = CreatePartitionsRequest(
            timeout_ms=timeout_ms,
            validate_only=validate_only,
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(
                    name=name, count=count, assignments=None
                )
                for name, count in new_counts.items()
            ],
        )
        response = await self.cluster.send(None, request)
        for result in response.results:
            _raise_for(result.error_code, result.error_message, result.name)
            self.cluster.invalidate(result.name)

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        topics = await self.cluster.refresh_metadata(None)
        return sorted(
            name
            for name, t in topics.items()
            if t.error_code == 0 and (include_internal or not t.is_internal)
        )

    async def describe_topics(
        self,
        names: Iterable[str] | None = None,
        include_internal: bool = False,
        partition_limit: int = 2000,
    ) -> list[TopicMetadata]:
        """The named topics (None: every topic), sorted by name, with
        eligible leader replicas when the broker serves DescribeTopicPartitions
        (as Kafka's admin client does since 3.8), else from Metadata."""
        if names is None:
            names = await self.list_topics(include_internal)
        names = sorted(set(names))
        if not names:
            return []
        try:
            await self.cluster.version_for(None, DESCRIBE_TOPIC_PARTITIONS)
        except errors.UnsupportedVersionException:
            answered = await self.cluster.refresh_metadata(names)
        else:
            answered = await self._describe_topic_partitions(names, partition_limit)
        out = []
        for name in names:
            topic = answered.get(name)
            if topic is None:
                raise _error_for(errors.UnknownTopicOrPartitionException.code, None, name)
            _raise_for(topic.error_code, None, name)
            out.append(topic)
        return out

    async def _describe_topic_partitions(
        self, names: list[str], limit: int
    ) -> dict[str, TopicMetadata]:
        """DescribeTopicPartitions, following its cursor: each answer holds at
        most ``limit`` partitions and names where the next one starts."""
        answered: dict[str, TopicMetadata] = {}
        cursor = None
        while True:
            remaining = names if cursor is None else [n for n in names if n >= cursor.topic_name]
            request = DescribeTopicPartitionsRequest(
                response_partition_limit=limit,
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in remaining],
                cursor=None
                if cursor is None
                else DescribeTopicPartitionsRequest.Cursor(
                    topic_name=cursor.topic_name, partition_index=cursor.partition_index
                ),
            )
            response = await self.cluster.send(None, request)
            for entry in response.topics:
                topic = answered.setdefault(
                    entry.name,
                    TopicMetadata(
                        name=entry.name,
                        topic_id=entry.topic_id,
                        is_internal=entry.is_internal,
                        error_code=entry.error_code,
                    ),
                )
                for p in entry.partitions:
                    topic.partitions[p.partition_index] = PartitionMetadata(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                        list(p.offline_replicas),
                        p.error_code,
                        None
                        if p.eligible_leader_replicas is None
                        else list(p.eligible_leader_replicas),
                        None if p.last_known_elr is None else list(p.last_known_elr),
                    )
            cursor = response.next_cursor
            if cursor is None:
                return answered

    # ---- configs ---------------------------------------------------------------------

    async def describe_configs(
        self,
        resource_type: int,
        names: Iterable[str],
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
    ) -> dict[str, list[ConfigEntry]]:
        keys = None if keys is None else list(keys)
        request = DescribeConfigsRequest(
            include_synonyms=include_synonyms,
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=keys
                )
                for name in names
            ],
        )
        response = await self.cluster.send(None, request)
        out = {}
        for result in response.results:
            _raise_for(result.error_code, result.error_message, result.resource_name)
            out[result.resource_name] = [
                ConfigEntry(
                    c.name,
                    c.value,
                    c.config_source,
                    c.read_only,
                    c.is_sensitive,
                    [(y.name, y.value, y.source) for y in c.synonyms or ()],
                )
                for c in result.configs
            ]
        return out

    async def alter_configs(
        self, resource_type: int, name: str, configs: Mapping[str, str], validate_only: bool = False
    ) -> None:
        """Legacy AlterConfigs: replaces the resource's whole set of overrides."""
        request = AlterConfigsRequest(
            validate_only=validate_only,
            resources=[
                AlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=[
                        AlterConfigsRequest.AlterableConfig(name=k, value=v)
                        for k, v in configs.items()
                    ],
                )
            ],
        )
        response = await self.cluster.send(None, request)
        for result in response.responses:
            _raise_for(result.error_code, result.error_message, result.resource_name)

    async def incremental_alter_configs(
        self,
        resource_type: int,
        name: str,
        operations: Mapping[str, tuple[int, str | None]],
        validate_only: bool = False,
    ) -> None:
        """``operations``: config name -> (OP_SET|OP_DELETE|OP_APPEND|OP_SUBTRACT, value)."""
        request = IncrementalAlterConfigsRequest(
            validate_only=validate_only,
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name=k, config_operation=op, value=v
                        )
                        for k, (op, v) in operations.items()
                    ],
                )
            ],
        )
        response = await self.cluster.send(None, request)
        for result in response.responses:
            _raise_for(result.error_code, result.error_message, result.resource_name)

    async def list_config_resources(self, resource_types: Iterable[int]) -> list[tuple[int, str]]:
        """ListConfigResources v1 (KIP-1142): (type, name) of the resources
        of ``resource_types`` (empty: every type)."""
        response = await self.cluster.send(
            None, ListConfigResourcesRequest(resource_types=list(resource_types))
        )
        _raise_for(response.error_code, None, "ListConfigResources")
        return [(r.resource_type, r.resource_name) for r in response.config_resources]

    # ---- client quotas ---------------------------------------------------------------

    async def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]], strict: bool = False
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """DescribeClientQuotas: ``components`` are (entity type, match type,
        match) filters (QUOTA_MATCH_*); returns (entity, {key: value}) pairs,
        an entity being {entity type: name, None for the default}."""
        Component = DescribeClientQuotasRequest.ComponentData
        request = DescribeClientQuotasRequest(
            strict=strict,
            components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components],
        )
        response = await self.cluster.send(None, request)
        _raise_for(response.error_code, response.error_message, "client quotas")
        return [
            (
                {e.entity_type: e.entity_name for e in entry.entity},
                {v.key: v.value for v in entry.values},
            )
            for entry in response.entries or ()
        ]

    async def alter_client_quotas(
        self,
        alterations: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas: per entity ({entity type: name or None}), quota
        key -> new value, or None to remove it."""
        Entry = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(
            validate_only=validate_only,
            entries=[
                Entry(
                    entity=[
                        AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity.items()
                    ],
                    ops=[
                        AlterClientQuotasRequest.OpData(
                            key=k, value=0.0 if v is None else float(v), remove=v is None
                        )
                        for k, v in ops.items()
                    ],
                )
                for entity, ops in alterations
            ],
        )
        response = await self.cluster.send(None, request)
        for entry in response.entries:
            _raise_for(
                entry.error_code,
                entry.error_message,
                ",".join(f"{e.entity_type}={e.entity_name}" for e in entry.entity),
            )

    # ---- offsets and records ---------------------------------------------------------

    async def _by_leader(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[int, list[tuple[str, int]]]:
        grouped: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            grouped.setdefault(await self.cluster.leader_for(topic, partition), []).append(
                (topic, partition)
            )
        return grouped

    async def list_offsets(
        self, specs: Mapping[tuple[str, int], int], isolation_level: int = 0
    ) -> dict[tuple[str, int], ListedOffset]:
        """``specs``: (topic, partition) -> EARLIEST, LATEST, MAX_TIMESTAMP or a
        timestamp in ms (the first offset whose timestamp is at or after it;
        offset -1 if there is none).

        Retriable failures, of a partition or of a whole request to its
        leader (connection refused or lost, timeout), are retried on fresh
        metadata with backoff until the cluster's ``metadata_timeout``, as
        Kafka's consumer bounds offset lookups by default.api.timeout.ms: a
        broker killed with -9 stays the leader in Metadata until its session
        times out, and a count of quick retries ends before that."""
        out: dict[tuple[str, int], ListedOffset] = {}
        pending = dict(specs)
        deadline = time.monotonic() + self.cluster.metadata_timeout
        attempt = 0
        while pending:
            retry: dict[tuple[str, int], int] = {}
            last_error: errors.KafkaError | None = None
            for leader, partitions in (await self._by_leader(pending)).items():
                topics: dict[str, list] = {}
                for topic, partition in partitions:
                    topics.setdefault(topic, []).append(
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=partition, timestamp=pending[topic, partition]
                        )
                    )
                try:
                    response = await self.cluster.send(
                        leader,
                        ListOffsetsRequest(
                            replica_id=CONSUMER_REPLICA_ID,
                            isolation_level=isolation_level,
                            topics=[
                                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p)
                                for t, p in topics.items()
                            ],
                        ),
                    )
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last_error = exc
                    for topic in topics:
                        self.cluster.invalidate(topic)
                    retry.update({key: pending[key] for key in partitions})
                    continue
                for topic in response.topics:
                    for p in topic.partitions:
                        key = (topic.name, p.partition_index)
                        if p.error_code and errors.for_code(p.error_code).retriable:
                            # A moved leader, or one that cannot answer yet
                            # (OFFSET_NOT_AVAILABLE: its high watermark lags).
                            if p.error_code in STALE_METADATA_CODES:
                                self.cluster.invalidate(topic.name)
                            last_error = errors.for_code(p.error_code)(
                                f"{topic.name}-{p.partition_index}"
                            )
                            retry[key] = pending[key]
                            continue
                        _raise_for(p.error_code, None, f"{topic.name}-{p.partition_index}")
                        out[key] = ListedOffset(p.offset, p.timestamp, p.leader_epoch)
            if retry and time.monotonic() >= deadline:
                assert last_error is not None  # every retried partition recorded its error
                raise last_error
            if retry:
                await self.cluster.backoff(attempt)
                attempt += 1
            pending = retry
        return out

    async def delete_records(
        self, before: Mapping[tuple[str, int], int], timeout_ms: int = 30000
    ) -> dict[tuple[str, int], int]:
        """Delete records before the given offsets (-1: the high watermark);
        returns each partition's new low watermark (log start offset)."""
        out = {}
        for leader, partitions in (await self._by_leader(before)).items():
            topics: dict[str, list] = {}
            for topic, partition in partitions:
                topics.setdefault(topic, []).append(
                    DeleteRecordsRequest.DeleteRecordsPartition(
                        partition_index=partition, offset=before[topic, partition]
                    )
                )
            response = await self.cluster.send(
                leader,
                DeleteRecordsRequest(
                    timeout_ms=timeout_ms,
                    topics=[
                        DeleteRecordsRequest.DeleteRecordsTopic(name=t, partitions=p)
                        for t, p in topics.items()
                    ],
                ),
            )
            for topic in response.topics:
                for p in topic.partitions:
                    _raise_for(p.error_code, None, f"{topic.name}-{p.partition_index}")
                    out[topic.name, p.partition_index] = p.low_watermark
        return out

    # ---- cluster ---------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        response = await self.cluster.send(None, DescribeClusterRequest())
        _raise_for(response.error_code, response.error_message, "cluster")
        return ClusterDescription(
            response.cluster_id,
            response.controller_id,
            [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers],
        )
