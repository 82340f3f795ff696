"""No silent acceptance (issue 19 item 5): a security setting kfast does not
implement stops the start naming it; the ones it implements resolve with
Kafka's per-listener precedence."""

import subprocess
import sys

import pytest

from kfast.config import ConfigException, KafkaConfig
from kfast.security.listener import ListenerSecurity
from kfast.tools.serve import build_config, new_server

REFUSED = [
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"listener.name.sasl_ssl.gssapi.sasl.kerberos.service.name": "kafka"}, "kerberos"),
    ({"ssl.engine.factory.class": "com.example.Engine"}, "ssl.engine.factory.class"),
    ({"ssl.provider": "BC"}, "ssl.provider"),
    ({"sasl.login.callback.handler.class": "x.Y"}, "sasl.login.callback.handler.class"),
    ({"principal.builder.class": "com.example.Builder"}, "principal.builder.class"),
    ({"sasl.server.callback.handler.class": "com.example.Handler"}, "sasl.server.callback"),
    ({"ssl.keystore.locaton": "/x"}, "ssl.keystore.locaton"),  # a typo
    ({"listener.name.ssl.ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"listener.name.x.scram-sha-256.sasl.bogus": "1"}, "sasl.bogus"),
    # Brokers take JAAS configs per listener and mechanism only.
    ({"sasl.jaas.config": "M required;"}, "sasl.jaas.config"),
    ({"listener.name.sasl_ssl.sasl.jaas.config": "M required;"}, "sasl.jaas.config"),
]


@pytest.mark.parametrize("props,named", REFUSED, ids=[n for _, n in REFUSED])
def test_unimplemented_security_settings_are_refused(props, named):
    with pytest.raises(ConfigException, match=named.replace(".", r"\.")):
        KafkaConfig(props)


def _listener_config(tmp_path, **props):
    base = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path),
        "process.roles": "broker,controller",
        "node.id": "1",
    }
    base.update(props)
    return build_config(None, [f"{k}={v}" for k, v in base.items()])


def test_sasl_listener_refuses_gssapi_and_needs_plain_users(tmp_path):
    # Kafka's default sasl.enabled.mechanisms is GSSAPI.
    with pytest.raises(ConfigException, match="GSSAPI"):
        new_server(_listener_config(tmp_path))
    with pytest.raises(ConfigException, match="SASL mechanism DIGEST-MD5"):
        new_server(_listener_config(tmp_path, **{"sasl.enabled.mechanisms": "DIGEST-MD5"}))
    with pytest.raises(ConfigException, match="plain.sasl.jaas.config"):
        new_server(_listener_config(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN"}))


def test_ssl_listener_needs_a_keystore_and_rejects_non_pkcs12_jks(tmp_path):
    config = KafkaConfig({"listeners": "SSL://127.0.0.1:0"}, strict=True)
    with pytest.raises(ConfigException, match="keystore"):
        ListenerSecurity.from_config(config, "SSL", "SSL")
    jks = tmp_path / "k.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)  # a JKS magic number
    config = KafkaConfig({"ssl.keystore.location": str(jks), "ssl.keystore.password": "p"})
    with pytest.raises(ConfigException, match="PKCS12"):
        ListenerSecurity.from_config(config, "SSL", "SSL")


def test_listener_prefix_wins():
    config = KafkaConfig(
        {
            "ssl.client.auth": "requested",
            "listener.name.internal.ssl.client.auth": "required",
            "connections.max.reauth.ms": "1000",
            "listener.name.internal.plain.connections.max.reauth.ms": "5",
        }
    )
    assert config.listener_value("INTERNAL", "ssl.client.auth") == "required"
    assert config.listener_value("EXTERNAL", "ssl.client.auth") == "requested"
    assert config.listener_value("INTERNAL", "connections.max.reauth.ms", "PLAIN") == 5
    assert config.listener_value("INTERNAL", "connections.max.reauth.ms", "SCRAM-SHA-256") == 1000


def test_kfast_serve_exits_2_naming_the_setting(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "serve",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "sasl.enabled.mechanisms" in lines[0] and "GSSAPI" in lines[0]
