"""ACLs end to end: Kafka's StandardAuthorizer in a real broker, enforced on
real clients (confluent-kafka, kafka-python, aiokafka) API family by API
family: without the permission the client gets Kafka's authorization
error, with it the call succeeds.

Every connection is User:ANONYMOUS until SASL lands, so the subject and the
administrator are told apart by host: the module's broker runs with
allow.everyone.if.no.acl.found=true, and a raw connection from 127.0.0.2
first gives itself ALL on every topic, group, transactional id and the
cluster. From then on every resource has an ACL, so clients on 127.0.0.1
are denied everything until a test grants them ACLs (removed after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import secrets
import time
import uuid

import kafka.errors as kafka_errors
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer
from security_support import RawConnection

import kfast.protocol as p
from kfast.cli import build_parser
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import (
    ACL_OPERATION_ALL,
    ACL_OPERATION_ALTER,
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_ANY,
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_IDEMPOTENT_WRITE,
    ACL_OPERATION_READ,
    ACL_OPERATION_TWO_PHASE_COMMIT,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_ANY,
    ACL_PERMISSION_DENY,
    ACL_RESOURCE_ANY,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
    CLUSTER_RESOURCE_NAME,
    PATTERN_TYPE_ANY,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_PREFIXED,
    authorized_operations,
)
from kfast.security.acl import Acl
from kfast.security.principal import KafkaPrincipal, serialize_principal
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"
CLIENT_HOST, ADMIN_HOST = "127.0.0.1", "127.0.0.2"
KEY = {name: api.key for name, api in api_keys.BY_NAME.items()}


class Raw(RawConnection):
    """A raw connection from the local address ``source``; requests at the
    API's latest version unless told."""

    def __init__(self, port: int, source: str):
        super().__init__(port, source=source)

    def request(self, name: str, version: int | None = None, **fields):
        return super().request(
            name, api_keys.BY_NAME[name].max_version if version is None else version, **fields
        )

    def create_acls(self, acls) -> None:
        response = self.request(
            "CreateAcls",
            creations=[
                p.CreateAclsRequest.AclCreation(
                    resource_type=a.resource_type,
                    resource_name=a.resource_name,
                    resource_pattern_type=a.pattern_type,
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in acls
            ],
        )
        assert [r.error_code for r in response.results] == [0] * len(acls), response
        self.await_acls(acls, present=True)

    def await_acls(self, acls, present: bool, timeout: float = 15.0) -> None:
        """Until the broker's authorizer has (or no longer has) every ACL: the
        controller answers once it committed them, brokers apply them after
        (Kafka's tests wait the same way, TestUtils.waitAndVerifyAcls)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [bool(self.request("DescribeAcls", **_exact_filter(a)).resources) for a in acls]
            if all(f == present for f in found):
                return
            assert time.monotonic() < deadline, f"ACLs present={found}, wanted {present}"
            time.sleep(0.05)

    def delete_acls(self, acls) -> None:
        response = self.request(
            "DeleteAcls",
            filters=[
                p.DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=a.resource_type,
                    resource_name_filter=a.resource_name,
                    pattern_type_filter=a.pattern_type,
                    principal_filter=a.principal,
                    host_filter=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in acls
            ],
        )
        assert all(r.error_code == 0 for r in response.filter_results), response
        self.await_acls(acls, present=False)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        response = self.request(
            "CreateTopics",
            topics=[
                p.CreateTopicsRequest.CreatableTopic(
                    name=name, num_partitions=partitions, replication_factor=-1
                )
            ],
            timeout_ms=10000,
        )
        assert response.topics[0].error_code == 0, response

    def close(self) -> None:
        self.sock.close()


def _exact_filter(a: Acl) -> dict:
    """DescribeAcls fields matching exactly ``a``."""
    return dict(
        resource_type_filter=a.resource_type,
        resource_name_filter=a.resource_name,
        pattern_type_filter=a.pattern_type,
        principal_filter=a.principal,
        host_filter=a.host,
        operation=a.operation,
        permission_type=a.permission_type,
    )


def acl(
    resource_type,
    name,
    operation,
    permission=ACL_PERMISSION_ALLOW,
    *,
    pattern=PATTERN_TYPE_LITERAL,
    principal=ANONYMOUS,
    host=CLIENT_HOST,
) -> Acl:
    return Acl(resource_type, name, pattern, principal, host, operation, permission)


ADMIN_ACLS = [
    acl(rtype, name, ACL_OPERATION_ALL, host=ADMIN_HOST)
    for rtype, name in (
        (ACL_RESOURCE_TOPIC, "*"),
        (ACL_RESOURCE_GROUP, "*"),
        (ACL_RESOURCE_TRANSACTIONAL_ID, "*"),
        (ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME),
    )
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = KfastBroker(
        {
            "authorizer.class.name": AUTHORIZER,
            "num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "allow.everyone.if.no.acl.found": "true",
            # InitProducerId v6 with enable2Pc (KIP-939) reaches its ACL check.
            "unstable.api.versions.enable": "true",
            "transaction.two.phase.commit.enable": "true",
        },
        data_dir=str(tmp_path_factory.mktemp("kfast-acls")),
    )
    broker.start()
    admin = Raw(broker.port, ADMIN_HOST)
    admin.create_acls(ADMIN_ACLS)
    yield broker, admin
    admin.close()
    broker.close()


@contextlib.contextmanager
def granted(admin: Raw, *acls):
    """The ACLs exist inside the block (CreateAcls answers once the broker's
    authorizer has them)."""
    admin.create_acls(acls)
    try:
        yield
    finally:
        admin.delete_acls(acls)


@pytest.fixture
def name():
    return f"acl-{uuid.uuid4().hex[:10]}"


def _produce(bootstrap: str, topic: str, **config) -> KafkaError | None:
    """One record with confluent-kafka; the delivery error, or None."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 1000,
            **config,
        }
    )
    outcome = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def test_produce_needs_write_on_the_topic(secured, name):
    broker, admin = secured
    admin.create_topic(name)
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_DESCRIBE)):
        error = _produce(broker.bootstrap_servers, name)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE)):
        assert _produce(broker.bootstrap_servers, name) is None


def test_consume_needs_read_on_the_topic_and_the_group(secured, name):
    broker, admin = secured
    admin.create_topic(name)
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE)):
        assert _produce(broker.bootstrap_servers, name) is None
    group = f"g-{name}"

    def consume():
        consumer = KafkaConsumer(
            name,
            bootstrap_servers=broker.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            request_timeout_ms=11000,
        )
        try:
            records = []
            for _ in range(40):
                for batch in consumer.poll(timeout_ms=250).values():
                    records += batch
                if records:
                    return records
            return records
        finally:
            consumer.close()

    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_READ)):
        with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
            consume()
    with granted(
        admin,
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_DESCRIBE),
        acl(ACL_RESOURCE_GROUP, group, ACL_OPERATION_READ),
    ):
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            consume()
    with granted(
        admin,
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_READ),
        acl(ACL_RESOURCE_GROUP, group, ACL_OPERATION_READ),
    ):
        assert [r.value for r in consume()] == [b"v"]


def test_metadata_hides_topics_the_principal_may_not_describe(secured, name):
    broker, admin = secured
    visible, hidden = f"{name}-visible", f"{name}-hidden"
    admin.create_topic(visible)
    admin.create_topic(hidden)
    client = Raw(broker.port, CLIENT_HOST)
    try:
        with granted(admin, acl(ACL_RESOURCE_TOPIC, visible, ACL_OPERATION_READ)):
            listed = (
                AdminClient({"bootstrap.servers": broker.bootstrap_servers})
                .list_topics(timeout=10)
                .topics
            )
            assert visible in listed and hidden not in listed
            # Named: refused, without saying whether it exists (nor auto-creating).
            response = client.request(
                "Metadata",
                12,
                topics=[
                    p.MetadataRequest.MetadataRequestTopic(name=n)
                    for n in (visible, hidden, f"{name}-absent")
                ],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=True,
            )
            by_name = {t.name: t for t in response.topics}
            assert by_name[visible].error_code == 0
            assert by_name[visible].topic_authorized_operations == authorized_operations(
                ACL_OPERATION_READ, ACL_OPERATION_DESCRIBE
            )
            assert by_name[hidden].error_code == errors.TopicAuthorizationException.code
            assert by_name[f"{name}-absent"].error_code == errors.TopicAuthorizationException.code
            assert f"{name}-absent" not in broker.broker.metadata_image.topics_by_name
    finally:
        client.close()


def test_create_topics_with_prefixed_acls_and_deny_beats_allow(secured, name):
    broker, admin = secured
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def create(topic):
        future = client.create_topics([NewTopic(topic, 1, 1)])[topic]
        try:
            future.result(15)
            return None
        except KafkaException as exc:
            return exc.args[0].code()

    team = f"{name}-team-"
    with granted(
        admin,
        acl(
            ACL_RESOURCE_TOPIC,
            team,
            ACL_OPERATION_ALL,
            pattern=PATTERN_TYPE_PREFIXED,
            principal="User:*",
            host="*",
        ),
        acl(ACL_RESOURCE_TOPIC, f"{team}b", ACL_OPERATION_CREATE, ACL_PERMISSION_DENY),
    ):
        assert create(f"{team}a") is None
        assert create(f"{name}-other") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert create(f"{team}b") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # DELETE comes with ALL: the prefixed topic can be deleted, the other not.
        admin.create_topic(f"{name}-other")
        futures = client.delete_topics([f"{team}a", f"{name}-other"])
        futures[f"{team}a"].result(15)
        with pytest.raises(KafkaException) as refused:
            futures[f"{name}-other"].result(15)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_configs_need_describe_configs_or_alter_configs(secured, name):
    broker, admin = secured
    admin.create_topic(name)
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as refused:
        client.describe_configs([resource])[resource].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_ALTER_CONFIGS)):
        # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
        assert "retention.ms" in client.describe_configs([resource])[resource].result(15)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        client.incremental_alter_configs([resource])[resource].result(15)


def test_cluster_operations_and_authorized_operations(secured):
    broker, admin = secured
    client = Raw(broker.port, CLIENT_HOST)
    try:

        def describe_cluster():
            return client.request("DescribeCluster", 1, include_cluster_authorized_operations=True)

        assert describe_cluster().error_code == errors.ClusterAuthorizationException.code
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            try:
                kafka_admin.describe_acls(_any_acl_filter())
            finally:
                kafka_admin.close()
        with granted(admin, acl(ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME, ACL_OPERATION_ALTER)):
            described = describe_cluster()
            assert described.error_code == 0
            assert described.cluster_authorized_operations == authorized_operations(
                ACL_OPERATION_ALTER, ACL_OPERATION_DESCRIBE
            )
            # librdkafka asks Metadata for the cluster's bitfield.
            confluent = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            cluster = confluent.describe_cluster(
                include_authorized_operations=True, request_timeout=10
            ).result(15)
            assert sorted(op.name for op in cluster.authorized_operations) == ["ALTER", "DESCRIBE"]
    finally:
        client.close()


def test_groups_are_described_and_listed_by_their_acls(secured, name):
    broker, admin = secured
    client = Raw(broker.port, CLIENT_HOST)
    group = f"g-{name}"
    try:

        def describe():
            return client.request(
                "DescribeGroups", 5, groups=[group], include_authorized_operations=True
            ).groups[0]

        assert describe().error_code == errors.GroupAuthorizationException.code
        with granted(admin, acl(ACL_RESOURCE_GROUP, group, ACL_OPERATION_READ)):
            # FindCoordinator creates __consumer_offsets on first use.
            assert client.request("FindCoordinator", 3, key=group, key_type=0).error_code == 0
            described = describe()
            assert described.error_code == 0
            assert described.authorized_operations == authorized_operations(
                ACL_OPERATION_READ, ACL_OPERATION_DESCRIBE
            )
            # kafka-python commits as a group member would; ListGroups shows
            # the group to this principal only while it may describe it.
            kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            try:
                admin.create_topic(name)
                with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_READ)):
                    consumer = KafkaConsumer(
                        bootstrap_servers=broker.bootstrap_servers,
                        group_id=group,
                        enable_auto_commit=False,
                    )
                    try:
                        from kafka import OffsetAndMetadata, TopicPartition

                        consumer.commit({TopicPartition(name, 0): OffsetAndMetadata(0, "", -1)})
                    finally:
                        consumer.close()
                assert group in [g["group_id"] for g in kafka_admin.list_groups()]
            finally:
                kafka_admin.close()
        kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert group not in [g["group_id"] for g in kafka_admin.list_groups()]
        finally:
            kafka_admin.close()
    finally:
        client.close()


def _any_acl_filter():
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    return ACLFilter(
        principal=None,
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )


def test_transactional_producer_needs_write_on_its_transactional_id(secured, name):
    broker, admin = secured
    admin.create_topic(name)
    txn = f"tx-{name}"

    def transaction():
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "transactional.id": txn,
                "transaction.timeout.ms": 10000,
            }
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(name, b"t")
        producer.commit_transaction(15)

    with granted(
        admin,
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE),
        acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_DESCRIBE),
    ):
        with pytest.raises(KafkaException) as refused:
            transaction()
        assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with granted(
        admin,
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE),
        acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_WRITE),
    ):
        transaction()


def test_two_phase_commit_needs_two_phase_commit_on_the_transactional_id(secured, name):
    broker, admin = secured
    txn = f"tx-{name}"
    client = Raw(broker.port, CLIENT_HOST)

    def init_producer_id() -> int:
        """InitProducerId v6 with enable2Pc, retried while the coordinator loads."""
        client.request("FindCoordinator", 3, key=txn, key_type=1)
        deadline = time.monotonic() + 15
        while True:
            code = client.request(
                "InitProducerId",
                6,
                transactional_id=txn,
                transaction_timeout_ms=60000,
                enable2_pc=True,
            ).error_code
            if (
                code
                not in (
                    errors.CoordinatorLoadInProgressException.code,
                    errors.CoordinatorNotAvailableException.code,
                )
                or time.monotonic() > deadline
            ):
                return code
            time.sleep(0.05)

    try:
        with granted(admin, acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_WRITE)):
            assert init_producer_id() == errors.TransactionalIdAuthorizationException.code
        with granted(
            admin,
            acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_WRITE),
            acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_TWO_PHASE_COMMIT),
        ):
            assert init_producer_id() == 0
    finally:
        client.close()


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(secured, name):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    broker, admin = secured
    admin.create_topic(name)

    async def produce():
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            enable_idempotence=True,
            request_timeout_ms=10000,
        )
        try:
            await producer.start()
            await producer.send_and_wait(name, b"i")
        finally:
            await producer.stop()

    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_DESCRIBE)):
        with pytest.raises(ClusterAuthorizationFailedError):
            asyncio.run(asyncio.wait_for(produce(), 30))
    with granted(
        admin,
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_DESCRIBE),
        acl(ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME, ACL_OPERATION_IDEMPOTENT_WRITE),
    ):
        with pytest.raises(TopicAuthorizationFailedError):  # an id, but no WRITE on the topic
            asyncio.run(asyncio.wait_for(produce(), 30))
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE)):
        asyncio.run(asyncio.wait_for(produce(), 30))


def test_kfast_acls_cli_adds_lists_and_removes(secured, name):
    broker, admin = secured

    def kfast_acls(*argv, stdin=""):
        args = build_parser("acls").parse_args(
            ["acls", "--bootstrap-server", broker.bootstrap_servers, *argv]
        )
        out, err = io.StringIO(), io.StringIO()
        status = args.handler(args, out, err, io.StringIO(stdin))
        return status, out.getvalue() + err.getvalue()

    status, output = kfast_acls("--list")
    assert status == 1
    assert output.startswith("Error while executing ACL command: ")
    with granted(admin, acl(ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME, ACL_OPERATION_ALTER)):
        status, output = kfast_acls(
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            name,
            "--resource-pattern-type",
            "prefixed",
        )
        assert status == 0
        pattern = f"ResourcePattern(resourceType=TOPIC, name={name}, patternType=PREFIXED)"
        line = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
        assert output == f"Adding ACLs for resource `{pattern}`: \n \t{line} \n\n"
        status, output = kfast_acls(
            "--list", "--topic", name, "--resource-pattern-type", "prefixed"
        )
        assert (status, output) == (0, f"Current ACLs for resource `{pattern}`: \n \t{line} \n\n")
        status, output = kfast_acls(
            "--remove", "--topic", name, "--resource-pattern-type", "prefixed", stdin="y\n"
        )
        assert status == 0 and "Are you sure you want to delete all ACLs" in output
        assert kfast_acls("--list", "--topic", name, "--resource-pattern-type", "prefixed") == (
            0,
            "",
        )
    status, output = kfast_acls("--add", "--topic", name)
    assert status == 1 and "--allow-principal, --deny-principal" in output


def test_super_users_may_do_anything(tmp_path):
    with KfastBroker({"authorizer.class.name": AUTHORIZER, "super.users": ANONYMOUS}) as broker:
        admin = Raw(broker.port, CLIENT_HOST)
        try:
            admin.create_acls(
                [acl(ACL_RESOURCE_TOPIC, "*", ACL_OPERATION_ALL, ACL_PERMISSION_DENY, host="*")]
            )
            assert _produce(broker.bootstrap_servers, "anything") is None
        finally:
            admin.close()


def test_acls_survive_a_restart(tmp_path):
    with KfastBroker(
        {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"},
        data_dir=str(tmp_path),
    ) as broker:
        admin = Raw(broker.port, ADMIN_HOST)
        admin.create_acls(ADMIN_ACLS)
        admin.close()
        broker.restart()
        assert (
            _produce(broker.bootstrap_servers, "after-restart").code()
            == KafkaError.TOPIC_AUTHORIZATION_FAILED
        )
        admin = Raw(broker.port, ADMIN_HOST)
        try:
            described = admin.request(
                "DescribeAcls",
                resource_type_filter=ACL_RESOURCE_ANY,
                resource_name_filter=None,
                principal_filter=None,
                host_filter=None,
                pattern_type_filter=PATTERN_TYPE_ANY,
                operation=ACL_OPERATION_ANY,
                permission_type=ACL_PERMISSION_ANY,
            )
            assert sorted(
                (r.resource_type, r.resource_name) for r in described.resources
            ) == sorted((a.resource_type, a.resource_name) for a in ADMIN_ACLS)
        finally:
            admin.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker):
    client = Raw(broker.port, CLIENT_HOST)
    try:
        for version in range(4):
            response = client.request(
                "DescribeAcls",
                version,
                resource_type_filter=ACL_RESOURCE_ANY,
                operation=ACL_OPERATION_ANY,
                permission_type=ACL_PERMISSION_ANY,
            )
            assert response.error_code == errors.SecurityDisabledException.code
        created = client.request(
            "CreateAcls",
            creations=[
                p.CreateAclsRequest.AclCreation(
                    resource_type=ACL_RESOURCE_TOPIC,
                    resource_name="t",
                    resource_pattern_type=3,
                    principal=ANONYMOUS,
                    host="*",
                    operation=ACL_OPERATION_READ,
                    permission_type=ACL_PERMISSION_ALLOW,
                )
            ],
        )
        assert [r.error_code for r in created.results] == [errors.SecurityDisabledException.code]
    finally:
        client.close()
    kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(kafka_errors.SecurityDisabledError):
            kafka_admin.describe_acls(_any_acl_filter())
    finally:
        kafka_admin.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.kfast_cluster_config(
    controllers=3,
    combined=True,
    overrides={"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"},
)
def test_acls_reach_every_node_of_a_cluster(kfast_cluster, name):
    """CreateAcls on one node (forwarded to the active controller) reaches
    every node's authorizer through the metadata log; DeleteAcls too."""
    cluster = kfast_cluster
    cluster.wait_for_brokers()
    ports = [node.broker_port for node in cluster.nodes.values()]
    rules = [
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_ALL, principal="User:*", host="*"),
        acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE, ACL_PERMISSION_DENY, host="*"),
    ]
    admin = Raw(ports[0], ADMIN_HOST)
    try:
        admin.create_topic(name, partitions=3)
        admin.create_acls(rules)

        def described(port, resource_type=ACL_RESOURCE_TOPIC):
            """How many ACLs the node lists: on the topic, or per resource of the type."""
            client = Raw(port, ADMIN_HOST)
            try:
                resources = client.request(
                    "DescribeAcls",
                    resource_type_filter=resource_type,
                    resource_name_filter=name if resource_type == ACL_RESOURCE_TOPIC else None,
                    pattern_type_filter=PATTERN_TYPE_ANY,
                    principal_filter=None,
                    host_filter=None,
                    operation=ACL_OPERATION_ANY,
                    permission_type=ACL_PERMISSION_ANY,
                ).resources
                if resource_type == ACL_RESOURCE_TOPIC:
                    return sum(len(r.acls) for r in resources)
                return len(resources)
            finally:
                client.close()

        cluster.wait_until(
            lambda: all(described(port) == 2 for port in ports), 30, "both ACLs on every node"
        )
        # Every partition's leader refuses the write (deny beats the wildcard allow).
        error = _produce(cluster.bootstrap_servers, name)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        admin.delete_acls(rules[1:])
        cluster.wait_until(
            lambda: all(described(port) == 1 for port in ports), 30, "the DENY gone from every node"
        )
        assert _produce(cluster.bootstrap_servers, name, acks="all") is None
        # Only 127.0.0.2 may alter the cluster (nodes keep CLUSTER_ACTION).
        # CreateAcls sent to a node that is not the active controller travels
        # in an Envelope with the client's address: allowed from 127.0.0.2,
        # refused from 127.0.0.1 -- the forwarding node's own address.
        admin.create_acls(
            [
                acl(
                    ACL_RESOURCE_CLUSTER,
                    CLUSTER_RESOURCE_NAME,
                    ACL_OPERATION_CLUSTER_ACTION,
                    principal="User:*",
                    host="*",
                ),
                acl(
                    ACL_RESOURCE_CLUSTER,
                    CLUSTER_RESOURCE_NAME,
                    ACL_OPERATION_ALL,
                    principal="User:*",
                    host=ADMIN_HOST,
                ),
            ]
        )
        for index, port in enumerate(ports):
            rule = acl(ACL_RESOURCE_GROUP, f"{name}-{index}", ACL_OPERATION_READ)
            cluster.wait_until(
                lambda: (
                    _create_acl(port, CLIENT_HOST, rule)
                    == errors.ClusterAuthorizationException.code
                ),
                30,
                "the cluster ACLs on the node",
            )
            assert _create_acl(port, ADMIN_HOST, rule) == 0
        cluster.wait_until(
            lambda: described(ports[0], ACL_RESOURCE_GROUP) == len(ports),
            30,
            "one group ACL per node",
        )
        _check_malformed_envelopes(cluster)
    finally:
        admin.close()


def _check_malformed_envelopes(cluster) -> None:
    """Envelopes a broker would never send get Kafka's errors from the
    active controller, NOT_CONTROLLER from the others."""
    principal = serialize_principal(KafkaPrincipal("User", "alice"))
    metadata = p.encode_request(KEY["Metadata"], 12, 1, "c", p.MetadataRequest(topics=[]))[4:]
    cases = [
        (b"\x07", b"\x7f\x00\x00\x01"),
        (principal, b"\x7f\x00\x01"),
        (principal, b"\x7f\x00\x00\x01"),
    ]
    answers = []
    for node in cluster.nodes.values():
        client = Raw(node.port, CLIENT_HOST)
        try:
            answers.append(
                tuple(
                    client.request(
                        "Envelope",
                        0,
                        request_data=metadata,
                        request_principal=request_principal,
                        client_host_address=address,
                    ).error_code
                    for request_principal, address in cases
                )
            )
        finally:
            client.close()
    not_controller = (errors.NotControllerException.code,) * len(cases)
    assert sorted(answers) == sorted(
        [not_controller] * (len(answers) - 1)
        + [
            (
                errors.PrincipalDeserializationException.code,
                errors.InvalidRequestException.code,
                errors.InvalidRequestException.code,
            )
        ]
    )


def _create_acl(port: int, source: str, rule: Acl) -> int:
    client = Raw(port, source)
    try:
        response = client.request(
            "CreateAcls",
            creations=[
                p.CreateAclsRequest.AclCreation(
                    resource_type=rule.resource_type,
                    resource_name=rule.resource_name,
                    resource_pattern_type=rule.pattern_type,
                    principal=rule.principal,
                    host=rule.host,
                    operation=rule.operation,
                    permission_type=rule.permission_type,
                )
            ],
        )
        return response.results[0].error_code
    finally:
        client.close()


# -- two users over SASL/PLAIN --------------------------------------------------------------
@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    """A broker with a SASL_PLAINTEXT listener for alice and bob (PLAIN,
    JAAS users with fresh passwords) and a PLAINTEXT one whose anonymous
    principal is the super user that sets the ACLs up."""
    users = {"alice": secrets.token_urlsafe(12), "bob": secrets.token_urlsafe(12)}
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{pw}"' for u, pw in users.items())
        + ";"
    )
    broker = KfastBroker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": AUTHORIZER,
            "super.users": ANONYMOUS,
            "num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
        },
        data_dir=str(tmp_path_factory.mktemp("kfast-acls-sasl")),
    )
    broker.start()
    ports = dict(broker.broker.bound_ports)
    admin = Raw(ports["PLAINTEXT"], CLIENT_HOST)
    yield broker, f"127.0.0.1:{ports['SASL_PLAINTEXT']}", users, admin
    admin.close()
    broker.close()


def test_two_sasl_users_get_what_their_acls_allow(sasl, name):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    broker, bootstrap, users, admin = sasl
    admin.create_topic(name)

    def confluent(user):
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": users[user],
        }

    def kafka_python(user):
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": users[user],
        }

    def consume(user):
        consumer = KafkaConsumer(
            name,
            bootstrap_servers=bootstrap,
            group_id=f"{name}-{user}",
            auto_offset_reset="earliest",
            request_timeout_ms=11000,
            **kafka_python(user),
        )
        try:
            for _ in range(40):
                records = [r for batch in consumer.poll(timeout_ms=250).values() for r in batch]
                if records:
                    return [r.value for r in records]
            return []
        finally:
            consumer.close()

    async def aio_produce(user, topic):
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, request_timeout_ms=10000, **kafka_python(user)
        )
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"aio")
        finally:
            await producer.stop()

    admin.create_acls(
        [
            acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE, principal="User:alice", host="*"),
            acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_READ, principal="User:*", host="*"),
            acl(
                ACL_RESOURCE_GROUP,
                name,
                ACL_OPERATION_READ,
                principal="User:*",
                host="*",
                pattern=PATTERN_TYPE_PREFIXED,
            ),
            acl(
                ACL_RESOURCE_TOPIC,
                name,
                ACL_OPERATION_READ,
                ACL_PERMISSION_DENY,
                principal="User:bob",
                host="*",
            ),
            acl(
                ACL_RESOURCE_TOPIC,
                f"bob-{name}",
                ACL_OPERATION_ALL,
                principal="User:bob",
                host="*",
                pattern=PATTERN_TYPE_PREFIXED,
            ),
        ]
    )
    # WRITE: alice's, not bob's.
    assert _produce(bootstrap, name, **confluent("alice")) is None
    assert (
        _produce(bootstrap, name, **confluent("bob")).code()
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    # READ for every user, but bob's DENY wins.
    assert consume("alice") == [b"v"]
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        consume("bob")
    # bob's prefix: he may create and write his own topics, and only those.
    asyncio.run(asyncio.wait_for(aio_produce("bob", f"bob-{name}-1"), 30))
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(asyncio.wait_for(aio_produce("bob", f"alice-{name}"), 30))
    assert f"alice-{name}" not in broker.broker.metadata_image.topics_by_name


def test_transactions_are_described_and_listed_by_their_acls(secured, name):
    """DescribeTransactions names only the partitions of topics the principal
    may describe, and both APIs only transactional ids it may describe
    (Kafka's handleDescribeTransactionsRequest / handleListTransactionsRequest)."""
    broker, admin = secured
    shown, hidden = f"{name}-shown", f"{name}-hidden"
    admin.create_topic(shown)
    admin.create_topic(hidden)
    txn = f"tx-{name}"
    writes = [
        acl(ACL_RESOURCE_TOPIC, shown, ACL_OPERATION_WRITE),
        acl(ACL_RESOURCE_TRANSACTIONAL_ID, txn, ACL_OPERATION_WRITE),
    ]
    with granted(admin, *writes, acl(ACL_RESOURCE_TOPIC, hidden, ACL_OPERATION_WRITE)):
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "transactional.id": txn,
                "transaction.timeout.ms": 60000,
            }
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        for topic in (shown, hidden):
            producer.produce(topic, b"t")
        assert producer.flush(15) == 0  # both partitions are in the open transaction
    # Gone without ending it (a live producer looking up its coordinator
    # without its ACLs would fail fatally); the coordinator aborts it on timeout.
    del producer
    client = Raw(broker.port, CLIENT_HOST)
    try:

        def described(conn):
            [state] = conn.request(
                "DescribeTransactions", transactional_ids=[txn]
            ).transaction_states
            return state.error_code, sorted(t.topic for t in state.topics or ())

        def listed(conn):
            return [
                t.transactional_id
                for t in conn.request(
                    "ListTransactions",
                    state_filters=[],
                    producer_id_filters=[],
                    duration_filter=-1,
                    transactional_id_pattern=None,
                ).transaction_states
            ]

        assert described(admin) == (0, sorted([shown, hidden]))
        assert txn in listed(admin)
        assert described(client) == (errors.TransactionalIdAuthorizationException.code, [])
        assert txn not in listed(client)
        with granted(admin, *writes):
            assert described(client) == (0, [shown])
            assert txn in listed(client)
    finally:
        client.close()


def test_authorizer_decisions_are_logged_as_kafka_authorizer_logger(
    secured, name, caplog, monkeypatch
):
    """kafka.authorizer.logger: a denial at INFO (repeats within the interval
    counted, not logged), an allowed check at DEBUG, in
    StandardAuthorizerData's words."""
    import logging

    import kfast.server.apis as apis
    from kfast.server.rate_limited_log import RateLimitedLogger

    broker, admin = secured
    admin.create_topic(name)
    monkeypatch.setattr(apis, "_AUDIT_DENIALS", RateLimitedLogger(apis._AUDIT_LOG))
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    for _ in range(3):
        assert (
            _produce(broker.bootstrap_servers, name).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        )
    denied = [
        r
        for r in caplog.records
        if r.name == "kafka.authorizer.logger" and r.levelno == logging.INFO
    ]
    assert denied, "no denial logged"
    assert denied[0].getMessage().startswith("Principal = User:ANONYMOUS is Denied operation = ")
    assert (
        f"from host = 127.0.0.1 on resource = Topic:LITERAL:{name} for request = "
        in denied[0].getMessage()
    )
    assert denied[0].getMessage().endswith("with resourceRefCount = 1 based on rule DefaultDeny")
    # Three producers retried their refused calls: one line, the rest counted.
    assert len(denied) == 1
    caplog.clear()
    with granted(admin, acl(ACL_RESOURCE_TOPIC, name, ACL_OPERATION_WRITE)):
        assert _produce(broker.bootstrap_servers, name) is None
    allowed = [
        r.getMessage()
        for r in caplog.records
        if r.name == "kafka.authorizer.logger" and r.levelno == logging.DEBUG
    ]
    assert (
        f"Principal = User:ANONYMOUS is Allowed operation = WRITE from host = 127.0.0.1 "
        f"on resource = Topic:LITERAL:{name} for request = Produce with resourceRefCount "
        f"= 1 based on rule MatchingAcl(acl=StandardAcl(resourceType=TOPIC, "
        f"resourceName={name}, patternType=LITERAL, principal=User:ANONYMOUS, "
        f"host=127.0.0.1, operation=WRITE, permissionType=ALLOW))"
    ) in allowed


def test_a_regex_subscription_matches_only_topics_the_member_may_describe(secured, name):
    """KIP-848: the coordinator resolves a member's SubscribedTopicRegex to
    the topics it may DESCRIBE only (Kafka's GroupMetadataManager asks the
    authorizer). confluent-kafka resolves regexes itself against Metadata,
    which already hides the topic, so the member here is the wire protocol's
    ConsumerGroupHeartbeat v1, as kafka-clients' subscribe(SubscriptionPattern)
    sends it."""
    broker, admin = secured
    readable, hidden, group = f"{name}-readable", f"{name}-hidden", f"g-{name}"
    for topic in (readable, hidden):
        admin.create_topic(topic)
    ids = {t.topic_id: n for n, t in broker.broker.metadata_image.topics_by_name.items()}
    client = Raw(broker.port, CLIENT_HOST)
    try:
        with granted(
            admin,
            acl(ACL_RESOURCE_TOPIC, readable, ACL_OPERATION_READ),
            acl(ACL_RESOURCE_GROUP, group, ACL_OPERATION_READ),
        ):
            member_id, epoch, deadline = str(uuid.uuid4()), 0, time.monotonic() + 30
            # __consumer_offsets exists once FindCoordinator answers.
            while (
                client.request("FindCoordinator", key_type=0, coordinator_keys=[group])
                .coordinators[0]
                .error_code
            ):
                assert time.monotonic() < deadline
            while True:
                response = client.request(
                    "ConsumerGroupHeartbeat",
                    1,
                    group_id=group,
                    member_id=member_id,
                    member_epoch=epoch,
                    instance_id=None,
                    rack_id=None,
                    rebalance_timeout_ms=30000,
                    subscribed_topic_names=None,
                    subscribed_topic_regex=f"{name}-.*",
                    server_assignor=None,
                    topic_partitions=None if epoch else [],
                )
                assert response.error_code == 0, response
                epoch = response.member_epoch
                assigned = {
                    ids[t.topic_id]
                    for t in (response.assignment.topic_partitions if response.assignment else ())
                }
                if assigned or time.monotonic() > deadline:
                    break
            assert assigned == {readable}
            client.request(
                "ConsumerGroupHeartbeat",
                1,
                group_id=group,
                member_id=member_id,
                member_epoch=-1,
                instance_id=None,
                rack_id=None,
                rebalance_timeout_ms=-1,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=None,
            )
    finally:
        client.close()


def test_filtering_checks_are_not_audited_as_denials(secured, name, caplog, monkeypatch):
    """Kafka's logIfDenied=false: the topics an all-topics Metadata leaves
    out, and ListGroups' cluster check, are filters, not refused requests,
    so kafka.authorizer.logger gets no INFO line for them; a topic named in
    the request and refused is still audited at INFO."""
    import logging

    import kfast.server.apis as apis
    from kfast.server.rate_limited_log import RateLimitedLogger

    broker, admin = secured
    visible, hidden = f"{name}-visible", f"{name}-hidden"
    admin.create_topic(visible)
    admin.create_topic(hidden)
    monkeypatch.setattr(apis, "_AUDIT_DENIALS", RateLimitedLogger(apis._AUDIT_LOG))
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")

    def audited(level: int, resource: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "kafka.authorizer.logger"
            and r.levelno == level
            and r.getMessage().split(" for request = ")[0].endswith(resource)
        ]

    with granted(admin, acl(ACL_RESOURCE_TOPIC, visible, ACL_OPERATION_DESCRIBE)):
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = client.list_topics(timeout=10).topics
        assert visible in listed and hidden not in listed
        client.list_consumer_groups(request_timeout=10).result()
        assert audited(logging.INFO, f"Topic:LITERAL:{hidden}") == []
        assert audited(logging.INFO, "Cluster:LITERAL:kafka-cluster") == []
        assert audited(logging.DEBUG, f"Topic:LITERAL:{visible}")
        # Asked for by name: a refused request, audited at INFO.
        with pytest.raises(KafkaException):
            client.describe_topics(TopicCollection([hidden]))[hidden].result(timeout=10)
        [line] = audited(logging.INFO, f"Topic:LITERAL:{hidden}")
        assert line.startswith("Principal = User:ANONYMOUS is Denied operation = DESCRIBE ")
