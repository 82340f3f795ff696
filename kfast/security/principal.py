"""KafkaPrincipal: the identity a request acts as (Kafka's
org.apache.kafka.common.security.auth.KafkaPrincipal).

A connection starts as ``User:ANONYMOUS`` (what Kafka's
DefaultKafkaPrincipalBuilder gives a PLAINTEXT connection); TLS client
certificates and SASL replace it once authenticated. ACLs name principals by
their string form ``<type>:<name>``, which ``parse`` reads back.
"""

from __future__ import annotations

from dataclasses import dataclass

from kfast._ext.varint import decode_uvarint, encode_uvarint

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # True when a token (OAUTHBEARER) or delegation token authenticated it.
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); the name may hold
        colons (Kafka splits at the first one)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal of the form <type>:<name>, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


# Kafka's DefaultKafkaPrincipalBuilder.serialize: how a broker hands a
# client's principal to the controller inside an Envelope (KIP-590).
#
#   principal := version      int16   (0)
#                type         compact string (uvarint length + 1, UTF-8)
#                name         compact string
#                token_auth   int8    (0 or 1)
#                tagged       uvarint (0: no tagged fields)
def serialize_principal(principal: KafkaPrincipal) -> bytes:
    out = bytearray(b"\x00\x00")
    for text in (principal.principal_type, principal.name):
        raw = text.encode()
        out += encode_uvarint(len(raw) + 1) + raw
    out += b"\x01" if principal.token_authenticated else b"\x00"
    out += b"\x00"
    return bytes(out)


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """ValueError if ``data`` is not a serialized principal of version 0."""
    if len(data) < 2 or data[:2] != b"\x00\x00":
        raise ValueError("unknown principal serialization version")
    pos, texts = 2, []
    for _ in range(2):
        try:
            length, pos = decode_uvarint(data, pos)
        except Exception as exc:  # a truncated or overlong varint
            raise ValueError(f"malformed principal: {exc}") from None
        if length == 0 or pos + length - 1 > len(data):
            raise ValueError("truncated principal")
        texts.append(bytes(data[pos : pos + length - 1]).decode())
        pos += length - 1
    if pos + 2 != len(data) or data[pos] > 1 or data[pos + 1] != 0:
        raise ValueError("malformed principal")
    return KafkaPrincipal(texts[0], texts[1], bool(data[pos]))
