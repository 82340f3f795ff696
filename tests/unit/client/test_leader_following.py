"""How kfast's client follows a leader that moved or died: retries bounded
by time (the cluster's ``metadata_timeout``, the producer's
``delivery_timeout_ms``), not by a count of quick retries, because a broker
killed with -9 stays the leader in Metadata until its session times out
(Kafka's default 9 s). Brokers are stand-ins here (a leader that refuses
connections, answers with retriable errors), except where a real one is
needed; the cluster tests (tests/spark/test_kfast_source_cluster.py,
tests/e2e/test_replication.py) kill real brokers."""

from __future__ import annotations

import time

import pytest

from kfast.client.admin import LATEST, KafkaAdmin
from kfast.client.cluster import Cluster
from kfast.client.fetcher import FetchedPartition, Fetcher
from kfast.client.producer import KafkaProducer
from kfast.protocol import ListOffsetsResponse, errors
from kfast.protocol.constants import INT32_MAX

DEAD_LEADER = 7


def quick_cluster(metadata_timeout: float) -> Cluster:
    """A cluster nobody connects to, with short backoffs (tests patch the I/O)."""
    cluster = Cluster(
        "127.0.0.1:1",
        retry_backoff=0.005,
        retry_backoff_max=0.01,
        metadata_timeout=metadata_timeout,
    )

    async def leader_for(topic, partition):
        return DEAD_LEADER

    cluster.leader_for = leader_for
    return cluster


def refused():
    return errors.NetworkException(f"cannot connect to broker {DEAD_LEADER}: refused")


# ---- Fetcher ----------------------------------------------------------------------------


def fetcher_failing(times: int, metadata_timeout: float):
    """A Fetcher whose leader refuses connections ``times`` times, then answers."""
    fetcher = Fetcher(cluster=quick_cluster(metadata_timeout))
    calls = []

    async def fetch_from(node, positions, partition_max_bytes, max_wait_ms):
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise refused()
        return (
            {
                key: FetchedPartition(key[0], key[1], offset, memoryview(b""), 10, 10, 0, offset)
                for key, offset in positions.items()
            },
            [],
            None,
        )

    fetcher._fetch_from = fetch_from
    return fetcher, calls


def test_fetch_outlasts_more_refusals_than_its_retry_count_within_the_timeout(run):
    fetcher, calls = fetcher_failing(times=30, metadata_timeout=10)
    part = run(fetcher.fetch_raw("t", 0, 4))
    assert (part.fetch_offset, part.high_watermark) == (4, 10)
    assert len(calls) == 31 and 30 > fetcher.retries


def test_fetch_gives_up_on_a_dead_leader_once_the_timeout_has_passed(run):
    fetcher, calls = fetcher_failing(times=10**9, metadata_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(errors.NetworkException):
        run(fetcher.fetch_raw("t", 0, 0))
    assert 0.3 <= time.monotonic() - started < 2
    assert len(calls) > fetcher.retries + 1  # not stopped by the count


# ---- ListOffsets ------------------------------------------------------------------------


def admin_answering(answers, metadata_timeout: float = 10):
    """A KafkaAdmin whose leader answers ListOffsets with ``answers`` in turn:
    an exception (raised by the request) or an error code for partition 0
    (0: offset 42)."""
    admin = KafkaAdmin(cluster=quick_cluster(metadata_timeout))
    invalidated = []
    admin.cluster.invalidate = invalidated.append
    remaining = list(answers)

    async def send(node, body, **kwargs):
        assert node == DEAD_LEADER
        answer = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(answer, Exception):
            raise answer
        return ListOffsetsResponse(
            topics=[
                ListOffsetsResponse.ListOffsetsTopicResponse(
                    name="t",
                    partitions=[
                        ListOffsetsResponse.ListOffsetsPartitionResponse(
                            partition_index=0,
                            error_code=answer,
                            offset=42 if answer == 0 else -1,
                            timestamp=-1,
                            leader_epoch=3,
                        )
                    ],
                )
            ]
        )

    admin.cluster.send = send
    return admin, invalidated


def test_list_offsets_retries_a_refused_connection_and_a_lagging_new_leader(run):
    admin, invalidated = admin_answering(
        [
            refused(),
            refused(),
            errors.NotLeaderOrFollowerException.code,
            # A new leader whose high watermark has not reached its epoch's start.
            errors.OffsetNotAvailableException.code,
            errors.TimeoutException("ListOffsets timed out"),
            0,
        ]
    )
    listed = run(admin.list_offsets({("t", 0): LATEST}))
    assert listed[("t", 0)].offset == 42
    # The dead or moved leader is looked up afresh after each of those.
    assert invalidated.count("t") >= 4


def test_list_offsets_gives_up_once_the_timeout_has_passed(run):
    admin, _ = admin_answering([refused()], metadata_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(errors.NetworkException):
        run(admin.list_offsets({("t", 0): LATEST}))
    assert 0.3 <= time.monotonic() - started < 2


def test_list_offsets_raises_a_non_retriable_error_at_once(run):
    admin, _ = admin_answering([errors.TopicAuthorizationException.code])
    with pytest.raises(errors.TopicAuthorizationException):
        run(admin.list_offsets({("t", 0): LATEST}))


# ---- Metadata ---------------------------------------------------------------------------


class DeadConnection:
    """A connection that looks open until a request finds its broker gone
    (a kill -9 while the client's loop was not running to read the close)."""

    connected = True

    async def send(self, body, **kwargs):
        self.connected = False
        raise errors.NetworkException("127.0.0.1:9 closed the connection")

    async def close(self):
        pass


def test_metadata_refresh_passes_over_a_connection_found_dead(broker, run):
    async def scenario():
        async with Cluster(broker.bootstrap_servers) as cluster:
            await cluster.connection(1)
            dead = DeadConnection()
            # Asked first: Metadata goes to the first open connection.
            cluster._connections = {99: dead, **cluster._connections}
            answered = await cluster.refresh_metadata(None)
            assert dead.connected is False
            assert list(cluster.brokers) == [1]
            return answered

    assert isinstance(run(scenario()), dict)


def test_backoff_survives_attempt_counts_of_time_bounded_retries(run):
    cluster = Cluster("127.0.0.1:1", retry_backoff=0.0001, retry_backoff_max=0.001)
    run(cluster.backoff(100_000))  # 2 ** 100000 as a float would overflow


# ---- Producer ---------------------------------------------------------------------------


def test_producer_retries_until_the_delivery_timeout_not_a_count(broker, run, request):
    """The partition's leader (node 7, not reachable: not even listed)
    never answers; Metadata still names it. The batch is retried, past the
    old default of 5 retries, until it is delivery_timeout_ms old."""
    name = f"dead-leader-{request.node.callspec.id}"

    async def scenario():
        async with KafkaProducer(
            broker.bootstrap_servers,
            retries=INT32_MAX,
            delivery_timeout_ms=500,
            retry_backoff=0.01,
            retry_backoff_max=0.02,
            allow_auto_topic_creation=True,
        ) as producer:
            await producer.send_and_wait(name, b"v", partition=0)
            attempts = []
            produce = producer._produce

            async def leader_for(topic, partition):
                return DEAD_LEADER

            async def counted(node, batches):
                attempts.append(node)
                return await produce(node, batches)

            producer.cluster.leader_for = leader_for
            producer._produce = counted
            started = time.monotonic()
            with pytest.raises(errors.LeaderNotAvailableException):
                await producer.send_and_wait(name, b"lost", partition=0)
            return time.monotonic() - started, attempts

    elapsed, attempts = run(scenario())
    assert 0.5 <= elapsed < 3
    assert len(attempts) > 6 and set(attempts) == {DEAD_LEADER}
