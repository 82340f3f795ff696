"""Admin APIs on the wire, version by version, for what the client libraries
do not expose: per-version response fields, error codes of malformed
resources, DescribeTopicPartitions paging, ElectLeaders, broker loggers."""

from __future__ import annotations

import logging
import socket
import struct
import uuid

import pytest

import kfast.protocol as p
from kfast.protocol import api_keys, errors
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]
KEY = {name: api.key for name, api in api_keys.BY_NAME.items()}
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


class Client:
    def __init__(self, broker):
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        self.correlation_id = 0

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    def request(self, name: str, version: int, **fields):
        self.correlation_id += 1
        body = p.request_class(name)(**fields)
        self.sock.sendall(p.encode_request(KEY[name], version, self.correlation_id, "t", body))
        (size,) = struct.unpack(">i", self._read(4))
        correlation_id, response = p.decode_response(KEY[name], version, self._read(size))
        assert correlation_id == self.correlation_id
        return response

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def client(broker):
    c = Client(broker)
    yield c
    c.close()


def create(client, name, partitions=1, version=7, **fields):
    Topic = p.CreateTopicsRequest.CreatableTopic
    return client.request(
        "CreateTopics",
        version,
        topics=[Topic(name=name, num_partitions=partitions, replication_factor=-1, **fields)],
    )


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7])
def test_create_topics_fields_per_version(client, topic, version):
    [result] = create(client, topic, 2, version).topics
    assert (result.name, result.error_code) == (topic, 0)
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 1)
        assert {c.name for c in result.configs} >= {"retention.ms", "cleanup.policy"}
    if version >= 7:
        assert result.topic_id != uuid.UUID(int=0)
    [again] = create(client, topic, 2, version).topics
    assert again.error_code == errors.TopicExistsException.code
    if version >= 1:
        assert again.error_message == f"Topic '{topic}' already exists."


def test_create_topics_duplicates_in_one_request(client, topic):
    Topic = p.CreateTopicsRequest.CreatableTopic
    response = client.request(
        "CreateTopics",
        7,
        topics=[
            Topic(name=topic, num_partitions=1, replication_factor=1),
            Topic(name=topic, num_partitions=1, replication_factor=1),
        ],
    )
    assert [t.error_code for t in response.topics] == [errors.InvalidRequestException.code] * 2


def test_delete_topics_by_id_v6(client, topic):
    [created] = create(client, topic).topics
    Topic = p.DeleteTopicsRequest.DeleteTopicState
    response = client.request(
        "DeleteTopics",
        6,
        timeout_ms=1000,
        topics=[
            Topic(name=None, topic_id=created.topic_id),
            Topic(name=None, topic_id=uuid.uuid4()),
        ],
    )
    ok, missing = response.responses
    assert (ok.name, ok.topic_id, ok.error_code) == (topic, created.topic_id, 0)
    assert missing.error_code == errors.UnknownTopicIdException.code and missing.name is None


def test_delete_topics_by_name_v1(client, topic):
    create(client, topic)
    response = client.request(
        "DeleteTopics", 1, timeout_ms=1000, topic_names=[topic, topic + "-missing"]
    )
    assert [(r.name, r.error_code) for r in response.responses] == [
        (topic, 0),
        (topic + "-missing", errors.UnknownTopicOrPartitionException.code),
    ]


def describe(client, resource_type, name, version=4, keys=None, **fields):
    Resource = p.DescribeConfigsRequest.DescribeConfigsResource
    [result] = client.request(
        "DescribeConfigs",
        version,
        resources=[
            Resource(resource_type=resource_type, resource_name=name, configuration_keys=keys)
        ],
        **fields,
    ).results
    return result


def test_describe_configs_synonyms_types_and_documentation(client, topic):
    create(
        client,
        topic,
        configs=[p.CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="1234")],
    )
    result = describe(
        client,
        TOPIC,
        topic,
        keys=["retention.ms", "segment.bytes"],
        include_synonyms=True,
        include_documentation=True,
    )
    assert result.error_code == 0
    by_name = {c.name: c for c in result.configs}
    assert set(by_name) == {"retention.ms", "segment.bytes"}
    retention = by_name["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("1234", 1, 5)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1234", 1),
        ("log.retention.hours", "168", 5),
    ]
    assert retention.documentation
    segment = by_name["segment.bytes"]
    assert (segment.value, segment.config_source, segment.config_type) == ("1073741824", 5, 3)


def test_describe_configs_empty_key_list_means_all(client, topic):
    create(client, topic)
    assert (
        len(describe(client, TOPIC, topic, keys=[]).configs)
        == len(describe(client, TOPIC, topic, keys=None).configs)
        > 20
    )


def test_describe_configs_v0_reports_is_default(client, topic):
    create(client, topic)
    result = describe(client, TOPIC, topic, version=0, keys=["retention.ms"])
    [entry] = result.configs
    assert entry.is_default is True


@pytest.mark.parametrize(
    "resource_type, name, code",
    [
        (TOPIC, "does-not-exist", errors.UnknownTopicOrPartitionException.code),
        (TOPIC, "bad name", errors.InvalidTopicException.code),
        (BROKER, "7", errors.InvalidRequestException.code),
        (BROKER, "x", errors.InvalidRequestException.code),
        (99, "x", errors.InvalidRequestException.code),
    ],
)
def test_describe_configs_errors(client, resource_type, name, code):
    assert describe(client, resource_type, name).error_code == code


def test_broker_default_resource_lists_cluster_wide_overrides(client):
    Resource = p.IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = p.IncrementalAlterConfigsRequest.AlterableConfig
    response = client.request(
        "IncrementalAlterConfigs",
        1,
        resources=[
            Resource(
                resource_type=BROKER,
                resource_name="",
                configs=[
                    Config(name="log.cleaner.min.compaction.lag.ms", config_operation=0, value="5")
                ],
            )
        ],
    )
    assert response.responses[0].error_code == 0
    result = describe(client, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in result.configs] == [
        ("log.cleaner.min.compaction.lag.ms", "5", 3)
    ]
    entry = {c.name: c for c in describe(client, BROKER, "1").configs}[
        "log.cleaner.min.compaction.lag.ms"
    ]
    assert (entry.value, entry.config_source) == ("5", 3)


def test_broker_loggers(client):
    name = "kfast.test.admin"
    logging.getLogger(name).setLevel(logging.INFO)
    result = describe(client, BROKER_LOGGER, "1", keys=[name])
    assert [(c.name, c.value) for c in result.configs] == [(name, "INFO")]
    Resource = p.IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = p.IncrementalAlterConfigsRequest.AlterableConfig

    def alter(operation, value):
        return (
            client.request(
                "IncrementalAlterConfigs",
                1,
                resources=[
                    Resource(
                        resource_type=BROKER_LOGGER,
                        resource_name="1",
                        configs=[Config(name=name, config_operation=operation, value=value)],
                    )
                ],
            )
            .responses[0]
            .error_code
        )

    assert alter(0, "DEBUG") == 0
    assert logging.getLogger(name).level == logging.DEBUG
    assert alter(0, "LOUD") == errors.InvalidConfigurationException.code
    assert alter(2, "DEBUG") == errors.InvalidRequestException.code
    assert logging.getLogger(name).level == logging.DEBUG
    assert alter(1, None) == 0  # DELETE: back to the parent's level
    assert logging.getLogger(name).level == logging.NOTSET


def test_legacy_alter_configs_errors(client, topic):
    create(client, topic)
    Resource = p.AlterConfigsRequest.AlterConfigsResource
    Config = p.AlterConfigsRequest.AlterableConfig
    response = client.request(
        "AlterConfigs",
        1,
        resources=[
            Resource(
                resource_type=TOPIC,
                resource_name=topic,
                configs=[Config(name="retention.ms", value="nope")],
            ),
            Resource(
                resource_type=TOPIC,
                resource_name=topic + "-x",
                configs=[Config(name="retention.ms", value="1")],
            ),
            Resource(
                resource_type=BROKER, resource_name="1", configs=[Config(name="node.id", value="2")]
            ),
        ],
        validate_only=False,
    )
    assert [r.error_code for r in response.responses] == [
        errors.InvalidConfigurationException.code,
        errors.UnknownTopicOrPartitionException.code,
        errors.InvalidRequestException.code,
    ]


def test_describe_cluster(client, broker):
    response = client.request("DescribeCluster", 1, include_cluster_authorized_operations=False)
    assert response.error_code == 0 and response.controller_id == 1
    assert response.cluster_authorized_operations == -2147483648
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, broker.port)]
    controller = client.request("DescribeCluster", 1, endpoint_type=2)
    assert controller.error_code == errors.UnsupportedEndpointTypeException.code


def test_describe_topic_partitions_pages_with_a_cursor(client, topic):
    create(client, topic, 5)
    Topic = p.DescribeTopicPartitionsRequest.TopicRequest
    response = client.request(
        "DescribeTopicPartitions", 0, topics=[Topic(name=topic)], response_partition_limit=3
    )
    [first] = response.topics
    assert [pt.partition_index for pt in first.partitions] == [0, 1, 2]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == (topic, 3)
    rest = client.request(
        "DescribeTopicPartitions",
        0,
        topics=[Topic(name=topic)],
        response_partition_limit=3,
        cursor=response.next_cursor,
    )
    assert [pt.partition_index for pt in rest.topics[0].partitions] == [3, 4]
    assert rest.next_cursor is None
    assert all(pt.leader_id == 1 and pt.isr_nodes == [1] for pt in first.partitions)


def test_elect_leaders_is_not_needed_on_one_node(client, topic):
    create(client, topic, 2)
    Partitions = p.ElectLeadersRequest.TopicPartitions
    response = client.request(
        "ElectLeaders",
        2,
        election_type=0,
        topic_partitions=[Partitions(topic=topic, partitions=[0, 1, 7])],
    )
    [result] = response.replica_election_results
    assert [(r.partition_id, r.error_code) for r in result.partition_result] == [
        (0, errors.ElectionNotNeededException.code),
        (1, errors.ElectionNotNeededException.code),
        (7, errors.UnknownTopicOrPartitionException.code),
    ]
    everything = client.request("ElectLeaders", 2, election_type=0, topic_partitions=None)
    assert everything.replica_election_results == []


def test_list_partition_reassignments_is_empty(client, topic):
    create(client, topic)
    response = client.request("ListPartitionReassignments", 0, topics=None)
    assert response.error_code == 0 and response.topics == []


def test_create_partitions_validate_only(client, topic):
    create(client, topic)
    Topic = p.CreatePartitionsRequest.CreatePartitionsTopic
    response = client.request(
        "CreatePartitions",
        3,
        topics=[Topic(name=topic, count=4)],
        validate_only=True,
        timeout_ms=1000,
    )
    assert response.results[0].error_code == 0
    [described] = client.request(
        "DescribeTopicPartitions",
        0,
        topics=[p.DescribeTopicPartitionsRequest.TopicRequest(name=topic)],
    ).topics
    assert len(described.partitions) == 1


def test_topic_deletion_disabled(tmp_path):
    with KfastBroker({"delete.topic.enable": "false"}, data_dir=str(tmp_path)) as broker:
        c = Client(broker)
        create(c, "kept")
        response = c.request("DeleteTopics", 4, timeout_ms=1000, topic_names=["kept"])
        assert response.responses[0].error_code == errors.TopicDeletionDisabledException.code
        old = c.request("DeleteTopics", 2, timeout_ms=1000, topic_names=["kept"])
        assert old.responses[0].error_code == errors.InvalidRequestException.code
        assert "kept" in broker.broker.metadata_image.topics_by_name
        c.close()


def test_deleted_topic_is_gone_without_auto_creation(tmp_path):
    with KfastBroker({"auto.create.topics.enable": "false"}, data_dir=str(tmp_path)) as broker:
        c = Client(broker)
        create(c, "gone", 2)
        response = c.request("DeleteTopics", 4, timeout_ms=1000, topic_names=["gone"])
        assert response.responses[0].error_code == 0
        Topic = p.MetadataRequest.MetadataRequestTopic
        metadata = c.request(
            "Metadata", 12, topics=[Topic(name="gone")], allow_auto_topic_creation=True
        )
        assert metadata.topics[0].error_code == errors.UnknownTopicOrPartitionException.code
        Data = p.ProduceRequest.TopicProduceData
        Partition = p.ProduceRequest.PartitionProduceData
        from kfast.records import RecordBatchBuilder

        builder = RecordBatchBuilder()
        builder.append(0, None, b"v")
        produced = c.request(
            "Produce",
            9,
            acks=1,
            timeout_ms=1000,
            topic_data=[
                Data(name="gone", partition_data=[Partition(index=0, records=builder.build())])
            ],
        )
        [result] = produced.responses[0].partition_responses
        assert result.error_code == errors.UnknownTopicOrPartitionException.code
        c.close()


def test_whole_request_failures_answer_every_resource(tmp_path):
    with KfastBroker({}, data_dir=str(tmp_path)) as broker:
        c = Client(broker)
        create(c, "present")
        controller = broker.broker.controller.local  # the quorum's controller
        broker.call_soon(setattr, controller, "started", False)  # as after a fatal fault
        try:
            [created] = create(c, "new").topics
            assert created.error_code == errors.NotControllerException.code
            deleted = c.request("DeleteTopics", 4, timeout_ms=1000, topic_names=["present"])
            assert deleted.responses[0].error_code == errors.NotControllerException.code
            Resource = p.IncrementalAlterConfigsRequest.AlterConfigsResource
            altered = c.request(
                "IncrementalAlterConfigs",
                1,
                resources=[Resource(resource_type=TOPIC, resource_name="present", configs=[])],
            )
            assert altered.responses[0].error_code == errors.NotControllerException.code
            Topic = p.CreatePartitionsRequest.CreatePartitionsTopic
            grown = c.request(
                "CreatePartitions", 3, topics=[Topic(name="present", count=2)], timeout_ms=1000
            )
            assert grown.results[0].error_code == errors.NotControllerException.code
        finally:
            broker.call_soon(setattr, controller, "started", True)
        c.close()


def test_api_versions_advertise_the_finalized_metadata_version(client):
    response = client.request(
        "ApiVersions", 3, client_software_name="kfast-test", client_software_version="1.0"
    )
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == [
        ("metadata.version", 21),
        ("transaction.version", 2),
    ]
    assert response.finalized_features_epoch >= 0
    advertised = {k.api_key for k in response.api_keys}
    assert {
        KEY[name]
        for name in (
            "CreateTopics",
            "DeleteTopics",
            "CreatePartitions",
            "DescribeConfigs",
            "AlterConfigs",
            "IncrementalAlterConfigs",
            "DescribeCluster",
            "ElectLeaders",
        )
    } <= advertised


def test_alter_partition_reassignments_on_one_node(client, topic):
    create(client, topic, 2)
    Topic = p.AlterPartitionReassignmentsRequest.ReassignableTopic
    Partition = p.AlterPartitionReassignmentsRequest.ReassignablePartition
    response = client.request(
        "AlterPartitionReassignments",
        0,
        timeout_ms=1000,
        topics=[
            Topic(
                name=topic,
                partitions=[
                    Partition(partition_index=0, replicas=[1]),
                    Partition(partition_index=1, replicas=None),
                    Partition(partition_index=5, replicas=[1]),
                ],
            ),
            Topic(name=topic + "-x", partitions=[Partition(partition_index=0, replicas=[2])]),
        ],
    )
    assert response.error_code == 0
    codes = [[pt.error_code for pt in t.partitions] for t in response.responses]
    assert codes == [
        [
            0,
            errors.NoReassignmentInProgressException.code,
            errors.UnknownTopicOrPartitionException.code,
        ],
        [errors.UnknownTopicOrPartitionException.code],
    ]
    moved = client.request(
        "AlterPartitionReassignments",
        0,
        timeout_ms=1000,
        topics=[Topic(name=topic, partitions=[Partition(partition_index=0, replicas=[2])])],
    )
    assert (
        moved.responses[0].partitions[0].error_code == errors.InvalidReplicaAssignmentException.code
    )
    listed = client.request("ListPartitionReassignments", 0, topics=None)
    assert listed.topics == []


def test_describe_quorum(client, broker):
    Topic = p.DescribeQuorumRequest.TopicData
    Partition = p.DescribeQuorumRequest.PartitionData
    response = client.request(
        "DescribeQuorum",
        2,
        topics=[
            Topic(
                topic_name="__cluster_metadata",
                partitions=[Partition(partition_index=0), Partition(partition_index=1)],
            )
        ],
    )
    assert response.error_code == 0
    ok, unknown = response.topics[0].partitions
    end = broker.call_soon(lambda: broker.broker.controller.raft.client.log.end_offset)
    assert (ok.error_code, ok.leader_id, ok.leader_epoch) == (0, 1, 1)
    assert ok.high_watermark == end > 0
    assert [(v.replica_id, v.log_end_offset) for v in ok.current_voters] == [(1, end)]
    assert unknown.error_code == errors.UnknownTopicOrPartitionException.code
    assert [n.node_id for n in response.nodes] == [1]


@pytest.mark.parametrize("version", [1, 2])
def test_update_features_accepts_only_the_running_levels(client, version):
    Update = p.UpdateFeaturesRequest.FeatureUpdateKey

    def update(*pairs):
        return client.request(
            "UpdateFeatures",
            version,
            timeout_ms=1000,
            feature_updates=[
                Update(feature=name, max_version_level=level) for name, level in pairs
            ],
        )

    ok = update(("metadata.version", 21), ("group.version", 0), ("transaction.version", 2))
    assert ok.error_code == 0
    bad = update(("metadata.version", 22))
    code = errors.InvalidUpdateVersionException.code
    if version >= 2:
        assert bad.error_code == code
    else:
        assert [(r.feature, r.error_code) for r in bad.results] == [("metadata.version", code)]
    assert (
        update(("kraft.version", 1), ("kraft.version", 0)).error_code
        == errors.InvalidRequestException.code
    )


def test_list_config_resources_versions(client, topic):
    create(client, topic)
    v0 = client.request("ListConfigResources", 0)  # ListClientMetricsResources
    assert (v0.error_code, v0.config_resources) == (0, [])
    v1 = client.request("ListConfigResources", 1, resource_types=[TOPIC, BROKER, TOPIC])
    assert v1.error_code == 0
    listed = [(r.resource_type, r.resource_name) for r in v1.config_resources]
    assert listed[0] == (BROKER, "1")  # Kafka's order: brokers before topics
    assert (TOPIC, topic) in listed and len(listed) == len(set(listed))
    for types in ([64], [TOPIC, 64]):
        bad = client.request("ListConfigResources", 1, resource_types=types)
        assert bad.error_code == errors.UnsupportedVersionException.code
        assert bad.config_resources == []
