from collections.abc import Iterable
from typing import NamedTuple

from typing_extensions import Buffer  # collections.abc.Buffer is Python 3.12+

NO_TIMESTAMP: int
NO_TIMESTAMP_TYPE: int
CREATE_TIME: int
LOG_APPEND_TIME: int

class LegacyRecord(NamedTuple):
    offset: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    timestamp_type: int  # NO_TIMESTAMP_TYPE for magic 0, else CREATE_TIME / LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    magic: int

def decode_message_set(
    buffer: Buffer, *, max_decompressed_bytes: int = ...
) -> list[LegacyRecord]: ...
def build_message_set(
    magic: int,
    records: Iterable[
        tuple[int, int, Buffer | None, Buffer | None]
    ],  # (offset, timestamp, key, value)
    compression: int = 0,
    *,
    timestamp_type: int = 0,
    log_append_time: int = -1,
) -> bytes: ...
def convert_message_set_to_v2(
    buffer: Buffer, *, compression: int | None = None, max_decompressed_bytes: int = ...
) -> bytes: ...
def convert_v2_to_message_set(
    buffer: Buffer, magic: int, *, first_offset: int = -1, max_decompressed_bytes: int = ...
) -> bytes: ...
