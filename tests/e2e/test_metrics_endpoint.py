"""The Prometheus endpoint (issue 20, item 2): scraped with a real HTTP GET
after real clients produced and consumed, parsed with prometheus_client's
text parser (which rejects a malformed exposition), values checked against
what the clients did. docs/metrics.md lists the names.
"""

from __future__ import annotations

import math
import socket
import struct
import time
import urllib.request

import pytest
from configs_support import kfast_configs
from confluent_kafka import Consumer, Producer, TopicPartition
from e2e_support import ServeProcess, free_port, wait_until
from prometheus_client.parser import text_string_to_metric_families

import kfast.protocol as p
from kfast.protocol import api_keys
from kfast.testing import KfastBroker
from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def scrape(port: int) -> tuple[dict, dict]:
    """(samples {(name, sorted labels): value}, families {name: type})."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples, types


def value(samples: dict, name: str, **labels) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def total(samples: dict, name: str, **labels) -> float:
    """Sum over the series of ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    broker = KfastBroker(
        {"num.partitions": 1, "kfast.metrics.port": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-metrics")),
    )
    broker.start()
    yield broker
    broker.close()


def test_the_endpoint_is_off_unless_configured():
    with KfastBroker() as broker:
        assert broker.broker.config["kfast.metrics.port"] == -1
        assert broker.broker.metrics_server is None


def test_topic_request_and_group_metrics_follow_real_clients(metered, topic):
    port = metered.broker.metrics_server.port
    producer = Producer({"bootstrap.servers": metered.bootstrap_servers, "linger.ms": 5})
    for i in range(25):
        producer.produce(topic, f"value-{i:04d}".encode())
    assert producer.flush(30) == 0
    before, types = scrape(port)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 25
    assert value(before, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 25 * 10
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total") >= 25
    assert value(before, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == 0
    assert total(before, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(before, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
    assert types["kafka_server_brokertopicmetrics_messagesin"] == "counter"
    assert types["kafka_network_requestmetrics_totaltimems"] == "summary"
    assert types["kafka_server_replicamanager_underreplicatedpartitions"] == "gauge"
    assert value(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0

    group = f"g-{topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": metered.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + 30
    while received < 25 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            received += 1
    assert received == 25
    consumer.commit(offsets=[TopicPartition(topic, 0, 17)], asynchronous=False)
    consumer.close()

    after, _ = scrape(port)
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= value(
        before, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic
    )
    assert total(after, "kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    assert total(after, "kafka_network_requestmetrics_requests_total", request="OffsetCommit") >= 1
    assert (
        value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 1
    )
    # Lag = log end (25 records) minus the committed offset (17).
    assert (
        value(after, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0")
        == 8
    )
    assert (
        value(
            after,
            "kafka_consumergroup_current_offset",
            consumergroup=group,
            topic=topic,
            partition="0",
        )
        == 17
    )
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert (
        value(after, "kafka_network_requestmetrics_totaltimems", request="Fetch", quantile="0.99")
        >= 0
    )


class _ServeWithMetrics(ServeProcess):
    def __init__(self, data_dir: str, port: int, metrics_port: int):
        super().__init__(data_dir, port)
        self.metrics_port = metrics_port

    def command(self) -> list[str]:
        return super().command() + ["--metrics-port", str(self.metrics_port)]


def test_kfast_serve_metrics_port(tmp_path):
    metrics_port = free_port()
    process = _ServeWithMetrics(str(tmp_path / "data"), free_port(), metrics_port)
    try:
        process.start()
        producer = Producer({"bootstrap.servers": process.bootstrap_servers})
        producer.produce("served", b"x")
        assert producer.flush(30) == 0
        samples, _ = scrape(metrics_port)
        assert (
            value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="served") == 1
        )
        assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    finally:
        process.kill()


@pytest.mark.slow
def test_under_replicated_partitions_with_a_stopped_follower(tmp_path):
    """Two brokers, one partition on both: the follower's replication is
    cut, a write leaves it behind, the leader drops it from the ISR after
    replica.lag.time.max.ms -- UnderReplicatedPartitions 1 and an ISR
    shrink on the leader's endpoint; healed, 0 again and an expand. The
    controller-only node's endpoint reports the controller's gauges."""
    ports = {1: free_port(), 2: free_port(), 3: free_port()}
    with KfastCluster(
        controllers=1,
        brokers=2,
        replication_links=True,
        base_dir=str(tmp_path / "cluster"),
        overrides={
            "replica.lag.time.max.ms": 1500,
            "broker.session.timeout.ms": 30000,
            "replica.socket.timeout.ms": 3000,
        },
        node_overrides={n: {"kfast.metrics.port": p} for n, p in ports.items()},
    ) as cluster:
        cluster.wait_for_brokers({2, 3})
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("urp", 1, 2)])["urp"].result(30)

        def in_sync() -> bool:
            partitions = cluster.partition_state("urp")
            return 0 in partitions and len(partitions[0].isr) == 2 and partitions[0].leader >= 0

        cluster.wait_until(in_sync, 15, "urp on two in-sync replicas")
        state = cluster.partition_state("urp")[0]
        follower = next(n for n in state.replicas if n != state.leader)
        leader_port = ports[state.leader]

        def urp() -> float:
            return value(
                scrape(leader_port)[0], "kafka_server_replicamanager_underreplicatedpartitions"
            )

        assert urp() == 0
        cluster.stop_replication(follower)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
        producer.produce("urp", b"leaves the follower behind")
        assert producer.flush(30) == 0
        wait_until(lambda: urp() == 1, 20, "the leader reports one under-replicated partition")
        samples, _ = scrape(leader_port)
        assert value(samples, "kafka_server_replicamanager_isrshrinks_total") >= 1
        cluster.resume_replication(follower)
        wait_until(lambda: urp() == 0, 20, "the follower back in the ISR")
        healed = scrape(leader_port)[0]
        assert value(healed, "kafka_server_replicamanager_isrexpands_total") >= 1
        # The write reached the follower by a replica fetch: counted on both sides.
        assert value(healed, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
        assert (
            value(
                scrape(ports[follower])[0],
                "kafka_server_brokertopicmetrics_replicationbytesin_total",
            )
            > 0
        )
        # Only the controller node is the active controller; brokers say 0.
        assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 0
        controller, types = scrape(ports[1])
        assert value(controller, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert value(controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert value(controller, "kafka_controller_kafkacontroller_globalpartitioncount") >= 1
        assert (
            total(
                controller, "kafka_network_requestmetrics_requests_total", request="BrokerHeartbeat"
            )
            >= 2
        )
        # A controller-only node has no broker metrics.
        assert "kafka_server_brokertopicmetrics_messagesin" not in types


@pytest.mark.slow
def test_leader_election_metrics_after_kill_9(tmp_path):
    """ControllerStats on the controller's endpoint: a partition leader
    killed -9 is fenced when its session lapses and the controller elects
    the other in-sync replica -- LeaderElectionRateAndTimeMs counts it,
    UncleanLeaderElectionsPerSec does not. The controller restarted replays
    that election from its log but does not count it again."""
    controller_port = free_port()
    with KfastCluster(
        controllers=1,
        brokers=2,
        base_dir=str(tmp_path / "cluster"),
        overrides={"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 3000},
        node_overrides={1: {"kfast.metrics.port": controller_port}},
    ) as cluster:
        cluster.wait_for_brokers({2, 3})
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("elected", 1, 2)])["elected"].result(30)

        def in_sync() -> bool:
            partition = cluster.partition_state("elected").get(0)
            return partition is not None and len(partition.isr) == 2 and partition.leader >= 0

        cluster.wait_until(in_sync, 15, "elected on two in-sync replicas")
        leader = cluster.partition_state("elected")[0].leader

        def elections() -> tuple[float, float]:
            samples = scrape(controller_port)[0]
            prefix = "kafka_controller_controllerstats_"
            return (
                value(samples, prefix + "leaderelectionrateandtimems_count"),
                value(samples, prefix + "uncleanleaderelections_total"),
            )

        before, unclean_before = elections()
        assert unclean_before == 0
        cluster.kill(leader)
        cluster.wait_until(
            lambda: cluster.partition_state("elected")[0].leader not in (leader, -1),
            20,
            "the surviving replica elected",
        )
        after, unclean_after = elections()
        assert after >= before + 1
        assert unclean_after == 0
        samples = scrape(controller_port)[0]
        assert value(samples, "kfast_controller_controllerstats_leaderelections_total") >= 1
        cluster.restart(1)
        cluster.wait_for_leader()
        wait_until(lambda: _scrapes(controller_port), 20, "the restarted controller's endpoint")
        assert elections() == (0, 0)


def _scrapes(port: int) -> bool:
    try:
        scrape(port)
        return True
    except OSError:
        return False


class _SlowReader:
    """A raw client connection whose receive buffer is small, so a large
    response waits in the broker until the client reads it."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", port))
        self.correlation_id = 0

    def send(self, name: str, version: int, **fields) -> None:
        self.sock.sendall(self.frame(name, version, **fields))

    def frame(self, name: str, version: int, **fields) -> bytes:
        """One request's bytes (the next correlation id), for sending
        several in one write."""
        self.correlation_id += 1
        body = p.request_class(name)(**fields)
        key = api_keys.BY_NAME[name].key
        return p.encode_request(key, version, self.correlation_id, "raw", body)

    def read(self, name: str, version: int):
        size = struct.unpack(">i", self._read(4))[0]
        return p.decode_response(api_keys.BY_NAME[name].key, version, self._read(size))[1]

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "closed by the broker"
            data += chunk
        return bytes(data)


def _fetch(topic: str, max_wait_ms: int, min_bytes: int, max_bytes: int) -> dict:
    return dict(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_epoch=-1,
        topics=[
            p.FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    p.FetchRequest.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )


def test_request_and_response_queue_and_send_times(metered, topic):
    """RequestMetrics' RequestQueueTimeMs, ResponseQueueTimeMs and
    ResponseSendTimeMs, each made long on purpose: a long-poll Fetch holds
    the 99 ApiVersions pipelined behind it in the response queue (responses
    go out in request order) and the 100th in the request queue (at most 100
    requests in flight); a 4 MB Fetch waits for a client that does not read.
    TotalTimeMs is the sum of the five parts, as Kafka's."""
    port = metered.broker.metrics_server.port
    producer = Producer({"bootstrap.servers": metered.bootstrap_servers, "linger.ms": 20})
    for _ in range(40):
        producer.produce(topic, b"x" * 100_000)
    assert producer.flush(30) == 0
    empty = f"{topic}-empty"
    producer.produce(empty, b"")  # auto-created; read past its one record below
    assert producer.flush(30) == 0
    before, _ = scrape(port)

    def part(samples, name: str, request: str) -> float:
        return samples.get((f"kafka_network_requestmetrics_{name}_sum", (("request", request),)), 0)

    client = _SlowReader(metered.port)
    try:
        hold_ms = 1000
        long_poll = _fetch(empty, hold_ms, 10**6, 1024)
        long_poll["topics"][0].partitions[0].fetch_offset = 1
        # One write: the 100th request is in the broker's receive buffer
        # (read, queued) when the 100 in flight stop the connection reading.
        # Sent one by one, on a loaded machine it can arrive after the broker
        # stopped reading, and wait in the socket instead.
        apiversions = dict(client_software_name="raw", client_software_version="1")
        client.sock.sendall(
            client.frame("Fetch", 12, **long_poll)
            + b"".join(client.frame("ApiVersions", 3, **apiversions) for _ in range(100))
        )
        assert not client.read("Fetch", 12).responses[0].partitions[0].records
        for _ in range(100):
            assert client.read("ApiVersions", 3).error_code == 0
        client.send("Fetch", 12, **_fetch(topic, 0, 1, 8 * 1024 * 1024))
        # The slow reader: the broker cannot hand 4 MB to a socket whose peer
        # buffers 16 kB until the client reads.
        time.sleep(hold_ms / 1000)
        fetched = client.read("Fetch", 12).responses[0].partitions[0].records
        assert len(fetched) >= 4_000_000
    finally:
        client.sock.close()
    wait_until(
        lambda: (
            part(scrape(port)[0], "responsesendtimems", "Fetch")
            - part(before, "responsesendtimems", "Fetch")
            >= hold_ms * 0.8
        ),
        message="the slow reader's Fetch send time",
    )
    after, types = scrape(port)

    def grew(name: str, request: str) -> float:
        return part(after, name, request) - part(before, name, request)

    for name in ("requestqueuetimems", "responsequeuetimems", "responsesendtimems"):
        assert types[f"kafka_network_requestmetrics_{name}"] == "summary"
    # 99 responses ready at once but sent after the long poll's (each ready
    # a little later than the one before: half the hold leaves room for a
    # loaded machine).
    assert grew("responsequeuetimems", "ApiVersions") >= 99 * hold_ms * 0.5
    # The 100th ApiVersions was read only when the long poll answered.
    assert grew("requestqueuetimems", "ApiVersions") >= hold_ms * 0.5
    assert grew("remotetimems", "Fetch") >= hold_ms * 0.8
    parts = ("requestqueuetimems", "localtimems", "remotetimems")
    parts += ("responsequeuetimems", "responsesendtimems")
    for request in ("ApiVersions", "Fetch", "Produce", "Metadata"):
        counts = {
            value(after, f"kafka_network_requestmetrics_{n}_count", request=request)
            for n in ("totaltimems", *parts)
        }
        assert len(counts) == 1 and counts.pop() >= 1, request
        assert math.isclose(
            part(after, "totaltimems", request),
            sum(part(after, n, request) for n in parts),
            rel_tol=1e-9,
        ), request


def test_purgatory_log_flush_and_quota_throttle_metrics(metered, topic):
    """DelayedOperationPurgatory sizes while a consumer's long poll waits,
    LogFlushRateAndTimeMs on a topic that fsyncs every record, and the quota
    throttle time of a producer over its producer_byte_rate."""
    from confluent_kafka.admin import AdminClient, NewTopic

    port = metered.broker.metrics_server.port
    admin = AdminClient({"bootstrap.servers": metered.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"flush.messages": "1"})])[topic].result(15)
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    before, types = scrape(port)
    assert types["kafka_log_logflushstats_logflushrateandtimems"] == "summary"
    producer = Producer({"bootstrap.servers": metered.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
        assert producer.flush(15) == 0
    wait_until(
        lambda: value(scrape(port)[0], flushes) >= value(before, flushes) + 3,
        message="a flush per record",
    )

    client = _SlowReader(metered.port)
    try:
        long_poll = _fetch(topic, 20_000, 10**6, 1024)
        long_poll["topics"][0].partitions[0].fetch_offset = 3  # the log end
        client.send("Fetch", 12, **long_poll)
        size = "kafka_server_delayedoperationpurgatory_purgatorysize"
        pending = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
        wait_until(
            lambda: value(scrape(port)[0], size, delayedOperation="Fetch") >= 1,
            message="the long poll in the fetch purgatory",
        )
        assert value(scrape(port)[0], pending, delayedOperation="Fetch") >= 1
    finally:
        client.sock.close()

    client_id = f"slow-{topic}"
    quota = ("--entity-type", "clients", "--entity-name", client_id, "--alter")
    code, _, err = kfast_configs(metered, *quota, "--add-config", "producer_byte_rate=2048")
    assert code == 0, err

    async def quota_set() -> bool:
        return metered.broker.quotas.produce.enabled

    wait_until(lambda: metered.call(quota_set()), message="the quota on the broker")
    try:
        slow = Producer({"bootstrap.servers": metered.bootstrap_servers, "client.id": client_id})
        for _ in range(8):
            slow.produce(topic, b"y" * 4096)
            slow.poll(0)
        assert slow.flush(30) == 0
        throttled = {"resource": "Produce", "clientId": client_id}
        wait_until(
            lambda: (
                total(scrape(port)[0], "kfast_server_quota_throttle_time_ms_total", **throttled) > 0
            ),
            message="the producer's throttle time",
        )
        assert total(scrape(port)[0], "kafka_server_quota_throttle_time", **throttled) > 0
    finally:
        code, _, err = kfast_configs(metered, *quota, "--delete-config", "producer_byte_rate")
        assert code == 0, err
