"""The API key table: every API kfast serves, its version range and listeners.

One row per API: wire key, Kafka's name, the oldest version Kafka 3.9
accepts (for an API 3.9 did not serve, the oldest 4.2 accepts: the share-group
APIs 76-79 start at v1, their v0 having been KIP-932's early access in 4.0 and
removed in 4.1), the newest version Kafka 4.2 defines, the first flexible version
(None = never flexible), whether the newest version is still unstable in Kafka
(defined but not advertised by default), and the listeners that serve it
("broker" = client-facing broker listener, "controller" = KRaft controller
listener). The message grammar of each API lives in
``kfast.protocol.messages.<snake_case_name>``.

Header versions follow from the flexible version (Kafka's rule):
request header v2 for flexible versions, else v1 (v0 belonged to
ControlledShutdown v0, which no KRaft listener serves); response header v1 for
flexible versions, else v0 -- except ApiVersions, whose response header is
always v0 so that a client that does not yet know the broker's versions can
read it (KIP-511).
"""

from __future__ import annotations

import re
from typing import NamedTuple


class ApiKey(NamedTuple):
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    latest_version_unstable: bool
    listeners: tuple[str, ...]

    @property
    def module(self) -> str:
        """Name of the module under kfast.protocol.messages with the grammar."""
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).lower()

    @property
    def max_stable_version(self) -> int:
        return self.max_version - 1 if self.latest_version_unstable else self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.key == API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0


API_KEYS: tuple[ApiKey, ...] = (
    ApiKey(0, "Produce", 0, 13, 9, False, ("broker",)),
    ApiKey(1, "Fetch", 0, 18, 12, False, ("broker", "controller")),
    ApiKey(2, "ListOffsets", 0, 11, 6, False, ("broker",)),
    ApiKey(3, "Metadata", 0, 13, 9, False, ("broker",)),
    ApiKey(8, "OffsetCommit", 0, 10, 8, False, ("broker",)),
    ApiKey(9, "OffsetFetch", 0, 10, 6, False, ("broker",)),
    ApiKey(10, "FindCoordinator", 0, 6, 3, False, ("broker",)),
    ApiKey(11, "JoinGroup", 0, 9, 6, False, ("broker",)),
    ApiKey(12, "Heartbeat", 0, 4, 4, False, ("broker",)),
    ApiKey(13, "LeaveGroup", 0, 5, 4, False, ("broker",)),
    ApiKey(14, "SyncGroup", 0, 5, 4, False, ("broker",)),
    ApiKey(15, "DescribeGroups", 0, 6, 5, False, ("broker",)),
    ApiKey(16, "ListGroups", 0, 5, 3, False, ("broker",)),
    ApiKey(17, "SaslHandshake", 0, 1, None, False, ("broker", "controller")),
    ApiKey(18, "ApiVersions", 0, 4, 3, False, ("broker", "controller")),
    ApiKey(19, "CreateTopics", 0, 7, 5, False, ("broker", "controller")),
    ApiKey(20, "DeleteTopics", 0, 6, 4, False, ("broker", "controller")),
    ApiKey(21, "DeleteRecords", 0, 2, 2, False, ("broker",)),
    ApiKey(22, "InitProducerId", 0, 6, 2, True, ("broker",)),
    ApiKey(23, "OffsetForLeaderEpoch", 0, 4, 4, False, ("broker",)),
    ApiKey(24, "AddPartitionsToTxn", 0, 5, 3, False, ("broker",)),
    ApiKey(25, "AddOffsetsToTxn", 0, 4, 3, False, ("broker",)),
    ApiKey(26, "EndTxn", 0, 5, 3, False, ("broker",)),
    ApiKey(27, "WriteTxnMarkers", 0, 2, 1, False, ("broker",)),
    ApiKey(28, "TxnOffsetCommit", 0, 5, 3, False, ("broker",)),
    ApiKey(29, "DescribeAcls", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(30, "CreateAcls", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(31, "DeleteAcls", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(32, "DescribeConfigs", 0, 4, 4, False, ("broker", "controller")),
    ApiKey(33, "AlterConfigs", 0, 2, 2, False, ("broker", "controller")),
    ApiKey(34, "AlterReplicaLogDirs", 0, 2, 2, False, ("broker",)),
    ApiKey(35, "DescribeLogDirs", 0, 4, 2, False, ("broker",)),
    ApiKey(36, "SaslAuthenticate", 0, 2, 2, False, ("broker", "controller")),
    ApiKey(37, "CreatePartitions", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(38, "CreateDelegationToken", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(39, "RenewDelegationToken", 0, 2, 2, False, ("broker", "controller")),
    ApiKey(40, "ExpireDelegationToken", 0, 2, 2, False, ("broker", "controller")),
    ApiKey(41, "DescribeDelegationToken", 0, 3, 2, False, ("broker", "controller")),
    ApiKey(42, "DeleteGroups", 0, 2, 2, False, ("broker",)),
    ApiKey(43, "ElectLeaders", 0, 2, 2, False, ("broker", "controller")),
    ApiKey(44, "IncrementalAlterConfigs", 0, 1, 1, False, ("broker", "controller")),
    ApiKey(45, "AlterPartitionReassignments", 0, 1, 0, False, ("broker", "controller")),
    ApiKey(46, "ListPartitionReassignments", 0, 0, 0, False, ("broker", "controller")),
    ApiKey(47, "OffsetDelete", 0, 0, None, False, ("broker",)),
    ApiKey(48, "DescribeClientQuotas", 0, 1, 1, False, ("broker",)),
    ApiKey(49, "AlterClientQuotas", 0, 1, 1, False, ("broker", "controller")),
    ApiKey(50, "DescribeUserScramCredentials", 0, 0, 0, False, ("broker", "controller")),
    ApiKey(51, "AlterUserScramCredentials", 0, 0, 0, False, ("broker", "controller")),
    ApiKey(52, "Vote", 0, 2, 0, False, ("controller",)),
    ApiKey(53, "BeginQuorumEpoch", 0, 1, 1, False, ("controller",)),
    ApiKey(54, "EndQuorumEpoch", 0, 1, 1, False, ("controller",)),
    ApiKey(55, "DescribeQuorum", 0, 2, 0, False, ("broker", "controller")),
    ApiKey(56, "AlterPartition", 0, 3, 0, False, ("controller",)),
    ApiKey(57, "UpdateFeatures", 0, 2, 0, False, ("broker", "controller")),
    ApiKey(58, "Envelope", 0, 0, 0, False, ("controller",)),
    ApiKey(59, "FetchSnapshot", 0, 1, 0, False, ("controller",)),
    ApiKey(60, "DescribeCluster", 0, 2, 0, False, ("broker", "controller")),
    ApiKey(61, "DescribeProducers", 0, 0, 0, False, ("broker",)),
    ApiKey(62, "BrokerRegistration", 0, 4, 0, False, ("controller",)),
    ApiKey(63, "BrokerHeartbeat", 0, 1, 0, False, ("controller",)),
    ApiKey(64, "UnregisterBroker", 0, 0, 0, False, ("broker", "controller")),
    ApiKey(65, "DescribeTransactions", 0, 0, 0, False, ("broker",)),
    ApiKey(66, "ListTransactions", 0, 2, 0, False, ("broker",)),
    ApiKey(67, "AllocateProducerIds", 0, 0, 0, False, ("controller",)),
    ApiKey(68, "ConsumerGroupHeartbeat", 0, 1, 0, False, ("broker",)),
    ApiKey(69, "ConsumerGroupDescribe", 0, 1, 0, False, ("broker",)),
    ApiKey(70, "ControllerRegistration", 0, 0, 0, False, ("controller",)),
    ApiKey(71, "GetTelemetrySubscriptions", 0, 0, 0, False, ("broker",)),
    ApiKey(72, "PushTelemetry", 0, 0, 0, False, ("broker",)),
    ApiKey(73, "AssignReplicasToDirs", 0, 0, 0, False, ("controller",)),
    ApiKey(74, "ListConfigResources", 0, 1, 0, False, ("broker",)),
    ApiKey(75, "DescribeTopicPartitions", 0, 0, 0, False, ("broker",)),
    ApiKey(76, "ShareGroupHeartbeat", 1, 1, 0, False, ("broker",)),
    ApiKey(77, "ShareGroupDescribe", 1, 1, 0, False, ("broker",)),
    ApiKey(78, "ShareFetch", 1, 2, 0, False, ("broker",)),
    ApiKey(79, "ShareAcknowledge", 1, 2, 0, False, ("broker",)),
    ApiKey(80, "AddRaftVoter", 0, 1, 0, False, ("controller", "broker")),
    ApiKey(81, "RemoveRaftVoter", 0, 0, 0, False, ("controller", "broker")),
    ApiKey(82, "UpdateRaftVoter", 0, 0, 0, False, ("controller",)),
    ApiKey(83, "InitializeShareGroupState", 0, 0, 0, False, ("broker",)),
    ApiKey(84, "ReadShareGroupState", 0, 0, 0, False, ("broker",)),
    ApiKey(85, "WriteShareGroupState", 0, 1, 0, False, ("broker",)),
    ApiKey(86, "DeleteShareGroupState", 0, 0, 0, False, ("broker",)),
    ApiKey(87, "ReadShareGroupStateSummary", 0, 1, 0, False, ("broker",)),
    ApiKey(88, "StreamsGroupHeartbeat", 0, 0, 0, False, ("broker",)),
    ApiKey(89, "StreamsGroupDescribe", 0, 0, 0, False, ("broker",)),
    ApiKey(90, "DescribeShareGroupOffsets", 0, 1, 0, False, ("broker",)),
    ApiKey(91, "AlterShareGroupOffsets", 0, 0, 0, False, ("broker",)),
    ApiKey(92, "DeleteShareGroupOffsets", 0, 0, 0, False, ("broker",)),
)

BY_KEY: dict[int, ApiKey] = {api.key: api for api in API_KEYS}
BY_NAME: dict[str, ApiKey] = {api.name: api for api in API_KEYS}

PRODUCE = 0
FETCH = 1
API_VERSIONS = 18

# flexible_from by key, as the header decoder wants it: -1 = never flexible,
# None = no such API.
FLEXIBLE_FROM: list = [None] * (max(BY_KEY) + 1)
for _api in API_KEYS:
    FLEXIBLE_FROM[_api.key] = -1 if _api.flexible_from is None else _api.flexible_from
del _api


def api_key(key_or_name: int | str) -> ApiKey:
    """The row for a key or a name; KeyError if kfast does not know it."""
    if isinstance(key_or_name, str):
        return BY_NAME[key_or_name]
    return BY_KEY[key_or_name]


def supported_versions(
    listener: str = "broker", include_unstable: bool = False
) -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for an ApiVersions response on
    ``listener``. Produce is advertised from v0 even where old versions are
    refused at request time: librdkafka disables compression when Produce v0-2
    are missing from ApiVersions (KAFKA-18659)."""
    out = []
    for api in API_KEYS:
        if listener not in api.listeners:
            continue
        top = api.max_version if include_unstable else api.max_stable_version
        out.append((api.key, 0 if api.key == PRODUCE else api.min_version, top))
    return out
