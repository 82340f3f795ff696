"""Log append kernel (grammar and order of checks: log_append.pxd)."""

from typing import Any
from typing import Any as Buffer  # any object exporting the buffer protocol

OK: int
TRUNCATED: int
LEGACY_MAGIC: int
UNKNOWN_MAGIC: int
BATCH_TOO_SMALL: int
BATCH_TRUNCATED: int
TOO_LARGE: int
BAD_CRC: int
CONTROL_FROM_CLIENT: int
BAD_RECORDS_COUNT: int
TRANSACTIONAL_WITHOUT_PRODUCER_ID: int
BAD_TIMESTAMP: int
OUT_OF_ORDER: int
APPENDED: int

class BatchScan:
    # Summary of the last successful scan.
    batch_count: int
    first_offset: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    first_max_timestamp: int
    records_count: int
    valid_bytes: int
    has_producer_id: bool
    append_info: tuple[int, int, int, int, int, int, int, int, bool]  # a LogAppendInfo
    # Details of the last failed scan.
    error_position: int
    error_value: int
    error_other: int
    error_base_offset: int

    appends_written: int
    def __init__(
        self, plain_file_type: type | None = None, info_type: type | None = None
    ) -> None: ...
    def scan(
        self,
        buffer: Buffer,
        assign_offsets: bool,
        next_offset: int,
        leader_epoch: int,
        log_append_time: int,
        from_client: bool,
        max_message_bytes: int,
        check_time: bool,
        earliest: int,
        latest: int,
    ) -> int: ...
    def configure(
        self,
        max_message_bytes: int,
        log_append_time: bool,
        timestamp_before_max_ms: int,
        timestamp_after_max_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> None: ...
    def append_to_segment(
        self,
        buffer: Buffer,
        segment: Any,
        next_offset: int,
        leader_epoch: int,
        now: int,
        from_client: bool,
        log_start_offset: int,
    ) -> int: ...
    def index_batches(
        self,
        position: int,
        since: int,
        index_interval_bytes: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        base_offset: int,
        offset_index: Buffer | None,
        offset_entries: int,
        offset_max_entries: int,
        time_index: Buffer | None,
        time_entries: int,
        time_max_entries: int,
    ) -> tuple[int, int, int, int, int] | None: ...
    def batch_infos(self) -> list[tuple[int, int, int]]: ...
    def positions(self, with_producer_id_only: bool = False) -> list[int]: ...
    def leader_epochs(self) -> list[tuple[int, int]]: ...

ORIGIN_CLIENT: str
ORIGIN_REPLICATION: str
ORIGIN_COORDINATOR: str

class LogState:
    """C fields of a Log and its leader append's fast path (log_append.pxd)."""

    log_end_offset: int
    log_start_offset: int
    high_watermark: int
    _first_unstable_offset: int  # -1: none (the producer state keeps it)
    _unflushed_messages: int
    _flush_messages: int  # log.flush.interval.messages
    offline: bool
    _fast_append: bool
    _scan: BatchScan
    _active_segment: Any
    _lock: Any
    leader_epoch_cache: Any
    producer_state: Any
    time_ms: Any
    def append_as_leader(
        self,
        records: Buffer,
        leader_epoch: int | None = 0,
        origin: str = ...,
        now: int | None = None,
    ) -> Any: ...
    def update_high_watermark(self, high_watermark: int) -> int: ...
    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark), at least log start."""

def now_ms() -> int: ...

# IndexState._last once entries were written past it (read back on demand).
INDEX_LAST_STALE: object

# The C fields of the storage objects the append kernel reads and writes
# (log_append.pxd). Fields the kernel holds as ``object`` are Any here; the
# kfast.storage subclasses declare what they store in them.
class FileState:
    _fd: int  # -1 once closed
    _size: int
    _allocated: int  # where the blocks reserved ahead of the writes end
    _allocate_step: int  # most bytes reserved ahead at once; 0: none
    def reserve(self, end: int) -> None: ...
    def release_reserved(self) -> None: ...

class IndexState:
    _view: Any  # bytearray (buffered), FileMapping or None
    _entries: int
    _max_entries: int
    _last: Any  # the last entry, None, or INDEX_LAST_STALE
    def entries_written(self, count: int) -> None: ...

class SegmentState:
    log: Any
    offset_index: Any
    time_index: Any
    base_offset: int
    index_interval_bytes: int
    roll_jitter_ms: int
    created_ms: int
    _max_timestamp_so_far: int | None
    _offset_of_max_timestamp_so_far: int
    _bytes_since_last_index_entry: int
    _rolling_based_timestamp: int | None
