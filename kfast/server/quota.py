"""Client quotas on the broker (Kafka's ClientQuotaManager with its
DefaultQuotaCallback, and ClientRequestQuotaManager).

One ClientQuotaManager per quota type: producer_byte_rate (bytes of
Produce requests), consumer_byte_rate (bytes of Fetch responses to
consumers) and request_percentage (handler time as a percentage of one
thread). Its limits come from the metadata image's client quotas (the
``update`` call of the metadata publisher); a type with no quota set
anywhere is disabled, and a disabled manager costs its callers one
attribute check.

Which quota applies to a (user, client-id) and which clients share a rate
are KIP-55's precedence, as the DefaultQuotaCallback resolves them. The
sensor a request is counted in is named by metric tags (user, client-id),
"" for a part the quota does not distinguish:

    1. /users/<user>/clients/<client-id>     tags (user, client-id)
    2. /users/<user>/clients/<default>       tags (user, client-id)
    3. /users/<user>                         tags (user, "")
    4. /users/<default>/clients/<client-id>  tags (user, client-id)
    5. /users/<default>/clients/<default>    tags (user, client-id)
    6. /users/<default>                      tags (user, "")
    7. /clients/<client-id>                  tags ("", client-id)
    8. /clients/<default>                    tags ("", client-id)

the first entity in that order that has a quota of any kind picks the tags
(Kafka keeps one callback per type, so "has a quota" means of this type);
the limit is then looked up for the tags: both parts set -- 1, 2, 4, 5;
the user only -- 3, 6; the client-id only -- 7, 8. The user is the
principal's name (ANONYMOUS for unauthenticated connections, which user
quotas therefore cover too).

Rates are Kafka's Rate over ``quota.window.num`` samples of
``quota.window.size.seconds``: the recorded sum divided by the time since
the oldest sample began, but never less than ``num - 1`` whole windows
(so a new client's first burst is measured over the whole window, not over
its first millisecond). A value is recorded, then the rate measured; above
the limit the throttle time is the time that brings the rate back to the
limit if nothing more were recorded, round((rate - limit) / limit x window
size) (QuotaUtils.throttleTime); request_percentage's is capped at one
window (ClientRequestQuotaManager).

Where each is counted: Produce's request size when its appends are done
(produce_apis); a consumer's Fetch response record bytes, taken back when
the response is throttled and sent empty (fetch_apis); the synchronous
handler time of every request but the inter-broker ones and followers'
fetches (KafkaApis). The response carries the largest throttle time and the
connection is muted for it (KafkaApis._throttle).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import QuotaEntity
from kfast.metrics.broker_stats import QuotaStats
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import QUOTA_ENTITY_CLIENT_ID, QUOTA_ENTITY_IP, QUOTA_ENTITY_USER
from kfast.server.replication_quota import SampledRate

if TYPE_CHECKING:
    from kfast.protocol.schema import Message
    from kfast.server.apis import RequestContext

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# Kafka's quota sensor type of each (kafka.server:type=Produce|Fetch|Request).
SENSOR_TYPES = {PRODUCE: "Produce", FETCH: "Fetch", REQUEST: "Request"}
CONNECTION_CREATION = "connection_creation_rate"
CONTROLLER_MUTATION = "controller_mutation_rate"
# An entity part: absent (None), the default entity, or a name.
DEFAULT_ENTITY = "<default>"
# A client's sensor is dropped after this long unused (Kafka's
# ClientQuotaManager.InactiveSensorExpirationTimeSeconds), looked for at
# most once per SENSOR_SWEEP_MS; resolved (user, client id) pairs are
# forgotten past RESOLVED_MAX, so neither grows with every client ever seen.
SENSOR_EXPIRATION_MS = 3600 * 1000
SENSOR_SWEEP_MS = 60 * 1000
RESOLVED_MAX = 10_000
# Handler nanoseconds as a percentage of one second (Kafka's
# ClientQuotaManager.NanosToPercentagePerSecond).
NANOS_TO_PERCENTAGE = 100.0 / 1e9

# A client quota's key: (user part, client-id part), each None (absent),
# DEFAULT_ENTITY or a name.
QuotaKey = tuple[str | None, str | None]


class _Expirable(Protocol):
    last_used_ms: int


_Sensor = TypeVar("_Sensor", bound=_Expirable)
_SensorKey = TypeVar("_SensorKey")


class QuotaRate(SampledRate):
    """Kafka's Rate: SampledRate whose window is at least ``num_samples - 1``
    whole windows plus the elapsed part of the current one."""

    last_used_ms = 0  # the client's last request (sensor expiration)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_ms
        if full_windows < self.num_samples - 1:
            elapsed += (self.num_samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)


def live_sensor(
    sensors: dict[_SensorKey, _Sensor],
    last_sweep_ms: int,
    key: _SensorKey,
    now_ms: int,
    make: Callable[[], _Sensor],
) -> tuple[_Sensor, dict[_SensorKey, _Sensor], int]:
    """The sensor of ``key`` in ``sensors`` (a Rate, a token bucket), made by
    ``make`` if new and marked used now; a new one first drops sensors
    unused for SENSOR_EXPIRATION_MS (at most once per SENSOR_SWEEP_MS).
    Returns (sensor, sensors, last sweep)."""
    sensor = sensors.get(key)
    if sensor is None:
        if now_ms - last_sweep_ms >= SENSOR_SWEEP_MS:
            last_sweep_ms = now_ms
            sensors = {
                k: s for k, s in sensors.items() if now_ms - s.last_used_ms < SENSOR_EXPIRATION_MS
            }
        sensor = sensors[key] = make()
    sensor.last_used_ms = now_ms
    return sensor, sensors, last_sweep_ms


def quota_entity(entity: QuotaEntity) -> QuotaKey | None:
    """An image entity ((type, name or None), ...) as the callback's key
    (user part, client-id part): None absent, DEFAULT_ENTITY the default.
    None for entities no client quota applies to (IP entities)."""
    parts = dict(entity)
    if set(parts) - {QUOTA_ENTITY_USER, QUOTA_ENTITY_CLIENT_ID}:
        return None

    def part(entity_type: str) -> str | None:
        if entity_type not in parts:
            return None
        return DEFAULT_ENTITY if parts[entity_type] is None else parts[entity_type]

    return part(QUOTA_ENTITY_USER), part(QUOTA_ENTITY_CLIENT_ID)


def metric_tags(overrides: Mapping[QuotaKey, float], user: str, client_id: str) -> tuple[str, str]:
    """KIP-55's sensor tags (user, client-id) for a request (see the module
    docstring): the DefaultQuotaCallback's quotaMetricTags."""
    if (user, client_id) in overrides or (user, DEFAULT_ENTITY) in overrides:
        return user, client_id
    if (user, None) in overrides:
        return user, ""
    if (DEFAULT_ENTITY, client_id) in overrides or (DEFAULT_ENTITY, DEFAULT_ENTITY) in overrides:
        return user, client_id
    if (DEFAULT_ENTITY, None) in overrides:
        return user, ""
    return "", client_id


def quota_limit(overrides: Mapping[QuotaKey, float], tags: tuple[str, str]) -> float | None:
    """The limit for a sensor's tags, None if none applies (the
    DefaultQuotaCallback's quotaLimit)."""
    user, client_id = tags
    order: tuple[QuotaKey, ...]
    if user and client_id:
        order = (
            (user, client_id),
            (user, DEFAULT_ENTITY),
            (DEFAULT_ENTITY, client_id),
            (DEFAULT_ENTITY, DEFAULT_ENTITY),
        )
    elif user:
        order = ((user, None), (DEFAULT_ENTITY, None))
    elif client_id:
        order = ((None, client_id), (None, DEFAULT_ENTITY))
    else:
        return None
    for key in order:
        limit = overrides.get(key)
        if limit is not None:
            return limit
    return None


def java_round(value: float) -> int:
    return int(math.floor(value + 0.5))


class ClientQuotaManager:
    def __init__(
        self,
        quota_type: str,
        num_samples: int,
        window_seconds: int,
        clock_ms: Callable[[], int] | None = None,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.num_samples = num_samples
        self.window_seconds = window_seconds
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.max_throttle_ms = max_throttle_ms
        self.overrides: dict[QuotaKey, float] = {}
        self.enabled = False
        # The broker's QuotaStats (its throttle-time sensors), when it has one.
        self.throttle_stats: QuotaStats | None = None
        self._sensors: dict[tuple[str, str], QuotaRate] = {}
        self._last_sweep_ms = 0
        # (user, client id) -> (tags, limit); cleared when the quotas change.
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}

    def update(self, overrides: Mapping[QuotaKey, float]) -> None:
        """The quotas of this type in force, {(user part, client part): value}.
        Rates already recorded keep counting against the new limits."""
        self.overrides = dict(overrides)
        self.enabled = bool(self.overrides)
        self._resolved.clear()

    def resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        key = (user, client_id)
        resolved = self._resolved.get(key)
        if resolved is None:
            if len(self._resolved) >= RESOLVED_MAX:
                self._resolved.clear()
            tags = metric_tags(self.overrides, user, client_id)
            resolved = self._resolved[key] = (tags, quota_limit(self.overrides, tags))
        return resolved

    def _sensor(self, tags: tuple[str, str], now_ms: int) -> QuotaRate:
        sensor, self._sensors, self._last_sweep_ms = live_sensor(
            self._sensors,
            self._last_sweep_ms,
            tags,
            now_ms,
            lambda: QuotaRate(self.num_samples, self.window_seconds * 1000),
        )
        return sensor

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str | None, value: float, now_ms: int | None = None
    ) -> int:
        """Count ``value`` for the client; the throttle time in ms its quota
        asks for now (0 within quota or without one)."""
        if not self.enabled:
            return 0
        now_ms = self.clock_ms() if now_ms is None else now_ms
        tags, limit = self.resolve(user, client_id or "")
        sensor = self._sensor(tags, now_ms)
        sensor.record(value, now_ms)
        if limit is None:
            return 0
        rate = sensor.measure(now_ms)
        if rate <= limit:
            return 0
        throttle = java_round((rate - limit) / limit * sensor.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        if throttle > 0 and self.throttle_stats is not None:
            # The quota entity's throttle-time sensor, tagged as its rate is.
            self.throttle_stats.record_throttle(
                SENSOR_TYPES.get(self.quota_type, self.quota_type), tags[0], tags[1], throttle
            )
        return throttle

    def unrecord(
        self, user: str, client_id: str | None, value: float, now_ms: int | None = None
    ) -> None:
        """Take back a recorded value (a throttled fetch sends no records)."""
        if self.enabled:
            now_ms = self.clock_ms() if now_ms is None else now_ms
            self._sensor(self.resolve(user, client_id or "")[0], now_ms).record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str | None) -> float:
        """The most a client can be given at once without being sure to be
        throttled: limit x (samples - 1) x window (a fetch's byte cap)."""
        if not self.enabled:
            return math.inf
        limit = self.resolve(user, client_id or "")[1]
        if limit is None:
            return math.inf
        return limit * (self.num_samples - 1) * self.window_seconds


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): tokens refill at the quota's rate up to
    a burst of (samples - 1) x window x rate; a new bucket starts full.
    Recording takes tokens, which may go below zero."""

    def __init__(self, num_samples: int, window_seconds: int) -> None:
        self.burst_seconds = (num_samples - 1) * window_seconds
        self.tokens: float | None = None
        self.last_ms = 0
        self.last_used_ms = 0  # the client's last request (sensor expiration)

    def _refill(self, rate: float, now_ms: int) -> tuple[float, float]:
        """(burst, tokens) after refilling up to now."""
        burst = self.burst_seconds * rate
        if self.tokens is None:
            tokens = burst
        else:
            tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.tokens = tokens
        self.last_ms = now_ms
        return burst, tokens

    def measure(self, rate: float, now_ms: int) -> float:
        return self._refill(rate, now_ms)[1]

    def record(self, value: float, rate: float, now_ms: int) -> None:
        burst, tokens = self._refill(rate, now_ms)
        self.tokens = min(burst, tokens - value)


class ControllerMutationQuota:
    """One request's view of its client's controller_mutation_rate (Kafka's
    Strict- and PermissiveControllerMutationQuota). Strict (CreateTopics
    v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused with
    THROTTLING_QUOTA_EXCEEDED while the bucket is below zero, else its
    partitions are taken even if that goes below zero. Permissive (older
    versions): everything is taken, only the throttle time is set. The
    throttle time is the time the bucket needs to refill to zero,
    round(-tokens / rate x 1000)."""

    def __init__(
        self, bucket: TokenBucket, rate: float, strict: bool, clock_ms: Callable[[], int]
    ) -> None:
        self.bucket, self.rate, self.strict, self.clock_ms = bucket, rate, strict, clock_ms
        self.throttle_time_ms = 0

    def _throttle(self, tokens: float) -> None:
        self.throttle_time_ms = max(self.throttle_time_ms, java_round(-tokens / self.rate * 1000))

    def record(self, permits: float) -> None:
        """Take ``permits`` (partitions created or deleted); strict:
        ThrottlingQuotaExceededException when the bucket is already empty."""
        now = self.clock_ms()
        tokens = self.bucket.measure(self.rate, now)
        if self.strict and tokens < 0:
            self._throttle(tokens)
            raise errors.ThrottlingQuotaExceededException("The throttling quota has been exceeded.")
        self.bucket.record(permits, self.rate, now)
        tokens = self.bucket.measure(self.rate, now)
        if not self.strict and tokens < 0:
            self._throttle(tokens)

    def refund(self, permits: float) -> None:
        """Give back what a topic the controller then refused had taken."""
        self.bucket.record(-permits, self.rate, self.clock_ms())


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: partitions created or deleted per second,
    per KIP-55 entity, in token buckets."""

    def __init__(
        self, num_samples: int, window_seconds: int, clock_ms: Callable[[], int] | None = None
    ) -> None:
        super().__init__(CONTROLLER_MUTATION, num_samples, window_seconds, clock_ms)
        # Expired like the Rates of the other quota types (Kafka keeps the
        # bucket in a sensor with the same inactive-sensor expiration).
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._last_bucket_sweep_ms = 0

    def new_quota(
        self, user: str, client_id: str | None, strict: bool
    ) -> ControllerMutationQuota | None:
        """The request's quota, None when none applies to the client."""
        if not self.enabled:
            return None
        tags, limit = self.resolve(user, client_id or "")
        if limit is None:
            return None
        bucket, self._buckets, self._last_bucket_sweep_ms = live_sensor(
            self._buckets,
            self._last_bucket_sweep_ms,
            tags,
            self.clock_ms(),
            lambda: TokenBucket(self.num_samples, self.window_seconds),
        )
        return ControllerMutationQuota(bucket, limit, strict, self.clock_ms)


def controller_mutation_quota(
    ctx: RequestContext, strict_since_version: int
) -> ControllerMutationQuota | None:
    """The controller mutation quota of an admin request's client, None
    without one (or on a node with no client quotas)."""
    quotas: ClientQuotas | None = getattr(ctx.broker, "quotas", None)
    if quotas is None or not quotas.controller_mutation.enabled:
        return None
    return quotas.controller_mutation.new_quota(
        ctx.principal.name, ctx.client_id, ctx.api_version >= strict_since_version
    )


def take_mutation_quota(
    ctx: RequestContext, quota: ControllerMutationQuota | None, items: list[tuple[str, int]]
) -> dict[str, errors.KafkaError]:
    """Take each topic's partitions from the request's controller mutation
    quota in request order; {topic: THROTTLING_QUOTA_EXCEEDED} for the ones
    it refuses. The response carries the throttle time."""
    refused: dict[str, errors.KafkaError] = {}
    if quota is None:
        return refused
    for name, permits in items:
        try:
            quota.record(permits)
        except errors.KafkaError as exc:
            refused[name] = exc
    throttle_response(ctx, quota.throttle_time_ms)
    return refused


def refund_mutation_quota(
    quota: ControllerMutationQuota | None,
    items: list[tuple[str, int]],
    failed: Container[str],
) -> None:
    """Give back the partitions of topics the controller then refused (Kafka
    takes them only for topics that pass validation)."""
    if quota is not None:
        for name, permits in items:
            if name in failed:
                quota.refund(permits)


def ip_entity(entity: QuotaEntity) -> str | None:
    """An image entity's IP part: the address, DEFAULT_ENTITY for the
    default IP entity; None when it is not an IP entity."""
    parts = dict(entity)
    if set(parts) != {QUOTA_ENTITY_IP}:
        return None
    return DEFAULT_ENTITY if parts[QUOTA_ENTITY_IP] is None else parts[QUOTA_ENTITY_IP]


class ConnectionCreationQuotas:
    """connection_creation_rate per IP (KIP-612, Kafka's ConnectionQuotas
    recordIpConnectionMaybeThrottle): each accepted connection from an IP
    with a quota (its own, else the default IP entity's) is recorded in the
    IP's Rate; when the rate then exceeds the quota the connection is taken
    back out of the rate and the listener closes it, unserved, after the
    throttle time -- round((rate - quota) / quota x window), at most one
    window (quota.window.size.seconds). Without any IP quota: disabled."""

    def __init__(
        self, num_samples: int, window_seconds: int, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self.num_samples = num_samples
        self.window_ms = window_seconds * 1000
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.overrides: dict[str, int] = {}
        self.enabled = False
        self._sensors: dict[str, QuotaRate] = {}
        self._last_sweep_ms = 0

    def update(self, overrides: Mapping[str, int]) -> None:
        """{ip or DEFAULT_ENTITY: connections per second}. Rates already
        recorded keep counting against the new limits."""
        self.overrides = dict(overrides)
        self.enabled = bool(self.overrides)

    def record_and_get_throttle_time_ms(self, ip: str, now_ms: int | None = None) -> int:
        """Count a new connection from ``ip``; the time in ms after which
        to close it, 0 to serve it."""
        if not self.enabled:
            return 0
        limit = self.overrides.get(ip, self.overrides.get(DEFAULT_ENTITY))
        if limit is None:
            return 0
        now_ms = self.clock_ms() if now_ms is None else now_ms
        sensor, self._sensors, self._last_sweep_ms = live_sensor(
            self._sensors,
            self._last_sweep_ms,
            ip,
            now_ms,
            lambda: QuotaRate(self.num_samples, self.window_ms),
        )
        sensor.record(1.0, now_ms)
        rate = sensor.measure(now_ms)
        if rate <= limit:
            return 0
        throttle = java_round((rate - limit) / limit * sensor.window_size_ms(now_ms))
        sensor.record(-1.0, now_ms)  # not accepted: it does not count
        return max(min(throttle, self.window_ms), 0)


class ClientQuotas:
    """The broker's quota managers (``broker.quotas``)."""

    def __init__(self, config: KafkaConfig, clock_ms: Callable[[], int] | None = None) -> None:
        samples, seconds = config["quota.window.num"], config["quota.window.size.seconds"]
        self.produce = ClientQuotaManager(PRODUCE, samples, seconds, clock_ms)
        self.fetch = ClientQuotaManager(FETCH, samples, seconds, clock_ms)
        self.request = ClientQuotaManager(
            REQUEST, samples, seconds, clock_ms, max_throttle_ms=seconds * 1000
        )
        self.controller_mutation = ControllerMutationQuotaManager(
            config["controller.quota.window.num"],
            config["controller.quota.window.size.seconds"],
            clock_ms,
        )
        self.connection_creation = ConnectionCreationQuotas(samples, seconds, clock_ms)
        self._image_quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None

    def update(self, client_quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The image's client quotas (entity -> {key: value}); a no-op when
        they did not change."""
        if client_quotas == self._image_quotas:
            return
        self._image_quotas = client_quotas
        by_type: dict[str, dict[QuotaKey, float]] = {
            PRODUCE: {},
            FETCH: {},
            REQUEST: {},
            CONTROLLER_MUTATION: {},
        }
        per_ip: dict[str, int] = {}
        for entity, values in client_quotas.items():
            ip = ip_entity(entity)
            if ip is not None and CONNECTION_CREATION in values:
                per_ip[ip] = int(values[CONNECTION_CREATION])
            key = quota_entity(entity)
            if key is None:
                continue
            for quota_type, value in values.items():
                if quota_type in by_type:
                    by_type[quota_type][key] = value
        self.produce.update(by_type[PRODUCE])
        self.fetch.update(by_type[FETCH])
        self.request.update(by_type[REQUEST])
        self.controller_mutation.update(by_type[CONTROLLER_MUTATION])
        self.connection_creation.update(per_ip)


# Requests no request_percentage quota applies to: the handshake APIs, and
# what brokers and controllers send each other (Kafka answers those with
# sendResponseExemptThrottle; a follower's Fetch is checked below).
_EXEMPT_APIS = frozenset(
    api_keys.BY_NAME[name].key
    for name in (
        "ApiVersions",
        "SaslHandshake",
        "SaslAuthenticate",
        "WriteTxnMarkers",
        "Envelope",
        "BrokerRegistration",
        "BrokerHeartbeat",
        "AlterPartition",
        "AllocateProducerIds",
        "Vote",
        "BeginQuorumEpoch",
        "EndQuorumEpoch",
        "DescribeQuorum",
        "FetchSnapshot",
        "UpdateRaftVoter",
    )
    if name in api_keys.BY_NAME
)
_FETCH = api_keys.BY_NAME["Fetch"].key


def request_quota_exempt(api_key: int, api_version: int, request: Message) -> bool:
    """True for a request request_percentage never throttles: inter-broker
    APIs, and a follower's Fetch (replication is never client-throttled)."""
    if api_key in _EXEMPT_APIS:
        return True
    if api_key == _FETCH:
        from kfast.protocol import FetchRequest
        from kfast.server.fetch_apis import _replica_id  # (fetch_apis imports this module)

        # Always true for a Fetch key's body; it says so to the type checker.
        return isinstance(request, FetchRequest) and _replica_id(request, api_version) >= 0
    return False


def throttle_response(ctx: RequestContext, throttle_time_ms: int) -> None:
    """Answer with ``throttle_time_ms`` and mute the channel for that long
    (KIP-219): the response goes out at once, the next request is read
    after the throttle time. A longer throttle already set on the request
    stays."""
    if throttle_time_ms > ctx.throttle_time_ms:
        ctx.throttle_time_ms = throttle_time_ms
