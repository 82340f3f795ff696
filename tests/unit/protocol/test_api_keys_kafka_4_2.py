"""The API key table against Apache Kafka 4.2.

A version-probing client (franz-go's kversion, the Java admin's feature
checks, librdkafka's ApiVersions use) decides which Kafka it talks to from
the max versions in ApiVersions: one max newer than 4.2's makes kfast look
like 4.3 (DescribeLogDirs v5, KIP-1066's is_cordoned, was such a row).

KAFKA_4_2 below is the reference, not a second definition: kfast's own rows
live in kfast.protocol.api_keys and this test only compares. Where it came
from: ``validVersions`` and ``latestVersionUnstable`` of Kafka 4.2's
clients/src/main/resources/common/message/*Request.json, as transcribed
release by release in franz-go's pkg/kversion (``V4_2_0()``: the KRaft broker
release ``b42`` plus the controller release ``c42``, twmb/franz-go commit
adb3a18). The apache/kafka snapshot available when this was written predates
the 4.2 branch, so the release-by-release transcription was the source; the
two rows that changed after 4.2 were checked against Kafka's own files:
DescribeLogDirs v5 and BrokerHeartbeat v2 are KIP-1066 (Kafka 4.3), and
InitProducerId v6 (KIP-939) is still unstable in 4.2.1 (KAFKA-20738: the 4.2
client caps the request at v5). The share-group APIs 76-79 start at v1: their
v0 was KIP-932's early access in 4.0 and was removed in 4.1.
"""

from __future__ import annotations

from kfast.protocol import api_keys

# (api key, oldest version, newest stable version) a Kafka 4.2 node accepts
# and advertises, over its broker and controller listeners together.
KAFKA_4_2 = [
    (0, 0, 13),  # Produce (v0-2 advertised again, KAFKA-18659)
    (1, 4, 18),  # Fetch
    (2, 1, 11),  # ListOffsets
    (3, 0, 13),  # Metadata
    (8, 2, 10),  # OffsetCommit
    (9, 1, 10),  # OffsetFetch
    (10, 0, 6),  # FindCoordinator
    (11, 0, 9),  # JoinGroup (v0-1 re-added in 4.1, KAFKA-19444)
    (12, 0, 4),  # Heartbeat
    (13, 0, 5),  # LeaveGroup
    (14, 0, 5),  # SyncGroup
    (15, 0, 6),  # DescribeGroups
    (16, 0, 5),  # ListGroups
    (17, 0, 1),  # SaslHandshake
    (18, 0, 4),  # ApiVersions
    (19, 2, 7),  # CreateTopics
    (20, 1, 6),  # DeleteTopics
    (21, 0, 2),  # DeleteRecords
    (22, 0, 5),  # InitProducerId (v6 defined, unstable)
    (23, 2, 4),  # OffsetForLeaderEpoch
    (24, 0, 5),  # AddPartitionsToTxn
    (25, 0, 4),  # AddOffsetsToTxn
    (26, 0, 5),  # EndTxn
    (27, 1, 2),  # WriteTxnMarkers
    (28, 0, 5),  # TxnOffsetCommit
    (29, 1, 3),  # DescribeAcls
    (30, 1, 3),  # CreateAcls
    (31, 1, 3),  # DeleteAcls
    (32, 1, 4),  # DescribeConfigs
    (33, 0, 2),  # AlterConfigs
    (34, 1, 2),  # AlterReplicaLogDirs
    (35, 1, 4),  # DescribeLogDirs
    (36, 0, 2),  # SaslAuthenticate
    (37, 0, 3),  # CreatePartitions
    (38, 1, 3),  # CreateDelegationToken
    (39, 1, 2),  # RenewDelegationToken
    (40, 1, 2),  # ExpireDelegationToken
    (41, 1, 3),  # DescribeDelegationToken
    (42, 0, 2),  # DeleteGroups
    (43, 0, 2),  # ElectLeaders
    (44, 0, 1),  # IncrementalAlterConfigs
    (45, 0, 1),  # AlterPartitionReassignments
    (46, 0, 0),  # ListPartitionReassignments
    (47, 0, 0),  # OffsetDelete
    (48, 0, 1),  # DescribeClientQuotas
    (49, 0, 1),  # AlterClientQuotas
    (50, 0, 0),  # DescribeUserScramCredentials
    (51, 0, 0),  # AlterUserScramCredentials
    (52, 0, 2),  # Vote
    (53, 0, 1),  # BeginQuorumEpoch
    (54, 0, 1),  # EndQuorumEpoch
    (55, 0, 2),  # DescribeQuorum
    (56, 2, 3),  # AlterPartition
    (57, 0, 2),  # UpdateFeatures
    (58, 0, 0),  # Envelope
    (59, 0, 1),  # FetchSnapshot
    (60, 0, 2),  # DescribeCluster
    (61, 0, 0),  # DescribeProducers
    (62, 0, 4),  # BrokerRegistration
    (63, 0, 1),  # BrokerHeartbeat
    (64, 0, 0),  # UnregisterBroker
    (65, 0, 0),  # DescribeTransactions
    (66, 0, 2),  # ListTransactions
    (67, 0, 0),  # AllocateProducerIds
    (68, 0, 1),  # ConsumerGroupHeartbeat
    (69, 0, 1),  # ConsumerGroupDescribe
    (70, 0, 0),  # ControllerRegistration
    (71, 0, 0),  # GetTelemetrySubscriptions
    (72, 0, 0),  # PushTelemetry
    (73, 0, 0),  # AssignReplicasToDirs
    (74, 0, 1),  # ListConfigResources
    (75, 0, 0),  # DescribeTopicPartitions
    (76, 1, 1),  # ShareGroupHeartbeat
    (77, 1, 1),  # ShareGroupDescribe
    (78, 1, 2),  # ShareFetch
    (79, 1, 2),  # ShareAcknowledge
    (80, 0, 1),  # AddRaftVoter
    (81, 0, 0),  # RemoveRaftVoter
    (82, 0, 0),  # UpdateRaftVoter
    (83, 0, 0),  # InitializeShareGroupState
    (84, 0, 0),  # ReadShareGroupState
    (85, 0, 1),  # WriteShareGroupState
    (86, 0, 0),  # DeleteShareGroupState
    (87, 0, 1),  # ReadShareGroupStateSummary
    (88, 0, 0),  # StreamsGroupHeartbeat
    (89, 0, 0),  # StreamsGroupDescribe
    (90, 0, 1),  # DescribeShareGroupOffsets
    (91, 0, 0),  # AlterShareGroupOffsets
    (92, 0, 0),  # DeleteShareGroupOffsets
]

# Newest version Kafka 4.2 defines but does not advertise by default
# (latestVersionUnstable): api key -> that version.
KAFKA_4_2_UNSTABLE = {22: 6}

_BY_KEY = {key: (low, high) for key, low, high in KAFKA_4_2}


def test_the_table_has_kafka_4_2s_apis():
    assert sorted(api_keys.BY_KEY) == sorted(_BY_KEY)


def test_newest_stable_version_is_kafka_4_2s():
    wrong = {
        api.name: (api.max_stable_version, _BY_KEY[api.key][1])
        for api in api_keys.API_KEYS
        if api.max_stable_version != _BY_KEY[api.key][1]
    }
    assert wrong == {}, "(kfast, Kafka 4.2) newest stable version"


def test_unstable_versions_are_kafka_4_2s():
    unstable = {
        api.key: api.max_version for api in api_keys.API_KEYS if api.latest_version_unstable
    }
    assert unstable == KAFKA_4_2_UNSTABLE
    for api in api_keys.API_KEYS:
        if not api.latest_version_unstable:
            assert api.max_version == _BY_KEY[api.key][1], api.name


def test_oldest_version_reaches_at_least_kafka_4_2s():
    # kfast also accepts the versions Kafka 3.9 did (KIP-896 removed them in
    # 4.0), so its oldest version may be older than 4.2's, never newer.
    too_new = {
        api.name: (api.min_version, _BY_KEY[api.key][0])
        for api in api_keys.API_KEYS
        if api.min_version > _BY_KEY[api.key][0]
    }
    assert too_new == {}


def test_api_versions_advertises_kafka_4_2s_max_on_every_listener():
    for listener in ("broker", "controller"):
        for key, _, high in api_keys.supported_versions(listener):
            assert high == _BY_KEY[key][1], (listener, api_keys.BY_KEY[key].name)
