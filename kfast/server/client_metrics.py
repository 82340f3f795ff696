"""ClientMetricsManager (KIP-714): client instances, their subscriptions,
the push-interval rules, and the metrics clients pushed (Kafka's
ClientMetricsManager and ClientMetricsInstance; the receiver plugin is the
Prometheus endpoint, which shows the latest pushed values).

Subscriptions are the CLIENT_METRICS config resources of the metadata
image. A client instance gets the union of the metrics of every
subscription whose match patterns it satisfies (``*`` if one of them asks
for all) and the smallest of their push intervals; the subscription id is
a CRC32C of that set and interval XOR the instance id's hash, so a change
of subscriptions gives the client a new id and its next push with the old
one UNKNOWN_SUBSCRIPTION_ID, after which it asks again.

Timing, as Kafka: GetTelemetrySubscriptions sooner than one push interval
after the last request answers THROTTLING_QUOTA_EXCEEDED, unless the last
push was refused with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE
(the client is told to ask again);
PushTelemetry is accepted right after a GetTelemetrySubscriptions, else
once a push interval has passed since the last push, and a terminating
push is accepted early -- after it nothing more is (INVALID_REQUEST). An
instance not heard from for max(60 s, 3 push intervals) is forgotten with
its metrics.

Closed connections, as Kafka's ClientMetricsManager: the connection an
instance was created on (or re-evaluated on, after a subscription change)
is remembered, and when it closes the instance is forgotten with its
metrics (``connection_closed``, a SocketServer disconnect listener).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kfast import compression
from kfast._ext.crc32c import crc32c
from kfast.metrics import subscriptions
from kfast.metrics.otlp import TEMPORALITY_DELTA, MetricPoint, OtlpDecodeError, decode_metrics_data
from kfast.protocol import errors
from kfast.storage.meta_properties import uuid_base64

if TYPE_CHECKING:
    from kfast.protocol import PushTelemetryRequest
    from kfast.server.apis import RequestContext

# A stored point's key: (name, kind, attributes).
PointKey = tuple[str, str, tuple[tuple[str, str], ...]]
# A point for the Prometheus endpoint: (name, kind, labels, value, count, monotonic).
TelemetryPoint = tuple[str, str, tuple[tuple[str, str], ...], float, int, bool]

logger = logging.getLogger(__name__)

# Kafka's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES, in its order.
ACCEPTED_COMPRESSION_TYPES = (
    compression.COMPRESSION_ZSTD,
    compression.COMPRESSION_LZ4,
    compression.COMPRESSION_GZIP,
    compression.COMPRESSION_SNAPPY,
)
CACHE_EXPIRY_MS = 60_000
# Uuid.RESERVED: the zero id and the metadata topic's id (0...01).
_RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
_ASK_AGAIN = (errors.UnknownSubscriptionIdException, errors.UnsupportedCompressionTypeException)
# Decompressed pushes are bounded too (a small compressed push must not
# inflate without limit): this many times telemetry.max.bytes.
_MAX_INFLATION = 16


def _java_uuid_hash(instance_id: uuid.UUID) -> int:
    """org.apache.kafka.common.Uuid.hashCode()."""
    bits = instance_id.int
    h = (bits >> 64) ^ (bits & 0xFFFFFFFFFFFFFFFF)
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    value = crc32c(text.encode()) ^ _java_uuid_hash(instance_id)
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientInstance:
    __slots__ = (
        "instance_id",
        "attributes",
        "subscription_version",
        "subscription_id",
        "metrics",
        "push_interval_ms",
        "last_get_ms",
        "last_push_ms",
        "last_seen_ms",
        "terminating",
        "last_error",
        "points",
    )

    def __init__(
        self,
        instance_id: uuid.UUID,
        attributes: dict[str, str | None],
        version: int,
        metrics: list[str],
        interval_ms: int,
        now_ms: int,
    ) -> None:
        self.instance_id = instance_id
        self.attributes = attributes
        self.subscription_version = version
        self.metrics = metrics
        self.push_interval_ms = interval_ms
        self.subscription_id = subscription_id(metrics, interval_ms, instance_id)
        self.last_get_ms = self.last_push_ms = 0
        self.last_seen_ms = now_ms
        self.terminating = False
        self.last_error: type[errors.KafkaError] | None = None  # of the last push
        # (name, kind, attributes) -> [value, count, monotonic]
        self.points: dict[PointKey, list[Any]] = {}

    def may_get(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        # Right after GetTelemetrySubscriptions a push may come early: the
        # client jitters its interval between 0.5 and 1.5 times.
        if (
            self.last_get_ms > self.last_push_ms
            or now_ms - self.last_push_ms >= self.push_interval_ms
        ):
            self.last_push_ms = now_ms
            return True
        return False

    def record(self, points: Iterable[MetricPoint]) -> None:
        stored = self.points
        for point in points:
            key = (point.name, point.kind, point.attributes)
            entry = stored.get(key)
            accumulate = point.temporality == TEMPORALITY_DELTA and point.kind != "gauge"
            if entry is None or not accumulate:
                stored[key] = [point.value, point.count, point.monotonic]
            else:
                entry[0] += point.value
                entry[1] += point.count


class ClientMetricsManager:
    def __init__(self, telemetry_max_bytes: int, time_ms: Callable[[], int] | None = None) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.time_ms = time_ms or (lambda: int(time.time() * 1000))
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        self.subscriptions: dict[str, subscriptions.Subscription] = {}
        self.version = 0
        self._configs: Mapping[str, Mapping[str, str]] | None = None
        # connection_id -> the instance created on it (Kafka's clientConnectionIdMap).
        self.connections: dict[str, uuid.UUID] = {}

    # -- subscriptions ---------------------------------------------------------------------
    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The CLIENT_METRICS resources of the current metadata image; a
        change re-evaluates every instance at its next request."""
        if configs == self._configs:
            return
        parsed = {}
        for name, values in configs.items():
            try:
                parsed[name] = subscriptions.parse(name, values)
            except errors.KafkaError as exc:  # validated on write; an old log may differ
                logger.warning("ignoring client metrics subscription %s: %s", name, exc)
        self.subscriptions = parsed
        self._configs = {name: dict(values) for name, values in configs.items()}
        self.version += 1

    def _evaluate(self, attributes: Mapping[str, str | None]) -> tuple[list[str], int]:
        metrics: set[str] = set()
        interval = subscriptions.DEFAULT_INTERVAL_MS
        everything = False
        for subscription in self.subscriptions.values():
            if subscriptions.matches(subscription, attributes):
                everything = (
                    everything or subscriptions.ALL_SUBSCRIBED_METRICS in subscription.metrics
                )
                metrics.update(m for m in subscription.metrics if m)
                interval = min(interval, subscription.interval_ms)
        if everything:
            return [subscriptions.ALL_SUBSCRIBED_METRICS], interval
        return sorted(metrics), interval

    def _instance(self, instance_id: uuid.UUID, ctx: RequestContext, now_ms: int) -> ClientInstance:
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_version < self.version:
            if instance is not None:
                attributes = instance.attributes
            else:
                connection = ctx.connection
                software = getattr(connection, "client_software", (None, None))
                peer = ctx.client_address
                # Ids as Kafka's Uuid.toString() writes them (base64url),
                # the form clients report and match patterns use.
                attributes = {
                    "client_instance_id": uuid_base64(instance_id),
                    "client_id": ctx.client_id,
                    "client_software_name": software[0],
                    "client_software_version": software[1],
                    "client_source_address": peer[0] if peer else None,
                    "client_source_port": str(peer[1]) if peer else None,
                }
            metrics, interval = self._evaluate(attributes)
            replaced = instance
            instance = ClientInstance(
                instance_id, attributes, self.version, metrics, interval, now_ms
            )
            if replaced is not None:
                instance.points = replaced.points
            self.instances[instance_id] = instance
            connection_id = getattr(ctx.connection, "connection_id", None)
            if connection_id is not None:
                self.connections[connection_id] = instance_id
        instance.last_seen_ms = now_ms
        return instance

    def expire(self, now_ms: int) -> None:
        expired = {
            i
            for i, instance in self.instances.items()
            if now_ms - instance.last_seen_ms > max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        }
        if not expired:
            return
        for instance_id in expired:
            del self.instances[instance_id]
        self.connections = {c: i for c, i in self.connections.items() if i not in expired}

    def connection_closed(self, connection_id: str) -> None:
        """The instance created on ``connection_id`` is forgotten with what
        it pushed (Kafka's ClientConnectionDisconnectListener)."""
        instance_id = self.connections.pop(connection_id, None)
        if instance_id is not None:
            self.instances.pop(instance_id, None)

    # -- the two APIs ----------------------------------------------------------------------
    def get_subscriptions(
        self, ctx: RequestContext, client_instance_id: uuid.UUID | None
    ) -> dict[str, Any]:
        """GetTelemetrySubscriptions' response fields; raises the KafkaError
        to answer instead."""
        now = self.time_ms()
        self.expire(now)
        if client_instance_id is None or client_instance_id.int == 0:
            client_instance_id = uuid.uuid4()
            while client_instance_id in self.instances:
                client_instance_id = uuid.uuid4()
        instance = self._instance(client_instance_id, ctx, now)
        # After a push refused for its subscription id or its compression
        # the client asks again at once, and is answered (KIP-714).
        if not instance.may_get(now) and instance.last_error not in _ASK_AGAIN:
            raise errors.ThrottlingQuotaExceededException(
                f"Request from the client [{client_instance_id}] arrived before the next push "
                f"interval time"
            )
        instance.last_error = None
        return dict(
            client_instance_id=client_instance_id,
            subscription_id=instance.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
            push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=self.telemetry_max_bytes,
            delta_temporality=True,
            requested_metrics=list(instance.metrics),
        )

    def push(self, ctx: RequestContext, request: PushTelemetryRequest) -> None:
        """PushTelemetry; raises the KafkaError to answer."""
        instance_id = request.client_instance_id
        if instance_id is None or instance_id in _RESERVED_IDS:
            raise errors.InvalidRequestException(
                f"Invalid request from the client [{instance_id}], invalid client instance id"
            )
        now = self.time_ms()
        instance = self._instance(instance_id, ctx, now)
        try:
            self._validate_push(instance, request, now)
        except errors.KafkaError as exc:
            instance.last_error = type(exc)
            raise
        finally:
            instance.terminating = request.terminating
        instance.last_error = None
        payload = request.metrics
        if payload:
            try:
                data = compression.decompress(
                    request.compression_type,
                    payload,
                    max_output=self.telemetry_max_bytes * _MAX_INFLATION,
                )
                instance.record(decode_metrics_data(data))
            except (OtlpDecodeError, errors.KafkaError) as exc:
                logger.debug("telemetry push from %s not decoded: %s", instance_id, exc)
                raise errors.InvalidRecordException(str(exc)) from None

    def _validate_push(
        self, instance: ClientInstance, request: PushTelemetryRequest, now: int
    ) -> None:
        instance_id = request.client_instance_id
        if instance.terminating:
            raise errors.InvalidRequestException(
                f"Client [{instance_id}] sent the previous request with state terminating to "
                f"TRUE, can not accept any requests after that"
            )
        if not instance.may_push(now) and not request.terminating:
            raise errors.ThrottlingQuotaExceededException(
                f"Request from the client [{instance_id}] arrived before the next push "
                f"interval time"
            )
        if request.subscription_id != instance.subscription_id:
            raise errors.UnknownSubscriptionIdException(
                f"Unknown client subscription id for the client [{instance_id}]"
            )
        if request.compression_type not in compression.CODEC_NAMES:
            raise errors.UnsupportedCompressionTypeException(
                f"Unknown compression type [{request.compression_type}] is received in "
                f"telemetry request from [{instance_id}]"
            )
        if request.metrics is not None and len(request.metrics) > self.telemetry_max_bytes:
            raise errors.TelemetryTooLargeException(
                f"Telemetry request from [{instance_id}] is larger than the maximum allowed "
                f"size [{self.telemetry_max_bytes}]"
            )

    # -- for the Prometheus endpoint ---------------------------------------------------------
    def snapshot(self) -> list[TelemetryPoint]:
        """(name, kind, labels, value, count, monotonic) per stored point,
        labels the instance's identity then the point's attributes."""
        self.expire(self.time_ms())
        out: list[TelemetryPoint] = []
        for instance in self.instances.values():
            identity = (
                ("client_instance_id", instance.attributes["client_instance_id"] or ""),
                ("client_id", instance.attributes.get("client_id") or ""),
                ("client_software_name", instance.attributes.get("client_software_name") or ""),
            )
            for (name, kind, attributes), (value, count, monotonic) in instance.points.items():
                out.append((name, kind, identity + attributes, value, count, monotonic))
        return out
