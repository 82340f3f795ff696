"""ScramControlManager through the QuorumController: AlterUserScramCredentials
validation with Kafka's errors, replay on restart and from a snapshot; and
the kafka-configs.sh value grammar of ``kfast configs``."""

from __future__ import annotations

import asyncio
import os

import pytest

from kfast.controller.metadata.records import UserScramCredentialRecord
from kfast.controller.scram_control import ScramControlManager
from kfast.controller.snapshot import image_records
from kfast.protocol import errors
from kfast.security.scram import MECHANISMS, ScramCredential
from kfast.tools.configs import UsageError
from kfast.tools.scram_credentials import alteration, parse_credential

from .memory_controller import InMemoryController, make_controller

SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]
PASSWORD = os.urandom(8).hex()


def controller(path, log=None) -> InMemoryController:
    return make_controller(path, log)


def upsertion(user, mechanism=SHA256, iterations=4096, salt=b"salt-1234"):
    return (
        user,
        mechanism.type,
        iterations,
        salt,
        mechanism.salted_password(PASSWORD.encode(), salt, iterations),
    )


def test_alter_validate_and_replay(tmp_path):
    async def main():
        c = controller(tmp_path)
        await c.start()
        results = dict(
            await c.alter_user_scram_credentials(
                [("ghost", SHA256.type)],
                [
                    upsertion("alice"),
                    upsertion("alice", SHA512, 8192),
                    upsertion(""),
                    upsertion("few", iterations=4095),
                    upsertion("many", iterations=16385),
                    ("odd", 3, 4096, b"s", b"p"),
                    upsertion("twice"),
                    upsertion("twice"),
                ],
            )
        )
        assert results["alice"] is None
        assert isinstance(results["ghost"], errors.ResourceNotFoundException)
        assert isinstance(results[""], errors.UnacceptableCredentialException)
        assert str(results["few"]) == "Too few iterations"
        assert str(results["many"]) == "Too many iterations"
        assert isinstance(results["odd"], errors.UnsupportedSaslMechanismException)
        assert isinstance(results["twice"], errors.DuplicateResourceException)
        expected = ScramCredential.generate(SHA512, PASSWORD, 8192, salt=b"salt-1234")
        assert c.image.scram_credentials[("alice", SHA512.type)] == expected
        assert set(c.image.scram_credentials) == {("alice", 1), ("alice", 2)}
        # Deleting one mechanism keeps the other.
        assert await c.alter_user_scram_credentials([("alice", SHA256.type)], []) == [
            ("alice", None)
        ]
        await c.shutdown()
        again = controller(tmp_path, c.log)  # a restart: the log replayed
        await again.start()
        assert set(again.image.scram_credentials) == {("alice", 2)}
        fresh = ScramControlManager()
        for record in image_records(again.image, 0):
            if isinstance(record, UserScramCredentialRecord):
                fresh.replay(record)
        assert fresh.credentials == dict(again.image.scram_credentials)
        await again.shutdown()

    asyncio.run(main())


def test_kafka_configs_credential_values():
    assert parse_credential("SCRAM-SHA-256", f"iterations=8192,password={PASSWORD}") == (
        8192,
        PASSWORD,
    )
    assert parse_credential("SCRAM-SHA-512", "password=a,b=c") == (4096, "a,b=c")
    with pytest.raises(UsageError, match="less than the minimum 4096"):
        parse_credential("SCRAM-SHA-256", "iterations=10,password=x")
    with pytest.raises(UsageError, match=r"Invalid credential property SCRAM-SHA-256=\[hidden\]"):
        parse_credential("SCRAM-SHA-256", "pass=x")
    request = alteration("bob", {"SCRAM-SHA-512": f"password={PASSWORD}"}, ["SCRAM-SHA-256"])
    assert [(d.name, d.mechanism) for d in request.deletions] == [("bob", 1)]
    (up,) = request.upsertions
    assert (up.name, up.mechanism, up.iterations, len(up.salt)) == ("bob", 2, 4096, 32)
    # Only the salted password travels.
    assert up.salted_password == SHA512.salted_password(PASSWORD.encode(), up.salt, 4096)
    assert PASSWORD.encode() not in bytes(up.salted_password)
