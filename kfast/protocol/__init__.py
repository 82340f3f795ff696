"""The Kafka wire protocol: every API kfast serves, every version, one codec.

The broker, kfast's own client and the Spark reader all use this API.

Framing: on the wire every request and response is ``int32 size`` followed by
``size`` bytes. The ``encode_*`` functions return whole frames (size prefix
included, ready to write); the ``decode_*`` functions take the bytes *after*
the size prefix (what a reader has once it has read ``size`` bytes).

Requests (broker side)::

    header = decode_request_header(buf)      # RequestHeader(api_key, api_version,
                                             #   correlation_id, client_id, header_length)
    body = decode_request_body(header, buf)  # or: header, body = decode_request(buf)

``decode_request_header`` works for any version of a known API key (so an
unsupported version can still be answered); ``decode_request_body`` raises
UnsupportedVersionException for a version outside the API's range, with the
header attached as ``exc.header``. Malformed bytes (truncation, negative or
oversized lengths, array counts beyond the remaining bytes, tagged fields
whose size does not match their value) raise
``errors.MalformedRequestException`` (INVALID_REQUEST, 42) before anything
the input claims is allocated. `records` fields of a decoded Produce request
are memoryview slices of ``buf`` (zero-copy): keep ``buf`` alive and
unmodified while they are in use.

Responses (broker side)::

    frame = encode_response(api_key, version, correlation_id, body)        # bytes
    parts = encode_response_parts(api_key, version, correlation_id, body)  # list

A `records` value may be bytes-like, a ``FileRegion`` or a list of those;
``encode_response_parts`` returns a list whose first item is the 4-byte size
prefix, followed by bytes chunks, buffers of at least 32 KiB and FileRegions
in wire order (send bytes-like parts with write/writev and FileRegions with
sendfile); the plain form reads regions into the frame. ApiVersions responses
always use header v0; to answer an ApiVersions request of an unsupported
version, encode an ``ApiVersionsResponse`` with error_code
UNSUPPORTED_VERSION (35) and ``api_keys`` from ``supported_versions()`` at
version 0 (KIP-511).

Requests and responses (client side)::

    frame = encode_request(api_key, version, correlation_id, client_id, body)
    correlation_id, body = decode_response(api_key, version, buf)

Message bodies are instances of per-API classes with attribute access by
snake_case field name, constructible by keyword with every field defaulted
(Kafka's defaults)::

    from kfast.protocol import ProduceRequest, MetadataResponse
    MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=1, host="localhost", port=9092)])

Any ``<Api>Request`` / ``<Api>Response`` name can be imported from this
package (or use ``request_class(key)`` / ``response_class(key)``); a body may
also be given to the encoders as a plain dict of fields. The grammar and
default rules are in ``kfast.protocol.schema``; the API table (names, version
ranges, flexible versions, listeners, header versions) in
``kfast.protocol.api_keys``; error codes and exceptions in
``kfast.protocol.errors``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from kfast._ext import protocol_codec as _codec
from kfast.protocol import api_keys, errors
from kfast.protocol.api_keys import API_KEYS, ApiKey, api_key, supported_versions
from kfast.protocol.file_region import FileRegion
from kfast.protocol.schema import Message
from kfast.protocol.schema import schema as _schema

if TYPE_CHECKING:
    # The message classes' fields, generated from the grammars; at run time the
    # classes come from __getattr__ below.
    from kfast.protocol.message_classes import *  # noqa: F403
    from kfast.protocol.message_classes import RequestRecords as RequestRecords
    from kfast.protocol.message_classes import ResponseRecords as ResponseRecords

__all__ = [
    "API_KEYS",
    "ApiKey",
    "FileRegion",
    "Message",
    "RequestHeader",
    "api_key",
    "api_keys",
    "decode_request",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "errors",
    "request_class",
    "response_class",
    "supported_versions",
]


# What the encoders take as a body: a message object, or a plain dict of fields.
Body = Message | dict[str, Any]


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_length: int


_REQUEST_HEADER = struct.Struct(">hhih")  # key, version, correlation id, client id length
_RESPONSE_HEADER = struct.Struct(">i")

# Compiled programs by (api_key, version): one dict probe per message on the
# hot path. Responses also cache whether their header carries tagged fields
# (header v1).
_REQUEST_PROGRAMS: dict[tuple[int, int], _codec.StructProgram] = {}
_RESPONSE_PROGRAMS: dict[tuple[int, int], tuple[_codec.StructProgram, bool]] = {}


def _request_program(key: int, version: int) -> _codec.StructProgram:
    program = _REQUEST_PROGRAMS.get((key, version))
    if program is None:
        program = _schema(key).request.program(version)
        _REQUEST_PROGRAMS[key, version] = program
    return program


def _response_program(key: int, version: int) -> tuple[_codec.StructProgram, bool]:
    found = _RESPONSE_PROGRAMS.get((key, version))
    if found is None:
        program = _schema(key).response.program(version)
        found = (program, api_key(key).response_header_version(version) == 1)
        _RESPONSE_PROGRAMS[key, version] = found
    return found


def request_class(key: int | str) -> type[Message]:
    """The request message class of an API (by key or name)."""
    return _schema(key).request.cls


def response_class(key: int | str) -> type[Message]:
    """The response message class of an API (by key or name)."""
    return _schema(key).response.cls


def decode_request_header(buf: bytes | bytearray | memoryview) -> RequestHeader:
    return RequestHeader(*_codec.decode_request_header(buf, api_keys.FLEXIBLE_FROM))


def decode_request_body(header: RequestHeader, buf: bytes | bytearray | memoryview) -> Message:
    try:
        program = _request_program(header.api_key, header.api_version)
    except errors.UnsupportedVersionException as exc:
        exc.header = header
        raise
    return _codec.decode(program, buf, header.header_length)[0]


def decode_request(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message]:
    header = decode_request_header(buf)
    return header, decode_request_body(header, buf)


def encode_request(
    key: int, version: int, correlation_id: int, client_id: str | None, body: Body
) -> bytes:
    program = _request_program(key, version)
    if client_id is None:
        header = _REQUEST_HEADER.pack(key, version, correlation_id, -1)
    else:
        raw = client_id.encode()
        header = _REQUEST_HEADER.pack(key, version, correlation_id, len(raw)) + raw
    if api_key(key).request_header_version(version) == 2:
        header += b"\x00"  # no tagged fields
    return _codec.encode_frame(header, program, body)


def _response_header(correlation_id: int, tagged: bool) -> bytes:
    header = _RESPONSE_HEADER.pack(correlation_id)
    return header + b"\x00" if tagged else header


def encode_response(key: int, version: int, correlation_id: int, body: Body) -> bytes:
    program, tagged = _response_program(key, version)
    return _codec.encode_frame(_response_header(correlation_id, tagged), program, body)


def encode_response_parts(
    key: int, version: int, correlation_id: int, body: Body
) -> list[bytes | memoryview | FileRegion]:
    program, tagged = _response_program(key, version)
    return _codec.encode_frame(_response_header(correlation_id, tagged), program, body, True)


def decode_response(
    key: int, version: int, buf: bytes | bytearray | memoryview
) -> tuple[int, Message]:
    program, tagged = _response_program(key, version)
    correlation_id, offset = _codec.decode_response_header(buf, tagged)
    body, _ = _codec.decode(program, buf, offset)
    return correlation_id, body


def __getattr__(name: str) -> type[Message]:
    # ProduceRequest, MetadataResponse, ...: built on first access.
    for suffix, attr in (("Request", "request"), ("Response", "response")):
        if name.endswith(suffix) and name[: -len(suffix)] in api_keys.BY_NAME:
            cls = getattr(_schema(name[: -len(suffix)]), attr).cls
            globals()[name] = cls
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
