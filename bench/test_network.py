"""Fetch-shaped responses over loopback: kfast's sendfile path vs uvloop transports.

Each round, a client thread sends REQUESTS requests on one connection and
reads REQUESTS responses of a 64-byte header plus 1 MiB of a file. The
server runs on uvloop in its own thread:

  network_kfast_sendfile     kfast.server.network.SocketServer; the 1 MiB is
                             a FileRegion, sent with sendfile(2)
  network_uvloop_transport   an asyncio.Protocol on uvloop; the 1 MiB is
                             pread into memory and given to transport.write
                             (what a broker does without sendfile)

    pytest bench/test_network.py --benchmark-only -k network

A second pair (group network_small, at the end of this file) measures the
per-request overhead with small pipelined requests.

extra_info carries MiB/s of response bytes (mean of the rounds) and the
server thread's CPU seconds per GiB sent (utime + stime from /proc).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import tempfile
import threading

import pytest

uvloop = pytest.importorskip("uvloop")

from kfast.protocol.file_region import FileRegion  # noqa: E402
from kfast.server.network import SocketServer  # noqa: E402

REGION = 1024 * 1024
HEADER = b"h" * 64
REQUESTS = 64
RESPONSE = 4 + len(HEADER) + REGION
REQUEST = struct.pack(">i", 8) + b"fetch..."
ROUNDS = 20


class _ServerThread:
    """A uvloop loop in a thread running `start(loop) -> port`."""

    def __init__(self, start):
        self._start = start
        self._ready = threading.Event()
        self.loop = uvloop.new_event_loop()
        self.port = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server thread did not start")

    def _run(self):
        self.native_id = threading.get_native_id()
        asyncio.set_event_loop(self.loop)
        self.port, self._stop = self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._stop())
        self.loop.close()

    def cpu_seconds(self):
        """utime + stime of the server thread (Linux /proc), or None."""
        try:
            with open(f"/proc/self/task/{self.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def _kfast_server(file):
    async def start():
        def handler(connection, frame):
            return [HEADER, FileRegion(file, 0, REGION)]

        server = SocketServer(handler, "127.0.0.1", 0, socket_send_buffer_bytes=-1)
        await server.start()
        return server.port, server.shutdown

    return start


class _TransportProtocol(asyncio.Protocol):
    def __init__(self, fd):
        self.fd = fd
        self.buffer = bytearray()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buffer += data
        while len(self.buffer) >= 4:
            (size,) = struct.unpack_from(">i", self.buffer)
            if len(self.buffer) < 4 + size:
                break
            del self.buffer[: 4 + size]
            records = os.pread(self.fd, REGION, 0)
            self.transport.write(struct.pack(">i", len(HEADER) + REGION) + HEADER)
            self.transport.write(records)


def _uvloop_transport_server(file):
    async def start():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _TransportProtocol(file.fileno()), "127.0.0.1", 0)

        async def stop():
            server.close()
            await server.wait_closed()

        return server.sockets[0].getsockname()[1], stop

    return start


def _round(sock, buf):
    sock.sendall(REQUEST * REQUESTS)
    view = memoryview(buf)
    remaining = RESPONSE * REQUESTS
    while remaining:
        n = sock.recv_into(view[: min(remaining, len(view))])
        if not n:
            raise RuntimeError("server closed the connection")
        remaining -= n


@pytest.fixture(scope="module")
def data_file():
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(REGION))
        f.flush()
        yield f


def _bench(benchmark, start):
    server = _ServerThread(start)
    try:
        sock = socket.create_connection(("127.0.0.1", server.port))
        buf = bytearray(4 * 1024 * 1024)
        _round(sock, buf)  # warm up: connection, page cache, socket buffers
        benchmark.group = "network"
        cpu_before = server.cpu_seconds()
        benchmark.pedantic(_round, args=(sock, buf), rounds=ROUNDS, iterations=1)
        cpu_after = server.cpu_seconds()
        mean = benchmark.stats.stats.mean
        benchmark.extra_info["MiB_per_s"] = round(RESPONSE * REQUESTS / mean / 2**20, 1)
        if cpu_before is not None:
            gib = RESPONSE * REQUESTS * ROUNDS / 2**30
            benchmark.extra_info["server_cpu_s_per_GiB"] = round((cpu_after - cpu_before) / gib, 3)
        sock.close()
    finally:
        server.close()


def test_network_kfast_sendfile(benchmark, data_file):
    _bench(benchmark, _kfast_server(data_file))


def test_network_uvloop_transport(benchmark, data_file):
    _bench(benchmark, _uvloop_transport_server(data_file))


# --- small requests: per-request overhead of the network layer -----------------
#
#   network_small_kfast            SocketServer, a sync handler returning one
#                                  60-byte part per 100-byte request
#   network_small_uvloop_protocol  asyncio.Protocol on uvloop cutting frames in
#                                  Python and answering with transport.writelines

SMALL_REQUESTS = 20000
SMALL_REQUEST = struct.pack(">i", 96) + b"r" * 96
SMALL_RESPONSE = b"x" * 60


def _kfast_small_server():
    async def start():
        server = SocketServer(lambda connection, frame: [SMALL_RESPONSE], "127.0.0.1", 0)
        await server.start()
        return server.port, server.shutdown

    return start


class _SmallProtocol(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data):
        buffer = self.buffer
        buffer += data
        position, out = 0, []
        while len(buffer) - position >= 4:
            (size,) = struct.unpack_from(">i", buffer, position)
            if len(buffer) - position - 4 < size:
                break
            position += 4 + size
            out.append(struct.pack(">i", len(SMALL_RESPONSE)) + SMALL_RESPONSE)
        del buffer[:position]
        if out:
            self.transport.writelines(out)


def _uvloop_small_server():
    async def start():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_SmallProtocol, "127.0.0.1", 0)

        async def stop():
            server.close()
            await server.wait_closed()

        return server.sockets[0].getsockname()[1], stop

    return start


def _small_round(sock, buf):
    wire = SMALL_REQUEST * 1000
    expected = (4 + len(SMALL_RESPONSE)) * SMALL_REQUESTS
    sender = threading.Thread(
        target=lambda: [sock.sendall(wire) for _ in range(SMALL_REQUESTS // 1000)]
    )
    sender.start()
    view = memoryview(buf)
    while expected:
        n = sock.recv_into(view[: min(expected, len(view))])
        if not n:
            raise RuntimeError("server closed the connection")
        expected -= n
    sender.join()


def _bench_small(benchmark, start):
    server = _ServerThread(start)
    try:
        sock = socket.create_connection(("127.0.0.1", server.port))
        buf = bytearray(1 << 20)
        _small_round(sock, buf)
        benchmark.group = "network_small"
        benchmark.pedantic(_small_round, args=(sock, buf), rounds=ROUNDS, iterations=1)
        benchmark.extra_info["requests_per_s"] = round(SMALL_REQUESTS / benchmark.stats.stats.mean)
        sock.close()
    finally:
        server.close()


def test_network_small_kfast(benchmark):
    _bench_small(benchmark, _kfast_small_server())


def test_network_small_uvloop_protocol(benchmark):
    _bench_small(benchmark, _uvloop_small_server())
