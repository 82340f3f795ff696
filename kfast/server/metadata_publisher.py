"""BrokerMetadataPublisher: apply each committed metadata change to this
broker's logs and partitions (Kafka's BrokerMetadataPublisher +
ReplicaManager.applyDelta).

The controller calls ``on_metadata_update(delta, image)`` on the event loop
after every committed change, and once at start with the replayed image.

What can be done in memory happens in the callback: the broker's image is
replaced, partitions of deleted topics (or moved off this broker) leave the
ReplicaManager, and leadership/ISR changes of partitions that already have
their log are applied. What touches the disk -- creating a partition's log
(directories, preallocated indexes, an fsynced partition.metadata),
renaming deleted logs away, applying topic configs and the broker's dynamic
log defaults -- runs in the executor,
one change after the other in commit order, so a topic deleted and created
again under the same name never sees its old directory. Until a new
partition's log exists, Metadata reports it LEADER_NOT_AVAILABLE and
produce/fetch get UNKNOWN_TOPIC_OR_PARTITION, both retriable, as with
Kafka while a new topic propagates. A log that cannot be created (no file
descriptors left) leaves its partition offline, answering
KAFKA_STORAGE_ERROR as Kafka's markPartitionOffline does; unlike Kafka
(which would take the whole log dir offline until a restart) the creation
is tried again with a backoff, so the partition comes online once
descriptors are free. ``await wait_idle()`` waits for the disk work of
every change published so far.

Dynamic broker configs (``delta.changed_broker_configs``, and the replayed
image at start) give the broker a new current configuration (Kafka's
DynamicBrokerConfig): per-broker overrides over the cluster-wide defaults
over server.properties. Its topic-config synonyms (log.retention.ms,
log.segment.bytes, ...) become the defaults of every live log and of logs
created later; a topic's own override still wins (Kafka's
DynamicLogConfig.reconfigure). The replication throttles follow the configs
at once, in memory: the broker's rates through ``broker.reconfigure``, each
topic's throttled replicas through the ReplicaManager.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kfast.config import KafkaConfig
from kfast.controller.config_describer import dynamic_broker_overrides
from kfast.controller.metadata.image import (
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kfast.protocol.errors import KafkaStorageException
from kfast.server.partition import kafka_uuid_string

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker
    from kfast.storage.log import Log

    # A partition to create on disk: (topic, topic id, index, registration,
    # the topic's config overrides).
    _ToCreate = tuple[str, uuid.UUID, int, PartitionRegistration, Mapping[str, str] | None]
    # A created one: (topic, topic id, index, registration, its log).
    _Created = tuple[str, uuid.UUID, int, PartitionRegistration, Log]

logger = logging.getLogger(__name__)

# Backoff of the retries of logs that could not be created.
_RETRY_MIN_S = 0.5
_RETRY_MAX_S = 8.0


class BrokerMetadataPublisher:
    """``on_partitions_applied(topics)``: told the names of the topics whose
    partitions were just applied to this broker (leadership included), so
    that coordinators follow the leadership of their internal topics."""

    def __init__(
        self,
        broker: KafkaBroker,
        on_partitions_applied: Callable[[set[str]], None] | None = None,
    ) -> None:
        self.broker = broker
        self._on_partitions_applied = on_partitions_applied or (lambda topics: None)
        self._first = True
        self._tail: asyncio.Future[None] | None = None
        # The configuration last given to broker.reconfigure (compared by
        # identity: with_dynamic returns the static config itself when no
        # dynamic config is left).
        self._config_in_force = broker.config
        # Logs that could not be created are tried again after this delay
        # (doubling up to _RETRY_MAX_S while they keep failing).
        self._retry_delay = _RETRY_MIN_S
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def published(self) -> bool:
        return not self._first

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        broker = self.broker
        broker.metadata_image = image
        broker.quotas.update(image.client_quotas)
        replica_manager = broker.replica_manager
        if replica_manager is None:
            raise RuntimeError("metadata published to a broker that is not started")
        current_config = None
        if self._first or delta.changed_broker_configs:
            current_config = broker.config.with_dynamic(
                dynamic_broker_overrides(image, broker.node_id)
            )
            if current_config is self._config_in_force:
                current_config = None  # still server.properties alone
            else:
                self._config_in_force = current_config
                broker.reconfigure(current_config)
        throttled_topics = image.topic_configs if self._first else delta.changed_topic_configs
        for name in (*throttled_topics, *delta.deleted_topics):
            replica_manager.update_replication_throttles(name, image.topic_configs.get(name))
        if self._first:
            # The first call carries the replayed image: every topic in it is
            # new to this process.
            changed: Mapping[str, TopicImage] = {**image.topics_by_name, **delta.changed_topics}
            self._first = False
        else:
            changed = delta.changed_topics
        doomed: list[tuple[str, int]] = []
        for name, topic in delta.deleted_topics.items():
            for index in topic.partitions:
                replica_manager.remove_partition(name, index)
                doomed.append((name, index))
        to_create: list[_ToCreate] = []
        for name, topic in changed.items():
            for index, registration in topic.partitions.items():
                if broker.node_id not in registration.replicas:
                    if replica_manager.remove_partition(name, index) is not None:
                        doomed.append((name, index))
                    continue
                existing = replica_manager.get_partition(name, index)
                if existing is not None and existing.topic_id == topic.topic_id:
                    replica_manager.apply_partition(
                        name, topic.topic_id, index, registration, existing.log
                    )
                else:
                    to_create.append(
                        (name, topic.topic_id, index, registration, image.topic_configs.get(name))
                    )
        configs = [
            (name, dict(image.topic_configs.get(name, {})))
            for name in delta.changed_topic_configs
            if name in image.topics_by_name
        ]
        if doomed or to_create or configs or current_config is not None:
            self._tail = asyncio.ensure_future(
                self._apply_on_disk(self._tail, doomed, to_create, configs, current_config)
            )
        self._on_partitions_applied(changed.keys() | delta.deleted_topics.keys())

    async def _apply_on_disk(
        self,
        previous: asyncio.Future[None] | None,
        doomed: list[tuple[str, int]],
        to_create: list[_ToCreate],
        configs: list[tuple[str, dict[str, str]]],
        current_config: KafkaConfig | None,
    ) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        loop = asyncio.get_running_loop()
        log_manager = self.broker.log_manager
        replica_manager = self.broker.replica_manager
        if log_manager is None or replica_manager is None:
            raise RuntimeError("metadata published to a broker that is not started")

        uncreated: list[tuple[str, uuid.UUID, int, str]] = []

        def delete_and_create() -> list[_Created]:
            for name, index in doomed:
                try:
                    log_manager.delete_log(name, index)
                except Exception:
                    logger.exception("could not delete the log of %s-%d", name, index)
            if current_config is not None:
                # Before creating logs, so that new logs get the new defaults.
                try:
                    log_manager.reconfigure_default_log_config(current_config)
                except Exception:
                    logger.exception("could not apply the dynamic broker configs")
            created: list[_Created] = []
            for name, topic_id, index, registration, overrides in to_create:
                existing = replica_manager.get_partition(name, index)
                if existing is not None and existing.topic_id == topic_id:
                    continue  # a retry racing a change that created it
                try:
                    log = log_manager.get_or_create_log(
                        name,
                        index,
                        topic_id=kafka_uuid_string(topic_id),
                        overrides=dict(overrides) if overrides else None,
                    )
                except KafkaStorageException as exc:
                    # A failed log dir (logged by the failure channel) or no
                    # descriptors left: no traceback for an expected error.
                    logger.error("could not create the log of %s-%d: %s", name, index, exc)
                    uncreated.append((name, topic_id, index, str(exc)))
                    continue
                except Exception:
                    logger.exception("could not create the log of %s-%d", name, index)
                    continue
                created.append((name, topic_id, index, registration, log))
            for name, overrides in configs:
                try:
                    log_manager.update_topic_config(name, overrides)
                except Exception:
                    logger.exception("could not apply the configs of %s", name)
            return created

        created = await loop.run_in_executor(None, delete_and_create)
        image = self.broker.metadata_image
        if image is None:
            return  # unreachable: the image was published before this ran
        for name, topic_id, index, registration, log in created:
            # A later change may have deleted the topic meanwhile.
            current = image.topics_by_name.get(name)
            if current is None or current.topic_id != topic_id:
                continue
            registration = current.partitions.get(index, registration)
            replica_manager.apply_partition(name, topic_id, index, registration, log)
        if created:
            self._on_partitions_applied({name for name, *_ in created})
        self._mark_uncreated(image, uncreated)

    def _mark_uncreated(
        self, image: MetadataImage, uncreated: list[tuple[str, uuid.UUID, int, str]]
    ) -> None:
        """Logs that could not be created (no descriptors left, Kafka's
        markPartitionOffline): their partitions answer KAFKA_STORAGE_ERROR,
        and creating them is tried again, with a backoff, until it works or
        they leave this broker -- not only at the next metadata change."""
        replica_manager = self.broker.replica_manager
        if replica_manager is None:
            return
        for name, topic_id, index, reason in uncreated:
            current = image.topics_by_name.get(name)
            registration = current.partitions.get(index) if current is not None else None
            if (
                current is not None
                and current.topic_id == topic_id
                and registration is not None
                and self.broker.node_id in registration.replicas
            ):
                replica_manager.mark_uncreated(name, index, reason)
        if not replica_manager.uncreated_partitions():
            self._retry_delay = _RETRY_MIN_S
        elif self._retry is None and not self._closed:
            self._retry = asyncio.get_running_loop().call_later(
                self._retry_delay, self._retry_uncreated
            )
            self._retry_delay = min(self._retry_delay * 2, _RETRY_MAX_S)

    def _retry_uncreated(self) -> None:
        self._retry = None
        image = self.broker.metadata_image
        replica_manager = self.broker.replica_manager
        if self._closed or image is None or replica_manager is None:
            return
        to_create: list[_ToCreate] = []
        for name, index in replica_manager.uncreated_partitions():
            topic = image.topics_by_name.get(name)
            registration = topic.partitions.get(index) if topic is not None else None
            if topic is None or registration is None:
                continue
            to_create.append(
                (name, topic.topic_id, index, registration, image.topic_configs.get(name))
            )
        if to_create:
            self._tail = asyncio.ensure_future(
                self._apply_on_disk(self._tail, [], to_create, [], None)
            )

    def close(self) -> None:
        """No more retries (the broker is stopping)."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    async def wait_idle(self) -> None:
        """Wait until the disk work of every published change is done."""
        while self._tail is not None and not self._tail.done():
            tail = self._tail
            await asyncio.gather(asyncio.shield(tail), return_exceptions=True)
