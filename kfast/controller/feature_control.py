"""FeatureControlManager: the cluster's finalized feature levels.

KRaft finalizes ``metadata.version`` (which record versions the metadata log
may hold) when the cluster is formatted; brokers advertise the finalized
levels in ApiVersions. kfast writes its level once, at bootstrap, as a
FeatureLevelRecord.
"""
from __future__ import annotations

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.records import FeatureLevelRecord
from kfast.protocol import errors

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

    def supported_range(self, name: str) -> tuple[int, int]:
        """Levels this controller can run a feature at: metadata.version only
        at kfast's level (other levels would need other record versions);
        every other feature only disabled (0)."""
        if name == METADATA_VERSION:
            return METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL
        return 0, 0

    def supported_features(self) -> dict[str, tuple[int, int]]:
        """{feature: (min level, max level)} this node supports, for
        ApiVersions' SupportedFeatures: only the features kfast can run at a
        level above 0 (a client reading ApiVersions v3 rejects min 0)."""
        return {name: self.supported_range(name) for name in (METADATA_VERSION,)}

    def update_features(self, updates: list[tuple[str, int]], node_id: int) -> ControllerResult:
        """UpdateFeatures: (feature, level) pairs; response {feature:
        KafkaError | None}. Only the current levels are accepted, so a valid
        request changes nothing."""
        results = {}
        for name, level in updates:
            low, high = self.supported_range(name)
            if name == METADATA_VERSION and level < 1:
                results[name] = errors.InvalidUpdateVersionException(
                    "The metadata.version feature cannot be disabled.")
            elif not low <= level <= high:
                results[name] = errors.InvalidUpdateVersionException(
                    f"Invalid update version {level} for feature {name}. Local controller "
                    f"{node_id} only supports versions {low}-{high}")
            else:
                results[name] = None
        return ControllerResult(results, [])

    def replay(self, record) -> None:
        if record.feature_level == 0:
            # Level 0 removes the feature (Kafka's convention).
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level
