"""SCRAM credentials in ``kfast configs`` (kafka-configs.sh's user SCRAM
configs), through AlterUserScramCredentials / DescribeUserScramCredentials.

    kfast configs --bootstrap-server H:P --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=...],SCRAM-SHA-512=[password=...]'
    kfast configs --bootstrap-server H:P --entity-type users --entity-name alice --alter \\
        --delete-config SCRAM-SHA-512
    kfast configs --bootstrap-server H:P --entity-type users --entity-name alice --describe
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192

Value grammar (kafka-configs.sh's, the brackets already removed)::

    credential := ["iterations=" int ","] "password=" text     (iterations 4096 by default)

The password is salted and hashed here (a random 32-byte salt, PBKDF2 with
the mechanism's hash); only the salted password travels, as Kafka's admin
client sends it.
"""
from __future__ import annotations

import os
import re

from kfast.protocol import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    errors,
)
from kfast.security.scram import MECHANISM_TYPES, MECHANISMS

DEFAULT_ITERATIONS = 4096
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)


def handles(key: str) -> bool:
    return key in MECHANISMS


def parse_credential(mechanism: str, value: str) -> tuple[int, str]:
    """(iterations, password) of one ``--add-config`` value."""
    from kfast.tools.configs import UsageError

    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        raise UsageError(f"Invalid credential property {mechanism}=[hidden]")
    iterations_text, password = match.groups()
    iterations = int(iterations_text) if iterations_text not in (None, "", "-1") \
        else DEFAULT_ITERATIONS
    minimum = MECHANISMS[mechanism].min_iterations
    if iterations < minimum:
        raise UsageError(f"Iterations {iterations} is less than the minimum {minimum} "
                         f"required for {mechanism}")
    return iterations, password


def alteration(user: str, add: dict[str, str], delete: list[str]):
    """The AlterUserScramCredentials request for one user."""
    upsertions = []
    for mechanism, value in add.items():
        iterations, password = parse_credential(mechanism, value)
        scram = MECHANISMS[mechanism]
        salt = os.urandom(32)
        upsertions.append(AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name=user, mechanism=scram.type, iterations=iterations, salt=salt,
            salted_password=scram.salted_password(password.encode("utf-8"), salt, iterations)))
    deletions = [AlterUserScramCredentialsRequest.ScramCredentialDeletion(
        name=user, mechanism=MECHANISMS[mechanism].type) for mechanism in delete]
    return AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)


async def alter(admin, user: str, add: dict[str, str], delete: list[str]) -> None:
    response = await admin.cluster.send(None, alteration(user, add, delete))
    for result in response.results:
        if result.error_code:
            error = errors.for_code(result.error_code)
            raise error(result.error_message or error.default_message)


async def describe(admin, users: list[str] | None, out) -> None:
    request = DescribeUserScramCredentialsRequest(
        users=[DescribeUserScramCredentialsRequest.UserName(name=u) for u in users or ()])
    response = await admin.cluster.send(None, request)
    if response.error_code:
        error = errors.for_code(response.error_code)
        raise error(response.error_message or error.default_message)
    for result in response.results:
        if result.error_code == errors.ResourceNotFoundException.code:
            continue  # kafka-configs.sh lists only users that have credentials
        if result.error_code:
            error = errors.for_code(result.error_code)
            out.write(f"Error retrieving SCRAM credential configs for user-principal "
                      f"'{result.user}': {error.__name__}: {result.error_message}\n")
            continue
        text = ", ".join(f"{MECHANISM_TYPES[i.mechanism].name}=iterations={i.iterations}"
                         for i in result.credential_infos if i.mechanism in MECHANISM_TYPES)
        out.write(f"SCRAM credential configs for user-principal '{result.user}' are {text}\n")
