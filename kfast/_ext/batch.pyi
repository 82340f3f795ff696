"""Record batch v2 kernel (see kfast.records for the overview)."""

from collections.abc import Iterator, Sequence

from typing_extensions import Buffer

from kfast.protocol.errors import CorruptRecordException

TIMESTAMP_CREATE_TIME: int
TIMESTAMP_LOG_APPEND_TIME: int
CONTROL_TYPE_ABORT: int
CONTROL_TYPE_COMMIT: int
NO_TIMESTAMP: int
NO_PRODUCER_ID: int
NO_PRODUCER_EPOCH: int
NO_SEQUENCE: int
NO_PARTITION_LEADER_EPOCH: int
MAGIC_VALUE_V2: int
RECORD_BATCH_OVERHEAD_BYTES: int
LOG_OVERHEAD_BYTES: int

class LegacyRecordFormatError(CorruptRecordException):
    magic: int
    def __init__(self, magic: int, message: str | None = ...) -> None: ...

def peek_magic(buffer: Buffer, offset: int = 0) -> int: ...

class BufferSlice:
    """Zero-copy read-only bytes; == / hash like bytes; buffer protocol."""
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def tobytes(self) -> bytes: ...
    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str: ...
    def __getitem__(self, index: int | slice) -> int | bytes: ...
    def __iter__(self) -> Iterator[int]: ...
    def __hash__(self) -> int: ...

class Record:
    offset: int
    timestamp: int
    attributes: int
    key: BufferSlice | None
    value: BufferSlice | None
    @property
    def headers(self) -> list[tuple[str, BufferSlice | None]]: ...
    @property
    def has_key(self) -> bool: ...
    @property
    def has_value(self) -> bool: ...

class RecordIterator(Iterator[Record]):
    def __next__(self) -> Record: ...

class RecordBatch:
    def __init__(self, buffer: Buffer, offset: int = 0) -> None: ...
    base_offset: int
    batch_length: int
    size_in_bytes: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    delete_horizon_ms: int | None
    last_offset_delta: int
    last_offset: int
    next_offset: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    has_producer_id: bool
    records_count: int
    offset: int
    def memoryview(self) -> memoryview: ...
    def tobytes(self) -> bytes: ...
    def compute_crc(self) -> int: ...
    def is_valid(self) -> bool: ...
    def validate(
        self, *, from_client: bool = True, check_records: bool = True, max_output: int = ...
    ) -> None: ...
    def set_base_offset(self, base_offset: int) -> None: ...
    def set_last_offset(self, last_offset: int) -> None: ...
    def set_partition_leader_epoch(self, epoch: int) -> None: ...
    def set_max_timestamp(self, timestamp_type: int, max_timestamp: int) -> None: ...
    def set_log_append_time(self, log_append_time: int) -> None: ...
    def __iter__(self) -> RecordIterator: ...
    def records(self) -> list[Record]: ...

def patch_batch(
    buffer: Buffer,
    offset: int,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time: int | None = None,
) -> int: ...
def complete_batches_size(buffer: Buffer, offset: int = 0) -> int: ...
def iter_batches(
    buffer: Buffer, offset: int = 0, *, allow_partial: bool = False
) -> Iterator[RecordBatch]: ...

class RecordBatchBuilder:
    compression: int
    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    timestamp_type: int
    records_count: int
    size_in_bytes: int
    last_offset: int
    def __init__(
        self,
        compression: int = 0,
        *,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: int = 0,
        max_batch_bytes: int | None = None,
    ) -> None: ...
    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str, Buffer | None]] | None = None,
        offset: int | None = None,
    ) -> bool: ...
    def build(self) -> bytes: ...

def build_control_batch(
    control_type: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes: ...
