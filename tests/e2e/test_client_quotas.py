"""Client quotas end to end: AlterClientQuotas / DescribeClientQuotas (kfast
configs and the wire protocol, both versions), quotas surviving a restart,
and confluent-kafka producers and consumers slowed to their byte rates
while others are not.

The throughput tests run the broker with quota.window.num=2 (one window of
1 s plus the current one): with Kafka's default of 11 windows a new client
may burst ten windows' worth before its first throttle, which takes many
seconds to average out. Kafka's sampled rate also lets a client run ahead or
behind by up to about one window's worth at any moment, and the first
seconds (the burst, then the throttle that pays for it) below the rate, so
the rate is measured over six windows from the third second on.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from configs_support import kfast_configs
from confluent_kafka import Consumer, Producer

from kfast.client.connection import BlockingConnection
from kfast.protocol import AlterClientQuotasRequest, DescribeClientQuotasRequest, errors
from kfast.protocol.constants import QUOTA_MATCH_DEFAULT, QUOTA_MATCH_EXACT, QUOTA_MATCH_SPECIFIED
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

RATE = 200_000  # bytes/s
RUN_S, MEASURE_FROM_S = 9.0, 3.0
INVALID_REQUEST = errors.InvalidRequestException.code


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": 1, "quota.window.num": 2, "group.initial.rebalance.delay.ms": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-quotas")),
    )
    instance.start()
    yield instance
    instance.close()


def connect(broker) -> BlockingConnection:
    host, _, port = broker.bootstrap_servers.rpartition(":")
    return BlockingConnection(host, int(port), client_id="quota-test")


def describe(connection, components, strict=False, version=1):
    C = DescribeClientQuotasRequest.ComponentData
    return connection.send(
        DescribeClientQuotasRequest(
            strict=strict,
            components=[C(entity_type=t, match_type=m, match=n) for t, m, n in components],
        ),
        version=version,
    )


def alter(connection, entries, validate_only=False, version=1):
    R = AlterClientQuotasRequest
    return connection.send(
        R(
            validate_only=validate_only,
            entries=[
                R.EntryData(
                    entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[R.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops],
                )
                for entity, ops in entries
            ],
        ),
        version=version,
    )


def as_dict(response) -> dict:
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


# -- the admin APIs -------------------------------------------------------------------------
def test_kfast_configs_alters_and_describes_quotas(quota_broker):
    status, out, err = kfast_configs(
        quota_broker,
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
        "--alter",
        "--add-config",
        "producer_byte_rate=1024,request_percentage=50.5",
    )
    assert (status, out, err) == (0, "Completed updating config for user alice.\n", "")
    status, out, _ = kfast_configs(
        quota_broker,
        "--client-defaults",
        "--alter",
        "--add-config",
        "consumer_byte_rate=10000000000",
    )
    assert (status, out) == (0, "Completed updating default config for clients in the cluster.\n")
    _, out, _ = kfast_configs(
        quota_broker,
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
        "--describe",
    )
    assert out == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "producer_byte_rate=1024.0, request_percentage=50.5\n"
    )
    _, out, _ = kfast_configs(quota_broker, "--entity-type", "clients", "--describe")
    assert out == "Quota configs for the default client-id are consumer_byte_rate=1.0E10\n"

    status, _, _ = kfast_configs(
        quota_broker,
        "--user",
        "alice",
        "--client-defaults",
        "--alter",
        "--delete-config",
        "request_percentage",
    )
    assert status == 0
    with connect(quota_broker) as connection:
        quotas = as_dict(describe(connection, [("user", QUOTA_MATCH_EXACT, "alice")]))
    assert quotas == {(("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0}}
    # kafka-configs.sh's errors: a fraction for a LONG quota, an unset key.
    status, _, err = kfast_configs(
        quota_broker, "--client", "c1", "--alter", "--add-config", "producer_byte_rate=1.5"
    )
    assert status == 1 and "producer_byte_rate cannot be a fractional value." in err
    status, _, err = kfast_configs(
        quota_broker, "--client", "c1", "--alter", "--delete-config", "producer_byte_rate"
    )
    assert (status, err) == (1, "Invalid config(s): producer_byte_rate\n")
    # Clean up for the other tests of the module.
    for argv in (["--user", "alice", "--client-defaults"], ["--client-defaults"]):
        key = "producer_byte_rate" if "--user" in argv else "consumer_byte_rate"
        assert kfast_configs(quota_broker, *argv, "--alter", "--delete-config", key)[0] == 0


@pytest.mark.parametrize("version", [0, 1])
def test_alter_validation_and_describe_filters(quota_broker, version):
    with connect(quota_broker) as connection:
        response = alter(
            connection,
            [
                ([("user", "u1")], [("producer_byte_rate", 100.0)]),
                ([("user", "u1"), ("client-id", "c1")], [("consumer_byte_rate", 200.0)]),
                ([("client-id", None)], [("request_percentage", 12.5)]),
                ([("ip", "127.0.0.1")], [("connection_creation_rate", 5.0)]),
                ([("user", "u2")], [("no_such_quota", 1.0)]),
                ([("user", "u4")], [("producer_byte_rate", -1.0)]),
                ([("ip", "127.0.0.2"), ("user", "u2")], [("producer_byte_rate", 1.0)]),
                ([("group", "g")], [("producer_byte_rate", 1.0)]),
                ([], [("producer_byte_rate", 1.0)]),
                ([("user", "")], [("producer_byte_rate", 1.0)]),
                (
                    [("user", "u5")],
                    [("controller_mutation_rate", 1.0), ("controller_mutation_rate", 2.0)],
                ),
                ([("user", "u5")], [("producer_byte_rate", 1.0)]),
            ],
            version=version,
        )
        assert [(e.error_code, e.error_message) for e in response.entries] == [
            (0, None),
            (0, None),
            (0, None),
            (0, None),
            (INVALID_REQUEST, "Invalid configuration key no_such_quota"),
            (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
            (
                INVALID_REQUEST,
                "Invalid quota entity combination, IP entity shouldnot be "
                "combined with User or ClientId",
            ),
            (INVALID_REQUEST, "Unhandled client quota entity type: group"),
            (INVALID_REQUEST, "Invalid empty client quota entity"),
            (INVALID_REQUEST, "Empty user not supported"),
            (
                INVALID_REQUEST,
                "Duplicate quota key controller_mutation_rate not updating quota "
                "for this entity ClientQuotaEntity(entries={user=u5})",
            ),
            (INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u5})"),
        ]
        assert [
            [(e.entity_type, e.entity_name) for e in entry.entity] for entry in response.entries
        ][:3] == [[("user", "u1")], [("user", "u1"), ("client-id", "c1")], [("client-id", None)]]
        # validate_only writes nothing.
        alter(
            connection,
            [([("user", "u3")], [("producer_byte_rate", 1.0)])],
            validate_only=True,
            version=version,
        )

        u1 = (("user", "u1"),)
        u1c1 = (("client-id", "c1"), ("user", "u1"))
        default_client = (("client-id", None),)
        ip = (("ip", "127.0.0.1"),)
        assert set(as_dict(describe(connection, [], version=version))) == {
            u1,
            u1c1,
            default_client,
            ip,
        }
        assert set(
            as_dict(describe(connection, [("user", QUOTA_MATCH_EXACT, "u1")], version=version))
        ) == {u1, u1c1}
        assert set(
            as_dict(
                describe(
                    connection, [("user", QUOTA_MATCH_EXACT, "u1")], strict=True, version=version
                )
            )
        ) == {u1}
        assert set(
            as_dict(
                describe(connection, [("client-id", QUOTA_MATCH_SPECIFIED, None)], version=version)
            )
        ) == {u1c1, default_client}
        assert as_dict(
            describe(
                connection, [("client-id", QUOTA_MATCH_DEFAULT, None)], strict=True, version=version
            )
        ) == {default_client: {"request_percentage": 12.5}}
        for components, code, message in [
            (
                [("user", QUOTA_MATCH_EXACT, None)],
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            ),
            (
                [("user", QUOTA_MATCH_DEFAULT, "x")],
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
            ),
            ([("user", 7, None)], INVALID_REQUEST, "Unknown match type 7"),
            (
                [("user", QUOTA_MATCH_SPECIFIED, None), ("user", QUOTA_MATCH_DEFAULT, None)],
                INVALID_REQUEST,
                "Entity type user cannot appear more than once in the filter.",
            ),
            (
                [("ip", QUOTA_MATCH_SPECIFIED, None), ("user", QUOTA_MATCH_DEFAULT, None)],
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter "
                "component should not be used with user or clientId filter "
                "component.",
            ),
            (
                [("group", QUOTA_MATCH_SPECIFIED, None)],
                errors.UnsupportedVersionException.code,
                "Unsupported entity type group",
            ),
        ]:
            response = describe(connection, components, version=version)
            assert (response.error_code, response.error_message, response.entries) == (
                code,
                message,
                None,
            )
        # Remove them again; removing an unset key is no error.
        response = alter(
            connection,
            [
                ([("user", "u1")], [("producer_byte_rate", None), ("consumer_byte_rate", None)]),
                ([("user", "u1"), ("client-id", "c1")], [("consumer_byte_rate", None)]),
                ([("client-id", None)], [("request_percentage", None)]),
                ([("ip", "127.0.0.1")], [("connection_creation_rate", None)]),
            ],
            version=version,
        )
        assert [e.error_code for e in response.entries] == [0, 0, 0, 0]
        assert describe(connection, [], version=version).entries == []


def test_quotas_survive_a_restart(tmp_path):
    with KfastBroker(data_dir=str(tmp_path)) as broker:
        assert (
            kfast_configs(
                broker, "--user-defaults", "--alter", "--add-config", "producer_byte_rate=5000"
            )[0]
            == 0
        )
        broker.restart()
        _, out, _ = kfast_configs(broker, "--entity-type", "users", "--describe")
        assert out == "Quota configs for the default user-principal are producer_byte_rate=5000.0\n"
        assert broker.call(_quota_limit(broker)) == 5000.0


async def _quota_limit(broker):
    return broker.broker.quotas.produce.resolve("ANONYMOUS", "any")[1]


# -- enforcement ----------------------------------------------------------------------------
class Measured:
    """Bytes a client got over time, and the largest throttle time its
    librdkafka statistics saw."""

    def __init__(self):
        self.marks: list[tuple[float, int]] = []
        self.max_throttle_ms = 0

    def stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            self.max_throttle_ms = max(self.max_throttle_ms, broker["throttle"]["max"])

    def at(self, t: float) -> int:
        return max((count for when, count in self.marks if when <= t), default=0)

    def rate(self, start: float, end: float) -> float:
        return (self.at(end) - self.at(start)) / (end - start)


def produce_for(broker, client_id: str, topic: str, seconds: float) -> Measured:
    measured = Measured()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 16384,
            "statistics.interval.ms": 500,
            "stats_cb": measured.stats,
        }
    )
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg)

    start = time.monotonic()
    value = b"x" * 1000
    while (now := time.monotonic() - start) < seconds:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        measured.marks.append((now, acked[0]))
    producer.poll(0.6)  # one more statistics report
    producer.purge()
    producer.flush(10)
    return measured


def consume_for(broker, client_id: str, topic: str, seconds: float, **config) -> Measured:
    """Consume for ``seconds`` from the first record on."""
    measured = Measured()
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "group.id": client_id,
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 500,
            "stats_cb": measured.stats,
            **config,
        }
    )
    consumer.subscribe([topic])
    received, start = 0, None
    deadline = time.monotonic() + 30  # the group forms, the first record comes
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                if start is None:
                    start = time.monotonic()
                received += len(message.value())
            if start is not None:
                now = time.monotonic() - start
                measured.marks.append((now, received))
                if now >= seconds:
                    break
        consumer.poll(0.6)  # one more statistics report
    finally:
        consumer.close()
    return measured


def run_together(*jobs) -> list:
    """Run the jobs on threads at once; their results (a job's exception is
    raised here)."""
    results: list = [None] * len(jobs)

    def run(i, job):
        try:
            results[i] = job()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def test_a_producer_is_slowed_to_its_byte_rate_and_others_are_not(quota_broker, topic):
    assert (
        kfast_configs(
            quota_broker,
            "--client",
            "slow-producer",
            "--alter",
            "--add-config",
            f"producer_byte_rate={RATE}",
        )[0]
        == 0
    )
    slow, free = run_together(
        lambda: produce_for(quota_broker, "slow-producer", topic, RUN_S),
        lambda: produce_for(quota_broker, "free-producer", topic + "-free", 1.0),
    )
    rate = slow.rate(MEASURE_FROM_S, RUN_S)
    assert RATE * 0.9 <= rate <= RATE * 1.1, (rate, slow.marks[-1])
    assert slow.max_throttle_ms > 0  # throttle_time_ms reached the client
    assert free.at(1.0) > 5 * RATE
    assert free.max_throttle_ms == 0


def test_a_consumer_is_slowed_to_its_byte_rate_and_others_are_not(quota_broker, topic):
    # Batches well below a window's worth: a fetch returns at least one whole
    # batch, and one larger than the quota lets through in a window would
    # always be over it (as in Kafka).
    records = 4000
    producer = Producer(
        {"bootstrap.servers": quota_broker.bootstrap_servers, "linger.ms": 20, "batch.size": 16384}
    )
    for _ in range(records):
        producer.produce(topic, b"y" * 1000)
    assert producer.flush(30) == 0
    assert (
        kfast_configs(
            quota_broker,
            "--client",
            "slow-consumer",
            "--alter",
            "--add-config",
            f"consumer_byte_rate={RATE}",
        )[0]
        == 0
    )
    slow, free = run_together(
        lambda: consume_for(
            quota_broker,
            "slow-consumer",
            topic,
            RUN_S,
            **{
                "fetch.max.bytes": 32768,
                "max.partition.fetch.bytes": 32768,
                "message.max.bytes": 32768,
            },
        ),
        lambda: consume_for(quota_broker, "free-consumer", topic, 1.0),
    )
    rate = slow.rate(MEASURE_FROM_S, RUN_S)
    assert RATE * 0.9 <= rate <= RATE * 1.1, (rate, slow.marks[-1])
    assert slow.max_throttle_ms > 0
    assert free.at(1.0) == records * 1000  # all of it within a second of the first record
    assert free.max_throttle_ms == 0


async def _request_quota(broker, client_id: str) -> float | None:
    return broker.broker.quotas.request.resolve("ANONYMOUS", client_id)[1]


def _await_request_quota(broker, client_id: str, limit: float) -> None:
    deadline = time.monotonic() + 15
    while broker.call(_request_quota(broker, client_id)) != limit:
        assert time.monotonic() < deadline, "the request quota never reached the broker"
        time.sleep(0.02)


def test_request_percentage_throttles_the_client_and_not_others(quota_broker):
    from kfast.protocol import MetadataRequest

    assert (
        kfast_configs(
            quota_broker, "--client", "busy", "--alter", "--add-config", "request_percentage=0.0001"
        )[0]
        == 0
    )
    # The quota is committed before the broker applies it from the metadata
    # log (as in Kafka): wait for the broker, not for the first request.
    _await_request_quota(quota_broker, "busy", 0.0001)
    host, _, port = quota_broker.bootstrap_servers.rpartition(":")
    with (
        BlockingConnection(host, int(port), client_id="busy") as busy,
        BlockingConnection(host, int(port), client_id="idle") as idle,
    ):
        # Any handler time is far above 0.0001% of a thread: throttled, for at
        # most one window (ClientRequestQuotaManager's cap).
        throttles = [busy.send(MetadataRequest(topics=[])).throttle_time_ms for _ in range(2)]
        assert all(0 < t <= 1000 for t in throttles), throttles
        assert idle.send(MetadataRequest(topics=[])).throttle_time_ms == 0
    assert (
        kfast_configs(
            quota_broker, "--client", "busy", "--alter", "--delete-config", "request_percentage"
        )[0]
        == 0
    )


def test_controller_mutation_rate_refuses_topics_over_the_burst(quota_broker, topic):
    from kafka.admin import KafkaAdminClient

    from kfast.protocol import CreateTopicsRequest

    # 2 partitions/s over Kafka's 11 controller samples: a burst of 20.
    assert (
        kfast_configs(
            quota_broker,
            "--client",
            "mutator",
            "--alter",
            "--add-config",
            "controller_mutation_rate=2",
        )[0]
        == 0
    )
    admin = KafkaAdminClient(bootstrap_servers=quota_broker.bootstrap_servers, client_id="mutator")
    try:
        # CreateTopics v7 (strict): the bucket is not empty before either of
        # the first two (15 + 10 partitions), so only the third is refused.
        response = admin.create_topics(
            {
                f"{topic}-a": {"num_partitions": 15},
                f"{topic}-b": {"num_partitions": 10},
                f"{topic}-c": {"num_partitions": 1},
            },
            raise_errors=False,
        )
        codes = {t["name"]: t["error_code"] for t in response["topics"]}
        assert codes == {
            f"{topic}-a": 0,
            f"{topic}-b": 0,
            f"{topic}-c": errors.ThrottlingQuotaExceededException.code,
        }
        # The bucket is 5 partitions short: at 2/s, 2.5 s of throttle.
        host, _, port = quota_broker.bootstrap_servers.rpartition(":")
        with BlockingConnection(host, int(port), client_id="mutator") as connection:
            answer = connection.send(
                CreateTopicsRequest(
                    timeout_ms=5000,
                    topics=[
                        CreateTopicsRequest.CreatableTopic(
                            name=f"{topic}-e", num_partitions=1, replication_factor=1
                        )
                    ],
                ),
                version=7,
            )
        assert answer.topics[0].error_code == errors.ThrottlingQuotaExceededException.code
        assert answer.topics[0].error_message == "The throttling quota has been exceeded."
        assert 0 < answer.throttle_time_ms <= 2500
    finally:
        admin.close()
    with KafkaAdminClient(
        bootstrap_servers=quota_broker.bootstrap_servers, client_id="other"
    ) as other:
        assert (
            other.create_topics({f"{topic}-d": {"num_partitions": 30}}, raise_errors=False)[
                "topics"
            ][0]["error_code"]
            == 0
        )
    assert (
        kfast_configs(
            quota_broker,
            "--client",
            "mutator",
            "--alter",
            "--delete-config",
            "controller_mutation_rate",
        )[0]
        == 0
    )


# -- connection_creation_rate (KIP-612) -----------------------------------------------------
async def _ip_quota_enabled(broker) -> bool:
    return broker.broker.quotas.connection_creation.enabled


def _await_ip_quota(broker, enabled: bool) -> None:
    deadline = time.monotonic() + 15
    while broker.call(_ip_quota_enabled(broker)) != enabled:
        assert time.monotonic() < deadline, "the IP quota never reached the broker"
        time.sleep(0.02)


def _open_connections(broker, seconds: float, interval: float = 0.05) -> tuple[int, int]:
    """Open a raw connection every ``interval`` for ``seconds``, each sending
    an ApiVersions request; (answered, closed unanswered)."""
    import selectors
    import socket

    from kfast.protocol import ApiVersionsRequest, encode_request

    host, _, port = broker.bootstrap_servers.rpartition(":")
    frame = encode_request(18, 0, 1, "ip-quota", ApiVersionsRequest())
    sockets, answered, closed = [], 0, 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(frame)
            sockets.append(sock)
            time.sleep(interval)
        selector = selectors.DefaultSelector()
        for sock in sockets:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 20
        while answered + closed < len(sockets):
            assert time.monotonic() < deadline, (answered, closed, len(sockets))
            for key, _ in selector.select(timeout=1):
                try:
                    data = key.fileobj.recv(65536)
                except ConnectionResetError:
                    data = b""
                if data:
                    answered += 1  # a response's first bytes
                else:
                    closed += 1
                selector.unregister(key.fileobj)
        selector.close()
    finally:
        for sock in sockets:
            sock.close()
    return answered, closed


def test_connection_creation_rate_closes_connections_over_the_ip_quota(quota_broker):
    assert (
        kfast_configs(
            quota_broker,
            "--entity-type",
            "ips",
            "--entity-name",
            "127.0.0.1",
            "--alter",
            "--add-config",
            "connection_creation_rate=2",
        )[0]
        == 0
    )
    try:
        _await_ip_quota(quota_broker, True)
        # 20 connections/s for 3 s against 2/s: with 2 samples of 1 s, about
        # 2/s plus one window's burst are served (7 nominal; the sampled
        # rate's tolerance is a window's worth either way), the rest are
        # closed unanswered after their throttle time.
        answered, closed = _open_connections(quota_broker, 3.0)
        assert 4 <= answered <= 10, (answered, closed)
        assert answered + closed >= 20 and closed >= 10, (answered, closed)
    finally:
        assert (
            kfast_configs(
                quota_broker,
                "--entity-type",
                "ips",
                "--entity-name",
                "127.0.0.1",
                "--alter",
                "--delete-config",
                "connection_creation_rate",
            )[0]
            == 0
        )
    _await_ip_quota(quota_broker, False)
    answered, closed = _open_connections(quota_broker, 0.5)
    assert closed == 0 and answered >= 5, (answered, closed)
