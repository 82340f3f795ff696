"""The principal a broker puts in an Envelope (Kafka's
DefaultKafkaPrincipalBuilder serialization): round trips, and malformed
bytes are a ValueError, never anything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.security.principal import (
    KafkaPrincipal,
    deserialize_principal,
    serialize_principal,
)


@given(st.text(), st.text(), st.booleans())
def test_round_trip(principal_type, name, token):
    principal = KafkaPrincipal(principal_type, name, token)
    assert deserialize_principal(serialize_principal(principal)) == principal


def test_the_bytes_of_kafkas_format():
    # version 0, compact strings "User" and "alice", not token-authenticated, no tags
    assert (
        serialize_principal(KafkaPrincipal("User", "alice")) == b"\x00\x00\x05User\x06alice\x00\x00"
    )


@given(st.binary(max_size=40))
def test_malformed_bytes_are_a_value_error(data):
    try:
        principal = deserialize_principal(data)
    except ValueError:
        return
    assert serialize_principal(principal) == data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x01",
        b"\x00\x00\x05Us",
        b"\x00\x00\xff\xff\xff\xff\xff",
        b"\x00\x00\x01\x01\x02\x00",
        b"\x00\x00\x01\x01\x00\x01",
    ],
)
def test_refused(data):
    with pytest.raises(ValueError):
        deserialize_principal(data)
