"""PlaintextTransport.answer_frames on a real socketpair: the readable
connection's common case in C (frames to the handler, responses queued,
one flush, send timing reported) against the general path it stands in for
(next_frame, send, flush: kfast.server.network.Connection's), and every
outcome it leaves to the caller."""

import asyncio
import socket
import struct
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast._ext import netio
from kfast._ext.netio import InvalidReceiveException, PlaintextTransport
from kfast.config import SERVER_CONFIGS

from ..hypothesis_budget import examples

MAX = SERVER_CONFIGS["socket.request.max.bytes"].default


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


class Timing:
    def __init__(self):
        self.calls = []

    def sent(self, dequeued, now):
        self.calls.append((dequeued, now))


class Timed(list):
    """Stands in for kfast.server.network.TimedResponse."""

    __slots__ = ("timing",)

    def __init__(self, parts, timing):
        super().__init__(parts)
        self.timing = timing


class Conn:
    """The attributes of a Connection answer_frames reads."""

    _reading = True


@pytest.fixture
def pair():
    server, client = socket.socketpair()
    server.setblocking(False)
    client.settimeout(10)
    yield server, client
    server.close()
    client.close()


def attached(server, handler, max_unsent=4 * 1024 * 1024):
    transport = PlaintextTransport(server.fileno(), MAX)
    conn, timed = Conn(), deque()
    transport.attach(handler, conn, Timed, timed, max_unsent)
    return transport, conn, timed


def read_exactly(client, n):
    out = bytearray()
    while len(out) < n:
        chunk = client.recv(n - len(out))
        assert chunk
        out += chunk
    return bytes(out)


def respond(body: bytes):
    """A deterministic handler result per body: no response, small parts
    (copied), a large one (held), a TimedResponse."""
    kind = body[0] % 4 if body else 0
    if kind == 0:
        return None
    parts = [b"r:", bytes(body)]
    if kind == 2:
        parts.append(bytes(body) * 300)  # over COALESCE_MAX: held, not copied
    if kind == 3:
        return Timed(parts, Timing())
    return parts


def expected_bytes(bodies):
    out = bytearray()
    for body in bodies:
        parts = respond(body)
        if parts is not None:
            payload = b"".join(parts)
            out += struct.pack(">i", len(payload)) + payload
    return bytes(out)


@settings(max_examples=examples(60), deadline=None)
@given(
    bodies=st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=12),
    cut=st.integers(min_value=1, max_value=400),
)
def test_answers_equal_the_general_path_byte_for_byte(bodies, cut):
    """The same frames, arriving in pieces of ``cut`` bytes, answered by
    answer_frames and by next_frame/send/flush, give the same byte stream."""
    wire = b"".join(frame(b) for b in bodies)
    streams = []
    for in_c in (True, False):
        server, client = socket.socketpair()
        try:
            server.setblocking(False)
            client.settimeout(10)
            handled = []

            def handler(connection, f):
                handled.append(bytes(f))
                return respond(bytes(f))

            transport, conn, timed = attached(server, handler)
            for i in range(0, len(wire), cut):
                client.sendall(wire[i : i + cut])
                while transport.receive() > 0:
                    pass
                if in_c:
                    status = transport.answer_frames()
                    assert status in (netio.ANSWER_NONE, netio.ANSWER_SENT)
                    assert not timed and transport.left is None
                else:
                    while (f := transport.next_frame()) is not None:
                        parts = handler(conn, f)
                        del f
                        if parts is not None:
                            transport.send(parts)
                    assert transport.flush()
            assert handled == bodies
            assert transport.answered_in_c == (len(bodies) if in_c else 0)
            assert transport.frames_received == len(bodies)
            want = expected_bytes(bodies)
            streams.append(read_exactly(client, len(want)))
            transport.close()
        finally:
            server.close()
            client.close()
    assert streams[0] == streams[1] == expected_bytes(bodies)


def test_nothing_to_answer(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [b"x"])
    assert transport.answer_frames() == netio.ANSWER_NONE
    client.sendall(frame(b"abc")[:5])  # an incomplete frame
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_NONE
    assert transport.answered_in_c == 0


def test_unsent_bytes_of_an_earlier_response_leave_it_to_the_caller(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [b"x"])
    transport.send([b"queued before"])
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_NONE
    assert transport.buffered_receive_bytes == 5  # not cut


def test_timing_reported_once_the_response_is_sent(pair):
    server, client = pair
    timing = Timing()
    transport, _, timed = attached(server, lambda c, f: Timed([b"ok"], timing))
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_SENT
    assert read_exactly(client, 6) == frame(b"ok")
    assert len(timing.calls) == 1 and timing.calls[0][0] <= timing.calls[0][1]
    assert not timed


def test_a_partial_send_leaves_the_timing_entries_to_the_caller(pair):
    server, client = pair
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = b"y" * (4 * 1024 * 1024)
    timing = Timing()
    transport, _, timed = attached(server, lambda c, f: Timed([big], timing))
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_UNSENT
    assert transport.has_unsent and timing.calls == []
    [(end, dequeued, entry_timing)] = timed
    # The end is the whole response (its size prefix included) in the sent count.
    assert end == 4 + len(big) and entry_timing is timing and dequeued > 0


@pytest.mark.parametrize(
    "result",
    [(b"a tuple",), "a str", pytest.param("coroutine", id="coroutine")],
)
def test_a_response_that_is_not_a_list_is_left_to_the_caller(pair, result):
    server, client = pair
    if result == "coroutine":

        async def later():
            return [b"x"]

        result = later()
    transport, _, timed = attached(server, lambda c, f: result)
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_LEFT
    assert transport.left is result and not transport.has_unsent
    assert transport.answered_in_c == 0
    if asyncio.iscoroutine(result):
        result.close()


def test_earlier_responses_stay_queued_for_the_caller(pair):
    """Frames answered before one that is left are queued, not flushed:
    the caller's flush sends them, in order, before anything else."""
    server, client = pair
    timing = Timing()

    def handler(connection, f):
        return Timed([b"first"], timing) if bytes(f) == b"1" else (b"second",)

    transport, _, timed = attached(server, handler)
    client.sendall(frame(b"1") + frame(b"2"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_LEFT
    assert transport.left == (b"second",)
    assert transport.has_unsent and len(timed) == 1 and timing.calls == []
    assert transport.flush()
    assert read_exactly(client, 9) == frame(b"first")


def test_a_handler_that_raises(pair):
    server, client = pair
    error = RuntimeError("boom")

    def handler(connection, f):
        raise error

    transport, _, _ = attached(server, handler)
    client.sendall(frame(b"a") + frame(b"b"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_FAILED
    assert transport.left is error
    assert transport.buffered_receive_bytes == 5  # the second frame is not cut


def test_an_invalid_part_queues_nothing_of_its_response(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [b"ok", object()])
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_INVALID
    assert isinstance(transport.left, TypeError)
    assert not transport.has_unsent and transport.answered_in_c == 0


def test_a_send_failure_is_left_to_the_caller(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [b"ok"])
    client.sendall(frame(b"a"))
    transport.receive()
    client.close()  # the peer is gone: the send fails with EPIPE/ECONNRESET
    assert transport.answer_frames() == netio.ANSWER_SEND_FAILED
    assert isinstance(transport.left, OSError)


def test_a_handler_that_closes_the_transport(pair):
    server, client = pair
    holder = {}
    response = [b"never sent"]

    def handler(connection, f):
        holder["t"].close()
        return response

    transport, _, _ = attached(server, handler)
    holder["t"] = transport
    client.sendall(frame(b"a"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_LEFT
    # The caller sees its connection closed and drops it (or lets an
    # awaitable run unobserved), as for a response of its general path.
    assert transport.left is response and not transport.has_unsent


def test_stops_when_the_connection_stops_reading(pair):
    """A handler that throttles or drains its connection: the frames behind
    are not cut here; the caller's general path decides."""
    server, client = pair

    def handler(connection, f):
        connection._reading = False
        return [b"ok"]

    transport, conn, _ = attached(server, handler)
    client.sendall(frame(b"a") + frame(b"b"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_SENT
    assert transport.answered_in_c == 1 and transport.buffered_receive_bytes == 5
    assert read_exactly(client, 6) == frame(b"ok")


def test_stops_over_the_unsent_bound(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [bytes(f)], max_unsent=0)
    client.sendall(frame(b"a") + frame(b"b"))
    transport.receive()
    assert transport.answer_frames() == netio.ANSWER_SENT
    assert transport.answered_in_c == 1 and transport.buffered_receive_bytes == 5


def test_a_bad_size_prefix_raises_as_next_frame_does(pair):
    server, client = pair
    transport, _, _ = attached(server, lambda c, f: [b"ok"])
    client.sendall(frame(b"a") + struct.pack(">i", -1))
    transport.receive()
    with pytest.raises(InvalidReceiveException):
        transport.answer_frames()
    assert transport.answered_in_c == 1  # the frame before it was answered


def test_close_drops_the_handler_and_connection(pair):
    server, _ = pair
    transport, conn, _ = attached(server, lambda c, f: None)
    transport.close()
    assert transport.answer_frames() == netio.ANSWER_NONE
