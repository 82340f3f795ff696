from typing import Any, Literal, NamedTuple, overload

from typing_extensions import Buffer  # collections.abc.Buffer is Python 3.12+

class Column:
    """Read-only 1-D array ('q' int64, 'i' int32, 'B' bytes) with the buffer protocol."""
    @property
    def itemsize(self) -> int: ...
    @property
    def format(self) -> str: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> memoryview: ...
    def tolist(self) -> list[int]: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class BatchInfo(NamedTuple):
    base_offset: int
    last_offset_delta: int
    partition_leader_epoch: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    first_record: int
    position: int
    size_in_bytes: int

class ColumnarRecords:
    offsets: Column
    timestamps: Column
    timestamp_types: Column
    key_offsets: Column
    key_lengths: Column
    value_offsets: Column
    value_lengths: Column
    header_offsets: Column | None
    header_key_offsets: Column | None
    header_key_lengths: Column | None
    header_value_offsets: Column | None
    header_value_lengths: Column | None
    data: memoryview | bytes
    num_records: int
    num_headers: int
    bytes_consumed: int
    truncated_bytes: int
    has_headers: bool
    @property
    def batches(self) -> list[BatchInfo]: ...
    def __len__(self) -> int: ...
    def key(self, i: int) -> bytes | None: ...
    def value(self, i: int) -> bytes | None: ...
    def headers(self, i: int) -> list[tuple[str, bytes | None]]: ...
    def to_arrow(self, include_headers: bool | None = None) -> Any: ...  # pyarrow.RecordBatch

@overload
def decode_columnar(
    buffer: Buffer,
    *,
    arrow: Literal[False] = False,
    include_headers: bool = False,
    include_control_batches: bool = False,
    check_crc: bool = True,
    max_decompressed_bytes: int = ...,
) -> ColumnarRecords: ...
@overload
def decode_columnar(
    buffer: Buffer,
    *,
    arrow: Literal[True],
    include_headers: bool = False,
    include_control_batches: bool = False,
    check_crc: bool = True,
    max_decompressed_bytes: int = ...,
) -> Any: ...  # pyarrow.RecordBatch (pyarrow has no type information)
@overload
def decode_columnar(
    buffer: Buffer,
    *,
    arrow: bool,
    include_headers: bool = False,
    include_control_batches: bool = False,
    check_crc: bool = True,
    max_decompressed_bytes: int = ...,
) -> ColumnarRecords | Any: ...
