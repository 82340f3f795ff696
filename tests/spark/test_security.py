"""The ``kfast`` sink and source over TLS + SASL (SASL_SSL, PLAIN): Spark
writes a topic through a secured listener and reads it back, every task
building its own TLS context and SASL login from the ``kafka.*`` options;
a wrong password fails the read with the broker's authentication error."""

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing import KfastBroker
from kfast.testing.certificates import TestCA

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "secured"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{}";'


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    ca = TestCA(str(tmp_path_factory.mktemp("ca")))
    ca.server = ca.issue("localhost", server=True)
    return ca


@pytest.fixture(scope="module")
def broker(ca, tmp_path_factory):
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": ca.server.keystore_path,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'user_alice="alice-secret";'
        ),
        "num.partitions": 2,
    }
    with KfastBroker(props, data_dir=str(tmp_path_factory.mktemp("kfast-sec"))) as broker:
        broker.secured = f"127.0.0.1:{broker.broker.bound_ports['SASL_SSL']}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(30)
        yield broker


def secured_options(broker, ca, password="alice-secret"):
    return {
        "kafka.bootstrap.servers": broker.secured,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": ca.cert_path,
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": JAAS.format(password),
    }


def test_write_and_read_back_over_sasl_ssl(spark, broker, ca):
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("kfast")
        .options(**secured_options(broker, ca))
        .option("topic", TOPIC)
        .mode("append")
        .save()
    )
    df = (
        spark.read.format("kfast").options(**secured_options(broker, ca)).option("subscribe", TOPIC)
    )
    got = sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in df.load().collect())
    assert got == sorted(rows)


def test_a_wrong_password_fails_the_read_with_the_brokers_error(spark, broker, ca):
    df = (
        spark.read.format("kfast")
        .options(**secured_options(broker, ca, password="wrong"))
        .option("subscribe", TOPIC)
    )
    with pytest.raises(Exception, match="SaslAuthenticationException|Authentication failed"):
        df.load().collect()
