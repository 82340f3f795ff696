"""The Apache Kafka Java client (kafka-clients 4.2) against kfast.

Each test runs one scenario of tests/java/src/main/java/kfast/ClientCheck.java
in its own JVM against a fresh broker and asserts on the ``key=value`` lines
it prints. ``make deps`` builds the program and its class path into
build/java (tests/java/build.py); this module builds nothing.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
from e2e_support import REPO
from test_transactions import CONSUMERS

from kfast.kafka_broker_configs import KAFKA_BROKER_CONFIGS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(120),
    # Groups form at once (no initial rebalance delay) and KIP-848 members
    # heartbeat every 500 ms, so rebalances take a fraction of a second (a
    # group may set its own interval down to 100 ms).
    pytest.mark.kfast_broker_config(
        {
            "group.initial.rebalance.delay.ms": 0,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.heartbeat.interval.ms": 100,
        }
    ),
]

JAVA_BUILD = REPO / "build" / "java"
CLIENT_CHECK_CLASS = JAVA_BUILD / "classes" / "kfast" / "ClientCheck.class"
JAVA_SOURCES = REPO / "tests" / "java" / "src"
CLASS_PATH = f"{JAVA_BUILD / 'classes'}:{JAVA_BUILD / 'lib'}/*"
SCENARIO_TIMEOUT_S = 60
# A run lasts seconds: the C1 compiler alone and the serial collector halve
# the JVM's CPU time (2 cores shared with the broker), and its wall time on a
# loaded machine by about a third.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Facts:
    """The key=value lines of one run: ``facts[key]`` is a key's only value,
    ``facts.all(key)`` every value of a repeated key, in order."""

    def __init__(self, stdout: str):
        self._values: dict[str, list[str]] = defaultdict(list)
        for line in stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                self._values[key].append(value)

    def all(self, key: str) -> list[str]:
        return list(self._values.get(key, []))

    def __getitem__(self, key: str) -> str:
        values = self._values.get(key, [])
        assert len(values) == 1, f"{key}: {values}"
        return values[0]


def run_client_check(
    broker,
    scenario: str,
    topic: str,
    bootstrap: str | None = None,
    client_properties: str | None = None,
) -> Facts:
    """``bootstrap``: another listener than the broker's first;
    ``client_properties``: a properties file every client of the run takes
    (ClientCheck's KFAST_CLIENT_PROPERTIES)."""
    if not CLIENT_CHECK_CLASS.exists():
        pytest.fail(
            f"{CLIENT_CHECK_CLASS.relative_to(REPO)} is missing: run `make deps` "
            "(it builds the Java client check with tests/java/build.py)"
        )
    stale = [
        source.relative_to(REPO)
        for source in JAVA_SOURCES.rglob("*.java")
        if source.stat().st_mtime > CLIENT_CHECK_CLASS.stat().st_mtime
    ]
    if stale:
        # Classes from older sources fail with facts that look like broker bugs.
        pytest.fail(f"{stale} changed since build/java was built: run `make deps`")
    java = shutil.which("java")
    if java is None:
        pytest.fail("no `java` on PATH: the Java client tests need a JDK 17 (`make deps`)")
    env = dict(os.environ)
    if client_properties is not None:
        env["KFAST_CLIENT_PROPERTIES"] = client_properties
    result = subprocess.run(
        [
            java,
            *JVM_OPTIONS,
            "-cp",
            CLASS_PATH,
            "kfast.ClientCheck",
            scenario,
            bootstrap or broker.bootstrap_servers,
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        env=env,
    )
    output = f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    assert result.returncode == 0, output
    facts = Facts(result.stdout)
    assert facts["done"] == scenario, output
    assert facts["client_version"].startswith("4.2."), output
    return facts


def offsets(text: str) -> dict[int, int]:
    """'0:21,1:29' -> {0: 21, 1: 29}"""
    return {int(p): int(o) for p, o in (pair.split(":") for pair in text.split(","))}


def test_idempotent_produce_and_classic_group_consume(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "produce-consume", topic)

    assert facts.all("produced") == [f"{codec} 10" for codec in CODECS]
    records = [line.split(":", 3) for line in facts.all("record")]
    assert sorted(value for _, _, _, value in records) == sorted(
        f"{codec}-{i}" for codec in CODECS for i in range(10)
    )
    by_partition: dict[int, list[int]] = defaultdict(list)
    by_key: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for partition, offset, key, value in records:
        by_partition[int(partition)].append(int(offset))
        by_key[key].append((int(partition), value))
    # Each partition from offset 0 with no gap, in order; a key's records in
    # one partition in the order they were sent.
    for partition_offsets in by_partition.values():
        assert partition_offsets == list(range(len(partition_offsets)))
    for key, placed in by_key.items():
        assert len({partition for partition, _ in placed}) == 1, key
        sequence = [int(value.rsplit("-", 1)[1]) for _, value in placed]
        assert sequence == sorted(sequence), key

    assert facts["assignment"] == "0,1"
    assert facts["member_id_set"] == "true"
    assert int(facts["generation"]) >= 1
    ends = {partition: len(found) for partition, found in by_partition.items()}
    assert offsets(facts["committed"]) == {0: ends.get(0, 0), 1: ends.get(1, 0)}
    assert facts["explicit_commit"] == "1:kfast-meta"
    # A new member of the group resumes at the committed offsets.
    assert facts["committed_after_close"] == facts["committed"]
    assert facts["second_member_assignment"] == "0,1"
    assert facts["second_member_records"] == "0"


def test_consumer_group_protocol(kfast_broker, topic):
    """group.protocol=consumer: two members, the broker's assignor, ConsumerGroupHeartbeat."""
    facts = run_client_check(kfast_broker, "consumer-protocol", topic)

    assert facts["records_seen"] == "40"
    first, second = facts["assignment.0"].split(","), facts["assignment.1"].split(",")
    assert len(first) == len(second) == 2
    assert sorted(first + second) == ["0", "1", "2", "3"]
    for member in (0, 1):
        assert facts[f"member_id_set.{member}"] == "true"
        assert int(facts[f"member_epoch.{member}"]) >= 1
    assert facts["group_type"] == "Consumer"
    assert facts["group_state"] == "Stable"
    assert facts["group_members"] == "2"
    assert facts["group_assignor"] == "uniform"
    assert offsets(facts["committed"]) == {0: 10, 1: 10, 2: 10, 3: 10}
    # subscribe(SubscriptionPattern): the broker resolves the regex and the
    # consumer looks the assigned topic ids up by id (Metadata with name "").
    assert facts["pattern_records"] == "40"
    assert facts["pattern_assignment"] == "0,1,2,3"
    # The group's configs: the broker's defaults, then its own overrides,
    # which the coordinator gives the members (ConsumerGroupHeartbeat).
    assert facts["group_config.consumer.session.timeout.ms"] == "45000 DEFAULT_CONFIG"
    assert facts["group_config.consumer.heartbeat.interval.ms"] == "500 DEFAULT_CONFIG"
    assert facts["group_config_altered.consumer.session.timeout.ms"] == "50000 DYNAMIC_GROUP_CONFIG"
    assert (
        facts["group_config_altered.consumer.heartbeat.interval.ms"] == "400 DYNAMIC_GROUP_CONFIG"
    )
    group = facts["group_id"]
    coordinator = kfast_broker.broker.group_coordinator.coordinator
    assert coordinator.group_config(group, "consumer.heartbeat.interval.ms") == 400
    assert coordinator.group_config(group, "consumer.session.timeout.ms") == 50000


def test_admin_client(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "admin", topic)
    broker_id = kfast_broker.broker.node_id

    assert facts["cluster_id_set"] == "true"
    assert facts.all("node") == [f"{broker_id} {kfast_broker.bootstrap_servers}"]
    assert facts["controller"] == str(broker_id)

    assert facts["created"] == topic
    assert facts["create_again"] == "TopicExistsException"
    assert facts["listed"] == "true"
    assert facts["partitions"] == "3"
    assert facts["leaders"] == ",".join([str(broker_id)] * 3)
    assert facts["replicas"] == "1,1,1"
    assert facts["topic_id_set"] == "true"
    assert facts["described_by_id"] == topic

    assert facts["config.cleanup.policy"] == "compact DYNAMIC_TOPIC_CONFIG"
    assert facts["config.segment.bytes"] == "1048576 DYNAMIC_TOPIC_CONFIG"
    assert facts["config.retention.ms"] == "604800000 DEFAULT_CONFIG"
    # incrementalAlterConfigs: SET retention.ms, DELETE cleanup.policy.
    assert facts["altered.cleanup.policy"] == "delete DEFAULT_CONFIG"
    assert facts["altered.segment.bytes"] == "1048576 DYNAMIC_TOPIC_CONFIG"
    assert facts["altered.retention.ms"] == "3600000 DYNAMIC_TOPIC_CONFIG"
    assert facts["alter_unknown_config"] == "InvalidConfigurationException"
    # Broker resource: every Kafka 4.2 broker config (kfast.kafka_broker_configs).
    assert int(facts["broker_config_count"]) >= len(KAFKA_BROKER_CONFIGS)
    assert (
        facts["broker_config.remote.log.manager.task.interval.ms"]
        == "30000 DEFAULT_CONFIG true LONG"
    )
    assert (
        facts["broker_config.sasl.kerberos.min.time.before.relogin"]
        == "60000 DEFAULT_CONFIG false LONG"
    )
    assert facts["broker_config.log.retention.hours"].endswith("true INT")
    assert facts["alter_read_only_broker_config"] == (
        "InvalidRequestException Cannot update these configs dynamically: Set(log.retention.hours)"
    )
    assert facts["partitions_after_increase"] == "4"

    # Five records at timestamps 1000, 1010, ... 1040 in partition 0.
    assert facts["offset.earliest"] == "0"
    assert facts["offset.latest"] == "5"
    assert facts["offset.max_timestamp"] == "4"
    assert facts["offset.for_timestamp_1015"] == "2"
    assert facts["low_watermark"] == "2"
    assert facts["offset.earliest_after_delete"] == "2"

    assert facts["listed_group"] == "true"
    assert facts["listed_consumer_group"] == "true"
    assert facts["group_type"] == "Classic"
    assert facts["group_state"] == "Stable"
    assert facts["group_protocol"] == "range"
    assert facts["group_members"] == "1"
    assert facts["group_member_partitions"] == "4"
    assert facts["group_coordinator"] == str(broker_id)
    assert facts["group_offsets"] == "1:0"
    assert facts["group_offsets_altered"] == "0:3,1:0"
    assert facts["group_state_after_close"] == "Empty"
    assert facts["group_deleted"] == "true"

    assert facts["deleted"] == "true"
    assert facts["describe_deleted"] == "UnknownTopicOrPartitionException"


def test_transactional_producer(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "transactions", topic)
    committed = [f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(5)]
    aborted = [f"a-{i}" for i in range(5)]

    # A new cluster finalizes transaction.version 2, so the client runs
    # transaction version 2 (KIP-890 part 2): Produce v12 and TxnOffsetCommit
    # v5 have the leaders add the partitions, and every EndTxn v5 bumps the
    # epoch -- the coordinator's epoch moves once per transaction, and the
    # input partition holds the epoch of the last marker.
    assert facts["finalized_transaction_version"] == "2"
    assert facts["supported_transaction_version"] == "0-2"
    assert facts["epoch.init"] == "0 Empty"
    assert facts["epoch.c1"] == "1 CompleteCommit"
    assert facts["epoch.a"] == "2 CompleteAbort"
    assert facts["epoch.c2"] == "3 CompleteCommit"
    assert facts["partition_producer_epoch"] == "3"
    assert facts.all("transaction_committed") == ["c1 5", "c2 5"]
    assert facts["transaction_aborted"] == "a 5"
    # The zombie's write is refused as Kafka refuses it under version 2 (the
    # coordinator's PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to a producer,
    # abortable), and ending its transaction is fenced.
    assert facts["fenced"] == "InvalidProducerEpochException"
    assert facts["fenced_abort"] == "ProducerFencedException"
    assert facts["committed_read"].split(",") == committed
    assert facts["uncommitted_read"].split(",") == committed[:5] + aborted + committed[5:]
    # 15 records and three transaction markers.
    assert facts["end_offset"] == "18"

    # Consume-transform-produce: output and input offsets committed together;
    # the aborted step changed neither.
    assert facts["ctp_position"] == "18"
    assert facts["ctp_committed"] == "0:18"
    assert facts["ctp_committed_after_abort"] == "0:18"
    assert facts["ctp_group_offsets"] == "0:18"
    assert facts["output_read"].split(",") == [value.upper() for value in committed]

    # An open transaction holds read_committed at its first offset (the LSO).
    assert facts["open_end_offset.read_committed"] == "18"
    assert facts["open_end_offset.read_uncommitted"] == "19"
    assert facts["open_state"] == "Ongoing"
    assert facts["open_partitions"] == f"[{topic}-in-0]"
    assert facts["open_listed"] == "true"
    assert facts["open_start_offset"] == "18"

    # read_committed consumers of the Python clients (none of which speaks
    # transaction version 2) see exactly what the version 2 producer committed.
    for name, consume in CONSUMERS.items():
        assert consume(
            kfast_broker.bootstrap_servers, f"{topic}-in", "read_committed", until=b"c2-4"
        ) == [value.encode() for value in committed], name


def test_transaction_version_follows_update_features(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "transaction-versions", topic)
    # Lowering a feature needs a downgrade upgrade type.
    assert facts["lower_as_upgrade"] == "InvalidUpdateVersionException"
    # Lowered to 0 (the feature removed): the original protocol, one epoch
    # for every transaction of the producer.
    assert facts.all("finalized_transaction_version") == ["none", "2"]
    assert facts.all("supported_transaction_version") == ["0-2", "0-2"]
    assert [facts[f"epoch.tv0.{step}"] for step in ("init", "commit", "abort")] == [
        "0 Empty",
        "0 CompleteCommit",
        "0 CompleteAbort",
    ]
    # Raised to 2: the epoch bumps at each end.
    assert [facts[f"epoch.tv2.{step}"] for step in ("init", "commit", "abort")] == [
        "0 Empty",
        "1 CompleteCommit",
        "2 CompleteAbort",
    ]
    # Offsets committed with the transaction in both versions; the aborted
    # ones never.
    assert facts["group_offsets.tv0"] == "0:1"
    assert facts["group_offsets.tv2"] == "0:3"
    assert facts["committed_read"].split(",") == ["tv0-commit", "tv2-commit"]


@pytest.mark.kfast_broker_config({"kfast.metrics.port": 0})
def test_java_client_pushes_telemetry(kfast_broker, topic):
    """KIP-714 with the Java client: the subscription written by its Admin,
    the producer's metrics pushed on its own and on the Prometheus endpoint
    under the client instance id the producer reports; the JVM waits on
    stdin until the test has seen them."""
    from e2e_support import wait_until
    from test_metrics_endpoint import scrape

    assert CLIENT_CHECK_CLASS.exists(), "run `make deps` (tests/java/build.py)"
    process = subprocess.Popen(
        [
            shutil.which("java"),
            *JVM_OPTIONS,
            "-cp",
            CLASS_PATH,
            "kfast.ClientCheck",
            "telemetry",
            kfast_broker.bootstrap_servers,
            topic,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        while not lines or not lines[-1].startswith("client_instance_id="):
            line = process.stdout.readline()
            assert line, f"the check ended early: {lines} {process.stderr.read()}"
            lines.append(line.strip())
        instance = lines[-1].partition("=")[2]
        port = kfast_broker.broker.metrics_server.port

        def pushed():
            return {
                name: dict(labels)
                for (name, labels) in scrape(port)[0]
                if ("client_instance_id", instance) in labels
            }

        names = wait_until(pushed, 30, "a telemetry push from the Java producer")
        assert "org_apache_kafka_producer_record_send_total" in names, sorted(names)
        labels = names["org_apache_kafka_producer_record_send_total"]
        assert labels["client_software_name"] == "apache-kafka-java"
        assert labels["client_id"] == "java-telemetry"
        out, err = process.communicate("done\n", timeout=SCENARIO_TIMEOUT_S)
        assert process.returncode == 0, err
        assert Facts(out)["done"] == "telemetry"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.kfast_broker_config(
    {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
)
def test_admin_acls(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "acls", topic)
    assert sorted(facts.all("acl")) == [
        f"TOPIC {topic} LITERAL User:alice READ ALLOW",
        f"TOPIC {topic} PREFIXED User:* WRITE DENY",
    ]
    assert facts["matched"] == "1"  # the prefix applies to <topic>-x, the literal not
    assert facts["deleted"] == "1"
    assert facts["left"] == "1"
    assert facts["bad_cluster_name"] == "InvalidRequestException"


def test_admin_client_quotas(kfast_broker, topic):
    facts = run_client_check(kfast_broker, "quotas", topic)
    assert sorted(facts.all("quota")) == sorted(
        [
            "{client-id=null, user=alice} {producer_byte_rate=1024.0, request_percentage=25.5}",
            f"{{client-id={topic}}} {{consumer_byte_rate=2048.0}}",
        ]
    )
    assert facts["alice_only"] == "0"  # strict: alice's entity also names a client id
    assert (
        facts["fractional"]
        == "InvalidRequestException: producer_byte_rate cannot be a fractional value."
    )
    assert facts["after_remove"] == "1"


def _write_client_properties(path, properties: dict) -> str:
    """A Java properties file (values escaped: PEM blocks span lines)."""

    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n")

    path.write_text("".join(f"{k}={escape(str(v))}\n" for k, v in properties.items()))
    return str(path)


def test_produce_consume_and_admin_over_sasl_ssl_scram_and_mtls(tmp_path, topic):
    """kafka-clients through a SASL_SSL listener with SCRAM-SHA-512 (a user
    made with kfast configs) and through an SSL listener that requires client
    certificates: the admin creates the topic, the idempotent producer and
    the group consumer run the produce-consume scenario. The truststore is
    the test CA's PEM, the client's key and chain inline PEM."""
    from kfast.testing import KfastBroker
    from kfast.testing.certificates import TestCA

    ca = TestCA(str(tmp_path / "ca"))
    server, client = ca.issue("localhost", server=True), ca.issue("java-client")
    password = secrets.token_urlsafe(12)
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": server.keystore_path,
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": ca.cert_path,
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
    }
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca.cert_path}
    ways = {
        "SASL_SSL": {
            "security.protocol": "SASL_SSL",
            **trust,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram."
            f'ScramLoginModule required username="alice" '
            f'password="{password}";',
        },
        "MTLS": {
            "security.protocol": "SSL",
            **trust,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": client.key_pem.decode(),
            "ssl.keystore.certificate.chain": client.cert_pem.decode(),
        },
    }
    with KfastBroker(props, data_dir=str(tmp_path / "data")) as broker:
        ports = dict(broker.broker.bound_ports)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kfast",
                "configs",
                "--bootstrap-server",
                f"127.0.0.1:{ports['PLAINTEXT']}",
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--alter",
                "--add-config",
                f"SCRAM-SHA-512=[password={password}]",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        for listener, settings in ways.items():
            facts = run_client_check(
                broker,
                "produce-consume",
                f"{topic}-{listener.lower()}",
                bootstrap=f"127.0.0.1:{ports[listener]}",
                client_properties=_write_client_properties(
                    tmp_path / f"{listener}.properties", settings
                ),
            )
            assert facts.all("produced") == [f"{codec} 10" for codec in CODECS], listener
            assert len(facts.all("record")) == 10 * len(CODECS), listener
            assert facts["assignment"] == "0,1", listener
