"""netio kernel on a real socketpair: framing, buffer ownership, sends."""

import errno
import os
import socket
import struct
import sys
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast._ext import netio
from kfast._ext.netio import InvalidReceiveException, PlaintextTransport
from kfast.config import SERVER_CONFIGS
from kfast.protocol.file_region import FileRegion

from ..hypothesis_budget import examples

DEVNULL = open(os.devnull, "rb")
# Kafka's socket.request.max.bytes default, the limit the broker passes.
MAX = SERVER_CONFIGS["socket.request.max.bytes"].default


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def pair():
    server, client = socket.socketpair()
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


def drain_frames(transport):
    out = []
    while (f := transport.next_frame()) is not None:
        out.append(bytes(f))
    return out


def receive_all(transport):
    """Receive until the socket has nothing more (EAGAIN)."""
    total = 0
    while (n := transport.receive()) > 0:
        total += n
    return total


def test_many_frames_in_one_segment(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    bodies = [b"", b"a", b"hello", bytes(range(256)) * 3]
    client.sendall(b"".join(frame(b) for b in bodies))
    receive_all(t)
    assert drain_frames(t) == bodies
    assert t.frames_received == 4
    assert t.bytes_received == sum(4 + len(b) for b in bodies)
    assert t.buffered_receive_bytes == 0


def test_frame_split_byte_by_byte(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    data = frame(b"split across segments") + frame(b"second")
    got = []
    for i in range(len(data)):
        client.send(data[i : i + 1])
        assert t.receive() == 1
        got.extend(drain_frames(t))
        if i < 24:
            assert got == []
    assert got == [b"split across segments", b"second"]


def test_receive_reports_eof_and_would_block(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    assert t.receive() == -1
    client.shutdown(socket.SHUT_WR)
    assert t.receive() == 0


@pytest.mark.parametrize(
    "prefix, message",
    [
        (struct.pack(">I", 0x80000000), "size = -2147483648"),  # 2 GiB: negative int32
        (struct.pack(">i", -1), "size = -1"),
        (struct.pack(">i", 0x7FFFFFFF), "larger than 104857600"),  # 2 GiB - 1
        (struct.pack(">i", 104857601), "larger than 104857600"),
    ],
)
def test_invalid_size_prefix_raises_before_buffering(pair, prefix, message):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    client.sendall(prefix + b"x" * 10)
    receive_all(t)
    with pytest.raises(InvalidReceiveException, match=message):
        t.next_frame()
    # Nothing of the claimed size was allocated.
    assert t.receive_capacity == netio.RECEIVE_CHUNK_SIZE


def test_max_receive_size_is_inclusive(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), 10)
    client.sendall(frame(b"0123456789") + frame(b"0123456789A"))
    receive_all(t)
    assert bytes(t.next_frame()) == b"0123456789"
    with pytest.raises(InvalidReceiveException):
        t.next_frame()


@pytest.fixture
def empty_receive_pool():
    """The receive pool emptied (other tests' chunks freed), then restored."""
    netio.set_receive_pool_limit(0)
    netio.set_receive_pool_limit(POOL_LIMIT)
    yield
    netio.set_receive_pool_limit(0)
    netio.set_receive_pool_limit(POOL_LIMIT)


POOL_LIMIT = 64 * 1024 * 1024  # RECEIVE_POOL_BYTES


def send_and_receive(client, t, data, step=50000):
    """Send ``data`` in pieces, receiving as it arrives; the frames cut."""
    sent = 0
    frames = []
    while sent < len(data):
        sent += client.send(data[sent : sent + step])
        receive_all(t)
        while (f := t.next_frame()) is not None:
            frames.append(f)
    return frames


def test_large_frame_grows_with_received_bytes_only(pair, empty_receive_pool):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    body = os.urandom(3 * 1024 * 1024 + 17)
    data = frame(body)
    sent = 0
    result = None
    while sent < len(data):
        step = client.send(data[sent : sent + 50000])
        sent += step
        while t.receive() > 0:
            # Capacity never exceeds twice the bytes received so far (or the
            # first chunk), whatever the size prefix claims.
            assert t.receive_capacity <= max(2 * t.bytes_received, netio.RECEIVE_CHUNK_SIZE) + 1
        f = t.next_frame()
        if f is not None:
            result = bytes(f)
    assert result == body


def test_claimed_size_not_allocated_for_a_trickle(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    client.sendall(struct.pack(">i", 100_000_000) + b"x" * 100)
    receive_all(t)
    assert t.next_frame() is None
    assert t.receive_capacity == netio.RECEIVE_CHUNK_SIZE


def test_a_large_frame_reuses_a_pooled_chunk(pair, empty_receive_pool):
    """Once a large frame has been received and released, its chunk is
    pooled and the next large frame lands in it whole: no growth by
    copying, no fresh allocation."""
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    first = os.urandom(1_000_000)
    (got,) = send_and_receive(client, t, frame(first))
    assert bytes(got) == first
    del got
    client.sendall(frame(b"small"))  # the empty large chunk is let go here
    receive_all(t)
    assert drain_frames(t) == [b"small"]
    chunks, pooled = netio.receive_pool()
    assert chunks >= 1 and pooled >= len(first)
    second = os.urandom(900_000)
    data = frame(second)
    client.sendall(data[:70_000])  # past the first chunk: the size is known
    receive_all(t)
    assert t.receive_capacity >= len(data)  # the pooled chunk, in one step
    assert netio.receive_pool()[1] < pooled
    (got,) = send_and_receive(client, t, data[70_000:])
    assert bytes(got) == second


def test_a_chunk_is_pooled_only_once_its_frames_are_released(pair, empty_receive_pool):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    body = os.urandom(500_000)
    (held,) = send_and_receive(client, t, frame(body))
    client.sendall(frame(b"next"))
    receive_all(t)
    assert drain_frames(t) == [b"next"]
    # The smaller chunks of the frame's growth are pooled; the one it is in
    # is not while ``held`` views it.
    chunks, pooled = netio.receive_pool()
    assert bytes(held) == body
    held.release()
    assert netio.receive_pool()[0] == chunks + 1
    assert netio.receive_pool()[1] >= pooled + len(body)


def test_the_receive_pool_is_bounded(empty_receive_pool):
    netio.set_receive_pool_limit(3 * 1024 * 1024)
    pairs = [socket.socketpair() for _ in range(6)]
    try:
        transports = []
        for server, client in pairs:
            server.setblocking(False)
            t = PlaintextTransport(server.fileno(), MAX)
            body = os.urandom(1_000_000)
            (got,) = send_and_receive(client, t, frame(body))
            assert bytes(got) == body
            transports.append(t)
        for t in transports:
            t.close()
        chunks, pooled = netio.receive_pool()
        assert 1 <= chunks and pooled <= 3 * 1024 * 1024
    finally:
        for server, client in pairs:
            server.close()
            client.close()


@settings(max_examples=examples(30))
@given(st.lists(st.integers(0, 40000), min_size=1, max_size=40), st.data())
def test_held_frames_survive_buffer_reuse(sizes, data):
    """Frames kept by their holder are never overwritten, whatever arrives
    later; frames dropped let the buffer be reused."""
    server, client = socket.socketpair()
    server.setblocking(False)
    client.setblocking(False)
    try:
        t = PlaintextTransport(server.fileno(), MAX)
        bodies = [os.urandom(n) for n in sizes]
        wire = b"".join(frame(b) for b in bodies)
        held = []
        got = 0
        sent = 0
        while got < len(bodies):
            if sent < len(wire):
                step = data.draw(st.integers(1, 70000))
                try:
                    sent += client.send(wire[sent : sent + step])
                except BlockingIOError:
                    pass
            while t.receive() > 0:
                pass
            while (f := t.next_frame()) is not None:
                if data.draw(st.booleans()):
                    held.append((got, f))
                else:
                    assert bytes(f) == bodies[got]
                    f.release()
                got += 1
        for index, f in held:
            assert bytes(f) == bodies[index]
    finally:
        server.close()
        client.close()


def test_frames_are_writable(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    client.sendall(frame(b"abcd"))
    receive_all(t)
    f = t.next_frame()
    assert not f.readonly
    f[0:2] = b"XY"
    assert bytes(f) == b"XYcd"


@pytest.fixture
def data_file():
    with tempfile.TemporaryFile() as f:
        content = os.urandom(5 * 1024 * 1024 + 123)
        f.write(content)
        f.flush()
        yield f, content


def read_exact(sock, n):
    sock.setblocking(True)
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        assert chunk, "peer closed early"
        buf += chunk
    return bytes(buf)


def test_send_writes_size_prefix_and_parts_in_order(pair, data_file):
    server, client = pair
    f, content = data_file
    t = PlaintextTransport(server.fileno(), MAX)
    header = b"header"
    region = FileRegion(f, 1000, 300)
    t.send([header, region, bytearray(b"mid"), memoryview(b"--tail--")[2:6], b""])
    assert t.unsent_bytes == 4 + 6 + 300 + 3 + 4
    assert t.flush() is True
    expected_body = header + content[1000:1300] + b"mid" + b"tail"
    assert read_exact(client, 4 + len(expected_body)) == frame(expected_body)
    assert t.unsent_bytes == 0
    assert t.responses_queued == 1
    if netio.HAVE_SENDFILE:
        assert t.sendfile_bytes == 300
        assert t.copied_bytes == 4 + 6 + 3 + 4
    else:
        assert t.copied_bytes == 4 + 6 + 300 + 3 + 4


def test_partial_sends_resume_byte_exact(data_file):
    """A small send buffer and a reader that reads late force EAGAIN in the
    middle of both sendmsg and sendfile; every byte still arrives in order."""
    f, content = data_file
    server, client = socket.socketpair()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    server.setblocking(False)
    try:
        t = PlaintextTransport(server.fileno(), MAX)
        blob = os.urandom(300_000)
        t.send([b"h" * 10, FileRegion(f, 0, len(content)), blob])
        t.send([FileRegion(f, 7, 1000)])
        expected = frame(b"h" * 10 + content + blob) + frame(content[7:1007])
        received = bytearray()
        blocked = 0
        client.setblocking(False)
        while not t.flush():
            blocked += 1
            while True:
                try:
                    chunk = client.recv(65536)
                except BlockingIOError:
                    break
                received += chunk
        received += read_exact(client, len(expected) - len(received))
        assert blocked > 10
        assert bytes(received) == expected
        if netio.HAVE_SENDFILE:
            assert t.sendfile_bytes == len(content) + 1000
            assert t.copied_bytes == 4 + 10 + len(blob) + 4
    finally:
        server.close()
        client.close()


def test_invalid_part_queues_nothing(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    with pytest.raises(TypeError):
        t.send([b"ok", 42])
    with pytest.raises(ValueError):
        t.send([b"ok", FileRegionLike(-1)])
    assert t.unsent_bytes == 0 and not t.has_unsent
    assert t.flush() is True


class FileRegionLike:
    def __init__(self, position):
        self.file = DEVNULL
        self.position = position
        self.length = 1


def test_truncated_file_region_raises(pair, data_file):
    server, client = pair
    f, content = data_file
    t = PlaintextTransport(server.fileno(), MAX)
    t.send([FileRegion(f, len(content) - 10, 20)])
    with pytest.raises(EOFError, match="truncated"):
        while not t.flush():
            client.recv(1 << 20)


def test_queued_buffers_are_held_until_sent_or_closed(pair, data_file):
    server, client = pair
    f, _ = data_file
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    t = PlaintextTransport(server.fileno(), MAX)
    payload = bytearray(2_000_000)
    region = FileRegion(f, 0, 10)
    refs = sys.getrefcount(region)
    t.send([payload, region])
    assert sys.getrefcount(region) == refs + 1
    assert t.flush() is False
    with pytest.raises(BufferError):
        payload.extend(b"x")  # exported: the transport still reads from it
    t.close()
    payload.extend(b"x")
    assert sys.getrefcount(region) == refs
    assert t.is_closed
    with pytest.raises(ValueError):
        t.send([b"x"])


def test_peer_gone_raises_oserror(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)
    client.close()
    t.send([b"x" * 100000])
    with pytest.raises(OSError) as info:
        for _ in range(10):
            t.flush()
            t.send([b"x" * 100000])
    assert isinstance(info.value, (BrokenPipeError, ConnectionResetError))


def test_response_size_limit(pair):
    server, client = pair
    t = PlaintextTransport(server.fileno(), MAX)

    class Huge:
        file = DEVNULL
        position = 0
        length = 2**31

    with pytest.raises(ValueError, match="2\\*\\*31"):
        t.send([Huge()])


_FILE_CONTENT = os.urandom(1 << 16)


@settings(max_examples=60)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.binary(max_size=1500),  # small and held parts
                st.tuples(st.integers(0, 1 << 16), st.integers(0, 5000)),  # file regions
            ),
            max_size=12,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_mix_of_parts_arrives_exactly(responses):
    """Small parts are coalesced, large ones held, regions sent from the
    file: whatever the mix, the wire carries prefix + parts in order."""
    with tempfile.TemporaryFile() as f:
        f.write(_FILE_CONTENT)
        f.flush()
        server, client = socket.socketpair()
        server.setblocking(False)
        try:
            t = PlaintextTransport(server.fileno(), MAX)
            expected = bytearray()
            file_bytes = 0
            for parts in responses:
                wire_parts, body = [], bytearray()
                for p in parts:
                    if isinstance(p, bytes):
                        wire_parts.append(memoryview(p) if len(p) % 2 else p)
                        body += p
                    else:
                        position, length = p
                        length = min(length, len(_FILE_CONTENT) - position)
                        wire_parts.append(FileRegion(f, position, length))
                        body += _FILE_CONTENT[position : position + length]
                        file_bytes += length
                t.send(wire_parts)
                expected += frame(bytes(body))
            assert t.unsent_bytes == len(expected)
            received = bytearray()
            client.setblocking(False)
            while not t.flush():
                try:
                    received += client.recv(1 << 20)
                except BlockingIOError:
                    pass
            received += read_exact(client, len(expected) - len(received))
            assert received == expected
            if netio.HAVE_SENDFILE:
                assert t.sendfile_bytes == file_bytes
                assert t.copied_bytes == len(expected) - file_bytes
        finally:
            server.close()
            client.close()


def _sendfile_refuses(path):
    """True if sendfile(2) fails with EINVAL for this file (procfs seq files
    on recent Linux kernels cannot splice) while pread works."""
    if not netio.HAVE_SENDFILE or not os.path.exists(path):
        return False
    a, b = socket.socketpair()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, 16, 0)
        os.sendfile(a.fileno(), fd, 0, 16)
    except OSError as exc:
        return exc.errno == errno.EINVAL
    finally:
        os.close(fd)
        a.close()
        b.close()
    return False


@pytest.mark.skipif(
    not _sendfile_refuses("/proc/self/status"),
    reason="needs a file sendfile(2) refuses with EINVAL",
)
def test_file_that_cannot_splice_falls_back_to_copy(pair):
    server, client = pair
    with open("/proc/self/status", "rb") as f:
        head = os.pread(f.fileno(), 5, 0)  # "Name:", stable
        t = PlaintextTransport(server.fileno(), MAX)
        t.send([FileRegion(f, 0, 5)])
        assert t.flush() is True
    assert read_exact(client, 9) == frame(head)
    assert t.sendfile_bytes == 0
    assert t.copied_bytes == 9
