"""QuorumController: the KRaft controller's state and operations.

The control managers, the replay of metadata records into them, the
MetadataImage built after each commit and its subscribers, and every
operation the controller APIs call. Every operation runs one at a time (an
asyncio lock plays the role of Kafka's single-threaded controller event
queue):

    1. a control manager reads the current state and returns a
       ControllerResult (response + records); nothing has changed yet;
    2. ``_commit`` makes the records durable in the metadata log as one
       batch (where and how is the subclass's: RaftQuorumController
       proposes them to the Raft log and waits until they are committed);
    3. only then each record is replayed into the managers, a new immutable
       MetadataImage is built, and every subscriber gets
       ``callback(delta, image)`` on the event loop;
    4. the response is returned.

A failed commit leaves the state untouched.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypedDict, TypeVar

from kfast.config import KafkaConfig
from kfast.controller.acl_control import AclControlManager
from kfast.controller.bootstrap_metadata import read_bootstrap_records
from kfast.controller.client_quota_control import ClientQuotaControlManager
from kfast.controller.cluster_control import ClusterControlManager
from kfast.controller.configuration_control import ConfigurationControlManager
from kfast.controller.controller_result import (
    BoundedListTooLongException,
    ControllerResult,
    check_records_bound,
)
from kfast.controller.delegation_token_control import CreatedToken, DelegationTokenControlManager
from kfast.controller.feature_control import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    FeatureControlManager,
)
from kfast.controller.metadata.image import (
    Endpoint,
    MetadataDelta,
    MetadataImage,
    QuotaEntity,
    TopicImage,
)
from kfast.controller.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kfast.controller.producer_id_control import ProducerIdControlManager
from kfast.controller.replication_control import (
    AlterPartitionResult,
    AlterPartitionTopic,
    CreatedTopic,
    PartitionErrors,
    ReplicationControlManager,
    TopicSpec,
)
from kfast.controller.scram_control import ScramControlManager
from kfast.metrics.controller_stats import ControllerStats
from kfast.protocol import errors
from kfast.protocol.constants import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_CLIENT_METRICS,
    CONFIG_RESOURCE_GROUP,
    CONFIG_RESOURCE_TOPIC,
)
from kfast.security.acl import Acl, AclFilter
from kfast.security.principal import KafkaPrincipal

logger = logging.getLogger(__name__)

_TOPIC_RECORDS = (TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord)
_CLUSTER_RECORDS = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
)

MetadataCallback = Callable[[MetadataDelta, MetadataImage], None]


T = TypeVar("T")


class QuorumView(TypedDict):
    """DescribeQuorum's view of the metadata partition: voters and
    observers as (node id, log end offset, last fetch time in ms since the
    epoch), -1 where unknown."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[tuple[int, int, int]]
    observers: list[tuple[int, int, int]]


class _DeltaBuilder:
    """What one commit changed, collected while its records are replayed."""

    def __init__(self) -> None:
        self.changed_topics: set[str] = set()
        self.deleted_topics: dict[str, TopicImage] = {}
        self.changed_topic_configs: set[str] = set()
        self.changed_broker_configs: set[str] = set()
        self.changed_group_configs: set[str] = set()
        self.changed_brokers: set[int] = set()
        self.changed_acls: dict[uuid.UUID, Acl | None] = {}
        self.changed_scram = False
        self.changed_tokens = False
        self.changed_client_quotas: set[QuotaEntity] = set()


class QuorumController(abc.ABC):
    """The state and the operations; a subclass says where records go
    (``_commit``) and how the node joins the quorum (``start``)."""

    def __init__(
        self,
        config: KafkaConfig,
        node_id: int,
        cluster_id: str,
        metadata_log_dir: str,
        loop: asyncio.AbstractEventLoop | None = None,
    ):
        self.config = config
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._loop = loop
        self._new_control_managers()
        # What an empty metadata log is formatted with: kfast storage
        # format's bootstrap.checkpoint (--add-scram), else the defaults.
        self._bootstrap_file_records = read_bootstrap_records(metadata_log_dir)
        self.image = MetadataImage(cluster_id=self.cluster_id, controller_id=node_id)
        self._last_offset = -1
        self._subscribers: list[MetadataCallback] = []
        self._lock = asyncio.Lock()
        self.started = False
        # A new snapshot after this many bytes of metadata records.
        self.snapshot_max_bytes = config["metadata.log.max.record.bytes.between.snapshots"]
        self.snapshot_end_offset = 0  # end offset of the snapshot loaded or written last
        # ControllerStats: the elections this controller performs (never
        # those it replays), for the metrics endpoint.
        self.stats = ControllerStats()

    def bootstrap_records(self) -> list[MetadataRecord]:
        """The records the first active controller commits into an empty log."""
        if self._bootstrap_file_records is not None:
            return list(self._bootstrap_file_records)
        return self.feature_control.bootstrap_records()

    def _new_control_managers(self) -> None:
        """Empty control managers: the state before the first record (a
        snapshot load starts from here too)."""
        self.cluster_control = ClusterControlManager()
        self.feature_control = FeatureControlManager()
        self.acl_control = AclControlManager()
        self.scram_control = ScramControlManager()
        self.delegation_token_control = DelegationTokenControlManager(
            self.config["delegation.token.secret.key"],
            self.config["delegation.token.max.lifetime.ms"],
            self.config["delegation.token.expiry.time.ms"],
            lambda: int(time.time() * 1000),
        )
        self.producer_id_control = ProducerIdControlManager()
        self.client_quota_control = ClientQuotaControlManager()
        self.replication_control = ReplicationControlManager(
            self.cluster_control,
            self._topic_defaults,
            unclean_election_enabled=self._unclean_election_enabled,
        )
        self.configuration_control = ConfigurationControlManager(
            lambda name: name in self.replication_control.topics_by_name,
            lambda broker_id: broker_id in self.cluster_control.brokers,
            self.config,
        )

    def _topic_defaults(self) -> tuple[int, int]:
        return self.config["num.partitions"], self.config["default.replication.factor"]

    def _unclean_election_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable: topic override, then the dynamic
        cluster-wide broker default, then server.properties."""
        key = "unclean.leader.election.enable"
        value = self.configuration_control.get(CONFIG_RESOURCE_TOPIC, topic).get(key)
        if value is None:
            value = self.configuration_control.get(CONFIG_RESOURCE_BROKER, "").get(key)
        if value is None:
            return bool(self.config[key])
        return value.strip().lower() == "true"

    # -- life cycle: the quorum's -------------------------------------------------------
    @abc.abstractmethod
    async def start(self) -> None:
        """Join the metadata quorum; committed records arrive by replay."""

    @abc.abstractmethod
    async def shutdown(self) -> None: ...

    def full_delta(self) -> MetadataDelta:
        """The current image as a delta from an empty one: what a
        subscriber that has seen nothing yet must apply (every topic, every
        topic's configs, every broker)."""
        image = self.image
        return MetadataDelta(
            changed_topics=dict(image.topics_by_name),
            changed_topic_configs=frozenset(image.topic_configs),
            changed_broker_configs=frozenset(image.broker_configs),
            changed_group_configs=frozenset(image.group_configs),
            changed_brokers=frozenset(image.brokers),
            changed_acls=dict(image.acls),
            changed_client_quotas=frozenset(image.client_quotas),
        )

    def subscribe(self, callback: MetadataCallback) -> None:
        """``callback(delta, image)`` after every committed change; called at
        once with the current image (as a full delta) if the controller has
        started."""
        self._subscribers.append(callback)
        if self.started:
            callback(self.full_delta(), self.image)

    # -- commit and replay -----------------------------------------------------------------
    async def _run(
        self, operation: Callable[[], ControllerResult[T]], validate_only: bool = False
    ) -> T:
        """Run one operation against the current state; commit its records
        unless ``validate_only``. Returns the operation's response."""
        async with self._lock:
            if not self.started:
                raise errors.NotControllerException("The controller is not running.")
            started = time.monotonic()
            try:
                result = operation()
            except BoundedListTooLongException:
                # Kafka's EventHandlerExceptionInfo: the whole operation fails.
                raise errors.PolicyViolationException(
                    "Unable to perform excessively large batch operation."
                ) from None
            if result.records and not validate_only:
                # Counted against the state before the records apply.
                elections, unclean = self.replication_control.count_elections(result.records)
                await self._commit(result.records)
                self.stats.record(elections, unclean, (time.monotonic() - started) * 1000)
            return result.response

    @abc.abstractmethod
    async def _commit(self, records: list[MetadataRecord], notify: bool = True) -> None:
        """Make ``records`` durable in the metadata log as one batch and
        replay them (``_replay`` then ``_publish``) before returning."""

    def _replay(self, record: MetadataRecord, offset: int, delta: _DeltaBuilder) -> None:
        if isinstance(record, _TOPIC_RECORDS):
            if isinstance(record, RemoveTopicRecord):
                topic = self.replication_control.topics.get(record.topic_id)
                if topic is not None:
                    delta.deleted_topics[topic.name] = topic.image()
            action, name = self.replication_control.replay(record)
            if action == "deleted":
                delta.changed_topics.discard(name)
                self.configuration_control.delete_topic_configs(name)
                delta.changed_topic_configs.discard(name)
            else:
                delta.changed_topics.add(name)
        elif isinstance(record, ConfigRecord):
            resource_type, name = self.configuration_control.replay(record)
            if resource_type == CONFIG_RESOURCE_TOPIC:
                delta.changed_topic_configs.add(name)
            elif resource_type == CONFIG_RESOURCE_BROKER:
                delta.changed_broker_configs.add(name)
            elif resource_type == CONFIG_RESOURCE_GROUP:
                delta.changed_group_configs.add(name)
        elif isinstance(record, _CLUSTER_RECORDS):
            broker_id = self.cluster_control.replay(record)
            if broker_id is not None:
                delta.changed_brokers.add(broker_id)
        elif isinstance(record, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
            acl_id, acl = self.acl_control.replay(record)
            delta.changed_acls[acl_id] = acl
        elif isinstance(record, (UserScramCredentialRecord, RemoveUserScramCredentialRecord)):
            self.scram_control.replay(record)
            delta.changed_scram = True
        elif isinstance(record, (DelegationTokenRecord, RemoveDelegationTokenRecord)):
            self.delegation_token_control.replay(record)
            delta.changed_tokens = True
        elif isinstance(record, FeatureLevelRecord):
            self.feature_control.replay(record)
        elif isinstance(record, ProducerIdsRecord):
            self.producer_id_control.replay(record)
        elif isinstance(record, ClientQuotaRecord):
            delta.changed_client_quotas.add(self.client_quota_control.replay(record))
        elif not isinstance(record, NoOpRecord):
            raise TypeError(f"cannot replay {type(record).__name__}")
        self._last_offset = offset

    def _publish(self, delta: _DeltaBuilder, notify: bool = True) -> None:
        previous = self.image
        topics_by_name = dict(previous.topics_by_name)
        topics_by_id = dict(previous.topics_by_id)
        for name, old in delta.deleted_topics.items():
            if (
                topics_by_name.get(name) is not None
                and topics_by_name[name].topic_id == old.topic_id
            ):
                del topics_by_name[name]
            topics_by_id.pop(old.topic_id, None)
        changed = {}
        for name in delta.changed_topics:
            topic = self.replication_control.topic(name)
            if topic is None:
                continue
            image = topic.image()
            topics_by_name[name] = topics_by_id[topic.topic_id] = changed[name] = image
        topic_configs, broker_configs, client_metrics_configs, group_configs = {}, {}, {}, {}
        for (resource_type, name), values in self.configuration_control.configs.items():
            if resource_type == CONFIG_RESOURCE_TOPIC:
                topic_configs[name] = dict(values)
            elif resource_type == CONFIG_RESOURCE_BROKER:
                broker_configs[name] = dict(values)
            elif resource_type == CONFIG_RESOURCE_CLIENT_METRICS:
                client_metrics_configs[name] = dict(values)
            elif resource_type == CONFIG_RESOURCE_GROUP:
                group_configs[name] = dict(values)
        self.image = MetadataImage(
            cluster_id=self.cluster_id,
            offset=self._last_offset,
            controller_id=self.active_controller_id(),
            topics_by_name=topics_by_name,
            topics_by_id=topics_by_id,
            brokers=dict(self.cluster_control.brokers),
            topic_configs=topic_configs,
            broker_configs=broker_configs,
            client_metrics_configs=client_metrics_configs,
            group_configs=group_configs,
            features=dict(self.feature_control.finalized),
            # A snapshot load may drop every ACL without a record saying so.
            acls=dict(self.acl_control.acls)
            if delta.changed_acls or len(previous.acls) != len(self.acl_control.acls)
            else previous.acls,
            scram_credentials=dict(self.scram_control.credentials)
            if delta.changed_scram
            or len(previous.scram_credentials) != len(self.scram_control.credentials)
            else previous.scram_credentials,
            client_quotas={
                entity: dict(values) for entity, values in self.client_quota_control.quotas.items()
            },
            delegation_tokens=dict(self.delegation_token_control.tokens)
            if delta.changed_tokens
            or len(previous.delegation_tokens) != len(self.delegation_token_control.tokens)
            else previous.delegation_tokens,
        )
        if not notify:
            return
        metadata_delta = MetadataDelta(
            changed_topics=changed,
            deleted_topics=dict(delta.deleted_topics),
            changed_topic_configs=frozenset(delta.changed_topic_configs),
            changed_broker_configs=frozenset(delta.changed_broker_configs),
            changed_group_configs=frozenset(delta.changed_group_configs),
            changed_brokers=frozenset(delta.changed_brokers),
            changed_acls=dict(delta.changed_acls),
            changed_client_quotas=frozenset(delta.changed_client_quotas),
        )
        for callback in list(self._subscribers):
            try:
                callback(metadata_delta, self.image)
            except Exception:
                logger.exception("metadata subscriber %r failed", callback)

    # -- the quorum ----------------------------------------------------------------------------
    def active_controller_id(self) -> int:
        """The node Metadata and DescribeCluster name as the controller."""
        return self.node_id

    @abc.abstractmethod
    def _log_end_offset(self) -> int: ...

    @abc.abstractmethod
    def quorum_state(self) -> QuorumView:
        """DescribeQuorum's view: leader, epoch, high watermark, and (node id,
        log end offset, last fetch time in ms since the epoch) of every voter
        and observer."""

    # -- brokers and producer ids ---------------------------------------------------------
    # Whether a broker is in service as soon as it registers; a quorum's
    # brokers are fenced until a heartbeat shows them caught up
    # (RaftQuorumController sets False).
    _unfence_on_register = True

    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: list[Endpoint],
        rack: str | None,
        features: Iterable[tuple[str, int, int]] = ((METADATA_VERSION, 1, METADATA_VERSION_LEVEL),),
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> int:
        """Register (or re-register) a broker; returns its new broker epoch.
        ``features``: (name, min, max) levels the broker supports;
        ``log_dirs``: the ids of its online log dirs (KIP-858)."""

        def operation() -> ControllerResult[int]:
            result = self.cluster_control.register_broker(
                broker_id,
                incarnation_id,
                listeners,
                rack,
                self._log_end_offset(),
                list(features),
                unfence=self._unfence_on_register,
                log_dirs=log_dirs,
            )
            if not result.records or not self._unfence_on_register:
                return result
            # Partitions left without a leader while it was away get it back.
            return ControllerResult(
                result.response,
                result.records + self.replication_control.broker_unfenced(broker_id),
            )

        return await self._run(operation)

    async def unregister_broker(self, broker_id: int) -> None:
        """Remove a broker's registration; its leaderships and ISR places go
        first, as when it is fenced (Kafka's handleBrokerUnregistered)."""

        def operation() -> ControllerResult[None]:
            result = self.cluster_control.unregister_broker(broker_id)
            return ControllerResult(
                None, self.replication_control.broker_fenced(broker_id) + result.records
            )

        await self._run(operation)

    async def fence_broker(self, broker_id: int) -> None:
        """Take a broker out of service: FenceBrokerRecord plus the
        leadership and ISR changes of its partitions."""

        def operation() -> ControllerResult[None]:
            records = self.cluster_control.fence_broker(broker_id).records
            if records:  # not fenced yet
                records = records + self.replication_control.broker_fenced(broker_id)
            return ControllerResult(None, records)

        await self._run(operation)

    async def assign_replicas_to_dirs(
        self,
        broker_id: int,
        broker_epoch: int,
        assignments: Mapping[uuid.UUID, Sequence[tuple[uuid.UUID, int]]],
    ) -> dict[tuple[uuid.UUID, uuid.UUID, int], int]:
        """AssignReplicasToDirs: {(directory, topic id, partition): error code}."""
        return await self._run(
            lambda: self.replication_control.assign_replicas_to_dirs(
                broker_id, broker_epoch, assignments
            )
        )

    async def allocate_producer_ids(self, broker_id: int) -> tuple[int, int]:
        """A block of producer ids for ``broker_id``: (first id, count)."""

        def operation() -> ControllerResult[tuple[int, int]]:
            registration = self.cluster_control.brokers.get(broker_id)
            epoch = registration.epoch if registration is not None else -1
            return self.producer_id_control.generate_next_producer_id(broker_id, epoch)

        return await self._run(operation)

    # -- topics ------------------------------------------------------------------------------
    async def create_topics(
        self, specs: list[TopicSpec], validate_only: bool = False
    ) -> list[CreatedTopic]:
        return await self._run(lambda: self.replication_control.create_topics(specs), validate_only)

    async def auto_create_topics(
        self,
        names: Iterable[str],
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """Create topics with the broker defaults (num.partitions,
        default.replication.factor) unless given; {name: error code}."""
        specs = [
            TopicSpec(
                name,
                num_partitions if num_partitions is not None else -1,
                replication_factor if replication_factor is not None else -1,
                None,
                dict(configs or {}),
            )
            for name in dict.fromkeys(names)
        ]
        results = await self.create_topics(specs)
        return {r.name: (r.error.code if r.error is not None else 0) for r in results}

    async def delete_topics(
        self, names: list[str | None], topic_ids: list[uuid.UUID]
    ) -> list[tuple[str | None, uuid.UUID, errors.KafkaError | None]]:
        """(name, topic_id, KafkaError | None) per entry."""
        return await self._run(lambda: self.replication_control.delete_topics(names, topic_ids))

    async def create_partitions(
        self, topics: list[tuple[str, int, list[list[int]] | None]], validate_only: bool = False
    ) -> list[errors.KafkaError | None]:
        """topics: (name, new total count, assignments); KafkaError | None per topic."""

        def operation() -> ControllerResult[list[errors.KafkaError | None]]:
            counts: dict[str, int] = {}
            for name, _, _ in topics:
                counts[name] = counts.get(name, 0) + 1
            results: list[errors.KafkaError | None] = []
            records: list[MetadataRecord] = []
            for name, count, assignments in topics:
                try:
                    if counts[name] > 1:
                        raise errors.InvalidRequestException("Duplicate topic name.")
                    records += self.replication_control.create_partitions(
                        name, count, assignments
                    ).records
                    # Kafka's createPartitions catches BoundedListTooLongException
                    # per topic (that topic gets UNKNOWN_SERVER_ERROR; KAFKA-19673
                    # proposes CreateTopics' rule); kfast refuses the request as
                    # CreateTopics does.
                    check_records_bound(len(records))
                    results.append(None)
                except errors.KafkaError as exc:
                    results.append(exc)
            return ControllerResult(results, records)

        return await self._run(operation, validate_only)

    async def elect_leaders(
        self, election_type: int, partitions: Iterable[tuple[str, int]] | None
    ) -> PartitionErrors:
        """{(topic, partition): KafkaError | None}; ``partitions`` None = all."""
        return await self._run(
            lambda: self.replication_control.elect_leaders(election_type, partitions)
        )

    async def alter_partition_reassignments(
        self,
        requests: Iterable[tuple[str, int, Sequence[int] | None]],
        allow_replication_factor_change: bool = True,
    ) -> PartitionErrors:
        """requests: (topic, index, target replicas | None); {(topic, index): KafkaError | None}."""
        return await self._run(
            lambda: self.replication_control.alter_partition_reassignments(
                requests, allow_replication_factor_change
            )
        )

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[AlterPartitionTopic], version: int = 3
    ) -> list[list[AlterPartitionResult]]:
        """A partition leader's ISR change; per topic, a list of
        AlterPartitionResult (ReplicationControlManager.alter_partition)."""
        return await self._run(
            lambda: self.replication_control.alter_partition(
                broker_id, broker_epoch, topics, version
            )
        )

    async def update_features(
        self, updates: list[tuple[str, int, int]], validate_only: bool = False
    ) -> dict[str, errors.KafkaError | None]:
        """(feature, max level, upgrade type) triples; {feature: KafkaError | None}."""
        return await self._run(
            lambda: self.feature_control.update_features(
                updates, self.node_id, self.kraft_version()
            ),
            validate_only,
        )

    def kraft_version(self) -> int:
        """kraft.version: 0 (static voters) without a Raft log's word."""
        return 0

    # -- ACLs ------------------------------------------------------------------------------------
    async def create_acls(self, acls: list[Acl]) -> list[errors.KafkaError | None]:
        """KafkaError | None per ACL (AclControlManager.create_acls)."""
        return await self._run(lambda: self.acl_control.create_acls(acls))

    async def delete_acls(
        self, filters: list[AclFilter]
    ) -> list[tuple[errors.KafkaError | None, list[Acl]]]:
        """(KafkaError | None, [deleted Acl]) per filter."""
        return await self._run(lambda: self.acl_control.delete_acls(filters))

    # -- SCRAM credentials ---------------------------------------------------------------------
    async def alter_user_scram_credentials(
        self,
        deletions: list[tuple[str, int]],
        upsertions: list[tuple[str, int, int, bytes, bytes]],
    ) -> list[tuple[str, errors.KafkaError | None]]:
        """[(user, KafkaError | None)] (ScramControlManager.alter_credentials)."""
        return await self._run(lambda: self.scram_control.alter_credentials(deletions, upsertions))

    # -- delegation tokens ---------------------------------------------------------------------
    async def create_delegation_token(
        self,
        requester: KafkaPrincipal,
        owner: KafkaPrincipal | None,
        renewers: list[KafkaPrincipal],
        max_lifetime_ms: int,
    ) -> CreatedToken:
        """DelegationTokenControlManager.create_token, committed."""
        return await self._run(
            lambda: self.delegation_token_control.create_token(
                requester, owner, renewers, max_lifetime_ms
            )
        )

    async def renew_delegation_token(
        self, principal: KafkaPrincipal, hmac: bytes, renew_period_ms: int
    ) -> tuple[errors.KafkaError | None, int]:
        """(error, new expiry timestamp) (DelegationTokenControlManager.renew_token)."""
        return await self._run(
            lambda: self.delegation_token_control.renew_token(principal, hmac, renew_period_ms)
        )

    async def expire_delegation_token(
        self, principal: KafkaPrincipal, hmac: bytes, expiry_period_ms: int
    ) -> tuple[errors.KafkaError | None, int]:
        """(error, new expiry timestamp) (DelegationTokenControlManager.expire_token)."""
        return await self._run(
            lambda: self.delegation_token_control.expire_token(principal, hmac, expiry_period_ms)
        )

    async def sweep_expired_delegation_tokens(self) -> int:
        """Remove every expired token; returns how many."""

        def operation() -> ControllerResult[int]:
            records = self.delegation_token_control.sweep_expired_tokens()
            return ControllerResult(len(records), records)

        return await self._run(operation)

    # -- configs -------------------------------------------------------------------------------
    async def incremental_alter_configs(
        self,
        changes: list[tuple[int, str, list[tuple[str, int, str | None]]]],
        validate_only: bool = False,
    ) -> list[errors.KafkaError | None]:
        """changes: (resource type, name, [(key, op, value)]); KafkaError | None each."""
        return await self._run(
            lambda: self.configuration_control.incremental_alter_configs(changes), validate_only
        )

    async def alter_client_quotas(
        self,
        alterations: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
        validate_only: bool = False,
    ) -> list[errors.KafkaError | None]:
        """alterations: (entity pairs, [(key, value or None)]); KafkaError | None each."""
        return await self._run(
            lambda: self.client_quota_control.alter_client_quotas(alterations), validate_only
        )

    async def legacy_alter_configs(
        self, changes: list[tuple[int, str, Mapping[str, str | None]]], validate_only: bool = False
    ) -> list[errors.KafkaError | None]:
        """changes: (resource type, name, {key: value}); KafkaError | None each."""
        return await self._run(
            lambda: self.configuration_control.legacy_alter_configs(changes), validate_only
        )
