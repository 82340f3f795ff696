"""Metadata snapshots: the whole cluster state as of one metadata offset.

The file format (``<end offset %020d>-<epoch %010d>.checkpoint`` next to the
metadata log segments; a SnapshotHeader control batch, the records, a
SnapshotFooter control batch; published atomically) is KRaft's and lives in
kfast.raft.snapshots. This module adds what is the controller's: which
records rebuild a MetadataImage.
"""

from __future__ import annotations

from kfast.controller.acl_control import acl_record
from kfast.controller.cluster_control import SECURITY_PROTOCOLS
from kfast.controller.delegation_token_control import token_record
from kfast.controller.metadata.image import MetadataImage
from kfast.controller.metadata.records import (
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kfast.controller.scram_control import scram_record
from kfast.protocol.constants import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_CLIENT_METRICS,
    CONFIG_RESOURCE_GROUP,
    CONFIG_RESOURCE_TOPIC,
)


def image_records(image: MetadataImage, next_producer_id: int) -> list[MetadataRecord]:
    """Records whose replay, into empty control managers, rebuilds ``image``
    (and the producer id allocation point)."""
    records: list[MetadataRecord] = [
        FeatureLevelRecord(name=name, feature_level=level)
        for name, level in sorted(image.features.items())
    ]
    for broker_id in sorted(image.brokers):
        registration = image.brokers[broker_id]
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=registration.incarnation_id,
                broker_epoch=registration.epoch,
                rack=registration.rack,
                fenced=registration.fenced,
                in_controlled_shutdown=registration.in_controlled_shutdown,
                log_dirs=list(registration.directories),
                end_points=[
                    RegisterBrokerRecord.BrokerEndpoint(
                        name=e.name,
                        host=e.host,
                        port=e.port,
                        security_protocol=SECURITY_PROTOCOLS[e.security_protocol],
                    )
                    for e in registration.listeners.values()
                ],
            )
        )
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        records.append(TopicRecord(name=name, topic_id=topic.topic_id))
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            records.append(
                PartitionRecord(
                    partition_id=index,
                    topic_id=topic.topic_id,
                    replicas=list(p.replicas),
                    isr=list(p.isr),
                    removing_replicas=list(p.removing_replicas),
                    adding_replicas=list(p.adding_replicas),
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    directories=list(p.directories),
                )
            )
    for resource_type, configs in (
        (CONFIG_RESOURCE_TOPIC, image.topic_configs),
        (CONFIG_RESOURCE_BROKER, image.broker_configs),
        (CONFIG_RESOURCE_CLIENT_METRICS, image.client_metrics_configs),
        (CONFIG_RESOURCE_GROUP, image.group_configs),
    ):
        for resource in sorted(configs):
            for key, value in sorted(configs[resource].items()):
                records.append(
                    ConfigRecord(
                        resource_type=resource_type, resource_name=resource, name=key, value=value
                    )
                )
    records += [acl_record(acl_id, acl) for acl_id, acl in image.acls.items()]
    records += [
        scram_record(user, mechanism_type, credential)
        for (user, mechanism_type), credential in image.scram_credentials.items()
    ]
    records += [token_record(image.delegation_tokens[t]) for t in sorted(image.delegation_tokens)]
    for entity in sorted(
        image.client_quotas, key=lambda e: [(t, n or "", n is None) for t, n in e]
    ):
        for quota_key, quota in sorted(image.client_quotas[entity].items()):
            records.append(
                ClientQuotaRecord(
                    entity=[
                        ClientQuotaRecord.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity
                    ],
                    key=quota_key,
                    value=quota,
                )
            )
    if next_producer_id > 0:
        records.append(
            ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=next_producer_id)
        )
    return records
