"""SASL mechanism servers: one state machine per mechanism, fed the client's
tokens by kfast.server.sasl_authenticator (Kafka's SaslServerAuthenticator).

Each server has ``evaluate(token) -> bytes`` (the challenge or final
response), ``complete`` and, once complete, ``authorization_id`` (the user
name the principal is built from) and ``expires_at_ms`` (a credential's own
end, for OAUTHBEARER and SCRAM with a delegation token; None otherwise),
and ``token_authenticated`` (SCRAM with a delegation token: the principal
is the token's owner, marked so). A failed exchange raises
``kfast.protocol.errors.SaslAuthenticationException`` with the message Kafka
sends the client, which names no secret and does not say whether the user
exists.
"""

from __future__ import annotations

from typing import Protocol


class SaslServer(Protocol):
    """A mechanism server, as the module docstring describes it."""

    def evaluate(self, token: bytes) -> bytes: ...
    @property
    def complete(self) -> bool: ...
    @property
    def authorization_id(self) -> str | None: ...
    @property
    def expires_at_ms(self) -> float | None: ...
    @property
    def token_authenticated(self) -> bool: ...


PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"
# What kfast implements, in the order brokers usually list them.
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
