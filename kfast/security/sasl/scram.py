"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 server (RFC 5802, RFC 7677; Kafka's
ScramSaslServer), over the credentials kfast keeps as metadata records.

Message grammar (RFC 5802 section 7, the parts a server reads)::

    client-first   := gs2-header client-first-bare
    gs2-header     := ("n" | "y") "," ["a=" saslname] ","
    client-first-bare := "n=" saslname ",r=" c-nonce ["," extensions]
    server-first   := "r=" c-nonce s-nonce ",s=" base64(salt) ",i=" iterations
    client-final   := "c=" base64(gs2-header) ",r=" nonce ["," extensions] ",p=" base64(proof)
    server-final   := "v=" base64(ServerSignature)
    saslname       := UTF-8 with "," as "=2C" and "=" as "=3D"

Kafka's client-first extension ``tokenauth=true`` logs in with a delegation
token (KIP-48): saslname is the token id, the password base64(HMAC); the
credential comes from the token lookup (the token's, made from its HMAC),
the authorization id is the token's owner and the session ends with the
token's expiry. An unknown or expired token fails as a wrong password does.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
from collections.abc import Callable

from kfast.protocol.errors import SaslAuthenticationException
from kfast.security.scram import MECHANISMS, ScramCredential

__all__ = ["ScramServer", "CredentialLookup", "TokenCredentialLookup"]

CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (mechanism, user)
# (mechanism, token id) -> (credential, owner's name, expiry timestamp ms) | None
TokenCredentialLookup = Callable[[str, str], "tuple[ScramCredential, str, int] | None"]

_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")


def _decode_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError("invalid saslname")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"invalid attribute {item!r}")
        out.append((key, value))
    return out


def _extensions(items: list[str]) -> dict[str, str]:
    """Kafka's client-first extensions: ("," ALPHA+ "=" value)* after the
    nonce (ScramMessages.EXTENSIONS)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _EXTENSION_KEY.fullmatch(key) or not value:
            raise ValueError(f"invalid extension {item!r}")
        out[key] = value
    return out


class ScramServer:
    def __init__(
        self,
        mechanism: str,
        lookup: CredentialLookup,
        token_lookup: TokenCredentialLookup | None = None,
    ):
        self.mechanism = mechanism
        self._scram = MECHANISMS[mechanism]
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._token_owner: str | None = None
        self.token_authenticated = False
        self._state = "client-first"
        self._credential: ScramCredential | None = None
        self._username: str | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self.complete = False
        self.authorization_id: str | None = None
        self.expires_at_ms: float | None = None

    def _fail(self, message: str | None = None) -> SaslAuthenticationException:
        self._state = "failed"
        if message is not None:
            return SaslAuthenticationException(message)
        return SaslAuthenticationException(
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail() from None
        if self._state == "client-first":
            return self._client_first(text)
        if self._state == "client-final":
            return self._client_final(text)
        raise self._fail("Authentication failed: unexpected SCRAM message")

    def _client_first(self, text: str) -> bytes:
        try:
            cbind, authzid, bare = text.split(",", 2)
            if cbind not in ("n", "y") or (authzid and not authzid.startswith("a=")):
                raise ValueError("invalid gs2 header")
            # saslname and nonce hold no ","; extensions follow them.
            items = bare.split(",")
            attributes = _attributes(",".join(items[:2]))
            if len(attributes) != 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
                raise ValueError("expected n= and r=")
            username = _decode_saslname(attributes[0][1])
            client_nonce = attributes[1][1]
            if not _PRINTABLE_NONCE.fullmatch(client_nonce) or not username:
                raise ValueError("invalid nonce or user")
            extensions = _extensions(items[2:])
        except ValueError:
            raise self._fail() from None
        credential: ScramCredential | None
        if extensions.get("tokenauth", "false").lower() == "true":
            found = (
                None if self._token_lookup is None else self._token_lookup(self.mechanism, username)
            )
            if found is None:
                raise self._fail()
            credential, self._token_owner, expiry_timestamp_ms = found
            self.expires_at_ms = float(expiry_timestamp_ms)
        else:
            credential = self._lookup(self.mechanism, username)
        if credential is None:
            raise self._fail()
        if authzid and authzid[2:] != attributes[0][1]:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that "
                "is different from username"
            )
        self._credential = credential
        self._username = username
        self._client_first_bare = bare
        self._client_nonce = client_nonce
        self._nonce = client_nonce + base64.b64encode(os.urandom(24)).decode().rstrip("=").replace(
            "+", "-"
        ).replace("/", "_")
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        try:
            without_proof, sep, proof_b64 = text.rpartition(",p=")
            if not sep:
                raise ValueError("no proof")
            attributes = dict(_attributes(without_proof))
            proof = base64.b64decode(proof_b64, validate=True)
            base64.b64decode(attributes["c"], validate=True)
            nonce = attributes["r"]
        except (ValueError, KeyError, binascii.Error):
            raise self._fail() from None
        # RFC 5802: the client echoes the nonce of server-first. librdkafka
        # before 2.6.1 (confluentinc/librdkafka#4895; Debian's kcat) sends its
        # own nonce once more in front; Kafka 3.8.1-3.9 accepted that form,
        # Kafka 4 refuses it. kfast accepts exactly that form too, so those
        # clients keep working: the fresh server nonce is still checked.
        if nonce != self._nonce and nonce != self._client_nonce + self._nonce:
            raise self._fail()
        scram, credential = self._scram, self._credential
        assert credential is not None  # found by client-first, which led to this state
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(scram.digest(client_key), credential.stored_key):
            raise self._fail()
        server_signature = scram.hmac(credential.server_key, auth_message)
        self._state = "complete"
        self.complete = True
        if self._token_owner is not None:
            self.authorization_id = self._token_owner
            self.token_authenticated = True
        else:
            self.authorization_id = self._username
        return b"v=" + base64.b64encode(server_signature)
