"""SASL mechanism servers as state machines: PLAIN and SCRAM against their
RFCs, and fuzzed tokens that never authenticate nor fail other than with
SASL_AUTHENTICATION_FAILED."""

import base64
import hashlib
import hmac
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.config import ConfigException
from kfast.protocol.errors import SaslAuthenticationException
from kfast.security.delegation_token import hmac_base64, token_hmac, token_scram_credential
from kfast.security.jaas import parse_jaas_config
from kfast.security.sasl.oauthbearer import OAuthBearerServer, UnsecuredValidator
from kfast.security.sasl.plain import PlainServer, plain_users
from kfast.security.sasl.scram import ScramServer
from kfast.security.scram import MECHANISMS, ScramCredential

PASSWORD = os.urandom(8).hex()


def test_plain_users_from_jaas():
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required username="admin" password="x" user_alice="{PASSWORD}" '
        'user_b="q\\"uote";'
    )
    assert plain_users(entry) == {"alice": PASSWORD, "b": 'q"uote'}
    for bad in ("Module required", "Module bogus a=b;", "A required; B required;", "M required a;"):
        with pytest.raises(ConfigException) as info:
            parse_jaas_config(bad)
        assert "[hidden]" in str(info.value)


def test_plain_exchange():
    server = PlainServer({"alice": PASSWORD})
    assert server.evaluate(f"\0alice\0{PASSWORD}".encode()) == b""
    assert server.complete and server.authorization_id == "alice"
    for token, message in [
        (b"\0alice\0nope", "Invalid username or password"),
        (b"\0eve\0nope", "Invalid username or password"),
        (b"bob\0alice\0" + PASSWORD.encode(), "authorization id"),
        (b"\0\0x", "username not specified"),
        (b"a\0b", "expected 3 tokens"),
    ]:
        with pytest.raises(SaslAuthenticationException, match=message):
            PlainServer({"alice": PASSWORD}).evaluate(token)


def _scram_client(mechanism, user, password, server, extensions=""):
    """RFC 5802 client side, written from the RFC (not from kfast's server);
    ``extensions``: Kafka's client-first extensions (",tokenauth=true")."""
    scram = MECHANISMS[mechanism]
    client_nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={client_nonce}{extensions}"
    server_first = server.evaluate(f"n,,{bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    assert fields["r"].startswith(client_nonce)
    salted = hashlib.pbkdf2_hmac(
        scram.hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", scram.hash_name).digest()
    stored_key = hashlib.new(scram.hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, scram.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = hmac.new(salted, b"Server Key", scram.hash_name).digest()
    expected = hmac.new(server_key, auth_message, scram.hash_name).digest()
    assert final == b"v=" + base64.b64encode(expected)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(mechanism):
    credential = ScramCredential.generate(MECHANISMS[mechanism], PASSWORD, 4096)
    store = {(mechanism, "alice"): credential}
    server = ScramServer(mechanism, lambda m, u: store.get((m, u)))
    _scram_client(mechanism, "alice", PASSWORD, server)
    assert server.complete and server.authorization_id == "alice"
    with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
        _scram_client(
            mechanism, "alice", "wrong", ScramServer(mechanism, lambda m, u: store.get((m, u)))
        )
    with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
        _scram_client(mechanism, "eve", PASSWORD, ScramServer(mechanism, lambda m, u: None))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_a_delegation_token(mechanism):
    """tokenauth=true: username = token id, password = base64(HMAC); the
    authorization id is the token's owner, the session ends with the token."""
    secret, token_id = "secret", "tokenId-_1"
    password = hmac_base64(token_hmac(secret, token_id))
    credential = token_scram_credential(secret, token_id, mechanism)
    tokens = {token_id: (credential, "alice", 1_800_000_000_000)}

    def users(m, u):
        return None  # no SCRAM user is named like the token

    server = ScramServer(mechanism, users, lambda m, t: tokens.get(t))
    _scram_client(mechanism, token_id, password, server, ",tokenauth=true")
    assert server.complete and server.authorization_id == "alice"
    assert server.token_authenticated and server.expires_at_ms == 1_800_000_000_000
    # A user's login is not a token's, and a token's is refused without tokenauth.
    plain = ScramServer(mechanism, lambda m, u: credential, lambda m, t: tokens.get(t))
    _scram_client(mechanism, token_id, password, plain)
    assert not plain.token_authenticated and plain.authorization_id == token_id
    for lookup, token, extensions in [
        (lambda m, t: tokens.get(t), "unknown", ",tokenauth=true"),  # unknown or expired token
        (None, token_id, ",tokenauth=true"),  # no tokens on this listener
        (lambda m, t: tokens.get(t), token_id, ",tokenauth=true,1x=y"),  # not ALPHA=value
    ]:
        with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
            _scram_client(
                mechanism, token, password, ScramServer(mechanism, users, lookup), extensions
            )


FUZZ_CREDENTIAL = ScramCredential.generate(
    MECHANISMS["SCRAM-SHA-256"], PASSWORD, 4096, salt=b"s" * 16
)


@given(st.lists(st.binary(max_size=200), min_size=1, max_size=3))
def test_fuzzed_tokens_never_authenticate(tokens):
    credential = FUZZ_CREDENTIAL
    for server in (
        PlainServer({"alice": PASSWORD}),
        ScramServer("SCRAM-SHA-256", lambda m, u: credential),
        OAuthBearerServer(UnsecuredValidator({})),
    ):
        try:
            for token in tokens:
                server.evaluate(token)
        except SaslAuthenticationException:
            continue
        assert not server.complete


def _unsecured(claims: dict) -> bytes:
    import json
    import time

    def part(value) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"exp": time.time() + 60, **claims}
    return f"n,,\x01auth=Bearer {part({'alg': 'none'})}.{part(claims)}.\x01\x01".encode()


def test_oauthbearer_unsecured_validator_options():
    server = OAuthBearerServer(
        UnsecuredValidator(
            {
                "unsecuredValidatorRequiredScope": "kafka",
                "unsecuredValidatorPrincipalClaimName": "u",
            }
        )
    )
    assert server.evaluate(_unsecured({"u": "frank", "scope": "kafka other"})) == b""
    assert server.authorization_id == "frank" and server.expires_at_ms > 0
    server = OAuthBearerServer(UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka"}))
    assert (
        server.evaluate(_unsecured({"sub": "frank", "scope": "other"}))
        == b'{"status":"insufficient_scope","scope":"kafka"}'
    )
    with pytest.raises(SaslAuthenticationException, match="insufficient_scope"):
        server.evaluate(b"\x01")
    for claims in ({"sub": ""}, {"sub": "x", "exp": "soon"}, {"sub": "x", "exp": None}):
        assert b"invalid_token" in OAuthBearerServer(UnsecuredValidator({})).evaluate(
            _unsecured(claims)
        )
    with pytest.raises(SaslAuthenticationException, match="OAUTHBEARER"):
        OAuthBearerServer(UnsecuredValidator({})).evaluate(b"n,,auth=Bearer x")
