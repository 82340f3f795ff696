"""What kfast's own client presents to a secured listener: TLS and a SASL
login (Kafka's client side of SSL / SASL_PLAINTEXT / SASL_SSL).

``ClientSecurity.for_listener(config, listener, mechanism)`` builds it from a
node's server.properties as Kafka's inter-broker and controller clients do:
the listener's ``listener.name.<l>.ssl.*`` settings (truststore, and the
keystore for mTLS), and the username/password options of the listener's
JAAS config for the mechanism (``sasl.mechanism.inter.broker.protocol`` /
``sasl.mechanism.controller.protocol``). ``authenticate(connection)`` runs
SaslHandshake v1 + SaslAuthenticate after ApiVersions (PLAIN, SCRAM-SHA-256/
512 with the server's signature checked, OAUTHBEARER with an unsecured token
from ``unsecuredLoginStringClaim_sub``), and returns the session lifetime
the broker set (connections.max.reauth.ms, KIP-368): the connection logs in
again on itself before it ends (kfast.client.connection).
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import ssl
import time
from dataclasses import dataclass

from kfast.config import ConfigException, KafkaConfig
from kfast.protocol import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    errors,
)
from kfast.security.jaas import parse_jaas_config
from kfast.security.scram import MECHANISMS

__all__ = ["ClientSecurity"]

_TLS = ("SSL", "SASL_SSL")
_SASL = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token_subject: str | None = None

    @classmethod
    def for_listener(
        cls, config: KafkaConfig, listener: str, mechanism_property: str
    ) -> ClientSecurity:
        from kfast.security.listener import listener_protocols

        protocol = listener_protocols(config).get(listener.upper(), "PLAINTEXT")
        mechanism = str(config[mechanism_property]).strip().upper() if protocol in _SASL else None
        key = f"listener.name.{listener.lower()}.{(mechanism or '').lower()}.sasl.jaas.config"
        return cls._build(
            protocol,
            lambda name: config.listener_value(listener, name),
            mechanism_property,
            mechanism,
            key,
            config.originals.get(key),
            f"the {listener} listener's own connections need its JAAS config for {mechanism}",
        )

    @classmethod
    def for_client_properties(cls, setting) -> ClientSecurity:
        """From a client's properties (kfast.client.properties): ``setting(name)``
        gives security.protocol, ssl.* (the truststore, the keystore for
        mTLS), sasl.mechanism and sasl.jaas.config (PlainLoginModule /
        ScramLoginModule username and password, or OAuthBearerLoginModule
        unsecuredLoginStringClaim_sub), each value or its default."""
        protocol = str(setting("security.protocol")).upper()
        mechanism = str(setting("sasl.mechanism")).strip().upper() if protocol in _SASL else None
        return cls._build(
            protocol,
            setting,
            "sasl.mechanism",
            mechanism,
            "sasl.jaas.config",
            setting("sasl.jaas.config"),
            f"set it for {mechanism}",
        )

    @classmethod
    def _build(
        cls, protocol, setting, mechanism_property, mechanism, jaas_key, jaas_text, missing_jaas
    ) -> ClientSecurity:
        from kfast.security.sasl import SUPPORTED_MECHANISMS
        from kfast.security.ssl_factory import client_ssl_context

        security = cls(protocol)
        if protocol in _TLS:
            security.ssl_context = client_ssl_context(setting)
        if protocol in _SASL:
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigException(
                    mechanism_property,
                    mechanism,
                    f"not supported: kfast's client speaks {', '.join(SUPPORTED_MECHANISMS)}",
                )
            if jaas_text is None:
                raise ConfigException(jaas_key, None, missing_jaas)
            options = parse_jaas_config(str(jaas_text), jaas_key).options
            security.mechanism = mechanism
            if mechanism == "OAUTHBEARER":
                security.token_subject = options.get("unsecuredLoginStringClaim_sub")
                if not security.token_subject:
                    raise ConfigException(jaas_key, "[hidden]", "set unsecuredLoginStringClaim_sub")
            else:
                security.username, security.password = (
                    options.get("username"),
                    options.get("password"),
                )
                if not security.username or security.password is None:
                    raise ConfigException(jaas_key, "[hidden]", "set username and password")
        return security

    # ------------------------------------------------------------- SASL client

    async def authenticate(self, connection) -> int:
        """Log in on ``connection`` (or log in again on it, KIP-368); the
        session lifetime the broker gave, in ms (0: the session never
        expires)."""
        if self.mechanism is None:
            return 0
        handshake = await connection.send(SaslHandshakeRequest(mechanism=self.mechanism), version=1)
        if handshake.error_code:
            raise errors.for_code(handshake.error_code)(
                f"SASL mechanism {self.mechanism} refused by {connection.host}:{connection.port}"
            )
        if self.mechanism in MECHANISMS:
            last = await self._scram(connection, MECHANISMS[self.mechanism])
        elif self.mechanism == "OAUTHBEARER":
            last = await self._exchange(
                connection, f"n,,\x01auth=Bearer {self._token()}\x01\x01".encode()
            )
        else:
            last = await self._exchange(connection, f"\0{self.username}\0{self.password}".encode())
        return max(0, last.session_lifetime_ms)

    async def _exchange(self, connection, token: bytes) -> SaslAuthenticateResponse:
        """One SaslAuthenticate round: the response (auth_bytes, and
        session_lifetime_ms on the last one)."""
        response = await connection.send(SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code:
            raise errors.SaslAuthenticationException(response.error_message or "")
        return response

    def _token(self) -> str:
        now = int(time.time())

        def part(value) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

        return f"{part({'alg': 'none'})}.{part({'sub': self.token_subject, 'iat': now, 'exp': now + 3600})}."

    async def _scram(self, connection, scram) -> SaslAuthenticateResponse:
        """RFC 5802 client: client-first, client-final, the server's signature."""
        # _build refuses a SCRAM configuration without both.
        assert self.username is not None and self.password is not None
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        nonce = base64.b64encode(os.urandom(24)).decode()
        bare = f"n={name},r={nonce}"
        server_first = bytes(
            (await self._exchange(connection, f"n,,{bare}".encode())).auth_bytes
        ).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        if not fields.get("r", "").startswith(nonce):
            raise errors.SaslAuthenticationException("invalid server nonce")
        salted = scram.salted_password(
            self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        client_key = scram.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{bare},{server_first},{without_proof}".encode()
        signature = scram.hmac(scram.digest(client_key), message)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        last = await self._exchange(connection, f"{without_proof},p={proof}".encode())
        expected = b"v=" + base64.b64encode(scram.hmac(scram.hmac(salted, b"Server Key"), message))
        if not hmac.compare_digest(bytes(last.auth_bytes), expected):
            raise errors.SaslAuthenticationException("the server's SCRAM signature is wrong")
        return last
