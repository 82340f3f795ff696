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

``kfast storage format --add-scram`` (kafka-storage.sh's, Kafka's ScramParser)
turns its arguments into UserScramCredentialRecords for the bootstrap
metadata::

    argument  := mechanism "=[" component ("," component)* "]"
    component := key "=" value        (a value in double quotes loses them)
    keys      := name (required), password | salt + saltedpassword (base64),
                 iterations (4096 by default, within the mechanism's bounds)
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from kfast.protocol import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    errors,
)
from kfast.security.scram import MECHANISM_TYPES, MECHANISMS, ScramCredential

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
    iterations = (
        int(iterations_text) if iterations_text not in (None, "", "-1") else DEFAULT_ITERATIONS
    )
    minimum = MECHANISMS[mechanism].min_iterations
    if iterations < minimum:
        raise UsageError(
            f"Iterations {iterations} is less than the minimum {minimum} required for {mechanism}"
        )
    return iterations, password


def alteration(user: str, add: dict[str, str], delete: list[str]):
    """The AlterUserScramCredentials request for one user."""
    upsertions = []
    for mechanism, value in add.items():
        iterations, password = parse_credential(mechanism, value)
        scram = MECHANISMS[mechanism]
        salt = os.urandom(32)
        upsertions.append(
            AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=user,
                mechanism=scram.type,
                iterations=iterations,
                salt=salt,
                salted_password=scram.salted_password(password.encode("utf-8"), salt, iterations),
            )
        )
    deletions = [
        AlterUserScramCredentialsRequest.ScramCredentialDeletion(
            name=user, mechanism=MECHANISMS[mechanism].type
        )
        for mechanism in delete
    ]
    return AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)


async def alter(admin, user: str, add: dict[str, str], delete: list[str]) -> None:
    response = await admin.cluster.send(None, alteration(user, add, delete))
    for result in response.results:
        if result.error_code:
            error = errors.for_code(result.error_code)
            raise error(result.error_message or error.default_message)


async def describe(admin, users: list[str] | None, out) -> None:
    request = DescribeUserScramCredentialsRequest(
        users=[DescribeUserScramCredentialsRequest.UserName(name=u) for u in users or ()]
    )
    response = await admin.cluster.send(None, request)
    if response.error_code:
        error = errors.for_code(response.error_code)
        raise error(response.error_message or error.default_message)
    for result in response.results:
        if result.error_code == errors.ResourceNotFoundException.code:
            continue  # kafka-configs.sh lists only users that have credentials
        if result.error_code:
            error = errors.for_code(result.error_code)
            out.write(
                f"Error retrieving SCRAM credential configs for user-principal "
                f"'{result.user}': {error.__name__}: {result.error_message}\n"
            )
            continue
        text = ", ".join(
            f"{MECHANISM_TYPES[i.mechanism].name}=iterations={i.iterations}"
            for i in result.credential_infos
            if i.mechanism in MECHANISM_TYPES
        )
        out.write(f"SCRAM credential configs for user-principal '{result.user}' are {text}\n")


class AddScramError(Exception):
    """An --add-scram argument kafka-storage.sh refuses (its FormatterException)."""


def _split_component(component: str) -> tuple[str, str]:
    key, equals, value = component.partition("=")
    if not equals:
        raise AddScramError(f"No equals sign found in SCRAM component: {component}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AddScramError(f"Failed to decode given {what}: {value}") from None


def add_scram_record(argument: str):
    """The UserScramCredentialRecord of one ``--add-scram`` argument."""
    from kfast.controller.scram_control import scram_record

    mechanism_name, equals, config = argument.strip().partition("=")
    if not equals:
        raise AddScramError(f"Failed to find equals sign in SCRAM argument '{argument.strip()}'")
    scram = MECHANISMS.get(mechanism_name)
    if scram is None:
        raise AddScramError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise AddScramError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise AddScramError("Expected configuration string to end with ]")
    components = dict(_split_component(c) for c in config[1:-1].split(","))
    name = components.pop("name", None)
    if name is None:
        raise AddScramError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = _base64(salt_text, "salt") if salt_text is not None else os.urandom(32)
    iterations_text = components.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else DEFAULT_ITERATIONS
    except ValueError:
        raise AddScramError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    if password is None and salted_text is None:
        raise AddScramError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt_text is None:
        raise AddScramError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if components:
        raise AddScramError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < scram.min_iterations:
        raise AddScramError(
            f"The 'iterations' value must be >= {scram.min_iterations} for "
            f"add-scram using {scram.name}"
        )
    if iterations > scram.max_iterations:
        raise AddScramError(
            f"The 'iterations' value must be <= {scram.max_iterations} for "
            f"add-scram using {scram.name}"
        )
    if password is not None:
        salted = scram.salted_password(password.encode("utf-8"), salt, iterations)
    else:
        assert salted_text is not None  # refused above when neither is given
        salted = _base64(salted_text, "saltedPassword")
    return scram_record(
        name, scram.type, ScramCredential.from_salted_password(scram, salt, salted, iterations)
    )
