"""SASL/OAUTHBEARER server (RFC 7628; Kafka's OAuthBearerSaslServer) with
Kafka's two validators:

* unsecured JWS (OAuthBearerUnsecuredValidatorCallbackHandler, Kafka's
  default): ``alg: none``, no signature; the JAAS options
  ``unsecuredValidatorPrincipalClaimName`` (default sub),
  ``unsecuredValidatorScopeClaimName`` (default scope),
  ``unsecuredValidatorRequiredScope`` and
  ``unsecuredValidatorAllowableClockSkewMs``;
* signed JWS verified against a JWKS (OAuthBearerValidatorCallbackHandler,
  ``sasl.server.callback.handler.class``): the keys from
  ``sasl.oauthbearer.jwks.endpoint.url`` (kfast: a ``file:`` URL, reread
  when the file changes), ``sasl.oauthbearer.expected.audience`` / ``issuer``,
  ``sub.claim.name``, ``clock.skew.seconds``.

Client message grammar (RFC 7628 section 3.1, as Kafka's
OAuthBearerClientInitialResponse reads it)::

    client-resp := "n," ["a=" saslname] "," %x01 kvpair* %x01
    kvpair      := key "=" value %x01          key := ALPHA+
    auth        := "auth=" ("Bearer" | "bearer") SP+ token
    token (JWS compact) := b64url(header) "." b64url(claims) "." [b64url(signature)]

A token that fails validation is answered with the JSON error challenge
(``{"status":"invalid_token"}``); the client acknowledges with a single
%x01 and the exchange fails with that JSON as the message, as in Kafka.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import time
from typing import Protocol
from urllib.parse import unquote, urlparse

from kfast.config import ConfigException
from kfast.protocol.errors import SaslAuthenticationException

__all__ = ["JwksValidator", "OAuthBearerServer", "UnsecuredValidator"]

JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_CLIENT_RESPONSE = re.compile(
    r"n,(?:a=(?P<authzid>"
    + _SASLNAME
    + r"))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01",
    re.S,
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
# Asymmetric JWS algorithms (Kafka's jose4j defaults; never "none" or HMAC).
_SIGNED_ALGORITHMS = [
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]


class _Invalid(Exception):
    """A token that does not validate: the challenge's status (and scope)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope


def _b64url_json(part: str) -> dict:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, TypeError):
        raise _Invalid("malformed token part") from None
    if not isinstance(value, dict):
        raise _Invalid("a token part is not a JSON object")
    return value


def _number(claims: dict[str, object], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(f"Claim {name} is not a number")
    return float(value)


def _scopes(claims: dict, name: str) -> set[str]:
    value = claims.get(name)
    if value is None:
        return set()
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return set(value)
    raise _Invalid(f"Claim {name} is not a string or a list of strings")


class ValidToken:
    __slots__ = ("principal_name", "expires_at_ms")

    def __init__(self, principal_name: str, expires_at_ms: float):
        self.principal_name = principal_name
        self.expires_at_ms = expires_at_ms


class TokenValidator(Protocol):
    """What OAuthBearerServer asks of a validator (UnsecuredValidator,
    JwksValidator): the token's principal and end, or SaslAuthenticationException."""

    def validate(self, token: str) -> ValidToken: ...


def _check_times_and_subject(claims: dict, subject_claim: str, skew_s: float) -> ValidToken:
    now = time.time()
    expires = _number(claims, "exp")
    if expires is None:
        raise _Invalid("Required claim missing: exp")
    issued = _number(claims, "iat")
    if expires <= now - skew_s:
        raise _Invalid("The token is expired")
    if issued is not None and issued > now + skew_s:
        raise _Invalid("The token was issued in the future")
    subject = claims.get(subject_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise _Invalid(f"Required claim missing or empty: {subject_claim}")
    return ValidToken(subject, expires * 1000.0)


class UnsecuredValidator:
    def __init__(self, options: dict[str, str]):
        self.subject_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope = set(options.get("unsecuredValidatorRequiredScope", "").split())
        try:
            self.skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
        except ValueError:
            raise ConfigException(
                "unsecuredValidatorAllowableClockSkewMs",
                options.get("unsecuredValidatorAllowableClockSkewMs"),
                "not a number",
            ) from None

    def validate(self, token: str) -> ValidToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise _Invalid("An unsecured token has three parts and no signature")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none":
            raise _Invalid("An unsecured token's alg is none")
        valid = _check_times_and_subject(claims, self.subject_claim, self.skew_s)
        missing = self.required_scope - _scopes(claims, self.scope_claim)
        if missing:
            raise _Invalid(
                "insufficient scope", "insufficient_scope", " ".join(sorted(self.required_scope))
            )
        return valid


class JwksValidator:
    def __init__(self, settings: dict):
        url = settings.get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigException(
                "sasl.oauthbearer.jwks.endpoint.url",
                None,
                f"{JWKS_VALIDATOR} needs the JWKS location",
            )
        parsed = urlparse(str(url))
        if parsed.scheme != "file":
            raise ConfigException(
                "sasl.oauthbearer.jwks.endpoint.url",
                url,
                "not supported: kfast reads the JWKS from a file: URL only",
            )
        try:
            import joserfc  # noqa: F401
        except ImportError:
            raise ConfigException(
                "sasl.server.callback.handler.class",
                JWKS_VALIDATOR,
                "verifying tokens needs joserfc: pip install kfast[oauth]",
            ) from None
        self.path = unquote(parsed.path)
        self.audience = set(settings.get("sasl.oauthbearer.expected.audience") or ())
        self.issuer = settings.get("sasl.oauthbearer.expected.issuer")
        self.subject_claim = settings.get("sasl.oauthbearer.sub.claim.name") or "sub"
        self.skew_s = int(settings.get("sasl.oauthbearer.clock.skew.seconds") or 0)
        self._mtime = None
        self._keys = None
        self._load()

    def _load(self):
        from joserfc.jwk import KeySet

        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime == self._mtime:
                return self._keys
            with open(self.path, encoding="utf-8") as f:
                self._keys = KeySet.import_key_set(json.load(f))
            self._mtime = mtime
        except (OSError, ValueError) as exc:
            if self._keys is None:
                raise ConfigException(
                    "sasl.oauthbearer.jwks.endpoint.url", self.path, f"cannot read the JWKS: {exc}"
                ) from None
        return self._keys

    def validate(self, token: str) -> ValidToken:
        from joserfc import jws
        from joserfc.errors import JoseError

        keys = self._load()
        try:
            compact = jws.deserialize_compact(token, keys, algorithms=_SIGNED_ALGORITHMS)
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise _Invalid(f"signature not verified: {exc}") from None
        try:
            claims = json.loads(compact.payload)
        except ValueError:
            raise _Invalid("the claims are not JSON") from None
        if not isinstance(claims, dict):
            raise _Invalid("the claims are not a JSON object")
        valid = _check_times_and_subject(claims, self.subject_claim, self.skew_s)
        if self.issuer and claims.get("iss") != self.issuer:
            raise _Invalid("unexpected issuer")
        if self.audience:
            audience = claims.get("aud")
            audience = (
                {audience}
                if isinstance(audience, str)
                else set(audience or ())
                if isinstance(audience, list)
                else set()
            )
            if not audience & self.audience:
                raise _Invalid("unexpected audience")
        return valid


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        self.expires_at_ms: float | None = None
        # An OAuth token is not a delegation token (Kafka's tokenAuthenticated).
        self.token_authenticated = False

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationException(self._error)
        self._error = None
        if self.complete:
            raise SaslAuthenticationException("Authentication failed: the exchange is over")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        match = _CLIENT_RESPONSE.fullmatch(text)
        pairs = (
            dict(kv.split("=", 1) for kv in match.group("kvpairs").split("\x01") if kv)
            if match
            else {}
        )
        auth = _AUTH.fullmatch(pairs.get("auth", ""))
        if match is None or auth is None or auth.group("scheme").lower() != "bearer":
            raise SaslAuthenticationException(
                "Authentication failed during authentication due to invalid credentials with "
                "SASL mechanism OAUTHBEARER"
            )
        try:
            valid = self._validator.validate(auth.group("token"))
        except _Invalid as exc:
            error = {"status": exc.status}
            if exc.scope:
                error["scope"] = exc.scope
            self._error = json.dumps(error, separators=(",", ":"))
            return self._error.encode()
        authzid = match.group("authzid") or ""
        if authzid and authzid != valid.principal_name:
            raise SaslAuthenticationException(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({valid.principal_name})"
            )
        self.authorization_id = valid.principal_name
        self.expires_at_ms = valid.expires_at_ms
        self.complete = True
        return b""
