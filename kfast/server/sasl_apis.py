"""SaslHandshake and SaslAuthenticate where no SASL exchange is expected:
on a PLAINTEXT or SSL listener, or a SaslAuthenticate after authentication
(Kafka's KafkaApis.handleSaslHandshakeRequest / handleSaslAuthenticateRequest).
A SASL listener's connections send these to their authenticator first
(kfast.server.sasl_authenticator); what reaches KafkaApis is out of place.
"""

from __future__ import annotations

from kfast.protocol import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    api_keys,
    errors,
)
from kfast.server.apis import ApiRegistry, RequestContext


def handle_sasl_handshake(
    ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=errors.IllegalSaslStateException.code, mechanisms=[])


def handle_sasl_authenticate(
    ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=errors.IllegalSaslStateException.code,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


def register(apis: ApiRegistry) -> None:
    apis.register(api_keys.BY_NAME["SaslHandshake"].key, handle_sasl_handshake)
    apis.register(api_keys.BY_NAME["SaslAuthenticate"].key, handle_sasl_authenticate)
