"""Envelope (58), on the controller listener: Kafka's
ControllerApis.handleEnvelopeRequest (KIP-590).

A broker that is not the active controller forwards a client's admin
request (controller_channel.FORWARDED_APIS) wrapped in an Envelope with the
client's principal (DefaultKafkaPrincipalBuilder's serialization) and IP
address. The active controller runs the inner request's handler as that
client, so ACLs apply to the client and not to the forwarding broker, and
answers with the inner response's header and body:

* the forwarding connection needs CLUSTER_ACTION on the cluster
  (CLUSTER_AUTHORIZATION_FAILED);
* a controller that is not active answers NOT_CONTROLLER (the broker tries
  the next one);
* a principal that does not deserialize: PRINCIPAL_DESERIALIZATION_FAILURE;
  an address that is not 4 or 16 bytes, an inner request that does not
  parse or is not forwardable: INVALID_REQUEST.
"""

from __future__ import annotations

import socket

from kfast.protocol import EnvelopeRequest, EnvelopeResponse, api_keys, errors
from kfast.protocol.constants import ACL_OPERATION_CLUSTER_ACTION
from kfast.security.principal import deserialize_principal
from kfast.server.apis import ApiRegistry, KafkaApis, RequestContext
from kfast.server.controller_channel import FORWARDED_APIS


def client_host(address: bytes) -> str:
    """The client's address as text: InvalidRequestException unless 4 or 16 bytes."""
    if len(address) == 4:
        return socket.inet_ntop(socket.AF_INET, address)
    if len(address) == 16:
        return socket.inet_ntop(socket.AF_INET6, address)
    raise errors.InvalidRequestException(f"Invalid client address of {len(address)} bytes")


async def handle_envelope(ctx: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    controller = ctx.broker.controller
    if controller is None or not controller.is_active:
        return EnvelopeResponse(error_code=errors.NotControllerException.code)
    try:
        principal = deserialize_principal(bytes(request.request_principal or b""))
    except ValueError:
        return EnvelopeResponse(error_code=errors.PrincipalDeserializationException.code)
    host = client_host(bytes(request.client_host_address))
    apis: KafkaApis = ctx.broker.apis
    data = await apis.handle_enveloped(
        ctx, bytes(request.request_data), principal, host, FORWARDED_APIS
    )
    return EnvelopeResponse(response_data=data, error_code=0)


def _error_response(
    ctx: RequestContext, request: EnvelopeRequest, error: errors.KafkaError
) -> EnvelopeResponse:
    return EnvelopeResponse(error_code=error.code)


def register(apis: ApiRegistry) -> None:
    apis.register(api_keys.BY_NAME["Envelope"].key, handle_envelope, error_response=_error_response)
