"""Plaintext socket I/O kernel: framed receives, zero-copy sends (see netio.pxd)."""

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol, Union

HAVE_SENDFILE: bool
RECEIVE_CHUNK_SIZE: int
MAX_FRAME_SIZE: int
ANSWER_NONE: int
ANSWER_SENT: int
ANSWER_UNSENT: int
ANSWER_LEFT: int
ANSWER_FAILED: int
ANSWER_INVALID: int
ANSWER_SEND_FAILED: int

class InvalidReceiveException(Exception): ...

class _FileLike(Protocol):
    def fileno(self) -> int: ...

class _FileRegionLike(Protocol):
    file: _FileLike
    position: int
    length: int

ResponsePart = Union[bytes, bytearray, memoryview, _FileRegionLike]

class ReceiveChunk:
    @property
    def live_exports(self) -> int: ...

class SendPart: ...

class PlaintextTransport:
    unsent_bytes: int
    bytes_received: int
    frames_received: int
    responses_queued: int
    sendfile_bytes: int
    copied_bytes: int
    answered_in_c: int
    left: Any
    def __init__(self, fd: int, max_receive_size: int) -> None: ...
    def receive(self) -> int: ...
    def next_frame(self) -> memoryview | None: ...
    @property
    def buffered_receive_bytes(self) -> int: ...
    @property
    def receive_capacity(self) -> int: ...
    def send(self, parts: Iterable[ResponsePart]) -> None: ...
    def flush(self) -> bool: ...
    @property
    def has_unsent(self) -> bool: ...
    def attach(
        self,
        handler: Callable[[Any, memoryview], Any],
        connection: Any,
        timed_type: type,
        timed: deque[Any],
        max_unsent: int,
    ) -> None: ...
    def answer_frames(self) -> int: ...
    def close(self) -> None: ...
    @property
    def is_closed(self) -> bool: ...
    def fileno(self) -> int: ...
