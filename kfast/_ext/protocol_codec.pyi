"""Type stub of the schema-driven protocol codec (see protocol_codec.pyx)."""

from typing import Any, Literal, overload

from kfast.protocol.file_region import FileRegion

KIND_INT8: int
KIND_INT16: int
KIND_INT32: int
KIND_INT64: int
KIND_UINT16: int
KIND_UINT32: int
KIND_FLOAT64: int
KIND_BOOL: int
KIND_STRING: int
KIND_BYTES: int
KIND_RECORDS: int
KIND_UUID: int
KIND_ARRAY: int
KIND_STRUCT: int
DEFAULT_VALUE: int
DEFAULT_LIST: int
DEFAULT_STRUCT: int

def configure(malformed: type[Exception], unsupported: type[Exception]) -> None: ...

class FieldOp:
    key: str
    kind: int
    elem_kind: int
    nullable: bool
    compact: bool
    struct: StructProgram | None
    tag: int
    default: Any
    default_kind: int
    ignorable: bool
    default_factory: type | None
    def __init__(
        self,
        key: str,
        kind: int,
        elem_kind: int,
        nullable: bool,
        compact: bool,
        struct: StructProgram | None,
        tag: int,
        default: Any,
        default_kind: int,
        ignorable: bool,
        default_factory: type | None,
    ) -> None: ...

class StructProgram:
    cls: type
    ops: tuple[FieldOp, ...]
    tagged_ops: tuple[FieldOp, ...]
    tagged_by_tag: dict[int, FieldOp]
    absent: tuple[FieldOp, ...]
    flexible: bool
    min_size: int
    def __init__(self, cls: type, flexible: bool) -> None: ...
    def set_fields(
        self, ops: tuple[FieldOp, ...], tagged_ops: tuple[FieldOp, ...], absent: tuple[FieldOp, ...]
    ) -> None: ...

def decode(prog: StructProgram, buf: Any, offset: int = 0) -> tuple[Any, int]: ...
def decode_request_header(
    buf: Any, flexible_from: list[int | None]
) -> tuple[int, int, int, str | None, int]: ...
def decode_response_header(buf: Any, flexible: bool) -> tuple[int, int]: ...
@overload
def encode_frame(
    header: bytes, prog: StructProgram, body: object, parts: Literal[False] = False
) -> bytes: ...
@overload
def encode_frame(
    header: bytes, prog: StructProgram, body: object, parts: Literal[True]
) -> list[bytes | memoryview | FileRegion]: ...
def encode(prog: StructProgram, body: Any) -> bytes: ...
def init_message(self: Any, fields: dict) -> None: ...
