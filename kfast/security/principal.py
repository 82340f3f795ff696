"""KafkaPrincipal: the identity a request acts as (Kafka's
org.apache.kafka.common.security.auth.KafkaPrincipal).

A connection starts as ``User:ANONYMOUS`` (what Kafka's
DefaultKafkaPrincipalBuilder gives a PLAINTEXT connection); TLS client
certificates and SASL replace it once authenticated. ACLs name principals by
their string form ``<type>:<name>``, which ``parse`` reads back.
"""
from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # True when a token (OAUTHBEARER) or delegation token authenticated it.
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """``User:alice`` -> KafkaPrincipal("User", "alice"); the name may hold
        colons (Kafka splits at the first one)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal of the form <type>:<name>, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
