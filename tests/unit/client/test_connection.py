"""BrokerConnection against a real kfast broker: versions, pipelining,
correlation, timeouts and lost connections."""

from __future__ import annotations

import asyncio

import pytest

from kfast.client.connection import BlockingConnection, BrokerConnection, api_key_of
from kfast.protocol import MetadataRequest, ProduceRequest, api_key, errors
from kfast.protocol.api_keys import API_VERSIONS


def address(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def test_api_key_of_request_bodies():
    assert api_key_of(ProduceRequest()) == 0
    assert api_key_of(MetadataRequest()) == 3
    with pytest.raises(TypeError):
        api_key_of(object())


def test_negotiated_versions_are_the_newest_both_sides_support(broker, run):
    async def scenario():
        async with await BrokerConnection.open(*address(broker)) as connection:
            assert API_VERSIONS in connection.broker_versions
            for key, (low, high) in connection.broker_versions.items():
                ours = api_key(key)
                expected = min(high, ours.max_stable_version)
                if key == 0:
                    low = max(low, 3)
                if max(low, ours.min_version) <= expected:
                    assert connection.version_for(key) == expected
            assert connection.version_for(3, max_version=9) == 9
            with pytest.raises(errors.UnsupportedVersionException):
                connection.version_for(3, max_version=-1)

    run(scenario())


def test_pipelined_requests_get_their_own_responses(broker, run):
    async def scenario():
        async with await BrokerConnection.open(*address(broker)) as connection:
            names = [f"pipelined-{i}" for i in range(40)]
            # Not-yet-existing topics, auto-creation off: each answer names
            # exactly the topic its request asked about.
            requests = [
                MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                    allow_auto_topic_creation=False,
                )
                for name in names
            ]
            responses = await asyncio.gather(*(connection.send(r) for r in requests))
            assert [[t.name for t in response.topics] for response in responses] == [
                [n] for n in names
            ]
            assert connection._in_flight == {}

    run(scenario())


def test_a_request_without_an_answer_times_out_and_closes(run):
    async def scenario():
        accepted = asyncio.Event()

        async def silent(reader, writer):
            accepted.set()
            await reader.read()  # never answers; returns when the client closes
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            connection = await BrokerConnection.open(
                "127.0.0.1", port, negotiate=False, request_timeout=0.2
            )
            with pytest.raises(errors.TimeoutException):
                await connection.send(MetadataRequest(topics=None), version=12)
            assert not connection.connected
            with pytest.raises(errors.NetworkException):
                await connection.send(MetadataRequest(topics=None), version=12)
            await connection.close()
        finally:
            server.close()
            await server.wait_closed()

    run(scenario())


def test_a_lost_connection_fails_requests_in_flight(run):
    async def scenario():
        async def hang_up(reader, writer):
            await reader.readexactly(4)  # a request started: hang up mid-conversation
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            connection = await BrokerConnection.open("127.0.0.1", port, negotiate=False)
            with pytest.raises(errors.NetworkException):
                await connection.send(MetadataRequest(topics=None), version=12)
            await connection.close()
        finally:
            server.close()
            await server.wait_closed()

    run(scenario())


def test_a_write_after_the_transport_closed_is_a_lost_connection(broker, run):
    """The transport is gone before the reader has seen it end (a reset
    that arrived between connect and the first request). uvloop raises
    RuntimeError for that write; the caller gets a NetworkException like any
    lost connection. A replica fetcher that got the RuntimeError stopped for
    good, and its partitions never rejoined their ISRs."""

    async def scenario():
        connection = await BrokerConnection.open(*address(broker))
        connection._writer.transport.abort()
        # One turn of the loop: uvloop has closed the handle, and the reader
        # task has not yet seen the connection end.
        await asyncio.sleep(0)
        with pytest.raises(errors.NetworkException):
            await connection.send(MetadataRequest(topics=[]))
        assert not connection.connected
        await connection.close()

    run(scenario())


def test_connect_refused_is_a_network_exception(run):
    async def scenario():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(errors.NetworkException):
            await BrokerConnection.open("127.0.0.1", port)

    run(scenario())


def test_blocking_connection(broker):
    with BlockingConnection(*address(broker)) as connection:
        response = connection.send(MetadataRequest(topics=None))
        assert [b.port for b in response.brokers] == [address(broker)[1]]
        assert connection.version_for(3) == min(
            connection.broker_versions[3][1], api_key(3).max_stable_version
        )


def test_negotiation_falls_back_to_the_brokers_api_versions_version(run):
    """A broker that knows ApiVersions only up to v2 answers our newer request
    with UNSUPPORTED_VERSION at v0 (KIP-511); we ask again at v2."""
    from kfast.protocol import ApiVersionsResponse, decode_request, encode_response

    seen_versions = []

    async def old_broker(reader, writer):
        while True:
            try:
                size = int.from_bytes(await reader.readexactly(4), "big")
            except asyncio.IncompleteReadError:
                break
            frame = await reader.readexactly(size)
            version = int.from_bytes(frame[2:4], "big")
            correlation_id = int.from_bytes(frame[4:8], "big")
            seen_versions.append(version)
            ranges = [
                ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2),
                ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=8),
            ]
            if version > 2:
                body = ApiVersionsResponse(
                    error_code=errors.UnsupportedVersionException.code, api_keys=ranges
                )
                writer.write(encode_response(18, 0, correlation_id, body))
            else:
                decode_request(frame)
                writer.write(
                    encode_response(
                        18, version, correlation_id, ApiVersionsResponse(api_keys=ranges)
                    )
                )
        writer.close()

    async def scenario():
        server = await asyncio.start_server(old_broker, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with await BrokerConnection.open("127.0.0.1", port) as connection:
                assert connection.broker_versions == {18: (0, 2), 3: (0, 8)}
                assert connection.version_for(3) == 8
                with pytest.raises(errors.UnsupportedVersionException):
                    connection.version_for(0)  # Produce not offered
        finally:
            server.close()
            await server.wait_closed()

    run(scenario())
    assert seen_versions == [api_key(API_VERSIONS).max_stable_version, 2]


def test_a_cancelled_request_leaves_the_connection_usable(broker, run, request):
    from kfast.client.admin import KafkaAdmin, NewTopic
    from kfast.protocol import FetchRequest

    name = f"cancelled-{request.node.callspec.id}"

    async def scenario():
        async with KafkaAdmin(broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(name, 1, 1)])
            topic_id = (await admin.describe_topics([name]))[0].topic_id
        async with await BrokerConnection.open(*address(broker)) as connection:
            # An empty partition: the broker holds this fetch for max_wait_ms.
            fetch = FetchRequest(
                max_wait_ms=1000,
                min_bytes=1,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=name,
                        topic_id=topic_id,
                        partitions=[
                            FetchRequest.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1024
                            )
                        ],
                    )
                ],
            )
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(connection.send(fetch), 0.1)
            response = await connection.send(MetadataRequest(topics=None))
            assert connection.connected and any(t.name == name for t in response.topics)

    run(scenario())
