"""The broker's network layer: accept TCP connections, cut requests, write
responses in request order, with record bytes going file -> socket by
sendfile(2).

Kafka's SocketServer runs an Acceptor and Processor threads around a
Selector of KafkaChannels; kfast runs the same roles on one event loop:
``SocketServer`` accepts, each ``Connection`` (Kafka's KafkaChannel) owns a
transport (``kfast._ext.netio.PlaintextTransport``: recv/sendmsg/sendfile in
C) and is driven by ``loop.add_reader``/``add_writer``. uvloop in production;
the plain asyncio loop works too.

Handler contract
----------------
``handler(connection, frame) -> response``, called once per request, in
arrival order, on the loop:

* ``frame`` is the request body as a writable memoryview (the 4-byte size
  prefix already stripped). It is a view into the receive buffer, not a copy,
  and it stays valid for as long as the handler (or anything it passes it to)
  holds it: the buffer is chunked and a chunk is reused only once no view of
  it is alive (see ``netio.pxd``). Handlers that finish synchronously and
  drop the view therefore cost no copy; async handlers may keep it without
  copying either.
* ``response`` is ``None`` (no response, e.g. Produce with acks=0), a list
  (or tuple) of parts, or an awaitable resolving to one of those. A part is
  bytes-like (bytes, bytearray, memoryview) or a
  ``kfast.protocol.file_region.FileRegion`` (sent with sendfile). Parts over
  512 bytes are held, not copied, until sent, so a mutable one must not
  change until then; smaller ones are copied at once. The network layer
  writes the 4-byte size prefix (the sum of the parts' lengths), so encoders
  produce the header + body only.
* Responses are written in request order per connection even when a later
  awaitable finishes first; a ``None`` response holds nothing up.
* Handlers are called in request order, but an async one may still be
  running when the next request's handler is called. Work that must happen
  in request order (appending a producer's batches) belongs before the
  handler's first await; ``max_in_flight_requests=1`` gives Kafka's model
  exactly (the channel is muted until the response is queued).
* An exception from the handler (raised or carried by the awaitable) is
  logged and closes that connection; turning errors into Kafka error
  responses is the handler's job.

Backpressure: a connection stops reading (and stops cutting already
buffered frames) while its unsent response bytes exceed
``max_queued_send_bytes`` or its unanswered requests reach
``max_in_flight_requests``, and resumes when it drains below both.

Idle connections (no bytes in either direction for
``connections_max_idle_ms`` and no request in flight) are closed by one
periodic sweep, not a timer per connection.

Connection limits follow Kafka: at ``max.connections`` the server stops
accepting (clients wait in the listen backlog) until a connection closes; a
connection beyond ``max.connections.per.ip`` is closed as soon as accepted.
Over a ``max.connection.creation.rate`` (``connection_rate``) the
connection just accepted waits, and nothing more is accepted, for the
throttle time; over an IP's ``connection_creation_rate`` quota
(``connection_quotas``) the connection is closed unserved after it.

Security: ``transport_factory`` makes each connection's transport (the
plaintext one in C, or ``kfast.server.tls_transport.TlsTransport`` for SSL
and SASL_SSL listeners: framing over ssl.MemoryBIO, FileRegion parts read
then encrypted, since encrypted bytes cannot come from the page cache), and
``connection_setup(connection)`` runs once per accepted connection before
its first read (the listener's TLS principal and SASL state go there; see
``security_for_listener``). A failed TLS handshake is logged at a bounded
rate and closes the connection.

Closed connections: ``disconnect_listeners`` are called with the
``connection_id`` of each connection once it is closed, whoever closed it
(Kafka's ConnectionDisconnectListener): state kept per connection outside
it -- KIP-714 client instances -- is dropped there. A listener that raises
is logged; the others still run.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import inspect
import itertools
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Union, final

from kfast._ext.netio import (
    ANSWER_FAILED,
    ANSWER_INVALID,
    ANSWER_LEFT,
    ANSWER_SEND_FAILED,
    ANSWER_SENT,
    InvalidReceiveException,
    PlaintextTransport,
)
from kfast.config import SERVER_CONFIGS, KafkaConfig
from kfast.protocol.constants import INT32_MAX
from kfast.protocol.file_region import FileRegion
from kfast.security.principal import ANONYMOUS
from kfast.server.futures import completions, run_completions, when_done
from kfast.server.rate_limited_log import RateLimitedLogger

if TYPE_CHECKING:
    from kfast.security.listener import ListenerSecurity
    from kfast.security.principal import KafkaPrincipal
    from kfast.server.connection_rate_quota import ConnectionRateQuotas
    from kfast.server.quota import ConnectionCreationQuotas
    from kfast.server.sasl_authenticator import SaslServerAuthenticator

__all__ = [
    "Connection",
    "TimedResponse",
    "Handler",
    "InvalidReceiveException",
    "NetworkMetrics",
    "Response",
    "SocketServer",
    "Transport",
]

logger = logging.getLogger(__name__)

# The broker properties this layer implements; their defaults live in the
# config table.
_PROPERTIES = {
    "socket_request_max_bytes": "socket.request.max.bytes",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "socket_send_buffer_bytes": "socket.send.buffer.bytes",  # -1: OS default
    "socket_receive_buffer_bytes": "socket.receive.buffer.bytes",  # -1: OS default
    "socket_listen_backlog_size": "socket.listen.backlog.size",
    "max_connections": "max.connections",
    "max_connections_per_ip": "max.connections.per.ip",
}
SOCKET_REQUEST_MAX_BYTES = SERVER_CONFIGS["socket.request.max.bytes"].default
CONNECTIONS_MAX_IDLE_MS = SERVER_CONFIGS["connections.max.idle.ms"].default
SOCKET_SEND_BUFFER_BYTES = SERVER_CONFIGS["socket.send.buffer.bytes"].default
SOCKET_RECEIVE_BUFFER_BYTES = SERVER_CONFIGS["socket.receive.buffer.bytes"].default
SOCKET_LISTEN_BACKLOG_SIZE = SERVER_CONFIGS["socket.listen.backlog.size"].default
MAX_CONNECTIONS = SERVER_CONFIGS["max.connections"].default
MAX_CONNECTIONS_PER_IP = SERVER_CONFIGS["max.connections.per.ip"].default
# kfast's own bounds (Kafka answers one request per connection at a time, by
# muting the channel; kfast pipelines and bounds the pipeline instead).
MAX_QUEUED_SEND_BYTES = 4 * 1024 * 1024
MAX_IN_FLIGHT_REQUESTS = 100
# Connections accepted per readable event of the listening socket, so a
# connection storm cannot starve the established connections.
_ACCEPTS_PER_EVENT = 64
# Out of descriptors (or socket memory), accept fails while the connection
# stays in the backlog, so the listener stays readable: without a pause the
# loop would spin on it. Accepting resumes after this delay (asyncio's
# BaseSelectorEventLoop pauses 1 s for the same errors) or when a connection
# closes; the client waits in the backlog meanwhile.
_ACCEPT_RETRY_DELAY_S = 0.1
_RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

Part = Union[bytes, bytearray, memoryview, FileRegion]
# A client's address as accept() gives it: (host, port) over IPv4,
# (host, port, flowinfo, scope id) over IPv6.
Peer = Union[tuple[str, int], tuple[str, int, int, int]]


class SendTiming(Protocol):
    def sent(self, dequeued: float, now: float) -> None: ...


class TimedResponse(list[Part]):
    """Response parts whose request is timed until its response is sent
    (Kafka's RequestMetrics ResponseQueueTime and ResponseSendTime): once
    the last byte is handed to the socket, ``timing.sent(dequeued, now)`` is
    called with the time.perf_counter() values of when the response was
    handed to the transport (its send began) and now. Responses of a
    connection that closes first are not reported."""

    __slots__ = ("timing",)

    def __init__(self, parts: Iterable[Part], timing: SendTiming) -> None:
        super().__init__(parts)
        self.timing = timing


Response = Union[None, Sequence[Part]]
Handler = Callable[["Connection", memoryview], Response | Awaitable[Response]]


class Transport(Protocol):
    """What a Connection needs from its transport (PlaintextTransport; a TLS
    transport would be a second implementation)."""

    # Read-only to a connection (TlsTransport computes unsent_bytes).
    @property
    def unsent_bytes(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def frames_received(self) -> int: ...
    @property
    def responses_queued(self) -> int: ...
    @property
    def sendfile_bytes(self) -> int: ...
    @property
    def copied_bytes(self) -> int: ...

    def receive(self) -> int: ...
    def next_frame(self) -> memoryview | None: ...
    def send(self, parts: Iterable[Part]) -> None: ...
    def flush(self) -> bool: ...
    @property
    def has_unsent(self) -> bool: ...
    def close(self) -> None: ...


TransportFactory = Callable[[socket.socket, int], Transport]


def _plaintext_transport(sock: socket.socket, max_receive_size: int) -> Transport:
    return PlaintextTransport(sock.fileno(), max_receive_size)


class ListenerSettings(TypedDict, total=False):
    """SocketServer arguments that secure a listener."""

    transport_factory: TransportFactory
    connection_setup: Callable[[Connection], None]


def security_for_listener(
    security: ListenerSecurity | None,
    sasl_setup: Callable[[Connection], None] | None = None,
) -> ListenerSettings:
    """SocketServer arguments for a listener's ``ListenerSecurity``
    (kfast.security.listener): the TLS transport whose completed handshake
    sets the connection's principal from the client certificate, and the
    per-connection SASL setup. Empty for PLAINTEXT."""
    settings: ListenerSettings = {}
    if security is None:
        return settings
    if security.uses_tls:
        from kfast.server.tls_transport import TlsTransport

        context = security.ssl_context
        if context is None:
            raise ValueError("a TLS listener without an SSL context")

        def tls_transport(sock: socket.socket, max_receive_size: int) -> Transport:
            return TlsTransport(sock, context, max_receive_size)

        settings["transport_factory"] = tls_transport

    def setup(connection: Connection) -> None:
        transport = connection.transport
        if security.uses_tls and not security.uses_sasl:
            assert isinstance(transport, TlsTransport)  # per connection, not per request

            def on_handshake(tls: TlsTransport) -> None:
                # SSL: the client certificate names the principal (SASL_SSL:
                # SASL does, once authenticated).
                connection.principal = security.certificate_principal(tls.peer_certificate())

            transport.on_handshake = on_handshake
        if sasl_setup is not None:
            sasl_setup(connection)

    settings["connection_setup"] = setup
    return settings


@dataclass(frozen=True)
class NetworkMetrics:
    """Counters of a SocketServer since start (closed connections included)."""

    connections_accepted: int
    connections_closed: int
    active_connections: int
    requests: int  # frames handed to the handler
    responses: int  # responses queued for sending
    bytes_received: int
    bytes_sent: int  # sendfile_bytes + copied_bytes
    sendfile_bytes: int  # file -> socket without passing through user space
    copied_bytes: int  # written from memory (size prefixes, headers, bytes parts)
    # Requests whose readable callback answered them in C (netio's
    # answer_frames: frames in, synchronous responses out).
    answered_in_c: int = 0


class _Totals:
    """Counters of closed connections, so metrics survive their connections."""

    __slots__ = (
        "requests",
        "responses",
        "bytes_received",
        "sendfile_bytes",
        "copied_bytes",
        "answered_in_c",
    )

    def __init__(self) -> None:
        self.requests = self.responses = self.bytes_received = 0
        self.sendfile_bytes = self.copied_bytes = self.answered_in_c = 0

    def add(self, transport: Transport) -> None:
        self.requests += transport.frames_received
        self.responses += transport.responses_queued
        self.bytes_received += transport.bytes_received
        self.sendfile_bytes += transport.sendfile_bytes
        self.copied_bytes += transport.copied_bytes
        if type(transport) is PlaintextTransport:
            self.answered_in_c += transport.answered_in_c


def _consume_outcome(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a response nobody will send, so asyncio does
    not report its exception as never retrieved."""
    if not future.cancelled():
        future.exception()


@final  # lets `type(head) is _Ready` tell a pending future from it, for mypy too
class _Ready:
    """A synchronous response waiting behind an earlier, unfinished one."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = parts


class Connection:
    """One client connection (Kafka's KafkaChannel).

    ``connection_id`` follows Kafka's form ``local-peer-index``; ``peer`` is
    the client's (host, port); ``listener_name`` is its server's listener.
    ``transport`` exposes the per-connection byte counters. The handler may
    keep its own per-connection state in attributes of its choosing (SASL
    state, client software name from ApiVersions).
    """

    # (name, version) a client's ApiVersions v3+ gave (KIP-511); unset before.
    client_software: tuple[str, str]

    def __init__(
        self,
        server: SocketServer,
        sock: socket.socket,
        peer: Peer,
        index: int,
        transport: Transport,
    ) -> None:
        self.server = server
        self.listener_name = server.listener_name
        self.peer = peer
        local = sock.getsockname()
        self.connection_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{index}"
        self.transport = transport
        # Who the connection's requests act as: anonymous until TLS or SASL
        # authenticates it (kfast.security).
        self.principal: KafkaPrincipal = ANONYMOUS
        # A SASL listener's per-connection authenticator (kfast.server.sasl_authenticator).
        self.sasl: SaslServerAuthenticator | None = None
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = server._started_loop()
        self._handler = server._handler
        # Unanswered requests in request order: futures of async handlers and
        # _Ready sync responses that finished behind them.
        self._pending: collections.deque[_Ready | asyncio.Future[Response]] = collections.deque()
        self._reading = False
        self._writing = False
        self._draining = False
        self._throttle_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self._closed_future: asyncio.Future[None] | None = None
        self.last_activity = self._loop.time()
        # time.perf_counter() of the last receive: every frame cut was
        # completed by it, since reading pauses while frames wait (Kafka's
        # request startTimeNanos, the start of its RequestQueueTime).
        self.received_at = 0.0
        # (bytes the transport will have sent once it is out, when its send
        # began, timing) of each TimedResponse queued and not yet sent.
        self._timed: collections.deque[tuple[int, float, SendTiming]] = collections.deque()
        # The plaintext transport answers the common case itself (frames in,
        # synchronous responses out: PlaintextTransport.answer_frames);
        # every rule beyond it stays in _process_frames.
        self._answerer: PlaintextTransport | None = None
        if type(transport) is PlaintextTransport:
            self._answerer = transport
            transport.attach(
                self._handler, self, TimedResponse, self._timed, server.max_queued_send_bytes
            )

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight_requests(self) -> int:
        """Requests handed to the handler and not yet answered."""
        return len(self._pending)

    @property
    def reading_paused(self) -> bool:
        """True while backpressure, a throttle or shutdown keeps this
        connection from reading requests."""
        return not self._closed and not self._reading

    @property
    def throttled(self) -> bool:
        return self._throttle_handle is not None

    def throttle(self, throttle_time_ms: float) -> None:
        """Read no requests for ``throttle_time_ms`` from now; responses keep
        flowing. Kafka mutes the channel of a client that exceeded a quota
        for the throttle time it reports in the response. A longer throttle
        extends a running one; a shorter one does not cut it."""
        if self._closed or throttle_time_ms <= 0:
            return
        until = self._loop.time() + throttle_time_ms / 1000.0
        if self._throttle_handle is not None:
            if self._throttle_handle.when() >= until:
                return
            self._throttle_handle.cancel()
        self._throttle_handle = self._loop.call_at(until, self._end_throttle)
        self._set_reading(False)

    def _end_throttle(self) -> None:
        self._throttle_handle = None
        if self._closed:
            return
        try:
            self._process_frames()
        except Exception as exc:
            self._fail(exc)

    async def wait_closed(self) -> None:
        if self._closed:
            return
        if self._closed_future is None:
            self._closed_future = self._loop.create_future()
        await asyncio.shield(self._closed_future)

    def __repr__(self) -> str:
        return f"<Connection {self.connection_id}{' closed' if self._closed else ''}>"

    def _over_limits(self) -> bool:
        server = self.server
        return (
            self.transport.unsent_bytes > server.max_queued_send_bytes
            or len(self._pending) >= server.max_in_flight_requests
        )

    def _set_reading(self, on: bool) -> None:
        if on and not self._reading:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True
        elif not on and self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    # --------------------------------------------------------------- receiving

    def _start(self) -> None:
        self._set_reading(True)

    def _on_readable(self) -> None:
        try:
            n = self.transport.receive()
            if n == 0:
                logger.debug("%s: peer closed the connection", self.connection_id)
                self.close()
                return
            if n < 0:
                return
            self.received_at = perf_counter()
            self.last_activity = self._loop.time()
            answerer = self._answerer
            if answerer is not None and not self._pending and not self._timed and not self._writing:
                answered = answerer.answer_frames()
                if answered != ANSWER_SENT or not self._reading or answerer.buffered_receive_bytes:
                    self._answered_in_c(answered, answerer.left)
                    self._process_frames()
            else:
                self._process_frames()
            if completions.queue:
                # Operations this request completed (a woken fetch): their
                # responses go out now, before the loop's next connection.
                run_completions()
        except Exception as exc:
            self._fail(exc)

    def _process_frames(self) -> None:
        """Hand buffered frames to the handler until none is complete or the
        connection is over its limits; flush; resume or pause reading."""
        transport = self.transport
        next_frame = transport.next_frame
        handler = self._handler
        pending = self._pending
        max_unsent = self.server.max_queued_send_bytes
        max_in_flight = self.server.max_in_flight_requests
        while True:
            limited = False
            while not self._closed and not self._draining and self._throttle_handle is None:
                if transport.unsent_bytes > max_unsent or len(pending) >= max_in_flight:
                    limited = True
                    break
                frame = next_frame()
                if frame is None:
                    break
                try:
                    response = handler(self, frame)
                except Exception as exc:
                    self._handler_failed(exc)
                    break
                del frame  # a handler that dropped it lets the buffer be reused
                if response is None:
                    continue
                # The common case inline: a synchronous response, nothing ahead.
                if isinstance(response, list) and not pending and not self._closed:
                    if not self._queue(response):
                        self.close_when_drained()
                    continue
                self._handle_response(response)
            if self._closed:
                return
            if transport.has_unsent and not self._writing:
                self._flush()
                if self._closed:
                    return
            if self._draining:
                self._set_reading(False)
                self._maybe_finish_drain()
                return
            if self._throttle_handle is not None:
                self._set_reading(False)
                return
            if limited and not self._over_limits():
                continue  # flushing made room for more buffered frames
            self._set_reading(not limited)
            return

    def _answered_in_c(self, answered: int, left: Any) -> None:
        """What PlaintextTransport.answer_frames left to this layer (its
        docstring lists the cases); _process_frames runs next (it flushes
        what is queued and applies the limits, throttle and draining)."""
        if answered == ANSWER_LEFT:
            self._handle_response(left)
        elif answered == ANSWER_FAILED:
            self._handler_failed(left)
        elif answered == ANSWER_INVALID:
            self._invalid_response(left)
            self.close_when_drained()
        elif answered == ANSWER_SEND_FAILED:
            self._send_failed(left)

    def _handler_failed(self, exc: Exception) -> None:
        logger.error(
            "%s: request handler failed; closing the connection", self.connection_id, exc_info=exc
        )
        self.close_when_drained()

    def _handle_response(self, response: Response | Awaitable[Response]) -> None:
        """What the handler returned (not None): queue it, wait behind the
        requests ahead of it, or wait for it."""
        if self._closed:
            # The handler closed its own connection; its work still runs.
            if inspect.isawaitable(response):
                asyncio.ensure_future(response, loop=self._loop).add_done_callback(_consume_outcome)
            return
        if isinstance(response, (list, tuple)):
            if self._pending:
                self._pending.append(_Ready(response))
            elif not self._queue(response):
                self.close_when_drained()
            return
        if inspect.isawaitable(response):
            future = asyncio.ensure_future(response, loop=self._loop)
            self._pending.append(future)
            if future.done():
                # Not from inside this handler call: the loop runs it next.
                future.add_done_callback(self._on_response_done)
            else:
                # A chained response (a woken fetch's) is queued and flushed
                # in the call that completes it, not a loop pass later,
                # behind every readable connection (kfast.server.futures).
                when_done(future, self._on_response_done)
            return
        logger.error(
            "%s: request handler returned %s (expected None, a list of parts "
            "or an awaitable); closing the connection",
            self.connection_id,
            type(response).__name__,
        )
        self.close_when_drained()

    # ----------------------------------------------------------------- sending

    def _queue(self, parts: Sequence[Part]) -> bool:
        transport = self.transport
        try:
            transport.send(parts)
        except (TypeError, ValueError, BufferError, OSError) as exc:
            self._invalid_response(exc)
            return False
        if type(parts) is TimedResponse:
            # Its last byte is out once the transport's sent count reaches
            # what it has sent plus what it now holds.
            end = transport.sendfile_bytes + transport.copied_bytes + transport.unsent_bytes
            self._timed.append((end, perf_counter(), parts.timing))
        return True

    def _invalid_response(self, exc: Exception) -> None:
        logger.error(
            "%s: invalid response; closing the connection", self.connection_id, exc_info=exc
        )

    def _report_sent(self, done: bool) -> None:
        """Report the timed responses whose last byte has gone to the
        socket. A TLS transport counts ciphertext as sent, so a response may
        be reported a record's overhead early; all are when nothing is left."""
        transport = self.transport
        sent = transport.sendfile_bytes + transport.copied_bytes
        timed = self._timed
        now = 0.0
        while timed and (done or timed[0][0] <= sent):
            _, dequeued, timing = timed.popleft()
            if not now:
                now = perf_counter()
            timing.sent(dequeued, now)

    def _on_response_done(self, future: asyncio.Future[Response]) -> None:
        if self._closed:
            _consume_outcome(future)
            return
        try:
            self._complete_pending()
        except Exception as exc:
            self._fail(exc)

    def _complete_pending(self) -> None:
        """Queue the responses at the head of the FIFO that are ready."""
        pending = self._pending
        while pending:
            head = pending[0]
            parts: Response
            if type(head) is _Ready:
                parts = head.parts
            else:
                if not head.done():
                    break
                if head.cancelled():
                    logger.error(
                        "%s: request handler was cancelled; closing the connection",
                        self.connection_id,
                    )
                    return self._request_failed()
                exc = head.exception()
                if exc is not None:
                    logger.error(
                        "%s: request handler failed; closing the connection",
                        self.connection_id,
                        exc_info=exc,
                    )
                    return self._request_failed()
                parts = head.result()
            if parts is None:
                pending.popleft()
                continue
            if not isinstance(parts, (list, tuple)):
                logger.error(
                    "%s: request handler resolved to %s (expected None or a list "
                    "of parts); closing the connection",
                    self.connection_id,
                    type(parts).__name__,
                )
                return self._request_failed()
            if not self._queue(parts):
                return self._request_failed()
            pending.popleft()
        # Flushes, and resumes reading if this made room.
        self._process_frames()

    def _request_failed(self) -> None:
        """The request at the head of the FIFO failed: the responses queued
        before it still go out, nothing after it is answered, then close."""
        self._discard_pending(cancel=False)
        self.close_when_drained()

    def _discard_pending(self, cancel: bool) -> None:
        # Emptied in place: _process_frames holds the deque in a local.
        pending = list(self._pending)
        self._pending.clear()
        for item in pending:
            if type(item) is not _Ready:
                item.remove_done_callback(self._on_response_done)
                if cancel:
                    item.cancel()
                item.add_done_callback(_consume_outcome)

    def _flush(self) -> None:
        transport = self.transport
        before = transport.unsent_bytes
        try:
            done = transport.flush()
        except Exception as exc:
            self._send_failed(exc)
            return
        if transport.unsent_bytes != before:
            self.last_activity = self._loop.time()
        if self._timed:
            self._report_sent(done)
        if done:
            if self._writing:
                self._loop.remove_writer(self._fd)
                self._writing = False
        elif not self._writing:
            self._loop.add_writer(self._fd, self._on_writable)
            self._writing = True

    def _send_failed(self, exc: Exception) -> None:
        if isinstance(exc, OSError):
            if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT):
                logger.debug("%s: peer went away while sending (%s)", self.connection_id, exc)
            else:
                logger.warning("%s: send failed: %s", self.connection_id, exc)
        else:
            logger.error(
                "%s: send failed; closing the connection", self.connection_id, exc_info=exc
            )
        self.close()

    def _on_writable(self) -> None:
        try:
            self._flush()
            if self._closed:
                return
            if not self._reading and not self._over_limits():
                # Below the bounds again: cut the frames backpressure held
                # back and resume reading, while the rest still drains.
                self._process_frames()
            elif self._draining:
                self._maybe_finish_drain()
        except Exception as exc:
            self._fail(exc)

    # ----------------------------------------------------------------- closing

    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, ssl.SSLError):
            # Kafka logs "Failed authentication with <host> (SSL handshake
            # failed)"; a scanner or a plaintext client makes one per connection.
            self.server.warnings.warning(
                "failed authentication",
                "Failed authentication with /%s (SSL handshake failed: %s)",
                self.peer[0],
                exc.reason or exc.__class__.__name__,
            )
        elif isinstance(exc, InvalidReceiveException):
            # Kafka logs this at WARN and closes the channel without answering;
            # one per garbage connection, so at a bounded rate.
            self.server.warnings.warning(
                "invalid receive", "%s: %s; closing the connection", self.connection_id, exc
            )
        elif isinstance(exc, OSError):
            logger.debug("%s: connection error: %s", self.connection_id, exc)
        else:
            logger.error(
                "%s: unexpected error; closing the connection", self.connection_id, exc_info=exc
            )
        self.close()

    def close_when_drained(self) -> None:
        """Take no new requests; close once the requests in flight are
        answered and every queued byte is sent (shutdown, failed requests).

        A handler may call it and still return a response: Kafka's "send
        this error, then close" (e.g. a failed SASL authentication)."""
        if self._closed:
            return
        self._draining = True
        self._set_reading(False)
        # Not now: a handler calling this has not returned its response yet.
        self._loop.call_soon(self._finish_drain)

    def _finish_drain(self) -> None:
        if self._closed:
            return
        if self.transport.has_unsent and not self._writing:
            self._flush()
        self._maybe_finish_drain()

    def _maybe_finish_drain(self) -> None:
        if (
            self._draining
            and not self._closed
            and not self._pending
            and not self.transport.has_unsent
        ):
            self.close()

    def close(self, cancel_pending: bool = False) -> None:
        """Close now: unsent responses are dropped (their buffers and file
        regions released). Requests still being handled finish unobserved,
        or are cancelled if ``cancel_pending``."""
        if self._closed:
            return
        self._closed = True
        if self._throttle_handle is not None:
            self._throttle_handle.cancel()
            self._throttle_handle = None
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False
        self._discard_pending(cancel_pending)
        self._timed.clear()
        self.transport.close()
        try:
            self._sock.close()
        except OSError:
            pass
        self.server._connection_closed(self)
        if self._closed_future is not None and not self._closed_future.done():
            self._closed_future.set_result(None)


class SocketServer:
    """Listens on (host, port) and runs one Connection per client.

        server = SocketServer(handler, "127.0.0.1", 9092)
        await server.start()
        ...
        await server.shutdown(timeout=30.0)

    ``port=0`` binds an ephemeral port; ``server.port`` is the bound one.
    """

    def __init__(
        self,
        handler: Handler,
        host: str = "0.0.0.0",
        port: int = 0,
        *,
        listener_name: str = "PLAINTEXT",
        socket_request_max_bytes: int = SOCKET_REQUEST_MAX_BYTES,
        connections_max_idle_ms: int = CONNECTIONS_MAX_IDLE_MS,
        socket_send_buffer_bytes: int = SOCKET_SEND_BUFFER_BYTES,
        socket_receive_buffer_bytes: int = SOCKET_RECEIVE_BUFFER_BYTES,
        socket_listen_backlog_size: int = SOCKET_LISTEN_BACKLOG_SIZE,
        max_connections: int = MAX_CONNECTIONS,
        max_connections_per_ip: int = MAX_CONNECTIONS_PER_IP,
        max_queued_send_bytes: int = MAX_QUEUED_SEND_BYTES,
        max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS,
        transport_factory: TransportFactory = _plaintext_transport,
        connection_setup: Callable[[Connection], None] | None = None,
    ):
        if not 0 <= socket_request_max_bytes <= INT32_MAX:
            raise ValueError("socket.request.max.bytes must be in [0, 2147483647]")
        if connections_max_idle_ms <= 0:
            raise ValueError("connections.max.idle.ms must be > 0")
        if max_in_flight_requests < 1:
            raise ValueError("max_in_flight_requests must be >= 1")
        self._handler = handler
        self.host = host
        self.listener_name = listener_name
        self._requested_port = port
        self.socket_request_max_bytes = socket_request_max_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.socket_send_buffer_bytes = socket_send_buffer_bytes
        self.socket_receive_buffer_bytes = socket_receive_buffer_bytes
        self.socket_listen_backlog_size = socket_listen_backlog_size
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_queued_send_bytes = max_queued_send_bytes
        self.max_in_flight_requests = max_in_flight_requests
        self._transport_factory = transport_factory
        self._connection_setup = connection_setup
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: socket.socket | None = None
        self._connections: dict[Connection, None] = {}  # insertion-ordered set
        self._connections_per_ip: collections.Counter[str] = collections.Counter()
        self._accepting = False
        self._index = itertools.count()
        self._accepted = 0
        self._closed_count = 0
        self._totals = _Totals()
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._shutting_down = False
        self._held = False
        self._all_closed: asyncio.Future[None] | None = None
        # Per-connection warnings (garbage received, accept failures).
        self.warnings = RateLimitedLogger(logger)
        # Called with the connection_id of every connection closed.
        self.disconnect_listeners: list[Callable[[str], None]] = []
        # The broker's per-IP connection_creation_rate quotas (a
        # ConnectionCreationQuotas), None on servers without them; sockets
        # over the quota wait here, unserved, until closed after their
        # throttle time (Kafka's throttledSockets).
        self.connection_quotas: ConnectionCreationQuotas | None = None
        self._throttled_sockets: dict[socket.socket, asyncio.TimerHandle] = {}
        # The broker's max.connection.creation.rate limits (a
        # ConnectionRateQuotas), None on servers without them. Over the
        # rate, the connection just accepted waits here and nothing more is
        # accepted until its throttle time has passed (Kafka's acceptor
        # blocked in waitForConnectionSlot).
        self.connection_rate: ConnectionRateQuotas | None = None
        self._rate_wait: tuple[socket.socket, Peer, asyncio.TimerHandle] | None = None

    def _started_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the server runs on, for what happens only once started."""
        if self._loop is None:
            raise RuntimeError("SocketServer is not started")
        return self._loop

    @classmethod
    def from_config(
        cls, handler: Handler, config: KafkaConfig, host: str, port: int, **overrides: Any
    ) -> SocketServer:
        """A server for one listener (pass ``listener_name=``), with the
        socket.*, max.connections* and connections.max.idle.ms properties of
        ``config``."""
        settings = {arg: config[name] for arg, name in _PROPERTIES.items()}
        settings.update(overrides)
        return cls(handler, host, port, **settings)

    # ------------------------------------------------------------------- start

    async def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("SocketServer already started")
        self._loop = asyncio.get_running_loop()
        family, _, _, _, address = socket.getaddrinfo(
            self.host, self._requested_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.socket_receive_buffer_bytes != -1:
                # Set before listen so accepted sockets get it from the start
                # (it bounds the TCP window negotiated in the handshake).
                listener.setsockopt(
                    socket.SOL_SOCKET, socket.SO_RCVBUF, self.socket_receive_buffer_bytes
                )
            listener.bind(address)
            listener.listen(self.socket_listen_backlog_size)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._set_accepting(True)
        self._schedule_sweep()

    async def __aenter__(self) -> SocketServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("SocketServer is not listening")
        port: int = self._listener.getsockname()[1]
        return port

    @property
    def connections(self) -> list[Connection]:
        return list(self._connections)

    # ------------------------------------------------------------------ accept

    def hold_accepting(self) -> None:
        """Bind but take no connections: clients wait in the listen backlog
        until ``release_accepting`` (a cluster's broker before it is in
        service). Closing connections and descriptor back-off do not undo it."""
        self._held = True
        self._set_accepting(False)

    def release_accepting(self) -> None:
        self._held = False
        if not self._shutting_down and len(self._connections) < self.max_connections:
            self._set_accepting(True)

    def _set_accepting(self, on: bool) -> None:
        if on and (self._held or self._rate_wait is not None):
            return
        listener = self._listener
        if on and not self._accepting and listener is not None:
            self._started_loop().add_reader(listener.fileno(), self._on_acceptable)
            self._accepting = True
        elif not on and self._accepting and listener is not None:  # closed after this
            self._started_loop().remove_reader(listener.fileno())
            self._accepting = False

    def _on_acceptable(self) -> None:
        for _ in range(_ACCEPTS_PER_EVENT):
            if self._listener is None:
                return
            if len(self._connections) >= self.max_connections:
                # Like Kafka's acceptor waiting for a connection slot: leave
                # new clients in the listen backlog until one closes.
                self._set_accepting(False)
                return
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # EMFILE/ENFILE/ECONNABORTED...: the listener stays usable.
                self.warnings.warning("accept failed", "accept failed: %s", exc)
                if exc.errno in _RESOURCE_ERRNOS:
                    self._set_accepting(False)
                    self._started_loop().call_later(_ACCEPT_RETRY_DELAY_S, self._resume_accepting)
                return
            rate = self.connection_rate
            if rate is not None and rate.enabled:
                throttle_ms = rate.record_and_get_throttle_time_ms(self.listener_name)
                if throttle_ms > 0:
                    self._set_accepting(False)
                    self._rate_wait = (
                        sock,
                        peer,
                        self._started_loop().call_later(throttle_ms / 1000.0, self._end_rate_wait),
                    )
                    return
            self._admit(sock, peer)

    def _end_rate_wait(self) -> None:
        """The connection creation rate is back within its limit: serve the
        connection that waited, and accept again."""
        if self._rate_wait is None:
            return
        sock, peer, _ = self._rate_wait
        self._rate_wait = None
        self._admit(sock, peer)
        self._resume_accepting()

    def _admit(self, sock: socket.socket, peer: Peer) -> None:
        """An accepted connection: the per-IP rate and count, then served."""
        host = peer[0]
        quotas = self.connection_quotas
        if quotas is not None and quotas.enabled:
            throttle_ms = quotas.record_and_get_throttle_time_ms(host)
            if throttle_ms > 0:
                rate = self.connection_rate
                if rate is not None:
                    rate.unrecord(self.listener_name)
                logger.debug("Delaying closing of connection from %s for %d ms", host, throttle_ms)
                self._throttled_sockets[sock] = self._started_loop().call_later(
                    throttle_ms / 1000.0, self._close_throttled, sock
                )
                return
        if self._connections_per_ip[host] >= self.max_connections_per_ip:
            logger.info(
                "Rejected connection from %s, address already has the configured "
                "maximum of %d connections.",
                host,
                self.max_connections_per_ip,
            )
            sock.close()
            return
        try:
            self._configure(sock)
            transport = self._transport_factory(sock, self.socket_request_max_bytes)
            connection = Connection(self, sock, peer, next(self._index), transport)
            if self._connection_setup is not None:
                self._connection_setup(connection)
        except Exception:
            logger.exception("could not set up the connection from %s", peer)
            sock.close()
            return
        self._connections[connection] = None
        self._connections_per_ip[host] += 1
        self._accepted += 1
        connection._start()

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled_sockets.pop(sock, None)
        sock.close()

    def _resume_accepting(self) -> None:
        if not self._shutting_down and len(self._connections) < self.max_connections:
            self._set_accepting(True)

    def _configure(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self.socket_send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.socket_send_buffer_bytes)
        if self.socket_receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.socket_receive_buffer_bytes)
        no_sigpipe = getattr(socket, "SO_NOSIGPIPE", None)
        if no_sigpipe is not None:  # macOS/BSD: no MSG_NOSIGNAL there
            sock.setsockopt(socket.SOL_SOCKET, no_sigpipe, 1)

    # ------------------------------------------------------------- idle sweep

    def _schedule_sweep(self) -> None:
        # A tenth of the idle timeout (between 10 ms and 10 s): a connection
        # is closed at most ~10% late, for one timer in the whole server.
        interval = min(max(self.connections_max_idle_ms / 10000.0, 0.01), 10.0)
        self._sweep_handle = self._started_loop().call_later(interval, self._sweep_idle)

    def _sweep_idle(self) -> None:
        deadline = self._started_loop().time() - self.connections_max_idle_ms / 1000.0
        for connection in list(self._connections):
            if connection.last_activity < deadline and not connection._pending:
                logger.debug(
                    "%s: idle for more than %d ms; closing",
                    connection.connection_id,
                    self.connections_max_idle_ms,
                )
                connection.close()
        if not self._shutting_down:
            self._schedule_sweep()

    # ---------------------------------------------------------------- metrics

    def metrics(self) -> NetworkMetrics:
        totals = _Totals()
        totals.requests = self._totals.requests
        totals.responses = self._totals.responses
        totals.bytes_received = self._totals.bytes_received
        totals.sendfile_bytes = self._totals.sendfile_bytes
        totals.copied_bytes = self._totals.copied_bytes
        totals.answered_in_c = self._totals.answered_in_c
        for connection in self._connections:
            totals.add(connection.transport)
        return NetworkMetrics(
            connections_accepted=self._accepted,
            connections_closed=self._closed_count,
            active_connections=len(self._connections),
            requests=totals.requests,
            responses=totals.responses,
            bytes_received=totals.bytes_received,
            bytes_sent=totals.sendfile_bytes + totals.copied_bytes,
            sendfile_bytes=totals.sendfile_bytes,
            copied_bytes=totals.copied_bytes,
            answered_in_c=totals.answered_in_c,
        )

    def _connection_closed(self, connection: Connection) -> None:
        if connection in self._connections:
            del self._connections[connection]
            host = connection.peer[0]
            self._connections_per_ip[host] -= 1
            if not self._connections_per_ip[host]:
                del self._connections_per_ip[host]
            self._closed_count += 1
            self._totals.add(connection.transport)
            for listener in self.disconnect_listeners:
                try:
                    listener(connection.connection_id)
                except Exception:
                    logger.exception(
                        "disconnect listener %r failed for %s", listener, connection.connection_id
                    )
            if not self._shutting_down:
                self._set_accepting(True)
        if self._all_closed is not None and not self._connections and not self._all_closed.done():
            self._all_closed.set_result(None)

    # --------------------------------------------------------------- shutdown

    def stop_accepting(self) -> None:
        """Close the listening socket; established connections carry on."""
        if self._listener is not None:
            self._set_accepting(False)
            self._listener.close()
            self._listener = None

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, stop reading new requests, let requests in flight
        finish and their responses flush for up to ``timeout`` seconds, then
        close every connection (cancelling handlers still running)."""
        if self._loop is None:
            return
        self._shutting_down = True
        self.stop_accepting()
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        if self._all_closed is None:
            self._all_closed = self._loop.create_future()
            if not self._connections:
                self._all_closed.set_result(None)
        for sock, handle in self._throttled_sockets.items():
            handle.cancel()
            sock.close()
        self._throttled_sockets.clear()
        if self._rate_wait is not None:
            sock, _, handle = self._rate_wait
            self._rate_wait = None
            handle.cancel()
            sock.close()
        for connection in list(self._connections):
            connection.close_when_drained()
        try:
            await asyncio.wait_for(asyncio.shield(self._all_closed), timeout)
        except TimeoutError:
            logger.warning(
                "shutdown: %d connection(s) still busy after %.1f s; closing them",
                len(self._connections),
                timeout,
            )
        for connection in list(self._connections):
            connection.close(cancel_pending=True)
        self.warnings.flush()
