"""--command-config FILE of the admin tools (as kafka-topics.sh,
kafka-configs.sh, kafka-acls.sh, kafka-reassign-partitions.sh and
kafka-client-metrics.sh take it), against a SASL_PLAINTEXT listener whose
only authorized user is the one the file names."""

from __future__ import annotations

import secrets
import uuid

import pytest

from kfast.cli import main
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    """(bootstrap of the SASL listener, admin properties file, one with a
    wrong password)."""
    password = secrets.token_urlsafe(12)
    tmp = tmp_path_factory.mktemp("kfast-command-config")
    broker = KfastBroker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f'{PLAIN} user_admin="{password}" user_other="other";'
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "num.partitions": 1,
        },
        data_dir=str(tmp / "data"),
    )
    broker.start()

    def properties(name: str, user: str, secret: str) -> str:
        path = tmp / name
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={PLAIN} username="{user}" password="{secret}";\n'
            "client.id=ops-tool\n"
        )
        return str(path)

    bootstrap = f"127.0.0.1:{broker.broker.bound_ports['SASL_PLAINTEXT']}"
    yield (
        bootstrap,
        properties("admin.properties", "admin", password),
        properties("wrong.properties", "admin", "wrong"),
        properties("other.properties", "other", "other"),
    )
    broker.close()


def kfast(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_admin_tools_authenticate_with_the_command_config(sasl, capsys):
    bootstrap, admin, _, _ = sasl
    topic = f"cc-{uuid.uuid4().hex[:8]}"
    common = ("--bootstrap-server", bootstrap, "--command-config", admin)
    code, out = kfast(capsys, "topics", "--create", "--topic", topic, *common)
    assert (code, out) == (0, f"Created topic {topic}.\n")
    code, out = kfast(capsys, "topics", "--list", *common)
    assert code == 0 and topic in out.split()
    code, out = kfast(
        capsys,
        "configs",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--alter",
        "--add-config",
        "retention.ms=60000",
        *common,
    )
    assert code == 0, out
    code, out = kfast(
        capsys, "configs", "--entity-type", "topics", "--entity-name", topic, "--describe", *common
    )
    assert code == 0 and "retention.ms=60000" in out, out
    code, out = kfast(
        capsys,
        "acls",
        "--add",
        "--allow-principal",
        "User:other",
        "--operation",
        "Describe",
        "--topic",
        topic,
        *common,
    )
    assert code == 0, out
    code, out = kfast(capsys, "acls", "--list", "--topic", topic, *common)
    assert code == 0 and "principal=User:other" in out and "operation=DESCRIBE" in out, out
    code, out = kfast(capsys, "reassign-partitions", "--list", *common)
    assert code == 0, out
    code, out = kfast(capsys, "client-metrics", "--list", *common)
    assert code == 0, out


def test_connection_tools_authenticate_with_the_command_config(sasl, capsys):
    """The tools that talk to single brokers (kafka-consumer-groups.sh,
    kafka-transactions.sh, kafka-cluster.sh, kafka-features.sh,
    kafka-leader-election.sh)."""
    bootstrap, admin, wrong, _ = sasl
    common = ("--bootstrap-server", bootstrap, "--command-config", admin)
    code, out = kfast(capsys, "cluster", "cluster-id", *common)
    assert code == 0 and out.startswith("Cluster ID: "), out
    code, out = kfast(capsys, "features", *common, "describe")
    assert code == 0 and "metadata.version" in out, out
    code, out = kfast(capsys, "groups", "list", *common)
    assert code == 0, out
    code, out = kfast(capsys, "transactions", *common, "list")
    assert code == 0 and "TransactionalId" in out, out
    code, out = kfast(
        capsys, "leader-election", *common, "--election-type", "PREFERRED", "--all-topic-partitions"
    )
    assert code == 0, out
    # The same tools with a wrong password fail on authentication (options
    # after the command: kafka-transactions.sh takes them there too).
    for argv in (("cluster", "cluster-id"), ("groups", "list"), ("transactions", "list")):
        code, out = kfast(capsys, *argv, "--bootstrap-server", bootstrap, "--command-config", wrong)
        assert code == 1 and "Authentication failed" in out, (argv, out)


def test_the_file_decides_who_the_tool_is(sasl, capsys):
    bootstrap, _, wrong, other = sasl
    # A wrong password: the broker's SASL answer, not a hang.
    code, out = kfast(
        capsys, "topics", "--list", "--bootstrap-server", bootstrap, "--command-config", wrong
    )
    assert code == 1 and "Authentication failed" in out, out
    # Authenticated as a user without CREATE on the cluster or the topic.
    topic = f"cc-{uuid.uuid4().hex[:8]}"
    code, out = kfast(
        capsys,
        "topics",
        "--create",
        "--topic",
        topic,
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        other,
    )
    assert (code, out.splitlines()[-1]) == (
        1,
        f"Error while executing topic command : {topic}: Authorization failed.",
    ), out
    # Without the file, the SASL listener is not spoken to in PLAINTEXT.
    code, out = kfast(
        capsys, "topics", "--list", "--bootstrap-server", bootstrap, "--command-timeout", "3"
    )
    assert (code, out.splitlines()[-1]) == (
        1,
        f"Error while executing topic command : {bootstrap} closed the connection",
    ), out


def test_a_bad_command_config_is_refused(sasl, capsys, tmp_path):
    bootstrap, _, _, _ = sasl
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    code, out = kfast(
        capsys, "topics", "--list", "--bootstrap-server", bootstrap, "--command-config", str(bad)
    )
    assert code == 1 and "sasl.mechanism" in out, out
    code, out = kfast(
        capsys,
        "configs",
        "--entity-type",
        "brokers",
        "--describe",
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        str(tmp_path / "missing.properties"),
    )
    assert code == 1 and "--command-config" in out, out
