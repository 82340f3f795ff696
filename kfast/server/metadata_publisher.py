"""BrokerMetadataPublisher: apply each committed metadata change to this
broker's logs and partitions (Kafka's BrokerMetadataPublisher +
ReplicaManager.applyDelta).

The controller calls ``on_metadata_update(delta, image)`` on the event loop
after every committed change, and once at start with the replayed image.
Created or changed topics get a Log (created on first sight, in the log dir
with the fewest partitions) and a Partition with the registration's leader
epoch and ISR; deleted topics lose their partitions and their logs are
renamed for deletion; changed topic configs are applied to the live logs.
"""
from __future__ import annotations

import logging

from kfast.controller.metadata.image import MetadataDelta, MetadataImage
from kfast.server.partition import kafka_uuid_string

logger = logging.getLogger(__name__)


class BrokerMetadataPublisher:
    def __init__(self, broker):
        self.broker = broker
        self._first = True

    @property
    def published(self) -> bool:
        return not self._first

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        broker = self.broker
        broker.metadata_image = image
        replica_manager = broker.replica_manager
        log_manager = broker.log_manager
        if self._first:
            # The first call carries the replayed image: every topic in it is
            # new to this process.
            changed = dict(image.topics_by_name)
            changed.update(delta.changed_topics)
            self._first = False
        else:
            changed = delta.changed_topics
        for name, topic in delta.deleted_topics.items():
            for index in topic.partitions:
                replica_manager.remove_partition(name, index)
                try:
                    log_manager.delete_log(name, index)
                except Exception:
                    logger.exception("could not delete the log of %s-%d", name, index)
        for name, topic in changed.items():
            overrides = image.topic_configs.get(name)
            for index, registration in topic.partitions.items():
                if broker.node_id not in registration.replicas:
                    if replica_manager.remove_partition(name, index) is not None:
                        log_manager.delete_log(name, index)
                    continue
                try:
                    log = log_manager.get_or_create_log(
                        name, index, topic_id=kafka_uuid_string(topic.topic_id),
                        overrides=dict(overrides) if overrides else None)
                except Exception:
                    logger.exception("could not create the log of %s-%d", name, index)
                    continue
                replica_manager.apply_partition(name, topic.topic_id, index, registration, log)
        for name in delta.changed_topic_configs:
            if name in image.topics_by_name:
                log_manager.update_topic_config(name, dict(image.topic_configs.get(name, {})))
