"""FeatureControlManager: the cluster's finalized feature levels.

KRaft finalizes ``metadata.version`` (which record versions the metadata log
may hold) when the cluster is formatted; brokers advertise the finalized
levels in ApiVersions. kfast writes its levels once, at bootstrap, as
FeatureLevelRecords:

* ``metadata.version``: kfast's one level (it writes one set of record
  versions); UpdateFeatures accepts only that level.
* ``transaction.version`` (KIP-890): 0 the original transaction protocol,
  1 flexible __transaction_state records, 2 an epoch bump per transaction
  and partitions added by their leaders (Produce v12, TxnOffsetCommit v5).
  A new cluster is formatted at 2, the level ``kafka-storage format`` gives
  a Kafka 4.x cluster at its latest metadata.version; UpdateFeatures moves
  it anywhere in 0-2 (Kafka's TransactionVersion levels depend on no
  metadata.version level). Level 0 removes the record's feature, as in
  Kafka. A cluster formatted before kfast knew the feature has no record and
  stays at 0 until it is raised.
"""

from __future__ import annotations

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.records import FeatureLevelRecord, MetadataRecord
from kfast.protocol import errors

METADATA_VERSION = "metadata.version"
# MetadataVersion.IBP_3_9_IV0: the newest level whose record versions kfast
# writes (PartitionRecord v0, RegisterBrokerRecord v3).
METADATA_VERSION_LEVEL = 21
TRANSACTION_VERSION = "transaction.version"
# TransactionVersion.TV_2, the latest level and the one new clusters get.
TRANSACTION_VERSION_LEVEL = 2
# UpdateFeatures upgrade types (FeatureUpdate.UpgradeType): v0's
# allow_downgrade=true reads as SAFE_DOWNGRADE.
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
# Kafka's KRaftVersion: 0 a static quorum (controller.quorum.voters), 1 a
# dynamic one (KIP-853). Not a FeatureLevelRecord: the Raft layer's
# KRaftVersionRecord sets it, and brokers and controllers report the level
# of their Raft log (Kafka's raftClient.kraftVersion()).
KRAFT_VERSION = "kraft.version"
KRAFT_VERSION_LEVELS = (0, 1)


class FeatureControlManager:
    def __init__(self) -> None:
        self.finalized: dict[str, int] = {}

    def bootstrap_records(self) -> list[MetadataRecord]:
        """Records that format a new cluster (an empty metadata log)."""
        return [
            FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL),
            FeatureLevelRecord(name=TRANSACTION_VERSION, feature_level=TRANSACTION_VERSION_LEVEL),
        ]

    def supported_range(self, name: str) -> tuple[int, int]:
        """Levels this controller can run a feature at: metadata.version only
        at kfast's level (other levels would need other record versions),
        transaction.version 0-2; every other feature only disabled (0)."""
        if name == METADATA_VERSION:
            return METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL
        if name == TRANSACTION_VERSION:
            return 0, TRANSACTION_VERSION_LEVEL
        if name == KRAFT_VERSION:
            return KRAFT_VERSION_LEVELS
        return 0, 0

    def supported_features(self) -> dict[str, tuple[int, int]]:
        """{feature: (min level, max level)} this node supports, for
        ApiVersions' SupportedFeatures and BrokerRegistration: the features
        kfast can run at a level above 0, and kraft.version. ApiVersions
        below v4 leaves out the ranges with a minimum of 0 (KAFKA-17492)."""
        return {
            name: self.supported_range(name)
            for name in (METADATA_VERSION, TRANSACTION_VERSION, KRAFT_VERSION)
        }

    def update_features(
        self, updates: list[tuple[str, int, int]], node_id: int, kraft_version: int = 0
    ) -> ControllerResult[dict[str, errors.KafkaError | None]]:
        """UpdateFeatures: (feature, level, upgrade type) triples; response
        {feature: KafkaError | None}. metadata.version accepts only its
        level; transaction.version any level in its range, a lower one only
        with a downgrade upgrade type (Kafka's FeatureControlManager), written
        as a FeatureLevelRecord when it changes. Nothing is written unless
        every update is valid (Kafka applies a request atomically).
        kraft.version accepts only ``kraft_version``, the Raft log's level
        (kfast does not upgrade a static quorum to a dynamic one)."""
        results: dict[str, errors.KafkaError | None] = {}
        records: list[MetadataRecord] = []
        for name, level, upgrade_type in updates:
            low, high = self.supported_range(name)
            current = self.finalized.get(name, 0)
            if name == KRAFT_VERSION:
                low = high = current = kraft_version
            if name == METADATA_VERSION and level < 1:
                results[name] = errors.InvalidUpdateVersionException(
                    "The metadata.version feature cannot be disabled."
                )
            elif not low <= level <= high:
                results[name] = errors.InvalidUpdateVersionException(
                    f"Invalid update version {level} for feature {name}. Local controller "
                    f"{node_id} only supports versions {low}-{high}"
                )
            elif level < current and upgrade_type == UPGRADE:
                results[name] = errors.InvalidUpdateVersionException(
                    f"Invalid update version {level} for feature {name}. Can't downgrade the "
                    f"version of this feature without setting the upgrade type to either safe "
                    f"or unsafe downgrade."
                )
            else:
                results[name] = None
                if level != current:
                    records.append(FeatureLevelRecord(name=name, feature_level=level))
        if any(error is not None for error in results.values()):
            records = []
        return ControllerResult(results, records)

    def replay(self, record: FeatureLevelRecord) -> None:
        if record.feature_level == 0:
            # Level 0 removes the feature (Kafka's convention).
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level
