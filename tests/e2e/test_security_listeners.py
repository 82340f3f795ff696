"""TLS and SASL listeners with real clients: one broker serving SSL
(client certificates requested, mapped to principals), SASL_PLAINTEXT and
SASL_SSL with PLAIN (JAAS users), SCRAM-SHA-256/512 (users created with
``kfast configs``, kept as metadata records) and OAUTHBEARER (unsecured JWS
on SASL_PLAINTEXT, JWS signed by a key of a JWKS file on SASL_SSL);
confluent-kafka, kafka-python,
aiokafka and kcat produce and consume through each; wrong credentials are
refused; SCRAM users come and go at runtime; requests before authentication
close the connection as Kafka's SaslServerAuthenticator does. Every key,
certificate and password is made by the fixtures."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import ssl
import subprocess
import sys
import time
import uuid

import pytest
from e2e_support import wait_until
from security_support import RawConnection

from kfast.protocol import errors
from kfast.security.principal import ANONYMOUS, KafkaPrincipal
from kfast.testing import KfastBroker
from kfast.testing.certificates import TestCA

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

REAUTH_MS = 1500
JAAS_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
# CN=<name>,OU=<unit>,... -> <name>@<unit>; a subject without OU as it is.
MAPPING_RULES = "RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/L,DEFAULT"


@pytest.fixture(scope="module")
def tls_ca(tmp_path_factory):
    ca = TestCA(str(tmp_path_factory.mktemp("ca")))
    ca.server = ca.issue("localhost", server=True)
    ca.alice = ca.issue("Alice", organizational_unit="Eng")
    ca.bob = ca.issue("bob")
    return ca


@pytest.fixture(scope="module")
def jwks(tmp_path_factory):
    """A signing key and the JWKS file of its public half."""
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256", parameters={"kid": secrets.token_hex(4)})
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [key.as_dict(private=False)]}))
    return key, path


def signed_token(key, subject="alice", audience="kfast", lifetime_s=3600) -> str:
    from joserfc import jwt

    now = int(time.time())
    return jwt.encode(
        {"alg": "ES256", "kid": key.kid},
        {"sub": subject, "aud": audience, "iat": now, "exp": now + lifetime_s},
        key,
    )


def unsecured_token(subject="alice", lifetime_s=3600) -> str:
    now = int(time.time())

    def part(value) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


@pytest.fixture(scope="module")
def users():
    return {"alice": secrets.token_urlsafe(12), "bob": secrets.token_urlsafe(12)}


@pytest.fixture(scope="module")
def secured(tls_ca, users, jwks):
    jaas = JAAS_PLAIN.format(users=" ".join(f'user_{u}="{pw}"' for u, pw in users.items()))
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0,REAUTH://127.0.0.1:0,MTLS://127.0.0.1:0",
        # REAUTH: SASL/PLAIN sessions of 1.5 s (KIP-368), re-authenticated in place.
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "REAUTH:SASL_PLAINTEXT,MTLS:SSL",
        # MTLS: client certificates required, the keystore a PEM file.
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.location": tls_ca.server.keystore_path,
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": tls_ca.cert_path,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.reauth.plain.sasl.jaas.config": jaas,
        "listener.name.reauth.connections.max.reauth.ms": REAUTH_MS,
        "num.partitions": 1,
        # The SSL listener's key inline (PEM), the SASL_SSL one's from a PKCS12 file.
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.key": tls_ca.server.key_pem.decode(),
        "listener.name.ssl.ssl.keystore.certificate.chain": tls_ca.server.cert_pem.decode(),
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.certificates": tls_ca.cert_pem.decode(),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.ssl.ssl.principal.mapping.rules": MAPPING_RULES,
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": tls_ca.server.pkcs12_path,
        "listener.name.sasl_ssl.ssl.keystore.password": tls_ca.server.pkcs12_password,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        # OAUTHBEARER: unsecured tokens (Kafka's default validator) on
        # SASL_PLAINTEXT, tokens signed by the JWKS's key on SASL_SSL.
        "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks[1].as_uri(),
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.audience": "kfast",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "connection.failed.authentication.delay.ms": 10,
    }
    with KfastBroker(props) as broker:
        broker.ports = dict(broker.broker.bound_ports)
        # SCRAM users as an operator makes them: kafka-configs.sh's syntax.
        configs(
            broker,
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--alter",
            "--add-config",
            f"SCRAM-SHA-256=[iterations=4096,password={users['alice']}],"
            f"SCRAM-SHA-512=[password={users['alice']}]",
        )
        yield broker


def configs(broker, *args) -> str:
    """``kfast configs`` against the broker's PLAINTEXT listener; its stdout."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "configs",
            "--bootstrap-server",
            f"127.0.0.1:{broker.ports['PLAINTEXT']}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def _settings(kind: str, listener: str, ca, users, password: str | None = None, jwks=None) -> dict:
    """librdkafka-style settings for one way of connecting (and, for
    OAUTHBEARER, "_token": a callable returning the token to present)."""
    conf: dict = {"security.protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = ca.cert_path
    if kind == "mtls":
        conf.update(
            {"ssl.certificate.location": ca.alice.cert_path, "ssl.key.location": ca.alice.key_path}
        )
    if kind in MECHANISM_OF:
        conf.update(
            {
                "sasl.mechanism": MECHANISM_OF[kind],
                "sasl.username": "alice",
                "sasl.password": password or users["alice"],
            }
        )
    if kind == "oauth":
        conf.update({"sasl.mechanism": "OAUTHBEARER", "_token": unsecured_token})
    if kind == "oauth-jwks":
        conf.update({"sasl.mechanism": "OAUTHBEARER", "_token": lambda: signed_token(jwks[0])})
    return conf


MECHANISM_OF = {"plain": "PLAIN", "scram256": "SCRAM-SHA-256", "scram512": "SCRAM-SHA-512"}
WAYS = [
    ("plain", "SASL_PLAINTEXT"),
    ("plain", "SASL_SSL"),
    ("scram256", "SASL_PLAINTEXT"),
    ("scram512", "SASL_SSL"),
    ("oauth", "SASL_PLAINTEXT"),
    ("oauth-jwks", "SASL_SSL"),
    ("tls", "SSL"),
    ("mtls", "SSL"),
]
ALL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def _confluent(conf) -> dict:
    conf = dict(conf)
    token = conf.pop("_token", None)
    if token is not None:
        conf["oauth_cb"] = lambda _config: (token(), time.time() + 3600)
    return conf


def _roundtrip_confluent(port, conf, topic):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    conf = _confluent(conf)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **conf})
    producer.produce(topic, b"v1", key=b"k")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": topic, **conf})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        message = None
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None
        return message.value()
    finally:
        consumer.close()


def _kafka_python_kwargs(conf) -> dict:
    kwargs = {"security_protocol": conf["security.protocol"]}
    if "ssl.ca.location" in conf:
        kwargs["ssl_cafile"] = conf["ssl.ca.location"]
    if "ssl.certificate.location" in conf:
        kwargs["ssl_certfile"] = conf["ssl.certificate.location"]
        kwargs["ssl_keyfile"] = conf["ssl.key.location"]
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self):
            return conf["_token"]()

    kwargs.update(_python_sasl_kwargs(conf, Tokens))
    return kwargs


def _python_sasl_kwargs(conf, token_provider_class) -> dict:
    """kafka-python's and aiokafka's SASL arguments (the same names in both)."""
    if "_token" in conf:
        return {
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": token_provider_class(),
        }
    if "sasl.mechanism" in conf:
        return {
            "sasl_mechanism": conf["sasl.mechanism"],
            "sasl_plain_username": conf["sasl.username"],
            "sasl_plain_password": conf["sasl.password"],
        }
    return {}


def _roundtrip_kafka_python(port, conf, topic):
    from kafka import KafkaConsumer, KafkaProducer

    kwargs = _kafka_python_kwargs(conf)
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", **kwargs)
    producer.send(topic, b"v1", key=b"k").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=f"127.0.0.1:{port}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        **kwargs,
    )
    try:
        return next(iter(consumer)).value
    finally:
        consumer.close()


def _aiokafka_kwargs(conf) -> dict:
    kwargs = {"security_protocol": conf["security.protocol"]}
    if "ssl.ca.location" in conf:
        from aiokafka.helpers import create_ssl_context

        kwargs["ssl_context"] = create_ssl_context(
            cafile=conf["ssl.ca.location"],
            certfile=conf.get("ssl.certificate.location"),
            keyfile=conf.get("ssl.key.location"),
        )
    from aiokafka.abc import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        async def token(self):
            return conf["_token"]()

    kwargs.update(_python_sasl_kwargs(conf, Tokens))
    return kwargs


def _roundtrip_aiokafka(port, conf, topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run():
        kwargs = _aiokafka_kwargs(conf)
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", **kwargs)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v1", key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=f"127.0.0.1:{port}", auto_offset_reset="earliest", **kwargs
        )
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), 30)
            return message.value
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _kcat_args(conf) -> list[str]:
    conf = dict(conf)
    if conf.pop("_token", None) is not None:
        # librdkafka makes its own unsecured JWS (kcat has no token callback).
        conf.update(
            {
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": "principal=alice",
            }
        )
    return [arg for key, value in conf.items() for arg in ("-X", f"{key}={value}")]


def _roundtrip_kcat(port, conf, topic):
    common = ["kcat", "-b", f"127.0.0.1:{port}", *_kcat_args(conf)]
    subprocess.run([*common, "-P", "-t", topic], input=b"v1\n", check=True, timeout=60)
    out = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    return out.stdout.strip()


def _java_properties(conf) -> list[str]:
    """The same settings with the Java client's names (kfast's client takes
    those): PEM truststore, the client's key and chain inline, JAAS configs."""
    props = {"security.protocol": conf["security.protocol"]}
    if "ssl.ca.location" in conf:
        props.update(
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": conf["ssl.ca.location"]}
        )
    if "ssl.certificate.location" in conf:
        with open(conf["ssl.key.location"]) as key, open(conf["ssl.certificate.location"]) as chain:
            props.update(
                {
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.key": key.read(),
                    "ssl.keystore.certificate.chain": chain.read(),
                }
            )
    module = {
        "PLAIN": "plain.PlainLoginModule",
        "SCRAM-SHA-256": "scram.ScramLoginModule",
        "SCRAM-SHA-512": "scram.ScramLoginModule",
    }
    if "_token" in conf:
        props.update(
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                'required unsecuredLoginStringClaim_sub="alice";',
            }
        )
    elif "sasl.mechanism" in conf:
        props.update(
            {
                "sasl.mechanism": conf["sasl.mechanism"],
                "sasl.jaas.config": f"org.apache.kafka.common.security.{module[conf['sasl.mechanism']]} "
                f'required username="{conf["sasl.username"]}" '
                f'password="{conf["sasl.password"]}";',
            }
        )
    return [f"{name}={value}" for name, value in props.items()]


def _roundtrip_kfast(port, conf, topic):
    """``kfast produce`` / ``kfast consume`` with Kafka client properties, as
    kafka-console-producer.sh / -consumer.sh take them."""
    import io

    from kfast.cli import build_parser
    from kfast.tools import console

    props = _java_properties(conf)
    common = ["--bootstrap-server", f"127.0.0.1:{port}", "--topic", topic]
    args = build_parser().parse_args(
        [
            "produce",
            *common,
            "--linger-ms",
            "0",
            *(arg for prop in props for arg in ("--producer-property", prop)),
        ]
    )
    err = io.StringIO()
    assert console.run_produce(args, stdin=io.StringIO("v1\n"), err=err) == 0, err.getvalue()
    args = build_parser().parse_args(
        [
            "consume",
            *common,
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "20000",
            *(arg for prop in props for arg in ("--consumer-property", prop)),
        ]
    )
    out, err = io.BytesIO(), io.StringIO()
    assert console.run_consume(args, out=out, err=err) == 0, err.getvalue()
    return out.getvalue().strip()


ROUNDTRIPS = {
    "confluent-kafka": _roundtrip_confluent,
    "kafka-python": _roundtrip_kafka_python,
    "aiokafka": _roundtrip_aiokafka,
    "kcat": _roundtrip_kcat,
    "kfast": _roundtrip_kfast,
}
# Every client through every way (each SASL mechanism, with and without TLS;
# TLS; mTLS); kcat cannot present a signed token (no callback, no OIDC here),
# nor can kfast's client (it sends unsecured tokens only).
MATRIX = [
    (client, kind, listener)
    for client in ROUNDTRIPS
    for kind, listener in WAYS
    if not (client in ("kcat", "kfast") and kind == "oauth-jwks")
]


@pytest.mark.parametrize("client,kind,listener", MATRIX, ids=[f"{c}-{k}-{l}" for c, k, l in MATRIX])
def test_clients_produce_and_consume_through_secured_listeners(
    secured, tls_ca, users, jwks, client, kind, listener
):
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    conf = _settings(kind, listener, tls_ca, users, jwks=jwks)
    assert ROUNDTRIPS[client](secured.ports[listener], conf, topic) == b"v1"


def test_wrong_password_is_refused_with_sasl_authentication_failed(secured, tls_ca, users):
    from confluent_kafka import KafkaError, Producer

    seen = []
    conf = _settings("plain", "SASL_SSL", tls_ca, users, password="not-" + users["alice"])
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{secured.ports['SASL_SSL']}",
            "error_cb": seen.append,
            **conf,
        }
    )
    wait_until(
        lambda: (
            producer.poll(0.2) is not None
            and any(e.code() == KafkaError._AUTHENTICATION for e in seen)
        ),
        timeout=30,
    )
    error = next(e for e in seen if e.code() == KafkaError._AUTHENTICATION)
    assert "Invalid username or password" in error.str()
    assert users["alice"] not in error.str()


def test_wrong_password_refused_aiokafka(secured, tls_ca, users):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    conf = _settings("plain", "SASL_PLAINTEXT", tls_ca, users, password="x" + users["alice"])
    port = secured.ports["SASL_PLAINTEXT"]

    async def run():
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000, **_aiokafka_kwargs(conf)
        )
        with pytest.raises(AioKafkaError):
            await producer.start()
        await producer.stop()

    asyncio.run(run())


def _raw_plain_authenticate(port, context, user, password, version=2):
    connection = RawConnection(port, context)
    handshake = connection.request("SaslHandshake", 1, mechanism="PLAIN")
    assert handshake.error_code == 0
    assert handshake.mechanisms == ALL_MECHANISMS
    answer = connection.request(
        "SaslAuthenticate", version, auth_bytes=f"\0{user}\0{password}".encode()
    )
    return connection, answer


def test_sasl_authenticate_wrong_password_then_close(secured, users):
    connection, answer = _raw_plain_authenticate(
        secured.ports["SASL_PLAINTEXT"], None, "alice", "wrong"
    )
    assert answer.error_code == errors.SaslAuthenticationException.code
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert connection.closed_by_broker()
    # An unknown user reads the same.
    connection, answer = _raw_plain_authenticate(
        secured.ports["SASL_PLAINTEXT"], None, "mallory", "wrong"
    )
    assert answer.error_message == "Authentication failed: Invalid username or password"


def test_requests_before_authentication_close_the_connection(secured, users):
    port = secured.ports["SASL_PLAINTEXT"]
    connection = RawConnection(port)
    connection.send("Metadata", 4, topics=None)
    assert connection.closed_by_broker()
    # ApiVersions is answered, and lists the SASL APIs.
    connection = RawConnection(port)
    versions = connection.request("ApiVersions", 2)
    assert {17, 36} <= {k.api_key for k in versions.api_keys}
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    answer = connection.request("SaslHandshake", 1, mechanism="SCRAM-SHA-1")
    assert answer.error_code == errors.UnsupportedSaslMechanismException.code
    assert answer.mechanisms == ALL_MECHANISMS
    assert connection.closed_by_broker()
    # Mid-exchange, a request other than SaslAuthenticate.
    connection = RawConnection(port)
    assert connection.request("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    connection.send("Metadata", 4, topics=None)
    assert connection.closed_by_broker()


def test_authenticated_connection_serves_requests_as_its_user(secured, users):
    connection, answer = _raw_plain_authenticate(
        secured.ports["SASL_PLAINTEXT"], None, "bob", users["bob"]
    )
    assert answer.error_code == 0 and answer.session_lifetime_ms == 0
    assert connection.request("Metadata", 4, topics=None).brokers
    principals = [c.principal for c in secured.broker.socket_servers["SASL_PLAINTEXT"].connections]
    assert KafkaPrincipal("User", "bob") in principals
    # A second SaslAuthenticate is out of place: Kafka's KafkaApis answer.
    late = connection.request("SaslAuthenticate", 1, auth_bytes=b"\0bob\0x")
    assert late.error_code == errors.IllegalSaslStateException.code
    connection.close()


def test_sasl_handshake_v0_raw_tokens(secured, users):
    connection = RawConnection(secured.ports["SASL_PLAINTEXT"])
    assert connection.request("SaslHandshake", 0, mechanism="PLAIN").error_code == 0
    connection.send_frame(f"\0alice\0{users['alice']}".encode())
    assert connection.read_frame() == b""
    assert connection.request("Metadata", 4, topics=None).brokers
    connection.close()
    connection = RawConnection(secured.ports["SASL_PLAINTEXT"])
    assert connection.request("SaslHandshake", 0, mechanism="PLAIN").error_code == 0
    connection.send_frame(b"\0alice\0wrong")
    assert connection.closed_by_broker()


def _client_context(ca, cert=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert_path)
    if cert is not None:
        context.load_cert_chain(cert.cert_path, cert.key_path)
    return context


def _principal_of(secured, listener, connection) -> KafkaPrincipal:
    local_port = connection.sock.getsockname()[1]
    server = secured.broker.socket_servers[listener]
    found = []
    wait_until(
        lambda: (
            found.extend(c.principal for c in server.connections if c.peer[1] == local_port)
            or found
        ),
        timeout=10,
    )
    return found[0]


def test_mtls_principal_from_the_client_certificate(secured, tls_ca):
    port = secured.ports["SSL"]
    # CN=Alice,OU=Eng,... -> alice@eng by the first rule (lower-cased).
    alice = RawConnection(port, _client_context(tls_ca, tls_ca.alice))
    assert alice.request("ApiVersions", 2).error_code == 0
    assert _principal_of(secured, "SSL", alice) == KafkaPrincipal("User", "alice@eng")
    # No OU: DEFAULT, the whole subject.
    bob = RawConnection(port, _client_context(tls_ca, tls_ca.bob))
    assert bob.request("ApiVersions", 2).error_code == 0
    assert _principal_of(secured, "SSL", bob) == KafkaPrincipal("User", tls_ca.bob.subject)
    # ssl.client.auth=requested: no certificate is ANONYMOUS.
    anonymous = RawConnection(port, _client_context(tls_ca))
    assert anonymous.request("ApiVersions", 2).error_code == 0
    assert _principal_of(secured, "SSL", anonymous) == ANONYMOUS


def test_tls_listener_refuses_plaintext_and_untrusted_clients(secured, tls_ca, tmp_path):
    port = secured.ports["SSL"]
    plain = RawConnection(port)
    plain.send("ApiVersions", 2)
    with pytest.raises((ConnectionError, OSError)):
        plain.read_frame()
    stranger = TestCA(str(tmp_path))
    with pytest.raises(ssl.SSLError):
        RawConnection(port, _client_context(stranger))
    # The broker still serves.
    good = RawConnection(port, _client_context(tls_ca))
    assert good.request("ApiVersions", 2).error_code == 0


def test_scram_users_added_and_removed_at_runtime(secured, tls_ca, users):
    from confluent_kafka import KafkaError, Producer

    carol = secrets.token_urlsafe(12)
    port = secured.ports["SASL_SSL"]

    def connects(password) -> bool:
        """Whether a SCRAM-SHA-512 producer as carol gets metadata (a new
        authentication each time)."""
        errors_seen = []
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": tls_ca.cert_path,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "carol",
                "sasl.password": password,
                "error_cb": errors_seen.append,
            }
        )
        for _ in range(60):
            try:
                producer.list_topics(timeout=0.5)
                return True
            except Exception:
                producer.poll(0.1)  # serves error_cb
                if any(e.code() == KafkaError._AUTHENTICATION for e in errors_seen):
                    return False
        raise AssertionError(f"neither connected nor refused: {errors_seen}")

    assert not connects(carol)
    configs(
        secured,
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
        "--alter",
        "--add-config",
        f"SCRAM-SHA-512=[iterations=8192,password={carol}]",
    )
    assert _describe_scram(secured, ["carol"]) == {"carol": [(2, 8192)]}
    assert (
        configs(secured, "--entity-type", "users", "--entity-name", "carol", "--describe")
        == "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192\n"
    )
    assert connects(carol)
    assert not connects("not-" + carol)
    configs(
        secured,
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
        "--alter",
        "--delete-config",
        "SCRAM-SHA-512",
    )
    assert not connects(carol)
    # Every user with credentials (SCRAM-SHA-256 is type 1, SCRAM-SHA-512 type 2).
    assert _describe_scram(secured, None) == {"alice": [(1, 4096), (2, 4096)]}


def _describe_scram(secured, users):
    connection = RawConnection(secured.ports["PLAINTEXT"])
    try:
        answer = connection.request(
            "DescribeUserScramCredentials",
            0,
            users=None if users is None else [{"name": u} for u in users],
        )
    finally:
        connection.close()
    assert answer.error_code == 0
    return {
        r.user: [(i.mechanism, i.iterations) for i in r.credential_infos]
        for r in answer.results
        if r.error_code == 0
    }


def _oauth_exchange(port, context, token: str, version: int = 2):
    connection = RawConnection(port, context)
    assert connection.request("SaslHandshake", 1, mechanism="OAUTHBEARER").error_code == 0
    answer = connection.request(
        "SaslAuthenticate", version, auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    )
    return connection, answer


def test_oauthbearer_tokens_are_validated(secured, tls_ca, jwks):
    key, _ = jwks
    tls = _client_context(tls_ca)
    # A valid token: the session lasts until the token expires (v1+).
    connection, answer = _oauth_exchange(
        secured.ports["SASL_SSL"], tls, signed_token(key, "dave", lifetime_s=600)
    )
    assert answer.error_code == 0 and 500_000 < answer.session_lifetime_ms <= 600_000
    assert _principal_of(secured, "SASL_SSL", connection) == KafkaPrincipal("User", "dave")
    connection.close()
    # Refused: expired, another audience, another key, unsecured where keys are required.
    from joserfc.jwk import ECKey

    stranger = ECKey.generate_key("P-256", parameters={"kid": key.kid})
    for token in (
        signed_token(key, lifetime_s=-120),
        signed_token(key, audience="other"),
        signed_token(stranger),
        unsecured_token(),
    ):
        connection, answer = _oauth_exchange(secured.ports["SASL_SSL"], tls, token)
        # Kafka's challenge, acknowledged with %x01, then the failure.
        assert answer.error_code == 0 and json.loads(answer.auth_bytes) == {
            "status": "invalid_token"
        }
        final = connection.request("SaslAuthenticate", 2, auth_bytes=b"\x01")
        assert final.error_code == errors.SaslAuthenticationException.code
        assert final.error_message == '{"status":"invalid_token"}'
        assert connection.closed_by_broker()
    # The unsecured validator takes unsecured tokens only, and checks expiry too.
    connection, answer = _oauth_exchange(
        secured.ports["SASL_PLAINTEXT"], None, unsecured_token("erin")
    )
    assert answer.error_code == 0
    assert _principal_of(secured, "SASL_PLAINTEXT", connection) == KafkaPrincipal("User", "erin")
    connection, answer = _oauth_exchange(
        secured.ports["SASL_PLAINTEXT"], None, unsecured_token(lifetime_s=-120)
    )
    assert json.loads(answer.auth_bytes) == {"status": "invalid_token"}


def test_sessions_expire_unless_reauthenticated(secured, users):
    """KIP-368 over the raw protocol: the lifetime is announced, a
    re-authentication on the same connection renews it, a request on an
    expired session closes the connection, and a re-authentication may not
    change the principal."""
    port = secured.ports["REAUTH"]
    connection, answer = _raw_plain_authenticate(port, None, "alice", users["alice"])
    assert answer.error_code == 0 and answer.session_lifetime_ms == REAUTH_MS
    started = time.monotonic()
    # Re-authenticate before the end, then use the connection past the first end.
    assert connection.request("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    renewed = connection.request(
        "SaslAuthenticate", 2, auth_bytes=f"\0alice\0{users['alice']}".encode()
    )
    assert renewed.error_code == 0 and renewed.session_lifetime_ms == REAUTH_MS
    renewed_at = time.monotonic()
    wait_until(lambda: time.monotonic() > started + REAUTH_MS / 1000 + 0.1, timeout=10)
    if time.monotonic() < renewed_at + REAUTH_MS / 1000:  # still inside the renewed session
        assert connection.request("Metadata", 4, topics=None).brokers
    # Past the renewed session: the next request closes the connection.
    wait_until(lambda: time.monotonic() > renewed_at + REAUTH_MS / 1000 + 0.1, timeout=10)
    connection.send("Metadata", 4, topics=None)
    assert connection.closed_by_broker()
    # Another user cannot take over the connection.
    connection, _ = _raw_plain_authenticate(port, None, "alice", users["alice"])
    assert connection.request("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    refused = connection.request(
        "SaslAuthenticate", 2, auth_bytes=f"\0bob\0{users['bob']}".encode()
    )
    assert refused.error_code == errors.SaslAuthenticationException.code
    assert refused.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert connection.closed_by_broker()


def test_librdkafka_reauthenticates_in_place(secured, users, tls_ca):
    """confluent-kafka keeps producing across several session lifetimes on
    the same connections, re-authenticating before each session ends."""
    from confluent_kafka import Producer

    handler = secured.broker.socket_servers["REAUTH"]._handler
    before = handler.reauthentications
    conf = _settings("plain", "SASL_PLAINTEXT", tls_ca, users)
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{secured.ports['REAUTH']}", **conf})
    delivered = []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline or handler.reauthentications < before + 2:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        assert time.monotonic() < deadline + 20, "no re-authentication"
    assert delivered and all(err is None for err in delivered)
    assert handler.reauthentications >= before + 2


def test_kfast_client_reauthenticates_in_place(secured, users, tls_ca):
    """kfast's own client keeps one connection across several session
    lifetimes: it logs in again before each session ends (KIP-368), holding
    the requests of concurrent senders meanwhile, and none of them fails."""
    import asyncio

    from kfast.client.connection import BrokerConnection
    from kfast.client.properties import Client, parse_client_properties, read_properties
    from kfast.protocol import MetadataRequest

    handler = secured.broker.socket_servers["REAUTH"]._handler
    before = handler.reauthentications
    security = parse_client_properties(
        read_properties(_java_properties(_settings("plain", "SASL_PLAINTEXT", tls_ca, users))),
        Client.ADMIN,
        strict=True,
    ).security

    async def run():
        connection = await BrokerConnection.open(
            "127.0.0.1", secured.ports["REAUTH"], security=security, request_timeout=10
        )
        answered = 0

        async def sender():
            nonlocal answered
            deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
            while time.monotonic() < deadline:
                response = await connection.send(MetadataRequest(topics=[]))
                assert response.brokers
                answered += 1
                await asyncio.sleep(0.02)

        try:
            await asyncio.gather(*(sender() for _ in range(3)))
            return connection.connected, answered
        finally:
            await connection.close()

    connected, answered = asyncio.run(run())
    assert connected and answered > 50
    # Three sessions ended in the window: at least two were renewed in place.
    assert handler.reauthentications >= before + 2


def test_required_client_certificate(secured, tls_ca):
    port = secured.ports["MTLS"]
    with_cert = RawConnection(port, _client_context(tls_ca, tls_ca.alice))
    assert with_cert.request("ApiVersions", 2).error_code == 0
    # TLS 1.3: the refusal (certificate required) arrives after the handshake.
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        RawConnection(port, _client_context(tls_ca)).request("ApiVersions", 2)


def test_kfast_client_presents_its_keystore_where_a_certificate_is_required(secured, tls_ca, users):
    port = secured.ports["MTLS"]
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    assert _roundtrip_kfast(port, _settings("mtls", "SSL", tls_ca, users), topic) == b"v1"
    # Without the keystore properties the broker refuses the connection.
    from kfast.client import KafkaAdmin
    from kfast.client.properties import Client, parse_client_properties, read_properties

    parsed = parse_client_properties(
        read_properties(_java_properties(_settings("tls", "SSL", tls_ca, users))),
        Client.ADMIN,
        strict=True,
    )

    async def describe():
        async with KafkaAdmin(
            f"127.0.0.1:{port}", request_timeout=5, metadata_timeout=5, **parsed.cluster_arguments()
        ) as admin:
            return await admin.list_topics()

    with pytest.raises((errors.KafkaError, ssl.SSLError, ConnectionError, OSError)):
        asyncio.run(describe())
