"""Type stub of the Fetch codec (see fetch_codec.pyx for the grammar)."""

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kfast.protocol.file_region import FileRegion

T = TypeVar("T", bound=tuple[Any, ...])

# (partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
#  log_start_offset, partition_max_bytes)
FetchPartition = tuple[int, int, int, int, int, int]

class FetchPartitionData:
    """What one partition contributes to a fetch response."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: FileRegion | None
    aborted_transactions: list[tuple[int, int]] | None  # (producer id, first offset)
    size: int
    diverging_epoch: tuple[int, int] | None  # (epoch, end offset)
    preferred_read_replica: int
    def __init__(
        self,
        error_code: int = 0,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        records: FileRegion | None = None,
        aborted_transactions: list[tuple[int, int]] | None = None,
        diverging_epoch: tuple[int, int] | None = None,
    ) -> None: ...

def read_caught_up(
    partition: Any, fetch_offset: int, current_leader_epoch: int, isolation_level: int
) -> FetchPartitionData | None:
    """A caught-up consumer's read of ``partition`` (the offsets, no
    records); None when the full read must answer."""

def read_partitions(
    partitions: dict[Any, Any],
    requests: list[T],
    params: Any,
    caught_up_here: bool,
    read_partition: Callable[[Any, T, int, bool], FetchPartitionData],
) -> tuple[list[tuple[T, FetchPartitionData]], int, bool]:
    """(results, total bytes, has_error) of reading ``requests`` in order."""

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

def partition_requests(
    cls: type[T],
    name: str,
    partitions: list[FetchPartition],
    last_fetched_epoch: int,
    log_start_offset: int,
) -> list[T]:
    """``cls`` (PartitionFetchRequest) of each partition of topic ``name``."""

def encode_fetch_response(
    version: int,
    correlation_id: int,
    error_code: int,
    session_id: int,
    results: list[tuple[Any, FetchPartitionData]],
    topic_ids: dict[str, uuid.UUID | None],
) -> list[bytes | memoryview | FileRegion]:
    """The response header and body as parts, without the size prefix."""
