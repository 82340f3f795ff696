"""The SASL authenticator (Kafka's SaslServerAuthenticator state machine) fed
hypothesis-made frames: well-formed SaslHandshake/SaslAuthenticate requests
with random tokens, mixed with random bytes. It never raises, never
authenticates without the password, and once it fails it only closes."""

import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kfast.protocol as p
from kfast.config import KafkaConfig
from kfast.protocol import api_keys
from kfast.security.listener import ListenerSecurity
from kfast.security.principal import ANONYMOUS
from kfast.server.sasl_authenticator import SaslListenerHandler, SaslServerAuthenticator

PASSWORD = secrets.token_hex(8)
SECURITY = ListenerSecurity.from_config(
    KafkaConfig(
        {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
            "listener.name.sasl.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_alice="{PASSWORD}";',
        }
    ),
    "SASL",
    "SASL_PLAINTEXT",
)


class _Connection:
    connection_id, peer = "fuzz", ("127.0.0.1", 1)

    def __init__(self):
        self.principal = ANONYMOUS
        self.closing = False

    def close_when_drained(self):
        self.closing = True


class _Apis:
    def handle(self, connection, frame, listener_name):
        return None


class _Broker:
    metadata_image = None


def _request(name: str, version: int, **fields) -> bytes:
    encoded = p.encode_request(
        api_keys.BY_NAME[name].key, version, 7, "fuzz", p.request_class(name)(**fields)
    )
    return encoded[4:]  # the network layer strips the size prefix


frames = st.one_of(
    st.binary(max_size=64),
    st.builds(
        lambda m, v: _request("SaslHandshake", v, mechanism=m),
        st.sampled_from(["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI", ""]),
        st.integers(0, 1),
    ),
    st.builds(
        lambda t, v: _request("SaslAuthenticate", v, auth_bytes=t),
        st.one_of(
            st.binary(max_size=80),
            st.builds(
                lambda u, pw: f"\0{u}\0{pw}".encode(),
                st.sampled_from(["alice", "bob", ""]),
                st.text(max_size=12),
            ),
        ),
        st.integers(0, 2),
    ),
    st.builds(lambda v: _request("ApiVersions", v), st.integers(0, 3)),
    st.builds(lambda: _request("Metadata", 4, topics=None)),
)


@pytest.mark.slow
@given(st.lists(frames, min_size=1, max_size=8))
def test_fuzzed_exchanges_never_crash_nor_authenticate(sequence):
    handler = SaslListenerHandler(_Apis(), "SASL", SECURITY, _Broker(), 0)
    connection = _Connection()
    authenticator = SaslServerAuthenticator(handler, connection)
    for frame in sequence:
        if connection.closing:
            break
        authenticator.handle(memoryview(bytearray(frame)))
    # Only alice's real password authenticates, and no fuzzed text is it.
    assert connection.principal == ANONYMOUS


def test_the_real_password_authenticates():
    handler = SaslListenerHandler(_Apis(), "SASL", SECURITY, _Broker(), 0)
    connection = _Connection()
    authenticator = SaslServerAuthenticator(handler, connection)
    authenticator.handle(memoryview(bytearray(_request("SaslHandshake", 1, mechanism="PLAIN"))))
    parts = authenticator.handle(
        memoryview(
            bytearray(_request("SaslAuthenticate", 2, auth_bytes=f"\0alice\0{PASSWORD}".encode()))
        )
    )
    assert str(connection.principal) == "User:alice" and not connection.closing
    _, answer = p.decode_response(36, 2, b"".join(bytes(x) for x in parts))
    assert answer.error_code == 0
