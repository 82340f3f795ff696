"""Kafka error codes, defined once.

Each error is one row: wire code, Kafka's constant name (as in
``org.apache.kafka.common.protocol.Errors``), the name of Kafka's exception
class, whether a client may retry, and Kafka's default message. For every row
an exception class of that name exists in this module, so Python code raises
and catches the same names a Kafka engineer knows, and the broker turns any of
them into its wire code with ``exc.code``.

    >>> from kfast.protocol import errors
    >>> errors.CorruptRecordException.code
    2
    >>> errors.for_code(2).name
    'CORRUPT_MESSAGE'
"""
from __future__ import annotations

from typing import NamedTuple


class ErrorCode(NamedTuple):
    code: int
    name: str
    exception_name: str
    retriable: bool
    message: str


class KafkaError(Exception):
    """Base of every Kafka error; subclasses carry their wire code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = ""

    def __init__(self, message: str | None = None):
        super().__init__(message or self.default_message)

    @property
    def message(self) -> str:
        return str(self)


# (code, NAME, ExceptionClass, retriable, default message)
# The protocol issue completes this table to every code Kafka 4.2 defines.
_TABLE = [
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerException", False,
     "The server experienced an unexpected error when processing the request."),
    (0, "NONE", "NoError", False, ""),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeException", False,
     "The requested offset is not within the range of offsets maintained by the server."),
    (2, "CORRUPT_MESSAGE", "CorruptRecordException", True,
     "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
     "compacted topic, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionException", True,
     "This server does not host this topic-partition."),
    (10, "MESSAGE_TOO_LARGE", "RecordTooLargeException", False,
     "The request included a message larger than the max message size the server will accept."),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageException", True,
     "Disk error when trying to access log file on the disk."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeException", False,
     "The requesting client does not support the compression type of given partition."),
    (87, "INVALID_RECORD", "InvalidRecordException", False,
     "This record has failed the validation on broker and hence will be rejected."),
]

_BY_CODE: dict[int, type[KafkaError]] = {}
ERRORS: dict[int, ErrorCode] = {}


def _define(row: tuple) -> None:
    info = ErrorCode(*row)
    ERRORS[info.code] = info
    cls = type(info.exception_name, (KafkaError,), {
        "code": info.code,
        "name": info.name,
        "retriable": info.retriable,
        "default_message": info.message,
        "__doc__": f"Kafka error {info.code} {info.name}: {info.message}",
        "__module__": __name__,
    })
    globals()[info.exception_name] = cls
    _BY_CODE[info.code] = cls


for _row in _TABLE:
    _define(_row)
del _row


def for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code (UnknownServerException if unknown)."""
    return _BY_CODE.get(code, _BY_CODE[-1])
