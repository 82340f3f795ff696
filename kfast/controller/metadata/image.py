"""MetadataImage: the cluster metadata a broker serves from, at one log offset.

KRaft keeps cluster metadata as a log of records (topics, partitions, configs,
brokers, features); replaying the log yields an image. Brokers answer
Metadata, DescribeConfigs and friends from the current image and react to
each change through a MetadataDelta (create/delete partition logs, become
leader or follower). Images are immutable: a new offset gives a new image, so
a handler that read an image sees one consistent cluster state.

    image.topics_by_name["orders"].partitions[0].leader      -> 1
    image.topic_configs.get("orders", {})                    -> overrides only
    image.brokers[1].listeners["PLAINTEXT"]                  -> Endpoint(...)
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kfast.protocol.constants import (
    DIRECTORY_LOST,
    DIRECTORY_MIGRATING,
    DIRECTORY_UNASSIGNED,
)
from kfast.security.acl import Acl
from kfast.security.delegation_token import TokenInformation
from kfast.security.scram import ScramCredential
from kfast.storage.manager import METADATA_TOPIC_ID  # noqa: F401 (re-exported)

# A client quota entity: its (entity type, name or None for the default)
# pairs, sorted by type (kfast.controller.client_quota_control).
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker as clients reach it (advertised)."""

    name: str  # listener name, e.g. "PLAINTEXT"
    host: str
    port: int
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """Assignment and leadership of one partition (KRaft PartitionRecord state)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()  # KIP-966 ELR
    last_known_elr: tuple[int, ...] = ()
    directories: tuple[uuid.UUID, ...] = ()  # log dir id per replica


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    listeners: Mapping[str, Endpoint]
    rack: str | None = None
    fenced: bool = False
    in_controlled_shutdown: bool = False
    # KIP-858: the ids of its online log dirs (meta.properties directory.id).
    directories: tuple[uuid.UUID, ...] = ()

    def has_online_dir(self, directory: uuid.UUID) -> bool:
        """Kafka's DirectoryId.isOnline: an unassigned or migrating replica
        may be anywhere, so counts as online, as does any dir of a broker
        that registered none; LOST never is."""
        if directory in (DIRECTORY_UNASSIGNED, DIRECTORY_MIGRATING):
            return True
        if directory == DIRECTORY_LOST:
            return False
        return not self.directories or directory in self.directories


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str
    offset: int = -1  # last metadata log offset applied
    controller_id: int = -1
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    # Dynamic config overrides only (static defaults live in kfast.config):
    # topic name -> {key: value}; broker "" (cluster-wide default) or str(id).
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # CLIENT_METRICS resources (KIP-714 subscriptions): name -> {key: value}.
    client_metrics_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # group id ->
    features: Mapping[str, int] = field(default_factory=dict)  # e.g. {"metadata.version": 27}
    acls: Mapping[uuid.UUID, Acl] = field(default_factory=dict)  # ACL id -> ACL
    # (user, SCRAM mechanism type) -> ScramCredential (kfast.security.scram)
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=dict)
    # Client quotas: entity ((type, name or None for the default), ... sorted
    # by type) -> {quota key: value} (kfast.controller.client_quota_control).
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    # Delegation tokens: token id -> TokenInformation (kfast.security.delegation_token)
    delegation_tokens: Mapping[str, TokenInformation] = field(default_factory=dict)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics_by_name.get(topic)
        return None if t is None else t.partitions.get(partition)


@dataclass(frozen=True, slots=True)
class MetadataDelta:
    """What changed between two images, for the broker's metadata publisher."""

    changed_topics: Mapping[str, TopicImage] = field(default_factory=dict)  # created or altered
    deleted_topics: Mapping[str, TopicImage] = field(default_factory=dict)
    changed_topic_configs: frozenset[str] = frozenset()
    changed_broker_configs: frozenset[str] = frozenset()
    changed_group_configs: frozenset[str] = frozenset()
    changed_brokers: frozenset[int] = frozenset()
    changed_acls: Mapping[uuid.UUID, Acl | None] = field(default_factory=dict)  # None: removed
    changed_client_quotas: frozenset[QuotaEntity] = frozenset()  # entities set, changed or removed
