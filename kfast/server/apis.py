"""KafkaApis: turn request frames into handler calls and handler results into
response frames (Kafka's KafkaApis + the request-parsing half of its
SocketServer Processor).

Handler contract (what every ``*_apis.py`` module and other helpers' modules
such as ``admin_apis.py`` code against)
-------------------------------------------------------------------------

Registration::

    def register(apis: ApiRegistry) -> None:   # a KafkaApis, or a wrapper of one
        apis.register(api_keys.BY_NAME["CreateTopics"].key, handle_create_topics)

    def handle_create_topics(
        ctx: RequestContext, request: CreateTopicsRequest
    ) -> CreateTopicsResponse: ...
    async def handle_create_topics(...) -> CreateTopicsResponse: ...   # also fine

  The handler modules are type-checked with mypy's strict flags: the request
  and response classes' fields come from the generated stub
  (kfast.protocol.message_classes), and ``register`` checks that a handler
  and its ``error_response`` take the same request class.

* ``request`` is the decoded body (``kfast.protocol`` message object) of any
  version in the API's range; ``ctx.api_version`` says which. Record fields
  of Produce requests are memoryviews into the receive buffer.
* The handler returns the response body (a message object or dict of
  fields), an awaitable of one, or ``None`` for "no response" (Produce with
  acks=0). KafkaApis encodes it at the request's version with the right
  response header; record fields may hold ``FileRegion``s (sent with
  sendfile).
* A handler that raises a ``kfast.protocol.errors.KafkaError`` gets Kafka's
  generic error response: the builder given as ``register(...,
  error_response=fn)`` (``fn(ctx, request, error) -> body``), else the
  response class with its top-level ``error_code`` set, for APIs that have
  one. Without either the connection is closed (logged). Any other exception
  is logged and answered the same way with UNKNOWN_SERVER_ERROR.
* ``ctx.close_connection()`` closes the connection once earlier responses
  are sent (Kafka's closeConnection, e.g. a failed acks=0 produce).
* Handlers run on the broker's event loop. Work that must happen in request
  order (appending a producer's batches) belongs before the first await.

``RequestContext`` attributes: ``header`` (``kfast.protocol.RequestHeader``),
``api_key``, ``api_version``, ``correlation_id``, ``client_id``,
``client_address`` (host, port), ``listener_name``, ``connection``,
``broker`` (the KafkaBroker: ``.config``, ``.controller``, ``.log_manager``,
``.replica_manager``, ``.metadata_image`` (current MetadataImage), ``.timer``,
``.node_id``, ``.cluster_id``).

Dispatch rules, as Kafka's broker applies them
----------------------------------------------
* An unknown API key, an API this broker does not serve (no handler), or a
  version outside the API's range: Kafka's Processor fails to parse the
  header ("... which is not enabled") and closes the connection without a
  response. ApiVersions is the exception: any version is accepted, and an
  unsupported one is answered in v0 with UNSUPPORTED_VERSION and the
  supported ranges (KIP-511).
* A body that does not parse: Kafka throws InvalidRequestException while
  building the request and closes the connection; so does kfast.
* ApiVersions advertises exactly the APIs with a registered handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import types
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from kfast._ext.request_metrics import RequestTiming
from kfast.metrics.broker_stats import RequestMetrics
from kfast.protocol import (
    RequestHeader,
    api_keys,
    decode_request_body,
    decode_request_header,
    encode_response_parts,
    errors,
    response_class,
)
from kfast.protocol.constants import (
    ACL_RESOURCE_CLUSTER,
    CLUSTER_RESOURCE_NAME,
    authorized_operations,
)
from kfast.security.acl import (
    OPERATION_NAMES,
    SUPPORTED_OPERATIONS,
)
from kfast.security.acl import (
    RESOURCE_TYPE_LOG_NAMES as _RESOURCE_TYPE_LOG_NAMES,
)
from kfast.security.principal import ANONYMOUS, KafkaPrincipal
from kfast.server.futures import then
from kfast.server.network import TimedResponse
from kfast.server.quota import NANOS_TO_PERCENTAGE, request_quota_exempt, throttle_response
from kfast.server.rate_limited_log import RateLimitedLogger

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from kfast.protocol import ApiVersionsRequest, ApiVersionsResponse
    from kfast.protocol.api_keys import ApiKey
    from kfast.protocol.file_region import FileRegion
    from kfast.protocol.schema import Message
    from kfast.security.authorizer import StandardAuthorizer
    from kfast.server.network import Connection, Peer
    from kfast.server.quota import ClientQuotaManager

__all__ = [
    "KafkaApis",
    "RequestContext",
    "Handler",
    "ErrorResponseBuilder",
    "ApiRegistry",
    "ResponseBody",
    "HandlerResult",
    "ResponseParts",
    "Answer",
    "FrameHandler",
]

logger = logging.getLogger(__name__)
# Kafka's authorizer audit log: allowed checks at DEBUG, denied ones at INFO,
# the denials rate-limited (a client retrying a refused call would flood it).
_AUDIT_LOG = logging.getLogger("kafka.authorizer.logger")
_AUDIT_DENIALS = RateLimitedLogger(_AUDIT_LOG)

# A response body: a message object, or a dict of its fields (values of
# every field type, hence Any).
ResponseBody: TypeAlias = "Message | dict[str, Any]"
# What a handler returns: the body, an awaitable of it, or None (no response).
HandlerResult: TypeAlias = "ResponseBody | Awaitable[ResponseBody | None] | None"
# The request parameter is Any here: each handler takes its own API's message
# class, which a table of handlers of every API cannot name; ``register``
# checks a handler against its error response builder.
_Request = TypeVar("_Request")
# A handler of requests of type _Request, and its error response builder.
_HandlerOf: TypeAlias = Callable[["RequestContext", _Request], HandlerResult]
_ErrorResponseOf: TypeAlias = Callable[
    ["RequestContext", _Request, errors.KafkaError], ResponseBody
]
Handler = _HandlerOf[Any]
ErrorResponseBuilder = _ErrorResponseOf[Any]
# A response's parts after the size prefix, as encode_response_parts gives them.
ResponseParts: TypeAlias = "list[bytes | memoryview | FileRegion]"
# What the network layer gets for one request (a network.Response): the
# parts, timed until sent, or None for no response.
Answer: TypeAlias = "ResponseParts | TimedResponse | None"
# A fast path of one API (``register_frame_handler``): the frame in, the
# response parts (or an awaitable of them) out, or None to leave the request
# to the API's handler -- having done nothing.
FrameHandler: TypeAlias = "Callable[[RequestContext, memoryview | bytearray], ResponseParts | Awaitable[ResponseParts] | None]"


class ApiRegistry(Protocol):
    """Where handler modules' ``register(apis)`` put their handlers: a
    ``KafkaApis``, or a wrapper that keeps some of them (the controller's)."""

    def register(
        self,
        api_key: int,
        handler: _HandlerOf[_Request],
        error_response: _ErrorResponseOf[_Request] | None = None,
    ) -> None: ...


# KIP-511: ApiVersions v3+ names the client software; Kafka rejects names and
# versions outside this pattern with INVALID_REQUEST.
_CoroutineType = types.CoroutineType
# ApiVersions lists supported feature ranges starting at level 0 from v4 on.
_SUPPORTED_MIN_0_FROM = 4
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _is_awaitable(result: HandlerResult) -> TypeIs[Awaitable[ResponseBody | None]]:
    # Coroutines and futures first: inspect.isawaitable is slow on the
    # common case, a plain message body.
    if type(result) is _CoroutineType or isinstance(result, asyncio.Future):
        return True
    if result is None or hasattr(type(result), "_field_names") or isinstance(result, dict):
        return False
    return inspect.isawaitable(result)


async def _awaited(
    result: Awaitable[ResponseBody | None],
    finish: Callable[[ResponseBody | None], Answer],
    fail: Callable[[Exception], Answer],
) -> Answer:
    """What ``then`` does for an awaitable that is not a future (a handler's
    coroutine)."""
    try:
        body = await result
    except Exception as exc:
        return fail(exc)
    return finish(body)


class RequestContext:
    """One request as a handler sees it."""

    __slots__ = (
        "header",
        "connection",
        "listener_name",
        "broker",
        "request_size",
        "throttle_time_ms",
        "forwarded",
    )

    def __init__(
        self,
        header: RequestHeader,
        connection: Connection | None,
        listener_name: str,
        broker: Any,
        request_size: int = 0,
    ) -> None:
        self.header = header
        self.connection = connection
        self.listener_name = listener_name
        # The KafkaBroker, or the ControllerServer on a controller listener:
        # handler modules serving both listeners use what the two share.
        self.broker = broker
        self.request_size = request_size
        # Set by a quota (kfast.server.quota.throttle_response): the response
        # carries it and the connection is muted for it.
        self.throttle_time_ms = 0
        # (principal, host) of the client whose request a broker forwarded
        # in an Envelope: the request acts as that client, not the broker.
        self.forwarded: tuple[KafkaPrincipal, str] | None = None

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def principal(self) -> KafkaPrincipal:
        """Who the request acts as (the connection's principal; anonymous for
        requests without a connection, as in tests)."""
        if self.forwarded is not None:
            return self.forwarded[0]
        return ANONYMOUS if self.connection is None else self.connection.principal

    @property
    def client_address(self) -> Peer | None:
        if self.forwarded is not None:
            return (self.forwarded[1], 0)
        return None if self.connection is None else self.connection.peer

    # -- authorization (kfast.security.authorizer; every check passes without one) ---------
    @property
    def in_process(self) -> bool:
        """A request this node made to itself (the embedded node's broker to
        its controller over LocalControllerChannel): no peer to authorize --
        it acts as the node, which Kafka operators make a super user."""
        return self.connection is None and self.forwarded is None

    def _authorizer(self) -> StandardAuthorizer | None:
        return None if self.in_process else getattr(self.broker, "authorizer", None)

    def authorize(
        self, operation: int, resource_type: int, name: str, audit_denied: bool = True
    ) -> bool:
        """Whether the principal may perform ``operation`` on the resource.
        ``audit_denied=False``: a filter, whose denials are not audit-logged
        at INFO (Kafka's Action.logIfDenied)."""
        authorizer = self._authorizer()
        if authorizer is None:
            return True
        # A null name (a malformed request) is checked as the empty name.
        host = self._host()
        allowed, rule = authorizer.decide(
            self.principal, host, operation, resource_type, name or ""
        )
        if allowed:
            if _AUDIT_LOG.isEnabledFor(logging.DEBUG):
                _AUDIT_LOG.debug(
                    self._audit_message(True, operation, host, resource_type, name, rule)
                )
        elif audit_denied and _AUDIT_LOG.isEnabledFor(logging.INFO):
            _AUDIT_DENIALS.info(
                "authorization denied",
                self._audit_message(False, operation, host, resource_type, name, rule),
            )
        return allowed

    def _audit_message(
        self,
        allowed: bool,
        operation: int,
        host: str,
        resource_type: int,
        name: str | None,
        rule: str,
    ) -> str:
        """StandardAuthorizerData.buildAuditMessage's line. The resource is
        the one asked about, so its pattern type is LITERAL; every check is
        of one reference (resourceRefCount 1)."""
        api = api_keys.BY_KEY.get(self.api_key)
        return (
            f"Principal = {self.principal} is {'Allowed' if allowed else 'Denied'} "
            f"operation = {OPERATION_NAMES.get(operation, 'UNKNOWN')} from host = {host} "
            f"on resource = {_RESOURCE_TYPE_LOG_NAMES.get(resource_type, 'Unknown')}:"
            f"LITERAL:{name or ''} for request = {api.name if api else self.api_key} "
            f"with resourceRefCount = 1 based on rule {rule}"
        )

    def authorize_cluster(self, operation: int) -> None:
        """Kafka's authorizeClusterOperation: ClusterAuthorizationException
        (the API's error response) unless allowed on the cluster."""
        if not self.authorize(operation, ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME):
            raise errors.ClusterAuthorizationException(f"Request {self!r} is not authorized.")

    def authorize_by_resource_type(self, operation: int, resource_type: int) -> bool:
        authorizer = self._authorizer()
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(
            self.principal, self._host(), operation, resource_type
        )

    def authorized_operations(self, resource_type: int, name: str) -> int:
        """The authorized-operations bitfield of a resource (every supported
        operation without an authorizer, as Kafka)."""
        authorizer = self._authorizer()
        if authorizer is None:
            return authorized_operations(*SUPPORTED_OPERATIONS[resource_type])
        return authorizer.authorized_operations(self.principal, self._host(), resource_type, name)

    def _host(self) -> str:
        peer = self.client_address
        return peer[0] if peer else ""

    def close_connection(self) -> None:
        if self.connection is not None:
            self.connection.close_when_drained()

    def __repr__(self) -> str:
        name = api_keys.BY_KEY[self.api_key].name
        return (
            f"RequestContext({name} v{self.api_version}, correlation_id="
            f"{self.correlation_id}, client_id={self.client_id!r})"
        )


class _Registration:
    """A registered API: its handler, error response builder, and the
    request versions served (fixed once registered: ``low``..``high``)."""

    __slots__ = ("handler", "error_response", "api", "low", "high", "frame_handler")

    def __init__(
        self,
        handler: Handler,
        error_response: ErrorResponseBuilder | None,
        api: ApiKey,
        low: int,
        high: int,
    ):
        self.handler = handler
        self.error_response = error_response
        self.api = api
        self.low = low
        self.high = high
        self.frame_handler: FrameHandler | None = None


class KafkaApis:
    """Request dispatch for one broker. ``network_handler(listener)`` gives
    the callable a ``SocketServer`` takes."""

    def __init__(self, broker: Any, listener_type: str = "broker") -> None:
        self.broker = broker
        self.listener_type = listener_type
        # Kafka's internal unstable.api.versions.enable: the newest version
        # of an API Kafka still calls unstable (InitProducerId v6, KIP-939) is
        # served and advertised only with it.
        config = getattr(broker, "config", None)
        self.unstable_api_versions = bool(
            config is not None and config["unstable.api.versions.enable"]
        )
        self._handlers: dict[int, _Registration] = {}
        self.register(api_keys.API_VERSIONS, self._handle_api_versions)
        # request_percentage quotas (a broker's; a controller's listener has none).
        quotas = getattr(broker, "quotas", None)
        self._request_quota: ClientQuotaManager | None = None if quotas is None else quotas.request
        # One per connection that sends what it cannot parse: bounded rate.
        self.warnings = RateLimitedLogger(logger)
        # Requests and their times per API (the broker passes its own).
        self.request_metrics = RequestMetrics()

    # -- registration ---------------------------------------------------------------
    def register(
        self,
        api_key: int,
        handler: _HandlerOf[_Request],
        error_response: _ErrorResponseOf[_Request] | None = None,
    ) -> None:
        api = api_keys.BY_KEY.get(api_key)
        if api is None:
            raise ValueError(f"unknown API key {api_key}")
        if self.listener_type not in api.listeners:
            raise ValueError(f"{api.name} is not served on {self.listener_type} listeners")
        # Produce is advertised from v0 (KAFKA-18659) and accepted from v0
        # here; ApiVersions answers any version outside its stable range in v0.
        low = 0 if api_key == api_keys.PRODUCE else api.min_version
        high = (
            api.max_stable_version if api_key == api_keys.API_VERSIONS else self._max_version(api)
        )
        self._handlers[api_key] = _Registration(handler, error_response, api, low, high)

    def register_frame_handler(self, api_key: int, frame_handler: FrameHandler) -> None:
        """A fast path for a registered API, tried before its body is decoded
        when no request quota applies and the API is not forwarded (Produce:
        kfast.server.produce_fast). The handler decides what it serves."""
        self._handlers[api_key].frame_handler = frame_handler

    def registered(self) -> list[int]:
        return sorted(self._handlers)

    def supported_versions(self) -> list[tuple[int, int, int]]:
        """(key, min, max) of every API this broker answers (ApiVersions)."""
        return [
            row
            for row in api_keys.supported_versions(self.listener_type, self.unstable_api_versions)
            if row[0] in self._handlers
        ]

    def _max_version(self, api: ApiKey) -> int:
        return api.max_version if self.unstable_api_versions else api.max_stable_version

    # -- dispatch ---------------------------------------------------------------------
    def network_handler(
        self, listener_name: str
    ) -> Callable[[Connection, memoryview], Answer | Awaitable[Answer]]:
        def handle(connection: Connection, frame: memoryview) -> Answer | Awaitable[Answer]:
            return self.handle(connection, frame, listener_name)

        return handle

    def handle(
        self,
        connection: Connection | None,
        frame: memoryview | bytearray,
        listener_name: str = "PLAINTEXT",
    ) -> Answer | Awaitable[Answer]:
        """Parse one frame (a view into the receive buffer; a bytearray from
        the in-process controller channel), run its handler; returns response
        parts, an awaitable of them, or None (no response / connection
        closing)."""
        started = perf_counter()
        # When the frame was fully read (an in-process caller has no queue).
        received = getattr(connection, "received_at", 0.0) or started
        try:
            header = decode_request_header(frame)
        except Exception as exc:  # unknown key, truncated header
            self._close(connection, f"cannot parse the request header: {exc}")
            return None
        api_key = header.api_key
        registration = self._handlers.get(api_key)
        if registration is None:
            self._close(connection, f"received request api key {api_key} which is not enabled")
            return None
        version = header.api_version
        if not registration.low <= version <= registration.high:
            api = registration.api
            if api_key == api_keys.API_VERSIONS:
                # Answered in v0 with the supported ranges (KIP-511).
                return self._unsupported_api_versions(header)
            self._close(
                connection,
                f"received request api key {api.name} with version {version} which is not enabled",
            )
            return None
        ctx = RequestContext(header, connection, listener_name, self.broker, len(frame))
        if registration.frame_handler is not None:
            answer = self._handle_frame(ctx, registration, frame, received, started)
            if answer is not None:
                return answer
        try:
            request = decode_request_body(header, frame)
        except Exception as exc:
            self._close(
                connection,
                f"error getting request for apiKey {registration.api.name}, "
                f"apiVersion {version}: {exc}",
            )
            return None
        forwarder = getattr(self.broker, "forwarder", None)
        if forwarder is not None and forwarder.wants(api_key, request):
            # A cluster's broker: the active controller answers this one.
            return self._finish(
                ctx,
                registration,
                request,
                forwarder.forward(api_key, version, request, ctx),
                received,
                started,
                perf_counter(),
            )
        request_quota = self._request_quota
        if (
            request_quota is not None
            and request_quota.enabled
            and not request_quota_exempt(api_key, version, request)
        ):
            return self._handle_with_request_quota(
                ctx, registration, request, request_quota, received, started
            )
        try:
            result = registration.handler(ctx, request)
        except Exception as exc:
            return self._error(ctx, registration, request, exc)
        if _is_awaitable(result):
            return self._finish(
                ctx, registration, request, result, received, started, perf_counter()
            )
        parts = self._encode(ctx, result)
        handled = perf_counter()
        return self._timed(ctx, parts, received, started, handled, handled)

    def _handle_frame(
        self,
        ctx: RequestContext,
        registration: _Registration,
        frame: memoryview | bytearray,
        received: float,
        started: float,
    ) -> Answer | Awaitable[Answer]:
        """The API's fast path (``register_frame_handler``), when no request
        quota or forwarding applies; None if it left the request to the
        handler."""
        request_quota = self._request_quota
        if request_quota is not None and request_quota.enabled:
            return None
        forwarder = getattr(self.broker, "forwarder", None)
        if forwarder is not None and forwarder.wants(ctx.header.api_key):
            return None
        assert registration.frame_handler is not None
        try:
            result = registration.frame_handler(ctx, frame)
        except Exception as exc:
            # As a handler's failure (no request object: Produce's error
            # answer does not need one).
            return self._error(ctx, registration, None, exc)
        if result is None:
            return None
        handled = perf_counter()
        if type(result) is list:
            return self._timed(ctx, result, received, started, handled, handled)

        def finish(parts: ResponseParts | None) -> Answer:
            return self._timed(ctx, parts, received, started, handled, perf_counter())

        def fail(exc: Exception) -> Answer:
            return self._error(ctx, registration, None, exc)

        if isinstance(result, asyncio.Future):
            # A waiting fetch's future: chained, no task or coroutine (as _finish).
            return then(result, finish, fail)
        return _awaited(result, finish, fail)  # type: ignore[arg-type]

    async def handle_enveloped(
        self,
        ctx: RequestContext,
        frame: bytes,
        principal: KafkaPrincipal,
        host: str,
        forwardable: frozenset[int],
    ) -> bytes:
        """A request a broker forwarded in an Envelope (KIP-590), run as the
        client ``principal`` from ``host``; returns its response's header and
        body. InvalidRequestException if ``frame`` is not a request, at a
        version served here, of an API in ``forwardable``."""
        try:
            header = decode_request_header(frame)
            request = decode_request_body(header, frame)
        except Exception as exc:
            raise errors.InvalidRequestException(
                f"Cannot parse the enveloped request: {exc}"
            ) from None
        registration = self._handlers.get(header.api_key)
        api = api_keys.BY_KEY.get(header.api_key)
        if (
            registration is None
            or api is None
            or header.api_key not in forwardable
            or not api.min_version <= header.api_version <= self._max_version(api)
        ):
            raise errors.InvalidRequestException(
                f"API key {header.api_key} v{header.api_version} cannot be forwarded"
            )
        # No connection: an error must not close the broker's, which carries
        # other clients' requests.
        inner = RequestContext(header, None, ctx.listener_name, self.broker, len(frame))
        inner.forwarded = (principal, host)
        try:
            result = registration.handler(inner, request)
            body = (await result) if _is_awaitable(result) else result
            parts = self._encode(inner, body)
        except Exception as exc:
            parts = self._error(inner, registration, request, exc)
        if parts is None:
            raise errors.UnknownServerException("The enveloped request got no response")
        # Forwardable APIs are admin writes: their responses carry no
        # records, so every part is bytes-like, never a FileRegion.
        return b"".join(bytes(part) for part in parts)  # type: ignore[arg-type]

    def _handle_with_request_quota(
        self,
        ctx: RequestContext,
        registration: _Registration,
        request: Any,
        quota: ClientQuotaManager,
        received: float,
        started: float,
    ) -> Answer | Awaitable[Answer]:
        """Run the handler and count its time against the client's
        request_percentage quota (Kafka's ClientRequestQuotaManager: the
        handler's time on the request thread; here the synchronous part,
        which is the time the event loop spends on it)."""
        start = perf_counter()
        result: HandlerResult = None
        failure: Exception | None = None
        try:
            result = registration.handler(ctx, request)
        except Exception as exc:
            failure = exc
        handled = perf_counter()
        throttle_response(
            ctx,
            quota.record_and_get_throttle_time_ms(
                ctx.principal.name, ctx.client_id, (handled - start) * 1e9 * NANOS_TO_PERCENTAGE
            ),
        )
        if failure is not None:
            return self._error(ctx, registration, request, failure)
        if _is_awaitable(result):
            return self._finish(ctx, registration, request, result, received, started, handled)
        parts = self._encode(ctx, result)
        return self._timed(ctx, parts, received, started, handled, handled)

    def _finish(
        self,
        ctx: RequestContext,
        registration: _Registration,
        request: Any,
        result: Awaitable[ResponseBody | None],
        received: float,
        started: float,
        handled: float,
    ) -> Awaitable[Answer]:
        """The response of a handler that waits. A future (a waiting fetch's)
        is chained by a done callback, without a task and coroutine per
        request (kfast.server.futures); any other awaitable is awaited."""

        def finish(body: ResponseBody | None) -> Answer:
            parts = self._encode(ctx, body)
            return self._timed(ctx, parts, received, started, handled, perf_counter())

        def fail(exc: Exception) -> Answer:
            return self._error(ctx, registration, request, exc)

        if isinstance(result, asyncio.Future):
            return then(result, finish, fail)
        return _awaited(result, finish, fail)

    def _timed(
        self,
        ctx: RequestContext,
        parts: ResponseParts | None,
        received: float,
        started: float,
        handled: float,
        finished: float,
    ) -> Answer:
        """The response, timed until the network layer has sent it
        (RequestMetrics are recorded then, as Kafka records them when the
        send completes); a request with no response, or from an in-process
        caller, is recorded now."""
        header = ctx.header
        if parts is None or ctx.connection is None:
            self.request_metrics.record(
                header.api_key,
                header.api_version,
                received,
                started,
                handled,
                finished,
                finished,
                finished,
            )
            return parts
        timing = RequestTiming(
            self.request_metrics,
            header.api_key,
            header.api_version,
            received,
            started,
            handled,
            finished,
        )
        return TimedResponse(parts, timing)

    def _encode(self, ctx: RequestContext, body: ResponseBody | None) -> ResponseParts | None:
        if ctx.throttle_time_ms:
            self._throttle(ctx, body)
        if body is None:
            return None
        header = ctx.header
        parts = encode_response_parts(
            header.api_key, header.api_version, header.correlation_id, body
        )
        # The network layer writes the size prefix itself.
        return parts[1:]

    @staticmethod
    def _throttle(ctx: RequestContext, body: ResponseBody | None) -> None:
        """A quota was exceeded: throttle_time_ms in the response, and the
        channel muted for that time once the response is queued (KIP-219;
        clients of older versions are held back by the mute alone)."""
        if isinstance(body, dict):
            body["throttle_time_ms"] = ctx.throttle_time_ms
        elif body is not None and "throttle_time_ms" in body._field_names:
            # A field of most APIs' responses, not of Message: set by name.
            setattr(body, "throttle_time_ms", ctx.throttle_time_ms)  # noqa: B010
        if ctx.connection is not None:
            ctx.connection.throttle(ctx.throttle_time_ms)

    def _error(
        self, ctx: RequestContext, registration: _Registration, request: Any, exc: Exception
    ) -> ResponseParts | None:
        if isinstance(exc, errors.KafkaError):
            error = exc
            logger.debug("%r failed: %s", ctx, exc)
        else:
            logger.exception("%r: unexpected error in the handler", ctx)
            error = errors.UnknownServerException(str(exc) or None)
        try:
            if registration.error_response is not None:
                body = registration.error_response(ctx, request, error)
            else:
                cls: type[Message] = response_class(ctx.api_key)
                if "error_code" not in cls._field_names:
                    self._close(ctx.connection, f"{ctx!r}: no error response for {error.name}")
                    return None
                body = cls(error_code=error.code)
            return self._encode(ctx, body)
        except Exception:
            logger.exception("%r: cannot build the error response", ctx)
            self._close(ctx.connection, "error response failed")
            return None

    def _close(self, connection: Connection | None, reason: str) -> None:
        # Kafka's Processor closes the channel on an unparseable request
        # instead of answering; log as it does and answer nothing.
        self.warnings.warning(
            "unparseable request",
            "%s: %s; closing the connection",
            getattr(connection, "connection_id", connection),
            reason,
        )
        if connection is not None:
            connection.close_when_drained()
        return None

    # -- ApiVersions ------------------------------------------------------------------
    def _api_versions_body(self, error_code: int = 0, version: int = 4) -> ApiVersionsResponse:
        from kfast.controller.feature_control import KRAFT_VERSION
        from kfast.protocol import ApiVersionsResponse

        image = getattr(self.broker, "metadata_image", None)
        features = dict(getattr(image, "features", None) or {})
        if image is not None:
            # The Raft log's kraft.version beside the metadata log's levels
            # (Kafka's KRaftMetadataCache.features).
            features[KRAFT_VERSION] = getattr(self.broker, "kraft_version", lambda: 0)()
        return ApiVersionsResponse(
            error_code=error_code,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in self.supported_versions()
            ],
            # Supported ranges come from the controller's feature control (what
            # UpdateFeatures would accept), not from the finalized levels.
            # Below v4 a range starting at 0 is left out: older clients fail
            # to read it (KAFKA-17492).
            supported_features=[
                ApiVersionsResponse.SupportedFeatureKey(
                    name=name, min_version=low, max_version=high
                )
                for name, (low, high) in self.broker.supported_features().items()
                if version >= _SUPPORTED_MIN_0_FROM or low > 0
            ],
            finalized_features_epoch=image.offset if image is not None and features else -1,
            # A feature at level 0 is not finalized (Kafka's createFinalizedFeatureKeys).
            finalized_features=[
                ApiVersionsResponse.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level
                )
                for name, level in features.items()
                if level != 0
            ],
        )

    def _unsupported_api_versions(self, header: RequestHeader) -> ResponseParts:
        body = self._api_versions_body(errors.UnsupportedVersionException.code)
        return encode_response_parts(api_keys.API_VERSIONS, 0, header.correlation_id, body)[1:]

    def _handle_api_versions(
        self, ctx: RequestContext, request: ApiVersionsRequest
    ) -> ApiVersionsResponse:
        if ctx.api_version >= 3:
            name = request.client_software_name
            version = request.client_software_version
            if not (
                _SOFTWARE_PATTERN.fullmatch(name or "")
                and _SOFTWARE_PATTERN.fullmatch(version or "")
            ):
                body = self._api_versions_body(errors.InvalidRequestException.code, ctx.api_version)
                body.api_keys = []
                return body
            if ctx.connection is not None:
                # Kafka's ClientInformation (KIP-714 subscriptions match on it).
                ctx.connection.client_software = (name, version)
        return self._api_versions_body(version=ctx.api_version)
