"""kfast storage format --add-scram (kafka-storage.sh's, Kafka's ScramParser):
the bootstrap checkpoint holds the default feature levels and one
UserScramCredentialRecord per argument, the credential a SCRAM client
proves; malformed arguments are refused with kafka-storage.sh's messages."""

from __future__ import annotations

import base64
import os
import secrets

import pytest

from kfast.cli import main
from kfast.controller.bootstrap_metadata import read_bootstrap_records
from kfast.controller.feature_control import FeatureControlManager
from kfast.controller.metadata.records import UserScramCredentialRecord
from kfast.security.scram import MECHANISMS, ScramCredential

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def write_config(tmp_path):
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=1@localhost:9093\n"
        f"log.dirs={data}\n"
    )
    return config, data


def format_with(tmp_path, capsys, *arguments):
    config, data = write_config(tmp_path)
    status = main(
        [
            "storage",
            "format",
            "--cluster-id",
            CLUSTER_ID,
            "--config",
            str(config),
            *[f"--add-scram={a}" for a in arguments],
        ]
    )
    return status, capsys.readouterr().err, data


def test_credentials_go_into_the_bootstrap_checkpoint(tmp_path, capsys):
    password = secrets.token_urlsafe(8)
    salt = os.urandom(16)
    salted = MECHANISMS["SCRAM-SHA-256"].salted_password(b"given", salt, 4096)
    status, err, data = format_with(
        tmp_path,
        capsys,
        f"SCRAM-SHA-512=[name=alice,iterations=8192,password={password}]",
        f'SCRAM-SHA-256=[name="bob",salt="{base64.b64encode(salt).decode()}",'
        f'saltedpassword="{base64.b64encode(salted).decode()}"]',
    )
    assert status == 0, err
    records = read_bootstrap_records(str(data))
    defaults = FeatureControlManager().bootstrap_records()
    assert records[: len(defaults)] == defaults
    alice, bob = records[len(defaults) :]
    assert isinstance(alice, UserScramCredentialRecord)
    assert (alice.name, alice.mechanism, alice.iterations) == ("alice", 2, 8192)
    expected = ScramCredential.generate(
        MECHANISMS["SCRAM-SHA-512"], password, 8192, salt=alice.salt
    )
    assert (alice.stored_key, alice.server_key) == (expected.stored_key, expected.server_key)
    expected = ScramCredential.from_salted_password(MECHANISMS["SCRAM-SHA-256"], salt, salted, 4096)
    assert (bob.name, bob.mechanism, bob.salt, bob.iterations) == ("bob", 1, salt, 4096)
    assert (bob.stored_key, bob.server_key) == (expected.stored_key, expected.server_key)


def test_without_add_scram_no_bootstrap_checkpoint(tmp_path, capsys):
    status, _, data = format_with(tmp_path, capsys)
    assert status == 0 and read_bootstrap_records(str(data)) is None


@pytest.mark.parametrize(
    "argument, message",
    [
        ("SCRAM-SHA-512", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'"),
        (
            "SCRAM-SHA-1=[name=a,password=b]",
            "The add-scram mechanism SCRAM-SHA-1 is not supported.",
        ),
        ("SCRAM-SHA-512=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-512=[name=a,password=b", "Expected configuration string to end with ]"),
        ("SCRAM-SHA-512=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-512=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        (
            "SCRAM-SHA-512=[name=a,saltedpassword=AAAA]",
            "You must supply 'salt' with 'saltedpassword'",
        ),
        ("SCRAM-SHA-512=[name=a,password]", "No equals sign found in SCRAM component: password"),
        ("SCRAM-SHA-512=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=4095]", "must be >= 4096"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]", "must be <= 16384"),
        ("SCRAM-SHA-512=[name=a,salt=%%,saltedpassword=AAAA]", "Failed to decode given salt: %%"),
    ],
)
def test_malformed_arguments_are_refused(tmp_path, capsys, argument, message):
    status, err, data = format_with(tmp_path, capsys, argument)
    assert status == 1 and message in err
    assert not os.path.exists(data / "meta.properties")
