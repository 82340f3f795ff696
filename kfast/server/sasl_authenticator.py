"""SASL on a listener (Kafka's SaslServerAuthenticator): the requests of a
SASL_PLAINTEXT or SASL_SSL connection before it is authenticated, and its
re-authentications (KIP-368).

States of one connection, as Kafka's::

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE --SaslHandshake--> AUTHENTICATE
    HANDSHAKE_OR_VERSIONS --SaslHandshake--> AUTHENTICATE
    AUTHENTICATE --SaslAuthenticate (v1+ handshake) or raw token (v0)--> ... --> COMPLETE
    COMPLETE --SaslHandshake (re-authentication)--> AUTHENTICATE --> COMPLETE

* Before COMPLETE any other request is Kafka's IllegalSaslStateException:
  the connection is closed without an answer (during AUTHENTICATE a v1+
  client gets the request's error response first, as Kafka builds one).
* A mechanism that is not enabled: SaslHandshake answers
  UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes.
* A failed exchange: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED
  with the mechanism's message (which never says whether the user exists),
  after connection.failed.authentication.delay.ms; then the connection
  closes. With a v0 handshake (raw tokens) there is no error frame: it closes.
  Failures are logged at a bounded rate.
* After COMPLETE, requests go to KafkaApis with the connection's principal
  set. The session lifetime (connections.max.reauth.ms, or the token's own
  expiry if sooner) is sent in SaslAuthenticate v1+; a request other than
  SaslHandshake on an expired session closes the connection, as Kafka's
  channel does. A re-authentication must keep the mechanism and principal.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from kfast.protocol import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    api_keys,
    decode_request_body,
    decode_request_header,
    encode_response_parts,
    errors,
)
from kfast.security.delegation_token import token_scram_credential
from kfast.security.listener import ListenerSecurity
from kfast.security.principal import USER_TYPE, KafkaPrincipal
from kfast.security.sasl import OAUTHBEARER, PLAIN, SaslServer
from kfast.security.sasl.oauthbearer import OAuthBearerServer
from kfast.security.sasl.plain import PlainServer, plain_users
from kfast.security.sasl.scram import ScramServer
from kfast.security.scram import MECHANISMS
from kfast.server.rate_limited_log import RateLimitedLogger

if TYPE_CHECKING:
    from kfast.protocol import RequestHeader
    from kfast.protocol.schema import Message
    from kfast.security.scram import ScramCredential
    from kfast.server.apis import KafkaApis
    from kfast.server.broker import KafkaBroker
    from kfast.server.controller_server import ControllerServer
    from kfast.server.network import Connection, Part, Response

    # What a frame gets: response parts, an awaitable of them, or None.
    _Answer: TypeAlias = Response | Awaitable[Response]

__all__ = ["SaslListenerHandler", "SaslServerAuthenticator"]

logger = logging.getLogger(__name__)

SASL_HANDSHAKE = api_keys.BY_NAME["SaslHandshake"].key
SASL_AUTHENTICATE = api_keys.BY_NAME["SaslAuthenticate"].key
_API_KEY = struct.Struct(">h")

HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
HANDSHAKE = "HANDSHAKE_REQUEST"
AUTHENTICATE = "AUTHENTICATE"
COMPLETE = "COMPLETE"
FAILED = "FAILED"


class SaslListenerHandler:
    """The network handler of a SASL listener: each connection's frames go
    through its SaslServerAuthenticator until it is authenticated, then to
    KafkaApis."""

    def __init__(
        self,
        apis: KafkaApis,
        listener_name: str,
        security: ListenerSecurity,
        broker: KafkaBroker | ControllerServer,
        failed_authentication_delay_ms: int,
    ) -> None:
        self.apis = apis
        self.listener_name = listener_name
        self.security = security
        self.broker = broker
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.failures = RateLimitedLogger(logger)
        # Completed KIP-368 re-authentications (Kafka's successful-reauthentication count).
        self.reauthentications = 0

    def setup(self, connection: Connection) -> None:
        connection.sasl = SaslServerAuthenticator(self, connection)

    def __call__(self, connection: Connection, frame: memoryview) -> _Answer:
        # setup() gave every connection of this listener its authenticator.
        return connection.sasl.handle(frame)  # type: ignore[union-attr]

    def new_mechanism_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(plain_users(self.security.jaas[PLAIN]))
        if mechanism == OAUTHBEARER:
            validator = self.security.oauthbearer_validator
            if validator is None:  # built with the listener when OAUTHBEARER is enabled
                raise errors.SaslAuthenticationException("OAUTHBEARER is not configured")
            return OAuthBearerServer(validator)
        return ScramServer(mechanism, self._scram_credential, self._token_credential)

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        # The committed credentials (UserScramCredentialRecords): a user added
        # or removed at runtime counts from the next authentication on.
        image = self.broker.metadata_image
        if image is None:
            return None
        return image.scram_credentials.get((user, MECHANISMS[mechanism].type))

    def _token_credential(
        self, mechanism: str, token_id: str
    ) -> tuple[ScramCredential, str, int] | None:
        """A delegation token's login (tokenauth=true): its credential, its
        owner's name and its expiry; None for an unknown or expired token
        or when tokens are disabled (no delegation.token.secret.key)."""
        image = self.broker.metadata_image
        if image is None:
            return None
        secret = self.broker.config["delegation.token.secret.key"]
        if not secret:
            return None
        token = image.delegation_tokens.get(token_id)
        if token is None or token.expired(int(time.time() * 1000)):
            return None
        credential = token_scram_credential(secret, token_id, mechanism)
        return credential, token.owner.name, token.expiry_timestamp_ms


class SaslServerAuthenticator:
    def __init__(self, listener: SaslListenerHandler, connection: Connection) -> None:
        self.listener = listener
        self.connection = connection
        self.state = HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.server: SaslServer | None = None
        self._bad_mechanism = ""
        self.handshake_version = 1
        self.reauthenticating = False
        # time.monotonic() after which the session has expired (None: never).
        self.session_expires_at: float | None = None

    # ---------------------------------------------------------------- frames

    def handle(self, frame: memoryview) -> _Answer:
        if self.state == COMPLETE:
            api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
            if api_key == SASL_HANDSHAKE:
                self.reauthenticating = True
                self.state = HANDSHAKE
                return self._kafka_request(frame)
            if self.session_expires_at is not None and time.monotonic() > self.session_expires_at:
                logger.debug(
                    "%s: SASL session expired without re-authentication; closing",
                    self.connection.connection_id,
                )
                self.connection.close_when_drained()
                return None
            answer: _Answer = self.listener.apis.handle(
                self.connection, frame, self.listener.listener_name
            )
            return answer
        if self.state == AUTHENTICATE:
            if len(frame) > self.listener.security.max_receive_size:
                return self._fail("Failing SASL authentication due to invalid receive size", None)
            if self.handshake_version == 0:
                return self._raw_token(bytes(frame))
            return self._authenticate_request(frame)
        if self.state in (HANDSHAKE_OR_VERSIONS, HANDSHAKE):
            return self._kafka_request(frame)
        self.connection.close_when_drained()
        return None

    def _illegal(self, message: str) -> None:
        self.state = FAILED
        self.listener.failures.warning(
            "illegal sasl state",
            "%s: %s; closing the connection",
            self.connection.connection_id,
            message,
        )
        self.connection.close_when_drained()
        return None

    def _kafka_request(self, frame: memoryview) -> _Answer:
        try:
            header = decode_request_header(frame)
        except Exception:
            self._illegal("the first packet is not a Kafka request (GSSAPI is not supported)")
            return None
        if header.api_key == api_keys.API_VERSIONS and self.state == HANDSHAKE_OR_VERSIONS:
            self.state = HANDSHAKE
            answer: _Answer = self.listener.apis.handle(
                self.connection, frame, self.listener.listener_name
            )
            return answer
        if header.api_key != SASL_HANDSHAKE:
            name = api_keys.BY_KEY.get(header.api_key)
            self._illegal(
                f"Unexpected Kafka request of type "
                f"{name.name if name else header.api_key} during SASL handshake."
            )
            return None
        api = api_keys.BY_KEY[SASL_HANDSHAKE]
        if not api.min_version <= header.api_version <= api.max_version:
            self._illegal(f"SaslHandshake version {header.api_version} is not supported")
            return None
        try:
            request = decode_request_body(header, frame)
        except Exception:
            self._illegal("cannot parse SaslHandshake")
            return None
        assert isinstance(request, SaslHandshakeRequest)  # decoded by its header's key
        enabled = list(self.listener.security.mechanisms)
        mechanism = request.mechanism
        if mechanism not in enabled:
            self.state = FAILED
            self.connection.close_when_drained()
            return self._respond(
                header,
                SaslHandshakeResponse(
                    error_code=errors.UnsupportedSaslMechanismException.code, mechanisms=enabled
                ),
            )
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka's REAUTH_BAD_MECHANISM: the handshake is answered, the
            # SaslAuthenticate that follows fails.
            self.state = AUTHENTICATE
            self.server = None
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not "
                f"supported for re-authentication of mechanism "
                f"'{self.mechanism}'"
            )
        else:
            self.mechanism = mechanism
            self.server = self.listener.new_mechanism_server(mechanism)
            self.state = AUTHENTICATE
        self.handshake_version = header.api_version
        return self._respond(header, SaslHandshakeResponse(error_code=0, mechanisms=enabled))

    def _authenticate_request(self, frame: memoryview) -> _Answer:
        try:
            header = decode_request_header(frame)
        except Exception:
            self._illegal("not a SaslAuthenticate request during SASL authentication")
            return None
        if header.api_key != SASL_AUTHENTICATE:
            name = api_keys.BY_KEY.get(header.api_key)
            self._illegal(
                f"Unexpected Kafka request of type "
                f"{name.name if name else header.api_key} during SASL "
                f"authentication."
            )
            return None
        api = api_keys.BY_KEY[SASL_AUTHENTICATE]
        if not api.min_version <= header.api_version <= api.max_version:
            self._illegal(
                f"Version {header.api_version} is not supported for apiKey SASL_AUTHENTICATE"
            )
            return None
        try:
            request = decode_request_body(header, frame)
        except Exception:
            self._illegal("cannot parse SaslAuthenticate")
            return None
        assert isinstance(request, SaslAuthenticateRequest)  # decoded by its header's key
        server = self.server
        if server is None:
            return self._fail(self._bad_mechanism, header)
        try:
            token = server.evaluate(bytes(request.auth_bytes))
            if server.complete:
                lifetime_ms = self._complete()
            else:
                lifetime_ms = 0
        except errors.SaslAuthenticationException as exc:
            return self._fail(exc.message, header)
        except Exception:
            logger.exception(
                "%s: SASL/%s server failed", self.connection.connection_id, self.mechanism
            )
            return self._fail(self._invalid_credentials(), header)
        return self._respond(
            header,
            SaslAuthenticateResponse(
                error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime_ms
            ),
        )

    def _raw_token(self, token: bytes) -> _Answer:
        server = self.server
        if server is None:  # a re-authentication's other mechanism (logged as before)
            return self._fail(self._invalid_credentials(), None)
        try:
            response = server.evaluate(token)
            if server.complete:
                self._complete()
        except Exception as exc:
            message = (
                exc.message
                if isinstance(exc, errors.SaslAuthenticationException)
                else self._invalid_credentials()
            )
            return self._fail(message, None)
        return [response]

    def _invalid_credentials(self) -> str:
        return (
            "Authentication failed during "
            f"{'re-authentication' if self.reauthenticating else 'authentication'} due to "
            f"invalid credentials with SASL mechanism {self.mechanism}"
        )

    # ------------------------------------------------------------- outcomes

    def _complete(self) -> int:
        """Authenticated: set the principal, return the session lifetime (ms)."""
        server = self.server
        mechanism = self.mechanism
        if server is None or mechanism is None or server.authorization_id is None:
            raise RuntimeError("SASL completed without a mechanism server and user")
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id, server.token_authenticated)
        if self.reauthenticating and principal != self.connection.principal:
            previous = self.connection.principal
            raise errors.SaslAuthenticationException(
                f"Cannot change principals during re-authentication from "
                f"{previous.principal_type}.{previous.name}: {principal.principal_type}."
                f"{principal.name}"
            )
        now_ms = time.time() * 1000.0
        max_reauth_ms = self.listener.security.reauth_ms.get(mechanism, 0)
        expires_at_ms = server.expires_at_ms
        lifetime_ms = 0
        if expires_at_ms is not None or max_reauth_ms > 0:
            candidates: list[float] = []
            if expires_at_ms is not None:
                candidates.append(expires_at_ms - now_ms)
            if max_reauth_ms > 0:
                candidates.append(max_reauth_ms)
            lifetime_ms = max(0, int(min(candidates)))
            self.session_expires_at = time.monotonic() + lifetime_ms / 1000.0
        else:
            self.session_expires_at = None
        self.connection.principal = principal
        self.state = COMPLETE
        if self.reauthenticating:
            self.listener.reauthentications += 1
        self.reauthenticating = False
        self.server = None
        logger.debug(
            "%s: authenticated as %s with SASL/%s",
            self.connection.connection_id,
            principal,
            self.mechanism,
        )
        return lifetime_ms

    def _fail(self, message: str, header: RequestHeader | None) -> _Answer:
        self.state = FAILED
        host = self.connection.peer[0] if self.connection.peer else "?"
        self.listener.failures.warning(
            "failed authentication", "Failed authentication with /%s (%s)", host, message
        )
        self.connection.close_when_drained()
        if header is None:
            return None
        parts = encode_response_parts(
            SASL_AUTHENTICATE,
            header.api_version,
            header.correlation_id,
            SaslAuthenticateResponse(
                error_code=errors.SaslAuthenticationException.code,
                error_message=message,
                auth_bytes=b"",
                session_lifetime_ms=0,
            ),
        )[1:]
        delay_ms = self.listener.failed_authentication_delay_ms
        if delay_ms <= 0:
            return parts
        return _after(delay_ms / 1000.0, parts)

    def _respond(self, header: RequestHeader, body: Message) -> Sequence[Part]:
        return encode_response_parts(
            header.api_key, header.api_version, header.correlation_id, body
        )[1:]


async def _after(delay_s: float, parts: Sequence[Part]) -> Sequence[Part]:
    # Kafka delays the failure response (and the close) to slow down
    # password guessing over new connections.
    await asyncio.sleep(delay_s)
    return parts
