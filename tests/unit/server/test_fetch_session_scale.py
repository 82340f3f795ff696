"""Incremental fetches cost O(changed partitions), not O(session) (issue 21
item 5): through a real broker and the raw protocol, an incremental Fetch
that changes nothing reads no partition and, when it waits, is watched under
one key; an append wakes it and only the changed partition is read."""

from __future__ import annotations

import time

import pytest

from kfast import protocol as p
from kfast.testing import KfastBroker
from tests.unit.server.test_apis import Client, ControllerDouble, _batch, _produce

# Session sizes compared; the topic has the larger number of partitions
# (creating 1,000 logs would take this test ~10 s on a loaded machine;
# 20x the small size shows the cost does not follow it).
SIZES = (10, 200)
TOPIC = "scale"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": max(SIZES)},
        data_dir=str(tmp_path_factory.mktemp("kfast")),
        controller_factory=ControllerDouble,
    )
    instance.start()
    # Auto-created with num.partitions, once for both sizes.
    c = Client(instance)
    c.sock.settimeout(60)  # creating the partitions' logs
    c.request(3, 12, p.MetadataRequest(topics=[p.MetadataRequest.MetadataRequestTopic(name=TOPIC)]))
    c.close()
    yield instance
    instance.close()


@pytest.fixture
def client(broker):
    c = Client(broker)
    yield c
    c.close()


# Records appended so far per partition (the sizes share the topic): full
# fetches start at these offsets, caught up.
APPENDED: dict[int, int] = {}


def _session_fetch(topic, partitions, session_id, epoch, max_wait_ms=0, offset=None):
    """``offset`` None: each partition's end (APPENDED)."""
    return p.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[]
        if not partitions
        else [
            p.FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    p.FetchRequest.FetchPartition(
                        partition=i,
                        fetch_offset=APPENDED.get(i, 0) if offset is None else offset,
                        partition_max_bytes=1 << 20,
                    )
                    for i in partitions
                ],
            )
        ],
    )


class ReadCounter:
    """Counts the partitions ReplicaManager.read_from_local_log reads (a
    caught-up one's read is C: counted where the reads start)."""

    def __init__(self, broker: KfastBroker) -> None:
        self.replica_manager = broker.broker.replica_manager
        self.read = self.replica_manager.read_from_local_log
        self.keys: list[tuple[str, int]] = []

    def __enter__(self) -> ReadCounter:
        def counting(params, requests):
            self.keys.extend(request.key for request in requests)
            return self.read(params, requests)

        self.replica_manager.read_from_local_log = counting
        return self

    def __exit__(self, *exc_info) -> None:
        del self.replica_manager.read_from_local_log


def _wait_until_waiting(broker: KfastBroker) -> None:
    """Until a fetch waits in the purgatory (the broker's state; no event
    reaches the test for it)."""
    purgatory = broker.broker.replica_manager.fetch_purgatory
    deadline = time.monotonic() + 10
    while not broker.call_soon(purgatory.delayed):
        assert time.monotonic() < deadline, "the fetch never waited"
        time.sleep(0.01)


@pytest.mark.parametrize("size", SIZES)
def test_incremental_fetch_without_changes_reads_nothing(broker, client, size):
    topic = TOPIC
    replica_manager = broker.broker.replica_manager
    purgatory = replica_manager.fetch_purgatory
    # The full fetch opens the session and reads every partition it lists.
    with ReadCounter(broker) as reads:
        full = client.request(1, 12, _session_fetch(topic, range(size), 0, 0))
    assert full.error_code == 0 and full.session_id != 0
    assert len(reads.keys) == size
    session = full.session_id

    # Nothing changed: an incremental fetch answered at once reads nothing.
    with ReadCounter(broker) as reads:
        empty = client.request(1, 12, _session_fetch(topic, [], session, 1))
    assert empty.error_code == 0 and empty.responses == []
    assert reads.keys == []

    # One that waits is watched under one key (its session), whatever the
    # session's size, and its expiry reads nothing either.
    watched_before = broker.call_soon(purgatory.watched)
    with ReadCounter(broker) as reads:
        client.send_frame(
            p.encode_request(1, 12, 501, "test", _session_fetch(topic, [], session, 2, 1000))
        )
        _wait_until_waiting(broker)
        assert broker.call_soon(purgatory.watched) - watched_before <= 1
        correlation_id, expired = p.decode_response(1, 12, client.read_frame())
    assert correlation_id == 501 and expired.responses == []
    assert reads.keys == []

    # An append to one partition wakes it: only that partition is read, and
    # the response carries only it.
    with ReadCounter(broker) as reads:
        client.send_frame(
            p.encode_request(1, 12, 502, "test", _session_fetch(topic, [], session, 3, 30_000))
        )
        _wait_until_waiting(broker)
        started = time.monotonic()
        producer = Client(broker)
        try:
            assert _produce(producer, topic, size - 1, _batch([b"wake"])).responses
        finally:
            producer.close()
        APPENDED[size - 1] = APPENDED.get(size - 1, 0) + 1
        correlation_id, woken = p.decode_response(1, 12, client.read_frame())
    assert correlation_id == 502
    assert time.monotonic() - started < 15  # woken by the append, not the 30 s expiry
    (answered,) = woken.responses
    assert [part.partition_index for part in answered.partitions] == [size - 1]
    assert set(reads.keys) == {(topic, size - 1)}

    # Caught up again (the client moved past the record): nothing to read.
    with ReadCounter(broker) as reads:
        moved = client.request(1, 12, _session_fetch(topic, [size - 1], session, 4))
        assert moved.responses == []
        again = client.request(1, 12, _session_fetch(topic, [], session, 5))
    assert again.responses == []
    assert reads.keys == [(topic, size - 1)]  # the moved partition, once
