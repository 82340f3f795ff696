"""SASL/PLAIN server (RFC 4616; Kafka's PlainSaslServer with the users of the
listener's JAAS config, ``user_<name>="<password>"``).

Client token grammar::

    message := [authzid] NUL authcid NUL passwd      (UTF-8)
"""

from __future__ import annotations

import hmac

from kfast.protocol.errors import SaslAuthenticationException
from kfast.security.jaas import JaasEntry

__all__ = ["PlainServer", "plain_users"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


def plain_users(entry: JaasEntry) -> dict[str, str]:
    return {
        name[len(_USER_PREFIX) :]: password
        for name, password in entry.options.items()
        if name.startswith(_USER_PREFIX)
    }


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None
        self.expires_at_ms = None
        self.token_authenticated = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationException("Authentication failed: the PLAIN exchange is over")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationException("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationException(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationException("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationException("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare even for an unknown user, so timing does not tell users apart.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\0").encode(), password.encode()
        )
        if expected is None or not matches:
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
