"""SocketServer over real 127.0.0.1 sockets, each test on asyncio and uvloop."""

import asyncio
import gc
import logging
import os
import socket
import struct
import tempfile
import weakref

import pytest

from kfast._ext import netio
from kfast.protocol.file_region import FileRegion
from kfast.server.futures import ChainedFuture, complete_soon, then
from kfast.server.network import SocketServer, TimedResponse

uvloop = pytest.importorskip("uvloop")

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(params=sorted(LOOPS))
def run(request):
    """run(async_fn) runs it on a fresh loop of the parametrized kind and
    fails the test if anything reached the loop's exception handler."""

    def runner(fn, timeout=60.0):
        errors = []

        async def main():
            asyncio.get_running_loop().set_exception_handler(
                lambda loop, context: errors.append(context)
            )
            return await asyncio.wait_for(fn(), timeout)

        with asyncio.Runner(loop_factory=LOOPS[request.param]) as r:
            result = r.run(main())
        assert errors == []
        return result

    return runner


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def read_frame(reader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


class Arrivals:
    """Counts handler calls; a test awaits the n-th one without polling."""

    def __init__(self):
        self.count = 0
        self.connections = []
        self._waiters = []

    def add(self, connection=None):
        self.count += 1
        self.connections.append(connection)
        for n, future in self._waiters:
            if self.count >= n and not future.done():
                future.set_result(None)

    async def reach(self, n, timeout=10.0):
        if self.count < n:
            future = asyncio.get_running_loop().create_future()
            self._waiters.append((n, future))
            await asyncio.wait_for(future, timeout)


async def until(predicate, timeout=10.0):
    """Wait for a state that has no event to await (backpressure pausing a
    connection, which depends on how much the kernel's socket buffers took)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.002)


def echo(connection, frame):
    return [b"echo:", bytes(frame)]


@pytest.fixture
def data_file():
    with tempfile.TemporaryFile() as f:
        content = os.urandom(6 * 1024 * 1024 + 321)
        f.write(content)
        f.flush()
        yield f, content


# ------------------------------------------------------------------- framing


def test_many_frames_in_one_segment(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            bodies = [str(i).encode() * (i % 7) for i in range(200)]
            writer.write(b"".join(frame(b) for b in bodies))
            for b in bodies:
                assert await read_frame(reader) == b"echo:" + b
            m = server.metrics()
            assert m.requests == 200 and m.responses == 200
            assert m.bytes_received == sum(4 + len(b) for b in bodies)
            assert m.bytes_sent == sum(4 + 5 + len(b) for b in bodies) == m.copied_bytes
            writer.close()

    run(body)


def test_frame_split_byte_by_byte(run):
    async def body():
        seen = []

        def handler(connection, frame):
            seen.append(bytes(frame))
            return [bytes(frame)[::-1]]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.transport.get_extra_info("socket").setsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
            )
            data = frame(b"one byte at a time") + frame(b"")
            for i in range(len(data)):
                writer.write(data[i : i + 1])
                await writer.drain()
            assert await read_frame(reader) == b"emit a ta etyb eno"
            assert await read_frame(reader) == b""
            assert seen == [b"one byte at a time", b""]
            writer.close()

    run(body)


@pytest.mark.parametrize(
    "prefix",
    [
        struct.pack(">I", 0x80000000),  # 2 GiB: a negative int32
        struct.pack(">i", -1),
        struct.pack(">i", 0x7FFFFFFF),  # above socket.request.max.bytes
    ],
)
def test_invalid_size_prefix_closes_only_that_connection(run, prefix, caplog):
    async def body():
        calls = []

        def handler(connection, frame):
            calls.append(bytes(frame))
            return [b"ok"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            good_r, good_w = await asyncio.open_connection("127.0.0.1", server.port)
            bad_r, bad_w = await asyncio.open_connection("127.0.0.1", server.port)
            bad_w.write(prefix + b"\x00" * 64)
            assert await bad_r.read() == b""  # closed, nothing answered
            good_w.write(frame(b"still fine"))
            assert await read_frame(good_r) == b"ok"
            assert calls == [b"still fine"]
            assert server.metrics().connections_closed == 1
            good_w.close()
            bad_w.close()

    with caplog.at_level(logging.WARNING, logger="kfast.server.network"):
        run(body)
    assert "Invalid receive" in caplog.text


def test_oversized_request_limit_is_configurable(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0, socket_request_max_bytes=8) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"12345678"))
            assert await read_frame(reader) == b"echo:12345678"
            writer.write(frame(b"123456789"))
            assert await reader.read() == b""
            writer.close()

    run(body)


# ---------------------------------------------------------------- pipelining


def test_out_of_order_completion_keeps_request_order(run):
    async def body():
        loop = asyncio.get_running_loop()
        futures = []
        all_received = asyncio.Event()
        n = 30

        def handler(connection, frame):
            i = int(bytes(frame))
            if i % 5 == 0:
                return None  # e.g. acks=0: no response
            if i % 3 == 0:
                return [b"sync-%d" % i]  # finishes at once
            fut = loop.create_future()
            futures.append((i, fut))
            if i == n - 1:
                all_received.set()
            return fut

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"".join(frame(b"%d" % i) for i in range(n)))
            await all_received.wait()
            # Resolve in reverse; one async handler answers None too.
            for i, fut in reversed(futures):
                fut.set_result(None if i == 7 else [b"async-", b"%d" % i])
            expected = []
            for i in range(n):
                if i % 5 == 0 or i == 7:
                    continue
                expected.append(b"sync-%d" % i if i % 3 == 0 else b"async-%d" % i)
            got = [await read_frame(reader) for _ in expected]
            assert got == expected
            writer.close()

    run(body)


def test_chained_response_is_sent_in_the_call_that_completes_it(run):
    """A response chained by kfast.server.futures.then (a woken fetch's) is
    queued and flushed by the call that completes the chain: with hundreds
    of readable connections in a loop pass, one scheduled hop more would
    leave it behind all of them."""

    async def body():
        loop = asyncio.get_running_loop()
        waiting = []
        arrived = Arrivals()

        def handler(connection, frame):
            source = loop.create_future()  # as the purgatory's
            waiting.append(source)
            arrived.add(connection)
            return then(then(source, lambda value: [value]), lambda parts: parts)

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"fetch"))
            await arrived.reach(1)
            connection = arrived.connections[0]
            assert connection.in_flight_requests == 1
            waiting[0].set_result(b"records")
            await asyncio.sleep(0)  # the loop runs the source's done callback
            assert connection.in_flight_requests == 0
            assert not connection.transport.has_unsent  # written, not queued
            assert await read_frame(reader) == b"records"
            writer.close()

    run(body)


def test_an_operation_completed_by_a_request_is_answered_before_the_next_callback(run):
    """A request that completes another connection's waiting operation (an
    append waking a fetch, through complete_soon) has that connection's
    response written when its own readable callback ends: before any
    callback the loop runs after it."""

    async def body():
        loop = asyncio.get_running_loop()
        waiting = []
        arrived = Arrivals()
        seen_in_flight = []

        def handler(connection, frame):
            arrived.add(connection)
            if bytes(frame) == b"fetch":
                source = ChainedFuture(loop=loop)  # as a parked fetch's
                waiting.append(source)
                return then(source, lambda value: [value])
            # The append: scheduled before the wake-up, this runs after the
            # append's callback, so it sees whether the fetch was answered there.
            fetcher = arrived.connections[0]
            loop.call_soon(lambda: seen_in_flight.append(fetcher.in_flight_requests))
            complete_soon(waiting[0], b"records")
            return [b"appended"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            fetch_reader, fetch_writer = await asyncio.open_connection("127.0.0.1", server.port)
            fetch_writer.write(frame(b"fetch"))
            await arrived.reach(1)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"append"))
            assert await read_frame(reader) == b"appended"
            assert await read_frame(fetch_reader) == b"records"
            assert seen_in_flight == [0]
            writer.close()
            fetch_writer.close()

    run(body)


def test_async_handler_may_hold_frames_without_copying(run):
    """Frames kept by coroutines stay intact while later requests arrive."""

    async def body():
        release = asyncio.Event()
        started = Arrivals()
        n = 400

        async def handler(connection, frame):
            started.add()
            await release.wait()
            return [bytes(frame)]

        async with SocketServer(handler, "127.0.0.1", 0, max_in_flight_requests=1000) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            bodies = [os.urandom(1 + (i * 997) % 5000) for i in range(n)]
            writer.write(b"".join(frame(b) for b in bodies))
            await writer.drain()
            await started.reach(n)
            release.set()
            for b in bodies:
                assert await read_frame(reader) == b
            writer.close()

    run(body)


# ------------------------------------------------------------ answered in C


def _general_path_only(connection):
    # What a TLS connection runs: every frame through _process_frames.
    connection._answerer = None


def test_plaintext_frames_are_answered_in_c_and_counted(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for i in range(5):  # one in flight, as a Kafka producer's
                writer.write(frame(b"%d" % i))
                assert await read_frame(reader) == b"echo:%d" % i
            writer.write(b"".join(frame(b"p%d" % i) for i in range(10)))
            for i in range(10):
                assert await read_frame(reader) == b"echo:p%d" % i
            assert server.metrics().answered_in_c == 15
            writer.close()
            await until(lambda: not server.connections)
            # Closed connections' counts are kept.
            assert server.metrics().answered_in_c == 15

    run(body)


def test_answers_in_c_equal_the_general_path(run, data_file):
    """Synchronous, empty, large, file-region and asynchronous responses,
    pipelined and cut into odd pieces: the same bytes, in request order,
    whether the transport answers in C or the general path does."""
    f, content = data_file

    async def later(i):
        await asyncio.sleep(0)
        return [b"async %d" % i]

    def handler(connection, frame):
        i = int(bytes(frame))
        kind = i % 5
        if kind == 0:
            return None
        if kind == 1:
            return [b"small %d" % i]
        if kind == 2:
            return [b"large", content[i * 100 : i * 100 + 3000]]
        if kind == 3:
            return [b"file", FileRegion(f, i * 10, 2000)]
        return later(i)

    wire = b"".join(frame(b"%d" % i) for i in range(60))

    async def stream(**settings):
        async with SocketServer(handler, "127.0.0.1", 0, **settings) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for i in range(0, len(wire), 7):
                writer.write(wire[i : i + 7])
                await writer.drain()
            got = [await read_frame(reader) for i in range(60) if i % 5]
            answered_in_c = server.metrics().answered_in_c
            writer.close()
            return got, answered_in_c

    async def body():
        in_c, answered_in_c = await stream()
        general, none_in_c = await stream(connection_setup=_general_path_only)
        assert in_c == general
        assert [g[:4] for g in general[:4]] == [b"smal", b"larg", b"file", b"asyn"]
        assert answered_in_c > 0 and none_in_c == 0

    run(body)


def test_a_timed_response_answered_in_c_reports_its_send(run):
    class Timing:
        def __init__(self):
            self.calls = []

        def sent(self, dequeued, now):
            self.calls.append((dequeued, now))

    timings = []

    def handler(connection, frame):
        timing = Timing()
        timings.append(timing)
        return TimedResponse([bytes(frame)], timing)

    async def body():
        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"a"))
            assert await read_frame(reader) == b"a"
            writer.write(frame(b"b") + frame(b"c"))
            assert [await read_frame(reader) for _ in range(2)] == [b"b", b"c"]
            assert server.metrics().answered_in_c == 3
            writer.close()

    run(body)
    assert [len(t.calls) for t in timings] == [1, 1, 1]
    assert all(dequeued <= now for t in timings for dequeued, now in t.calls)


# ----------------------------------------------------------------- zero-copy


def test_file_regions_travel_by_sendfile(run, data_file):
    f, content = data_file
    regions = [(0, 1024 * 1024), (1024 * 1024, 2 * 1024 * 1024), (5000, 3 * 1024 * 1024 + 321)]

    async def body():
        def handler(connection, frame):
            i = int(bytes(frame))
            position, length = regions[i]
            return [b"hdr%d" % i, FileRegion(f, position, length)]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"".join(frame(b"%d" % i) for i in range(len(regions))))
            for i, (position, length) in enumerate(regions):
                assert (
                    await read_frame(reader) == b"hdr%d" % i + content[position : position + length]
                )
            m = server.metrics()
            file_bytes = sum(length for _, length in regions)
            headers = sum(4 + 4 for _ in regions)
            if netio.HAVE_SENDFILE:
                assert m.sendfile_bytes == file_bytes
                assert m.copied_bytes == headers
            else:
                assert m.sendfile_bytes == 0
                assert m.copied_bytes == file_bytes + headers
            conn = server.connections[0]
            assert conn.transport.sendfile_bytes == m.sendfile_bytes
            writer.close()

    run(body)


def test_slow_reader_forces_partial_sendfile(run, data_file):
    f, content = data_file

    async def body():
        loop = asyncio.get_running_loop()
        handled = asyncio.Event()

        def handler(connection, frame):
            handled.set()
            return [b"H", FileRegion(f, 0, len(content)), b"T"]

        async with SocketServer(handler, "127.0.0.1", 0, socket_send_buffer_bytes=8192) as server:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            await loop.sock_sendall(sock, frame(b"fetch"))
            await handled.wait()
            conn = server.connections[0]
            # The first flush ran right after the handler: the socket is full.
            assert conn.transport.has_unsent
            assert 0 < conn.transport.unsent_bytes < len(content) + 6
            expected = frame(b"H" + content + b"T")
            received = bytearray()
            while len(received) < len(expected):
                chunk = await loop.sock_recv(sock, 3000)  # read late, in small steps
                assert chunk
                received += chunk
            assert bytes(received) == expected
            assert not conn.transport.has_unsent
            if netio.HAVE_SENDFILE:
                assert conn.transport.sendfile_bytes == len(content)
                assert conn.transport.copied_bytes == 6
            sock.close()

    run(body)


# -------------------------------------------------------------- backpressure


def test_in_flight_bound_pauses_reading(run):
    async def body():
        loop = asyncio.get_running_loop()
        futures = []
        arrivals = Arrivals()

        def handler(connection, frame):
            fut = loop.create_future()
            futures.append(fut)
            arrivals.add(connection)
            return fut

        async with SocketServer(handler, "127.0.0.1", 0, max_in_flight_requests=5) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"".join(frame(b"%d" % i) for i in range(20)))
            await writer.drain()
            await arrivals.reach(5)
            conn = arrivals.connections[0]
            for _ in range(50):  # let any readable event fire
                await asyncio.sleep(0)
            assert len(futures) == 5 and conn.reading_paused
            futures[0].set_result([b"0"])
            assert await read_frame(reader) == b"0"
            await arrivals.reach(6)  # one slot freed, one more request read
            assert len(futures) == 6
            for i in range(1, 20):
                await arrivals.reach(i + 1)
                futures[i].set_result([b"%d" % i])
                assert await read_frame(reader) == b"%d" % i
            writer.close()

    run(body)


def test_client_that_never_reads_is_paused_then_resumed(run):
    async def body():
        loop = asyncio.get_running_loop()
        handled = []
        arrivals = Arrivals()
        response = os.urandom(256 * 1024)
        n = 60

        def handler(connection, frame):
            handled.append(int(bytes(frame)))
            arrivals.add(connection)
            return [response]

        async with SocketServer(
            handler,
            "127.0.0.1",
            0,
            max_queued_send_bytes=512 * 1024,
            socket_send_buffer_bytes=16384,
        ) as server:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            await loop.sock_sendall(sock, b"".join(frame(b"%d" % i) for i in range(n)))
            await arrivals.reach(1)
            conn = arrivals.connections[0]
            await until(lambda: conn.reading_paused)
            stalled_at = len(handled)
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(handled) == stalled_at < n
            # Unsent bytes exceed the bound (the handler ran past it by at most
            # one response) and the queue holds no more than that.
            assert 512 * 1024 < conn.transport.unsent_bytes <= 512 * 1024 + len(frame(response))
            expected = frame(response) * n
            received = bytearray()
            while len(received) < len(expected):
                chunk = await loop.sock_recv(sock, 1 << 20)
                assert chunk
                received += chunk
            assert received == expected
            assert handled == list(range(n))
            assert not conn.reading_paused
            sock.close()

    run(body)


# --------------------------------------------------------- closing paths


def test_idle_connection_is_closed(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0, connections_max_idle_ms=100) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"x"))
            assert await read_frame(reader) == b"echo:x"
            assert await reader.read() == b""  # the sweep closed it
            assert server.metrics().connections_closed == 1
            assert server.connections == []
            writer.close()

    run(body)


def test_connection_with_request_in_flight_is_not_idle(run):
    async def body():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        arrivals = Arrivals()

        def handler(connection, frame):
            arrivals.add(connection)
            return fut

        async with SocketServer(handler, "127.0.0.1", 0, connections_max_idle_ms=50) as server:
            r1, w1 = await asyncio.open_connection("127.0.0.1", server.port)
            w1.write(frame(b"long poll"))
            await arrivals.reach(1)
            conn = arrivals.connections[0]
            assert conn.in_flight_requests == 1
            r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
            # The idle one goes after >= 50 ms; the busy one survives the sweeps.
            assert await r2.read() == b""
            assert not conn.closed
            fut.set_result([b"done"])
            assert await read_frame(r1) == b"done"
            w1.close()
            w2.close()

    run(body)


class TrackedRegion(FileRegion):
    """A FileRegion that can be weakly referenced (FileRegion has slots)."""


def test_client_vanishing_mid_response_leaves_others_alone(run, data_file):
    f, content = data_file

    async def body():
        loop = asyncio.get_running_loop()
        regions = []
        big_requests = Arrivals()

        def handler(connection, frame):
            if bytes(frame) == b"big":
                region = TrackedRegion(f, 0, len(content))
                regions.append(weakref.ref(region))
                big_requests.add(connection)
                return [region]
            return [b"pong"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            vanishing = socket.socket()
            vanishing.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            vanishing.setblocking(False)
            await loop.sock_connect(vanishing, ("127.0.0.1", server.port))
            await loop.sock_sendall(vanishing, frame(b"big"))
            await big_requests.reach(1)
            await loop.sock_recv(vanishing, 1000)  # read a little, then RST
            vanishing.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            doomed = big_requests.connections[0]
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            vanishing.close()
            await doomed.wait_closed()
            for _ in range(3):
                writer.write(frame(b"ping"))
                assert await read_frame(reader) == b"pong"
            gc.collect()
            assert regions[0]() is None  # the region was released
            assert len(server.connections) == 1
            writer.close()

    run(body)


def test_handler_exception_closes_the_connection_and_is_logged(run, caplog):
    async def body():
        async def failing_later(connection, frame):
            raise RuntimeError("async boom")

        def handler(connection, frame):
            if bytes(frame) == b"sync":
                raise RuntimeError("sync boom")
            if bytes(frame) == b"async":
                return failing_later(connection, frame)
            return [b"fine"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            for kind in (b"sync", b"async"):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(frame(b"ok") + frame(kind) + frame(b"ok"))
                assert await read_frame(reader) == b"fine"
                assert await reader.read() == b""
                writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"ok"))
            assert await read_frame(reader) == b"fine"
            writer.close()

    with caplog.at_level(logging.ERROR, logger="kfast.server.network"):
        run(body)
    assert "sync boom" in caplog.text and "async boom" in caplog.text


def test_graceful_shutdown_flushes_in_flight_responses(run, data_file):
    f, content = data_file

    async def body():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        handled = asyncio.Event()

        def handler(connection, frame):
            handled.set()
            return fut

        server = SocketServer(handler, "127.0.0.1", 0)
        await server.start()
        port = server.port
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"req"))
        await handled.wait()
        shutdown = asyncio.ensure_future(server.shutdown(timeout=30))
        await asyncio.sleep(0)  # one turn: shutdown runs up to its wait
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        assert not shutdown.done()
        fut.set_result([b"last words ", FileRegion(f, 0, len(content))])
        assert await read_frame(reader) == b"last words " + content
        await shutdown
        assert await reader.read() == b""
        assert server.connections == []
        writer.close()

    run(body)


def test_shutdown_deadline_cancels_stuck_handlers(run):
    async def body():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        arrivals = Arrivals()

        def handler(connection, frame):
            arrivals.add(connection)
            return fut

        server = SocketServer(handler, "127.0.0.1", 0)
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame(b"never answered"))
        await arrivals.reach(1)
        conn = arrivals.connections[0]
        assert conn.in_flight_requests == 1
        await server.shutdown(timeout=0.1)
        assert fut.cancelled()
        assert conn.closed
        assert await reader.read() == b""
        writer.close()

    run(body)


def test_connection_identity_and_metrics(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"abc"))
            assert await read_frame(reader) == b"echo:abc"
            conn = server.connections[0]
            local = writer.get_extra_info("sockname")
            assert conn.peer[:2] == local[:2]
            assert conn.connection_id == f"127.0.0.1:{server.port}-127.0.0.1:{local[1]}-0"
            assert conn.listener_name == "PLAINTEXT"
            m = server.metrics()
            assert (m.connections_accepted, m.active_connections, m.connections_closed) == (1, 1, 0)
            assert (m.requests, m.responses, m.bytes_received) == (1, 1, 7)
            assert m.bytes_sent == m.copied_bytes == 4 + 8
            writer.close()
            await conn.wait_closed()
            m = server.metrics()
            assert (m.active_connections, m.connections_closed, m.requests) == (0, 1, 1)

    run(body)


def test_from_config_reads_the_kafka_properties(run):
    from kfast.config import KafkaConfig

    config = KafkaConfig(
        {
            "socket.request.max.bytes": 16,
            "connections.max.idle.ms": 60000,
            "socket.send.buffer.bytes": -1,
        }
    )
    server = SocketServer.from_config(echo, config, "127.0.0.1", 0)
    assert (
        server.socket_request_max_bytes,
        server.connections_max_idle_ms,
        server.socket_send_buffer_bytes,
        server.socket_listen_backlog_size,
    ) == (16, 60000, -1, 50)

    async def body():
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"x" * 16))
            assert await read_frame(reader) == b"echo:" + b"x" * 16
            writer.write(frame(b"x" * 17))
            assert await reader.read() == b""
            writer.close()

    run(body)


def test_handler_can_answer_then_close(run):
    async def body():
        calls = []

        def handler(connection, frame):
            calls.append(bytes(frame))
            connection.close_when_drained()
            return [b"goodbye"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"auth") + frame(b"ignored"))
            assert await read_frame(reader) == b"goodbye"
            assert await reader.read() == b""
            assert calls == [b"auth"]
            writer.close()

    run(body)


def test_handler_closing_its_connection_is_not_an_error(run, caplog):
    async def body():
        ran = asyncio.Event()

        async def later():
            ran.set()
            return [b"unsent"]

        def handler(connection, frame):
            connection.close()
            return later() if bytes(frame) == b"async" else [b"unsent"]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            for kind in (b"sync", b"async"):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(frame(kind))
                assert await reader.read() == b""
                writer.close()
            await ran.wait()  # the coroutine's work still ran

    with caplog.at_level(logging.WARNING, logger="kfast.server.network"):
        run(body)
    assert caplog.records == []


@pytest.mark.parametrize("seed", range(4))
def test_random_pipelines_answer_in_order(run, seed):
    """Random request sizes, random client write boundaries, random mix of
    sync / async / no responses completing in random order."""
    import random

    async def body():
        rng = random.Random(seed)
        n = 300
        bodies = [rng.randbytes(rng.choice([0, 1, 10, 1000, 70000])) for _ in range(n)]
        kinds = [rng.choice(["sync", "async", "none", "async-none"]) for _ in range(n)]

        async def answer(i, frame, delay_turns):
            for _ in range(delay_turns):
                await asyncio.sleep(0)
            if kinds[i] == "async-none":
                return None
            return [b"%d:" % i, frame]  # the held frame goes out as is

        count = 0

        def handler(connection, frame):
            nonlocal count
            i = count
            count += 1
            assert bytes(frame) == bodies[i]
            if kinds[i] == "none":
                return None
            if kinds[i] == "sync":
                return [b"%d:" % i, bytes(frame)]
            return answer(i, frame, rng.randrange(0, 30))

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            wire = b"".join(frame(b) for b in bodies)
            pos = 0
            while pos < len(wire):
                step = rng.choice([1, 7, 500, 65536, 300000])
                writer.write(wire[pos : pos + step])
                pos += step
                if rng.random() < 0.3:
                    await writer.drain()
            for i in range(n):
                if kinds[i] in ("none", "async-none"):
                    continue
                assert await read_frame(reader) == b"%d:" % i + bodies[i]
            writer.close()

    run(body)


def test_max_connections_waits_for_a_free_slot(run):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0, max_connections=2) as server:
            clients = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
            for reader, writer in clients:
                writer.write(frame(b"in"))
                assert await read_frame(reader) == b"echo:in"
            # The third handshake completes in the backlog, but it is not
            # accepted (nor answered) while both slots are taken.
            r3, w3 = await asyncio.open_connection("127.0.0.1", server.port)
            w3.write(frame(b"third"))
            answer = asyncio.ensure_future(read_frame(r3))
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(server.connections) == 2 and not answer.done()
            clients[0][1].close()
            assert await answer == b"echo:third"
            assert server.metrics().connections_accepted == 3
            for _, writer in clients[1:]:
                writer.close()
            w3.close()

    run(body)


def test_max_connections_per_ip_rejects_the_extra_connection(run, caplog):
    async def body():
        async with SocketServer(echo, "127.0.0.1", 0, max_connections_per_ip=1) as server:
            r1, w1 = await asyncio.open_connection("127.0.0.1", server.port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
            assert await r2.read() == b""  # rejected: closed at once
            w1.write(frame(b"first"))
            assert await read_frame(r1) == b"echo:first"
            w1.close()
            conn = server.connections[0]
            await conn.wait_closed()
            r3, w3 = await asyncio.open_connection("127.0.0.1", server.port)
            w3.write(frame(b"again"))
            assert await read_frame(r3) == b"echo:again"
            w2.close()
            w3.close()

    with caplog.at_level(logging.INFO, logger="kfast.server.network"):
        run(body)
    assert "Rejected connection from 127.0.0.1" in caplog.text


def test_throttle_mutes_reading_but_not_responses(run):
    async def body():
        loop = asyncio.get_running_loop()
        handled_at = []

        def handler(connection, frame):
            handled_at.append(loop.time())
            if bytes(frame) == b"over quota":
                connection.throttle(150)
                assert connection.throttled and connection.reading_paused
            return [bytes(frame)]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"over quota") + frame(b"next"))
            assert await read_frame(reader) == b"over quota"  # answered at once
            assert await read_frame(reader) == b"next"  # read after the throttle
            assert handled_at[1] - handled_at[0] >= 0.15 - 0.005
            assert not server.connections[0].throttled
            writer.close()

    run(body)


def test_many_clients_at_once(run, data_file):
    f, content = data_file

    async def body():
        async def handler(connection, frame):
            i = int(bytes(frame))
            await asyncio.sleep(0)
            return [b"%d|" % i, FileRegion(f, i * 1000, 5000)]

        def dispatch(connection, frame):
            i = int(bytes(frame))
            if i % 2:
                return handler(connection, frame)
            return [b"%d|" % i, content[i * 1000 : i * 1000 + 5000]]

        async def client(port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"".join(frame(b"%d" % i) for i in range(50)))
            for i in range(50):
                assert await read_frame(reader) == b"%d|" % i + content[i * 1000 : i * 1000 + 5000]
            writer.close()

        async with SocketServer(dispatch, "127.0.0.1", 0) as server:
            await asyncio.gather(*(client(server.port) for _ in range(30)))
            m = server.metrics()
            assert m.connections_accepted == 30 and m.requests == 1500
            if netio.HAVE_SENDFILE:
                assert m.sendfile_bytes == 30 * 25 * 5000

    run(body)


def test_large_request_then_buffer_shrinks_back(run):
    async def body():
        arrivals = Arrivals()

        def handler(connection, frame):
            arrivals.add(connection)
            return [bytes(frame[:16]), struct.pack(">i", len(frame))]

        async with SocketServer(handler, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            big = os.urandom(5 * 1024 * 1024)
            writer.write(frame(big))
            assert await read_frame(reader) == big[:16] + struct.pack(">i", len(big))
            writer.write(frame(b"small request"))
            assert await read_frame(reader) == b"small request" + struct.pack(">i", 13)
            transport = arrivals.connections[0].transport
            assert transport.receive_capacity == netio.RECEIVE_CHUNK_SIZE
            writer.close()

    run(body)


def test_held_listener_leaves_clients_in_the_backlog_until_released(run):
    """A cluster's broker binds its listener before it is in service and
    holds it: clients connect (the kernel's backlog) but nothing is
    accepted or answered, even when other connections close, until release."""

    async def body():
        async with SocketServer(echo, "127.0.0.1", 0) as server:
            early_reader, early_writer = await asyncio.open_connection("127.0.0.1", server.port)
            early_writer.write(frame(b"x"))
            assert await read_frame(early_reader) == b"echo:x"
            server.hold_accepting()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(frame(b"waiting"))
            early_writer.close()  # a closing connection must not resume it
            await until(lambda: len(server.connections) == 0)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(read_frame(reader), 0.3)
            server.release_accepting()
            assert await read_frame(reader) == b"echo:waiting"
            writer.close()

    run(body)
