"""SCRAM credentials (RFC 5802, RFC 7677): what the broker keeps per user and
mechanism instead of the password (Kafka's ScramCredential, ScramFormatter).

    SaltedPassword := Hi(password, salt, iterations)      PBKDF2-HMAC-<H>
    ClientKey      := HMAC(SaltedPassword, "Client Key")
    StoredKey      := H(ClientKey)
    ServerKey      := HMAC(SaltedPassword, "Server Key")

Kafka's mechanism type numbers (UserScramCredentialRecord.mechanism, the
DescribeUserScramCredentials/AlterUserScramCredentials ``mechanism`` field):
1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

__all__ = ["MECHANISMS", "MECHANISM_TYPES", "ScramCredential", "ScramMechanism"]


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    type: int
    hash_name: str
    # Kafka's ScramMechanism bounds (AlterUserScramCredentials rejects
    # iterations outside them).
    min_iterations: int = 4096
    max_iterations: int = 16384

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)


MECHANISMS = {
    m.name: m
    for m in (
        ScramMechanism("SCRAM-SHA-256", 1, "sha256"),
        ScramMechanism("SCRAM-SHA-512", 2, "sha512"),
    )
}
MECHANISM_TYPES = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt,
            mechanism.digest(client_key),
            mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        )

    @classmethod
    def generate(
        cls, mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        salt = os.urandom(32) if salt is None else salt
        salted = mechanism.salted_password(password.encode("utf-8"), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)
