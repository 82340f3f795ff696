"""Type stub of the varint kernel's Python wrappers (see varint.pyx; the
grammar is in varint.pxd). Decoders raise CorruptRecordException on truncated
or overlong input and ValueError on an offset outside the buffer."""

from typing_extensions import Buffer

def decode_varint(buf: Buffer, offset: int = 0) -> tuple[int, int]:
    """Decode a zigzag varint (int32) at ``offset``; return (value, next_offset)."""

def decode_varlong(buf: Buffer, offset: int = 0) -> tuple[int, int]:
    """Decode a zigzag varlong (int64) at ``offset``; return (value, next_offset)."""

def decode_uvarint(buf: Buffer, offset: int = 0) -> tuple[int, int]:
    """Decode an unsigned varint (up to 64 bits); return (value, next_offset)."""

def encode_varint(value: int) -> bytes: ...
def encode_varlong(value: int) -> bytes: ...
def encode_uvarint(value: int) -> bytes: ...
def size_of_varint(value: int) -> int: ...
def size_of_varlong(value: int) -> int: ...
