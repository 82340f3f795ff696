"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714 client
metrics, v0 as Kafka 4.2 serves them. The state and the rules are
kfast.server.client_metrics'; these handlers translate the wire.

Kafka advertises the two APIs only when a client telemetry receiver is
configured; kfast's receiver is its Prometheus endpoint, so they are
registered (and advertised by ApiVersions) only when ``kfast.metrics.port``
turns the endpoint on. Errors are answered in the response's error_code
with throttle_time_ms 0, as Kafka's getErrorResponse does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfast.protocol import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
    api_keys,
)
from kfast.server.apis import KafkaApis, RequestContext

if TYPE_CHECKING:
    from kfast.server.client_metrics import ClientMetricsManager


def _manager(ctx: RequestContext) -> ClientMetricsManager:
    manager: ClientMetricsManager = ctx.broker.client_metrics
    manager.update_subscriptions(ctx.broker.metadata_image.client_metrics_configs)
    return manager


def handle_get_telemetry_subscriptions(
    ctx: RequestContext, request: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    fields = _manager(ctx).get_subscriptions(ctx, request.client_instance_id)
    return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=0, **fields)


def handle_push_telemetry(
    ctx: RequestContext, request: PushTelemetryRequest
) -> PushTelemetryResponse:
    _manager(ctx).push(ctx, request)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=0)


def register(apis: KafkaApis) -> None:
    if apis.broker.config["kfast.metrics.port"] < 0:
        return
    apis.register(
        api_keys.BY_NAME["GetTelemetrySubscriptions"].key, handle_get_telemetry_subscriptions
    )
    apis.register(api_keys.BY_NAME["PushTelemetry"].key, handle_push_telemetry)
