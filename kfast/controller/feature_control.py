"""FeatureControlManager: the cluster's finalized feature levels.

KRaft finalizes ``metadata.version`` (which record versions the metadata log
may hold) when the cluster is formatted; brokers advertise the finalized
levels in ApiVersions. kfast writes its level once, at bootstrap, as a
FeatureLevelRecord.
"""
from __future__ import annotations

from kfast.controller.metadata.records import FeatureLevelRecord

METADATA_VERSION = "metadata.version"
# MetadataVersion.IBP_3_9_IV0: the newest level whose record versions kfast
# writes (PartitionRecord v0, RegisterBrokerRecord v3).
METADATA_VERSION_LEVEL = 21


class FeatureControlManager:
    def __init__(self):
        self.finalized: dict[str, int] = {}

    def bootstrap_records(self) -> list:
        """Records that format a new cluster (an empty metadata log)."""
        return [FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL)]

    def replay(self, record) -> None:
        if record.feature_level == 0:
            # Level 0 removes the feature (Kafka's convention).
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level
