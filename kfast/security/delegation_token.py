"""Delegation tokens (KIP-48; on KRaft KIP-900): what a token is and how it
is signed (Kafka's TokenInformation, DelegationToken and
DelegationTokenManager.createHmac).

A token is a random id (a Uuid's base64 text) issued to an owner; its HMAC
is HmacSHA512 keyed by ``delegation.token.secret.key`` (UTF-8) over the
token id (UTF-8). The HMAC is the token's password: a client logs in with
SCRAM as username = token id, password = base64(HMAC), and the HMAC names
the token in RenewDelegationToken and ExpireDelegationToken. It is never
stored: every node holding the secret recomputes it.

Times are milliseconds since the epoch: a token is valid until
``expiry_timestamp_ms`` (renewable up to ``max_timestamp_ms``, its absolute
end); past either it is expired.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from dataclasses import dataclass

from kfast.security.principal import KafkaPrincipal
from kfast.security.scram import MECHANISMS, ScramCredential

__all__ = ["TokenInformation", "token_hmac", "hmac_base64", "token_scram_credential"]


def token_hmac(secret: str, token_id: str) -> bytes:
    """HmacSHA512(secret, token id), as Kafka's createHmac."""
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_base64(digest: bytes) -> str:
    """The HMAC as the token's SCRAM password (java.util.Base64's encoder)."""
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True, slots=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp_ms: int
    max_timestamp_ms: int
    expiry_timestamp_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's ownerOrRenewer: principals compare by type and name."""
        key = (principal.principal_type, principal.name)
        return key == (self.owner.principal_type, self.owner.name) or any(
            key == (r.principal_type, r.name) for r in self.renewers
        )

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp_ms < now_ms or self.expiry_timestamp_ms < now_ms


@functools.lru_cache(maxsize=1024)
def token_scram_credential(secret: str, token_id: str, mechanism: str) -> ScramCredential:
    """The SCRAM credential a token logs in with (Kafka's
    DelegationTokenManager.prepareScramCredentials): password = base64(HMAC),
    the mechanism's minimum iterations, a fresh salt. Cached: PBKDF2 runs
    once per token and mechanism, not per login."""
    scram = MECHANISMS[mechanism]
    return ScramCredential.generate(
        scram, hmac_base64(token_hmac(secret, token_id)), scram.min_iterations
    )
