"""KafkaApis and the broker's data-plane handlers over real sockets.

The broker runs with ``ControllerDouble``: an in-memory stand-in with the
QuorumController interface that builds MetadataImages by hand, so these
tests exercise the broker alone (the real controller has its own tests, and
tests/e2e runs the two together).
"""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

import kfast.protocol as p
from kfast.controller.metadata.image import (
    BrokerRegistration,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kfast.protocol import errors
from kfast.records import RecordBatchBuilder, iter_batches
from kfast.testing import KfastBroker


class ControllerDouble:
    """Single-node metadata built by hand (test double of QuorumController)."""

    def __init__(self, broker, loop):
        self.broker = broker
        self.node_id = broker.node_id
        self.image = MetadataImage(
            cluster_id=broker.cluster_id or "test-cluster", offset=0, controller_id=self.node_id
        )
        self._subscribers = []
        self._next_producer_id = 1000
        self.offline_log_dirs = set()

    async def start(self):
        pass

    async def shutdown(self):
        pass

    def subscribe(self, callback):
        self._subscribers.append(callback)
        callback(MetadataDelta(), self.image)

    def _publish(self, image, delta):
        self.image = image
        for callback in self._subscribers:
            callback(delta, image)

    async def assign_replicas_to_dirs(self, assignments):
        return {}

    async def register_broker(self, broker_id, incarnation_id, listeners, rack, log_dirs=()):
        registration = BrokerRegistration(
            broker_id, incarnation_id, 1, {e.name: e for e in listeners}, rack
        )
        brokers = dict(self.image.brokers)
        brokers[broker_id] = registration
        self._publish(
            _replace(self.image, brokers=brokers, offset=self.image.offset + 1),
            MetadataDelta(changed_brokers=frozenset({broker_id})),
        )
        return 1

    async def auto_create_topics(
        self, names, num_partitions=None, replication_factor=None, configs=None
    ):
        count = num_partitions or self.broker.config["num.partitions"]
        by_name = dict(self.image.topics_by_name)
        by_id = dict(self.image.topics_by_id)
        changed = {}
        result = {}
        for name in names:
            if name in by_name:
                result[name] = errors.TopicExistsException.code
                continue
            topic = TopicImage(
                name,
                uuid.uuid4(),
                {
                    i: PartitionRegistration((self.node_id,), (self.node_id,), self.node_id, 0, 0)
                    for i in range(count)
                },
            )
            by_name[name] = by_id[topic.topic_id] = changed[name] = topic
            result[name] = 0
        self._publish(
            _replace(
                self.image, topics_by_name=by_name, topics_by_id=by_id, offset=self.image.offset + 1
            ),
            MetadataDelta(changed_topics=changed),
        )
        return result

    async def allocate_producer_ids(self, broker_id):
        first = self._next_producer_id
        self._next_producer_id += 1000
        return first, 1000


def _replace(image, **changes):
    fields = {name: getattr(image, name) for name in MetadataImage.__dataclass_fields__}
    fields.update(changes)
    return MetadataImage(**fields)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": 2},
        data_dir=str(tmp_path_factory.mktemp("kfast")),
        controller_factory=ControllerDouble,
    )
    instance.start()
    yield instance
    instance.close()


class Client:
    """A blocking raw-protocol client: one request, one response."""

    def __init__(self, broker):
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        self.correlation_id = 0

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def read_frame(self) -> bytes | None:
        header = self._read(4)
        if header is None:
            return None
        (size,) = struct.unpack(">i", header)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def request(self, key: int, version: int, body):
        self.correlation_id += 1
        self.send_frame(p.encode_request(key, version, self.correlation_id, "test", body))
        frame = self.read_frame()
        assert frame is not None, "connection closed"
        correlation_id, response = p.decode_response(key, version, frame)
        assert correlation_id == self.correlation_id
        return response

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


@pytest.fixture
def client(broker):
    c = Client(broker)
    yield c
    c.close()


def _batch(values, **kwargs) -> bytes:
    builder = RecordBatchBuilder(0, **kwargs)
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, None, value)
    return builder.build()


def _produce(client, topic, partition, records, acks=-1, version=9):
    body = p.ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            p.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    p.ProduceRequest.PartitionProduceData(index=partition, records=records)
                ],
            )
        ],
    )
    return client.request(0, version, body)


def _metadata(client, topics, version=12, allow_auto=True):
    body = p.MetadataRequest(
        topics=None
        if topics is None
        else [p.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=allow_auto,
    )
    return client.request(3, version, body)


def _fetch(
    client,
    topic,
    partition,
    offset,
    version=12,
    max_wait_ms=0,
    min_bytes=1,
    session_id=0,
    epoch=-1,
    isolation_level=0,
):
    body = p.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            p.FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    p.FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    return client.request(1, version, body)


def _values(records) -> list[bytes]:
    return [bytes(r.value) for batch in iter_batches(records) for r in batch]


# -- ApiVersions -----------------------------------------------------------------------------
def test_api_versions_lists_registered_apis(broker, client):
    response = client.request(
        18,
        3,
        p.ApiVersionsRequest(client_software_name="kfast-test", client_software_version="1.0"),
    )
    assert response.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    table = p.api_keys.BY_KEY
    assert keys[0] == (0, table[0].max_stable_version)  # Produce from v0 (KAFKA-18659)
    for key in (1, 2, 3, 18, 21, 22, 23, 35):
        assert keys[key] == (table[key].min_version, table[key].max_stable_version)
    # Exactly the APIs with a handler are advertised: nothing a client would
    # call only to be disconnected for an unknown key.
    assert sorted(keys) == broker.broker.apis.registered()
    # The transaction coordinator's APIs, every stable version.
    for key in (24, 25, 26, 27, 65, 66):
        assert keys[key] == (table[key].min_version, table[key].max_stable_version)


def test_api_versions_unsupported_version_answers_v0(client):
    frame = bytearray(p.encode_request(18, 3, 99, "test", {}))
    frame[6:8] = struct.pack(">h", 42)
    client.send_frame(bytes(frame))
    correlation_id, response = p.decode_response(18, 0, client.read_frame())
    assert correlation_id == 99
    assert response.error_code == errors.UnsupportedVersionException.code
    assert any(k.api_key == 18 and k.max_version == 4 for k in response.api_keys)


def test_api_versions_rejects_bad_software_name(client):
    response = client.request(
        18, 3, p.ApiVersionsRequest(client_software_name="-bad", client_software_version="1")
    )
    assert response.error_code == errors.InvalidRequestException.code


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 200, 0, 1, -1),  # unknown API key
        struct.pack(">hhih", 3, 99, 1, -1),  # unsupported Metadata version
        # InitProducerId v6 (KIP-939) is served only with
        # unstable.api.versions.enable: a version the codec can parse.
        struct.pack(">hhih", 22, 6, 1, -1) + b"\x00" + bytes(30),
        struct.pack(">hhih", 11, 0, 1, -1),  # JoinGroup: not served by this broker
        struct.pack(">hhih", 3, 1, 1, -1) + b"\xff",  # truncated Metadata body
        b"\x00",  # truncated header
    ],
)
def test_unparseable_requests_close_the_connection(broker, client, frame):
    client.send_frame(struct.pack(">i", len(frame)) + frame)
    assert client.closed_by_peer()
    other = Client(broker)
    try:
        assert other.request(18, 0, {}).error_code == 0  # the broker still serves
    finally:
        other.close()


# -- Metadata ---------------------------------------------------------------------------------
def test_metadata_auto_creates_topics(client, broker):
    response = _metadata(client, ["auto-a"])
    assert response.cluster_id == broker.broker.cluster_id
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, broker.port)]
    (topic,) = response.topics
    assert topic.error_code in (0, errors.LeaderNotAvailableException.code)
    response = _metadata(client, ["auto-a"])
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.topic_id != uuid.UUID(int=0)
    assert [(q.partition_index, q.leader_id, q.error_code) for q in topic.partitions] == [
        (0, 1, 0),
        (1, 1, 0),
    ]


def test_metadata_without_auto_creation(client):
    (topic,) = _metadata(client, ["not-created"], allow_auto=False).topics
    assert topic.error_code == errors.UnknownTopicOrPartitionException.code
    (topic,) = _metadata(client, ["bad/name"]).topics
    assert topic.error_code == errors.InvalidTopicException.code
    names = {t.name for t in _metadata(client, None).topics}
    assert "not-created" not in names


# -- Produce / Fetch -------------------------------------------------------------------------
def test_produce_then_fetch(client):
    _metadata(client, ["pf"])
    response = _produce(client, "pf", 0, _batch([b"a", b"b", b"c"]))
    (part,) = response.responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (0, 0)
    response = _produce(client, "pf", 0, _batch([b"d"]), acks=1)
    assert response.responses[0].partition_responses[0].base_offset == 3
    fetched = _fetch(client, "pf", 0, 0).responses[0].partitions[0]
    assert fetched.error_code == 0 and fetched.high_watermark == 4
    assert _values(fetched.records) == [b"a", b"b", b"c", b"d"]
    out_of_range = _fetch(client, "pf", 0, 99).responses[0].partitions[0]
    assert out_of_range.error_code == errors.OffsetOutOfRangeException.code


def test_produce_errors_per_partition(client):
    _metadata(client, ["perr"])
    unknown = _produce(client, "perr", 7, _batch([b"x"])).responses[0].partition_responses[0]
    assert unknown.error_code == errors.UnknownTopicOrPartitionException.code
    corrupt = bytearray(_batch([b"x"]))
    corrupt[-1] ^= 0xFF
    bad = _produce(client, "perr", 0, bytes(corrupt)).responses[0].partition_responses[0]
    assert bad.error_code == errors.CorruptRecordException.code
    two = _batch([b"1"]) + _batch([b"2"])
    bad = _produce(client, "perr", 0, two).responses[0].partition_responses[0]
    assert bad.error_code == errors.InvalidRecordException.code
    bad = _produce(client, "perr", 0, _batch([b"x"]), acks=2).responses[0].partition_responses[0]
    assert bad.error_code == errors.InvalidRequiredAcksException.code


def test_acks_zero_sends_nothing_and_closes_on_error(client, broker):
    _metadata(client, ["zero"])
    body = p.ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[
            p.ProduceRequest.TopicProduceData(
                name="zero",
                partition_data=[
                    p.ProduceRequest.PartitionProduceData(index=0, records=_batch([b"q"]))
                ],
            )
        ],
    )
    client.send_frame(p.encode_request(0, 9, 500, "test", body))
    # The next response on the connection is the Metadata one: acks=0 got none.
    (topic,) = _metadata(client, ["zero"]).topics
    assert topic.error_code == 0
    fetched = _fetch(client, "zero", 0, 0).responses[0].partitions[0]
    assert _values(fetched.records) == [b"q"]
    body.topic_data[0].partition_data[0].index = 9
    client.send_frame(p.encode_request(0, 9, 501, "test", body))
    assert client.closed_by_peer()


def test_delayed_fetch_completes_on_append(broker, client):
    _metadata(client, ["wait"])
    waiter = Client(broker)
    try:
        body = p.FetchRequest(
            max_wait_ms=5000,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                p.FetchRequest.FetchTopic(
                    topic="wait",
                    partitions=[
                        p.FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        waiter.send_frame(p.encode_request(1, 12, 77, "test", body))
        # The fetch is parked in the purgatory until this append.
        purgatory = broker.broker.replica_manager.fetch_purgatory
        assert _wait_for(broker, lambda: purgatory.delayed() == 1)
        _produce(client, "wait", 0, _batch([b"late"]))
        correlation_id, response = p.decode_response(1, 12, waiter.read_frame())
        assert correlation_id == 77
        assert _values(response.responses[0].partitions[0].records) == [b"late"]
    finally:
        waiter.close()


def _wait_for(broker, condition, timeout: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker.call_soon(condition):
            return True
    return False


def test_fetch_sessions_incremental(client):
    _metadata(client, ["sess"])
    _produce(client, "sess", 0, _batch([b"1", b"2"]))
    full = _fetch(client, "sess", 0, 0, session_id=0, epoch=0)
    assert full.session_id != 0
    assert _values(full.responses[0].partitions[0].records) == [b"1", b"2"]
    # The client moved to offset 2 and nothing else changed: no partitions.
    empty = _fetch(client, "sess", 0, 2, session_id=full.session_id, epoch=1)
    assert empty.error_code == 0 and empty.responses == []
    # With no partition listed, the session's remembered position is used.
    _produce(client, "sess", 0, _batch([b"3"]))
    body = p.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=full.session_id,
        session_epoch=2,
        topics=[],
    )
    incremental = client.request(1, 12, body)
    assert incremental.session_id == full.session_id
    (topic,) = incremental.responses
    assert topic.partitions[0].high_watermark == 3
    assert _values(topic.partitions[0].records) == [b"3"]
    stale = _fetch(client, "sess", 0, 3, session_id=full.session_id, epoch=2)
    assert stale.error_code == errors.InvalidFetchSessionEpochException.code
    unknown = _fetch(client, "sess", 0, 3, session_id=12345, epoch=1)
    assert unknown.error_code == errors.FetchSessionIdNotFoundException.code


def test_fetch_v3_down_converts_to_magic_1(client):
    _metadata(client, ["old"])
    _produce(client, "old", 0, _batch([b"legacy"]))
    part = _fetch(client, "old", 0, 0, version=3).responses[0].partitions[0]
    from kfast._ext.legacy import decode_message_set

    (record,) = decode_message_set(part.records)
    assert (record.magic, record.offset, record.value) == (1, 0, b"legacy")


def test_produce_v2_magic_1_is_converted(client):
    from kfast._ext.legacy import build_message_set

    _metadata(client, ["legacyin"])
    message_set = build_message_set(
        1, [(0, 1_700_000_000_000, b"k", b"v1"), (1, 1_700_000_000_001, None, b"v2")]
    )
    part = (
        _produce(client, "legacyin", 0, message_set, version=2).responses[0].partition_responses[0]
    )
    assert (part.error_code, part.base_offset) == (0, 0)
    fetched = _fetch(client, "legacyin", 0, 0).responses[0].partitions[0]
    assert _values(fetched.records) == [b"v1", b"v2"]


# -- ListOffsets, InitProducerId, idempotence, DeleteRecords ---------------------------------
def test_list_offsets(client):
    _metadata(client, ["lo"])
    _produce(client, "lo", 0, _batch([b"a", b"b", b"c"]))

    def list_offset(timestamp, version=7):
        body = p.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                p.ListOffsetsRequest.ListOffsetsTopic(
                    name="lo",
                    partitions=[
                        p.ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=0, timestamp=timestamp
                        )
                    ],
                )
            ],
        )
        return client.request(2, version, body).topics[0].partitions[0]

    assert list_offset(-2).offset == 0
    assert list_offset(-1).offset == 3
    by_time = list_offset(1_700_000_000_001)
    assert (by_time.offset, by_time.timestamp) == (1, 1_700_000_000_001)
    assert list_offset(1_800_000_000_000).offset == -1
    assert list_offset(-3).offset == 2
    # Older versions: only the fields they have.
    assert list_offset(-1, version=1).offset == 3
    assert list_offset(1_700_000_000_002, version=3).offset == 2
    assert list_offset(-2, version=0).old_style_offsets == [0]
    assert list_offset(-3, version=6).error_code == errors.UnsupportedVersionException.code


def test_idempotent_produce(client):
    _metadata(client, ["idem"])
    response = client.request(
        22, 4, p.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    )
    assert response.error_code == 0 and response.producer_id >= 0
    pid = response.producer_id

    def send(sequence, values, epoch=0):
        batch = _batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
        return _produce(client, "idem", 0, batch).responses[0].partition_responses[0]

    assert send(0, [b"a", b"b"]).base_offset == 0
    duplicate = send(0, [b"a", b"b"])
    assert (duplicate.error_code, duplicate.base_offset) == (0, 0)
    assert send(5, [b"gap"]).error_code == errors.OutOfOrderSequenceException.code
    assert send(2, [b"c"]).base_offset == 2
    fetched = _fetch(client, "idem", 0, 0).responses[0].partitions[0]
    assert _values(fetched.records) == [b"a", b"b", b"c"]


def test_delete_records_moves_log_start(client):
    _metadata(client, ["dr"])
    _produce(client, "dr", 0, _batch([b"a", b"b", b"c"]))
    body = p.DeleteRecordsRequest(
        timeout_ms=5000,
        topics=[
            p.DeleteRecordsRequest.DeleteRecordsTopic(
                name="dr",
                partitions=[
                    p.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=2)
                ],
            )
        ],
    )
    result = client.request(21, 2, body).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (0, 2)
    assert (
        _fetch(client, "dr", 0, 0).responses[0].partitions[0].error_code
        == errors.OffsetOutOfRangeException.code
    )
    body.topics[0].partitions[0].offset = 99
    result = client.request(21, 2, body).topics[0].partitions[0]
    assert result.error_code == errors.OffsetOutOfRangeException.code


def test_describe_log_dirs(client, broker):
    _metadata(client, ["dld"])
    _produce(client, "dld", 0, _batch([b"x"]))
    response = client.request(35, 2, p.DescribeLogDirsRequest(topics=None))
    (result,) = response.results
    assert result.error_code == 0
    sizes = {
        (t.name, q.partition_index): q.partition_size for t in result.topics for q in t.partitions
    }
    assert sizes[("dld", 0)] > 0


def test_fetched_records_go_out_by_sendfile(client, broker):
    _metadata(client, ["zerocopy"])
    payload = [bytes([i]) * 50_000 for i in range(4)]
    _produce(client, "zerocopy", 0, _batch(payload))
    server = broker.broker.socket_servers["PLAINTEXT"]
    before = broker.call_soon(lambda: server.metrics().sendfile_bytes)
    fetched = _fetch(client, "zerocopy", 0, 0).responses[0].partitions[0]
    assert _values(fetched.records) == payload
    after = broker.call_soon(lambda: server.metrics().sendfile_bytes)
    # The record bytes went file -> socket, not through Python.
    assert after - before >= len(fetched.records) >= 200_000
