"""What one listener's security protocol asks of its connections (Kafka's
ChannelBuilders + the listener-prefixed settings): the TLS context, the
client-certificate principal mapping, the SASL mechanisms with their JAAS
options and session lifetimes.

``ListenerSecurity.from_config(config, name, protocol)`` reads every setting
with Kafka's precedence (``KafkaConfig.listener_value``) and fails the start
with a ConfigException for anything kfast cannot serve, so no listener runs
with less security than its settings say.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kfast.config import ConfigException, KafkaConfig
from kfast.security.jaas import JaasEntry, parse_jaas_config
from kfast.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from kfast.security.principal_mapping import SslPrincipalMapper
from kfast.security.sasl import GSSAPI, OAUTHBEARER, SUPPORTED_MECHANISMS

if TYPE_CHECKING:
    from kfast.security.sasl.oauthbearer import TokenValidator

__all__ = ["SECURITY_PROTOCOLS", "ListenerSecurity", "principal_from_certificate"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def _uses_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class ListenerSecurity:
    listener_name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    # SASL: enabled mechanisms in the configured order, their JAAS entries
    # (absent for SCRAM, whose users are metadata) and session lifetimes.
    mechanisms: tuple[str, ...] = ()
    jaas: dict[str, JaasEntry] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)
    # Settings of the mechanisms (OAUTHBEARER's validation) by name.
    settings: dict[str, object] = field(default_factory=dict)
    max_receive_size: int = 524288
    # OAUTHBEARER's token validator (kfast.security.sasl.oauthbearer).
    oauthbearer_validator: TokenValidator | None = None

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return _uses_sasl(self.security_protocol)

    @classmethod
    def from_config(
        cls, config: KafkaConfig, listener_name: str, protocol: str
    ) -> ListenerSecurity:
        from kfast.security.ssl_factory import server_ssl_context

        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigException(
                "listener.security.protocol.map",
                protocol,
                f"Unknown security protocol {protocol} of listener {listener_name}",
            )
        security = cls(listener_name, protocol)

        def setting(name: str, mechanism: str | None = None):
            return config.listener_value(listener_name, name, mechanism)

        if _uses_tls(protocol):
            security.ssl_context = server_ssl_context(setting)
            try:
                security.principal_mapper = SslPrincipalMapper(
                    setting("ssl.principal.mapping.rules")
                )
            except ValueError as exc:
                raise ConfigException(
                    "ssl.principal.mapping.rules", setting("ssl.principal.mapping.rules"), str(exc)
                ) from None
        if _uses_sasl(protocol):
            security._configure_sasl(config, setting)
        return security

    def _configure_sasl(self, config: KafkaConfig, setting) -> None:
        mechanisms = [
            m.strip().upper() for m in setting("sasl.enabled.mechanisms") or [] if m.strip()
        ]
        prefix = f"listener.name.{self.listener_name.lower()}."
        if not mechanisms:
            raise ConfigException(
                prefix + "sasl.enabled.mechanisms",
                "",
                f"no SASL mechanism enabled on listener {self.listener_name}",
            )
        for mechanism in mechanisms:
            if mechanism == GSSAPI:
                raise ConfigException(
                    "sasl.enabled.mechanisms",
                    ",".join(mechanisms),
                    "not supported: kfast does not implement GSSAPI (Kerberos, "
                    "Kafka's default); enable "
                    f"{', '.join(SUPPORTED_MECHANISMS)}",
                )
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigException(
                    "sasl.enabled.mechanisms",
                    ",".join(mechanisms),
                    f"not supported: SASL mechanism {mechanism} (kfast "
                    f"implements {', '.join(SUPPORTED_MECHANISMS)})",
                )
            key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
            raw = config.originals.get(key)
            if raw is not None:
                self.jaas[mechanism] = parse_jaas_config(str(raw), key)
            elif mechanism == "PLAIN":
                raise ConfigException(
                    key,
                    None,
                    "a PLAIN listener needs its users in this "
                    'JAAS config (user_<name>="<password>")',
                )
            self.reauth_ms[mechanism] = int(setting("connections.max.reauth.ms", mechanism))
        self.mechanisms = tuple(mechanisms)
        self.max_receive_size = setting("sasl.server.max.receive.size")
        for name in (
            "sasl.oauthbearer.jwks.endpoint.url",
            "sasl.oauthbearer.expected.audience",
            "sasl.oauthbearer.expected.issuer",
            "sasl.oauthbearer.sub.claim.name",
            "sasl.oauthbearer.scope.claim.name",
            "sasl.oauthbearer.clock.skew.seconds",
        ):
            self.settings[name] = setting(name, "OAUTHBEARER")
        self.settings["sasl.server.callback.handler.class"] = setting(
            "sasl.server.callback.handler.class", "OAUTHBEARER"
        )
        if OAUTHBEARER in mechanisms:
            self.oauthbearer_validator = self._oauthbearer_validator()

    def _oauthbearer_validator(self):
        """Kafka's default unsecured validator, or the JWKS one when
        sasl.server.callback.handler.class names it (built now: a JWKS that
        cannot be read stops the start)."""
        from kfast.security.sasl.oauthbearer import (
            JWKS_VALIDATOR,
            JwksValidator,
            UnsecuredValidator,
        )

        if self.settings["sasl.server.callback.handler.class"] == JWKS_VALIDATOR:
            return JwksValidator(self.settings)
        entry = self.jaas.get(OAUTHBEARER)
        return UnsecuredValidator(entry.options if entry is not None else {})

    def certificate_principal(self, der_certificate: bytes | None) -> KafkaPrincipal:
        """The principal of an SSL connection (Kafka's DefaultKafkaPrincipalBuilder):
        the mapped subject of the client's certificate, ANONYMOUS without one."""
        return principal_from_certificate(der_certificate, self.principal_mapper)


def principal_from_certificate(
    der_certificate: bytes | None, mapper: SslPrincipalMapper | None
) -> KafkaPrincipal:
    if der_certificate is None:
        return ANONYMOUS
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()
    name = (mapper or SslPrincipalMapper()).name(subject)
    return KafkaPrincipal(USER_TYPE, name)


def listener_protocols(config: KafkaConfig) -> dict[str, str]:
    """listener.security.protocol.map as {LISTENER: PROTOCOL}."""
    return {
        name.strip().upper(): protocol.strip().upper()
        for name, _, protocol in (
            entry.partition(":") for entry in config["listener.security.protocol.map"]
        )
    }
