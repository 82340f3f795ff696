"""One TCP connection to one Kafka broker: framing, correlation, versions.

    connection = await BrokerConnection.open("127.0.0.1", 9092)
    response = await connection.send(MetadataRequest(topics=None))
    await connection.close()

``send`` takes a request body (a ``kfast.protocol`` ``<Api>Request``
instance, or a dict with ``api_key=`` given), picks the version (the newest
both sides support, from the ApiVersions exchange done by ``connect``) unless
``version=`` is given, assigns the correlation id and returns the decoded
response body. Any number of requests may be in flight at once; Kafka answers
requests on one connection in the order they were sent, but responses are
matched by correlation id all the same, so a broker that broke that rule
would be caught (a response whose id matches nothing closes the connection).

Failures: a request that gets no answer within ``request_timeout`` raises
``errors.TimeoutException`` (REQUEST_TIMED_OUT), and the connection is
closed, because a later answer could no longer be matched to a caller who
still waits; a lost connection fails every request in flight with
``errors.NetworkException``. Neither inspects the response's error codes:
that is the caller's business (the response body is returned as decoded).

``BlockingConnection`` wraps the same thing for command-line tools that run
no event loop of their own.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import random
import struct

from kfast.protocol import api_keys, decode_response, encode_request, errors, request_class
from kfast.protocol.api_keys import API_VERSIONS, PRODUCE
from kfast.protocol.api_keys import api_key as lookup_api
from kfast.protocol.constants import INT32_MAX

__all__ = ["BrokerConnection", "BlockingConnection", "api_key_of", "DEFAULT_CLIENT_ID"]

DEFAULT_CLIENT_ID = "kfast"
DEFAULT_REQUEST_TIMEOUT = 30.0
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_UNSUPPORTED_VERSION = errors.UnsupportedVersionException.code
# The largest frame a broker may send us; fetch responses are bounded by the
# fetch max bytes the client asked for, so this only guards against garbage.
MAX_RESPONSE_SIZE = 1 << 30


def api_key_of(body) -> int:
    """The API key of a request body instance (ProduceRequest -> 0)."""
    name = type(body).__name__
    if not name.endswith("Request"):
        raise TypeError(f"not a request body: {type(body).__qualname__}")
    return api_keys.BY_NAME[name[: -len("Request")]].key


class BrokerConnection:
    """An asyncio connection to one broker (works on uvloop and asyncio)."""

    def __init__(
        self,
        client_id: str | None = DEFAULT_CLIENT_ID,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        security=None,
    ):
        self.client_id = client_id
        self.request_timeout = request_timeout
        # kfast.client.security.ClientSecurity: TLS and SASL (None: PLAINTEXT).
        self.security = security
        self.host: str | None = None
        self.port: int | None = None
        # api_key -> (min_version, max_version) the broker advertised.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._correlation_ids = itertools.count(1)
        # correlation id -> (future, api key, version), in send order.
        self._in_flight: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._closed_error: Exception | None = None
        # KIP-368: loop time at which to log in again (None: the session
        # does not expire), and the login under way, which other senders await.
        self._reauthenticate_at: float | None = None
        self._reauthentication: asyncio.Future | None = None

    @classmethod
    async def open(cls, host: str, port: int, negotiate: bool = True, **kwargs) -> BrokerConnection:
        connection = cls(**kwargs)
        await connection.connect(host, port, negotiate)
        return connection

    # ---- lifecycle ------------------------------------------------------------------

    async def connect(self, host: str, port: int, negotiate: bool = True) -> None:
        """Open the TCP connection (TLS when ``security`` says so) and (by
        default) learn the broker's versions; then authenticate (SASL)."""
        self.host, self.port = host, port
        security = self.security
        tls = (
            {}
            if security is None or security.ssl_context is None
            else {
                "ssl": security.ssl_context,
                "server_hostname": host if security.ssl_context.check_hostname else None,
            }
        )
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, **tls), self.request_timeout
            )
        except (TimeoutError, OSError) as exc:
            raise errors.NetworkException(f"cannot connect to {host}:{port}: {exc}") from exc
        self._closed_error = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_responses(reader))
        try:
            if negotiate:
                await self.negotiate_versions()
            if security is not None:
                self._schedule_reauthentication(await security.authenticate(self))
        except BaseException:
            await self.close()
            raise

    # ---- re-authentication (KIP-368) -----------------------------------------------

    def _schedule_reauthentication(self, session_lifetime_ms: int) -> None:
        """Log in again at 85-95% of the session the broker granted, at
        random as Kafka's client does (so a broker's sessions do not all
        renew at once): a request sent on an expired session makes the
        broker close the connection."""
        self._reauthenticate_at = (
            None
            if session_lifetime_ms <= 0
            else asyncio.get_running_loop().time()
            + session_lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        )

    async def _before_send(self) -> None:
        """Hold a request while the connection logs in again, and start that
        login when it is due."""
        if _REAUTHENTICATING.get() is self:
            return  # the login's own requests
        while True:
            pending = self._reauthentication
            if pending is not None:
                await asyncio.shield(pending)
                continue
            due = self._reauthenticate_at
            if due is None or asyncio.get_running_loop().time() < due:
                return
            await self._reauthenticate()

    async def _reauthenticate(self) -> None:
        """SaslHandshake + SaslAuthenticate again on this connection, once
        the requests already sent are answered (Kafka's client sends nothing
        else meanwhile); a failed login closes the connection with its error."""
        assert self.security is not None
        done = self._reauthentication = asyncio.get_running_loop().create_future()
        token = _REAUTHENTICATING.set(self)
        try:
            in_flight = [future for future, _, _ in self._in_flight.values()]
            if in_flight:
                await asyncio.wait(in_flight)
            self._schedule_reauthentication(await self.security.authenticate(self))
        except Exception as exc:
            raise self._shut(exc) from exc
        finally:
            _REAUTHENTICATING.reset(token)
            self._reauthentication = None
            done.set_result(None)

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_error is None

    async def close(self) -> None:
        self._fail_in_flight(errors.NetworkException("connection closed by the client"))
        writer, self._writer = self._writer, None
        task, self._read_task = self._read_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, ConnectionError):
                pass

    async def __aenter__(self) -> BrokerConnection:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # ---- versions -------------------------------------------------------------------

    async def negotiate_versions(self) -> None:
        """ApiVersions at our newest version; a broker that does not know it
        answers UNSUPPORTED_VERSION with its own range for ApiVersions at v0
        (KIP-511), and we ask again at the newest version it named."""
        ours = lookup_api(API_VERSIONS).max_stable_version
        request = request_class(API_VERSIONS)(
            client_software_name="kfast", client_software_version=_kfast_version()
        )
        response = await self.send(request, version=ours)
        if response.error_code == errors.UnsupportedVersionException.code:
            theirs = {entry.api_key: entry.max_version for entry in response.api_keys}
            retry = min(ours, theirs.get(API_VERSIONS, 0))
            response = await self.send(request, version=retry)
        if response.error_code:
            raise errors.for_code(response.error_code)(
                f"ApiVersions failed at {self.host}:{self.port}"
            )
        self.broker_versions = {
            entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys
        }

    def version_for(
        self, key: int, max_version: int | None = None, min_version: int | None = None
    ) -> int:
        """The newest version of ``key`` both sides support (optionally capped
        by the caller); UnsupportedVersionException when the ranges miss."""
        api = lookup_api(key)
        low, high = api.min_version, api.max_stable_version
        if key == PRODUCE:
            low = max(low, 3)  # record batches (magic 2) start at Produce v3
        if max_version is not None:
            high = min(high, max_version)
        if min_version is not None:
            low = max(low, min_version)
        if self.broker_versions:
            if key not in self.broker_versions:
                raise errors.UnsupportedVersionException(
                    f"broker {self.host}:{self.port} does not support {api.name}"
                )
            broker_low, broker_high = self.broker_versions[key]
            low, high = max(low, broker_low), min(high, broker_high)
        if low > high:
            raise errors.UnsupportedVersionException(
                f"no common version of {api.name} with broker {self.host}:{self.port}"
            )
        return high

    # ---- requests -------------------------------------------------------------------

    async def send(
        self,
        body,
        api_key: int | None = None,
        version: int | None = None,
        expect_response: bool = True,
        timeout: float | None = None,
    ):
        """Send one request and wait for its response body.

        ``expect_response=False`` is for Produce with acks=0, which Kafka
        never answers: the call returns None once the bytes are queued."""
        if self._writer is None or self._closed_error is not None:
            raise errors.NetworkException(
                f"not connected to {self.host}:{self.port}"
                if self._closed_error is None
                else str(self._closed_error)
            )
        if self._reauthenticate_at is not None or self._reauthentication is not None:
            await self._before_send()
            if self._writer is None or self._closed_error is not None:
                raise errors.NetworkException(str(self._closed_error or "connection closed"))
        key = api_key_of(body) if api_key is None else api_key
        if version is None:
            version = self.version_for(key)
        correlation_id = next(self._correlation_ids) & INT32_MAX
        frame = encode_request(key, version, correlation_id, self.client_id, body)
        if not expect_response:
            self._write(frame)
            await self._writer.drain()
            return None
        future = asyncio.get_running_loop().create_future()
        self._in_flight[correlation_id] = (future, key, version)
        try:
            self._write(frame)
            await self._writer.drain()
            return await asyncio.wait_for(
                asyncio.shield(future), self.request_timeout if timeout is None else timeout
            )
        except TimeoutError:
            self._in_flight.pop(correlation_id, None)
            error = errors.TimeoutException(
                f"{lookup_api(key).name} v{version} to {self.host}:{self.port} timed out"
            )
            self._shut(error)
            raise error from None
        except (OSError, ConnectionError) as exc:
            raise self._shut(
                errors.NetworkException(f"connection to {self.host}:{self.port} lost: {exc}")
            ) from exc
        finally:
            # A caller that gives up (cancellation) leaves its entry: the
            # reader drops the answer when it comes, and the connection lives on.
            if not future.done():
                future.cancel()

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > MAX_RESPONSE_SIZE:
                    raise errors.CorruptRecordException(f"response frame of {size} bytes")
                frame = await reader.readexactly(size)
                correlation_id = _CORRELATION.unpack_from(frame)[0]
                entry = self._in_flight.pop(correlation_id, None)
                if entry is None:
                    raise errors.NetworkException(
                        f"{self.host}:{self.port} answered unknown correlation id {correlation_id}"
                    )
                future, key, version = entry
                if future.done():  # the caller gave up (cancelled) meanwhile
                    continue
                if (
                    key == API_VERSIONS
                    and len(frame) >= 6
                    and _ERROR_CODE.unpack_from(frame, 4)[0] == _UNSUPPORTED_VERSION
                ):
                    # KIP-511: a broker that does not know our ApiVersions
                    # version answers in v0's layout, whatever we asked for.
                    version = 0
                try:
                    _, body = decode_response(key, version, frame)
                except Exception as exc:  # a malformed answer fails only its caller
                    future.set_exception(exc)
                else:
                    future.set_result(body)
        except asyncio.CancelledError:
            raise
        except asyncio.IncompleteReadError:
            self._shut(errors.NetworkException(f"{self.host}:{self.port} closed the connection"))
        except (OSError, ConnectionError) as exc:
            self._shut(
                errors.NetworkException(f"connection to {self.host}:{self.port} lost: {exc}")
            )
        except errors.KafkaError as exc:
            self._shut(exc)
        except Exception as exc:  # never leave callers waiting on a dead reader
            self._shut(
                errors.NetworkException(f"reading from {self.host}:{self.port} failed: {exc!r}")
            )

    def _write(self, frame: bytes) -> None:
        """Queue ``frame``; a transport the peer has already closed fails as
        a lost connection. (uvloop raises RuntimeError for a write to a
        closed handle, asyncio's transports drop it silently: either way the
        reader has seen, or will see, the connection end.)"""
        assert self._writer is not None
        try:
            self._writer.write(frame)
        except RuntimeError as exc:
            raise self._shut(
                errors.NetworkException(f"connection to {self.host}:{self.port} lost: {exc}")
            ) from exc

    def _shut(self, error: Exception) -> Exception:
        """Mark the connection dead with ``error`` and fail everything in flight;
        return the error it is closed with (the first one, if already dead)."""
        if self._closed_error is None:
            self._closed_error = error
        closed = self._closed_error
        self._fail_in_flight(error)
        if self._writer is not None:
            self._writer.close()
        return closed

    def _fail_in_flight(self, error: Exception) -> None:
        in_flight, self._in_flight = self._in_flight, {}
        for future, _, _ in in_flight.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a caller that gave up logs nothing


#: The connection whose re-authentication the current task is running: its
#: own SaslHandshake / SaslAuthenticate requests pass the gate in ``send``.
_REAUTHENTICATING: contextvars.ContextVar[BrokerConnection | None] = contextvars.ContextVar(
    "kfast_client_reauthenticating", default=None
)


def _kfast_version() -> str:
    try:
        from kfast import __version__

        return str(__version__)
    except ImportError:
        return "0"


class BlockingConnection:
    """A BrokerConnection driven by a private event loop, for synchronous
    callers (command-line tools). Not for use inside a running event loop."""

    def __init__(self, host: str, port: int, **kwargs):
        self._loop = asyncio.new_event_loop()
        self._connection = BrokerConnection(**kwargs)
        try:
            self._loop.run_until_complete(self._connection.connect(host, port))
        except BaseException:
            self._loop.close()
            raise

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        return self._connection.broker_versions

    def version_for(
        self, key: int, max_version: int | None = None, min_version: int | None = None
    ) -> int:
        return self._connection.version_for(key, max_version, min_version)

    def send(
        self,
        body,
        api_key: int | None = None,
        version: int | None = None,
        timeout: float | None = None,
    ):
        return self._loop.run_until_complete(
            self._connection.send(body, api_key, version, timeout=timeout)
        )

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._connection.close())
            self._loop.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
