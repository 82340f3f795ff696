"""Type stub of the Fetch codec (see fetch_codec.pyx for the grammar)."""

import uuid
from typing import Any

from kfast.protocol.file_region import FileRegion

# (partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
#  log_start_offset, partition_max_bytes)
FetchPartition = tuple[int, int, int, int, int, int]

def decode_fetch_request(
    frame: Any, offset: int, version: int
) -> (
    tuple[
        int,
        int,
        int,
        int,
        int,
        int,
        int,
        list[tuple[str | uuid.UUID, list[FetchPartition]]],
        list[tuple[str | uuid.UUID, list[int]]],
        str,
    ]
    | None
):
    """(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
    session_id, session_epoch, topics, forgotten_topics, rack_id) of the body
    at ``frame[offset:]``; None when the generic decoder should have it.
    MalformedRequestException on malformed input."""

def encode_fetch_response(
    version: int,
    correlation_id: int,
    error_code: int,
    session_id: int,
    results: list[tuple[Any, Any]],
    topic_ids: dict[str, uuid.UUID | None],
) -> list[bytes | memoryview | FileRegion]:
    """The response header and body as parts, without the size prefix."""
