"""Type stub of the Produce codec (see produce_codec.pyx for the grammar)."""

import uuid
from typing import Any

from kfast.protocol import ProduceResponse

class PartitionResult:
    """One partition of a Produce response, as an append fills it in."""

    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None
    record_errors: list[ProduceResponse.BatchIndexAndErrorMessage]
    def __init__(self, index: int) -> None: ...

def decode_produce_request(
    frame: Any, offset: int, version: int
) -> tuple[str | None, int, int, list[tuple[Any, list[tuple[int, memoryview | None]]]]] | None:
    """(transactional_id, acks, timeout_ms, topics) of the body at
    ``frame[offset:]``; None when the generic decoder should have it.
    MalformedRequestException on malformed input."""

def encode_produce_response(
    version: int,
    correlation_id: int,
    throttle_time_ms: int,
    topics: list[tuple[str | uuid.UUID, list[PartitionResult]]],
) -> bytes:
    """The response header and body, without the size prefix."""
