"""FileRecords: a segment's .log file, and the batch-header scan over it.

A .log file is record batches back to back (docs/formats.md):

    log      := batch*
    batch    := baseOffset int64, batchLength int32, <batchLength bytes>
    header   := baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
                magic int8 (= 2), crc uint32, attributes int16,
                lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
                producerId int64, producerEpoch int16, baseSequence int32,
                recordsCount int32                                   (61 bytes)

Logs written before Kafka 0.11 (and never rewritten) hold legacy messages
instead, which are read (never written) as one-message "batches":

    message  := offset int64 (a compressed wrapper: its last inner offset),
                messageSize int32, crc uint32 (CRC-32 of the rest),
                magic int8 (0 or 1), attributes int8, [timestamp int64 if magic 1],
                key bytes (int32 length), value bytes (int32 length)

Storage only ever needs a batch's header (offsets, timestamps, producer
fields) and its CRC; record contents are the codec's business
(``kfast.records``). The append path uses the codec's RecordBatch view; scans
of the file parse the fixed header here because they read headers only (a
RecordBatch view needs the whole batch in memory) and must also walk legacy
messages. Writes go through one ``os.pwrite``/``os.pwritev`` per
append at the tracked end of the file, so a failed write can be rolled back by
truncating to the old size.
"""

from __future__ import annotations

import os
import struct
import weakref
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, overload

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    LEGACY_CODEC_MASK,
    LEGACY_CRC_AT,
    LEGACY_HEADER_V0,
    LEGACY_HEADER_V1,
    LEGACY_MAGIC_AT,
    LEGACY_TIMESTAMP_TYPE_MASK,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from kfast._ext.log_append import FileState
from kfast.protocol.constants import INT32_MAX
from kfast.protocol.errors import CorruptRecordException
from kfast.records import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer

# Bytes a header is read from: indexed and unpacked, so not any buffer.
BytesLike = bytes | bytearray | memoryview

# Smallest legacy message (key and value null), with its log overhead.
LEGACY_MIN_SIZE = {0: LOG_OVERHEAD + RECORD_OVERHEAD_V0, 1: LOG_OVERHEAD + RECORD_OVERHEAD_V1}
_LEGACY_HEADER_SIZE = {0: LEGACY_HEADER_V0.size, 1: LEGACY_HEADER_V1.size}
# Header scans (offset lookups from an index entry, which is at most about
# index.interval.bytes before the target) start with a small read and grow;
# full scans (recovery, CRC checks) read big chunks to keep syscalls few.
_FIRST_SCAN_CHUNK = 8 * 1024
_SCAN_CHUNK = 64 * 1024
_FULL_SCAN_CHUNK = 1024 * 1024


class BatchHeaderView(Protocol):
    """What producer state and the append path read of a v2 batch's header:
    a BatchHeader parsed from a file, or a kfast.records.RecordBatch over
    the bytes of a request."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def is_transactional(self) -> bool: ...


class BatchHeader(NamedTuple):
    """The fixed header (RECORD_BATCH_OVERHEAD bytes) of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at int32 max, as Kafka's)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (
            (self.base_sequence + self.last_offset_delta) & INT32_MAX
            if self.base_sequence + self.last_offset_delta > INT32_MAX
            else self.base_sequence + self.last_offset_delta
        )


def read_header(buf: BytesLike, offset: int = 0) -> BatchHeader:
    """Parse the header at ``offset`` of ``buf`` (which must hold
    RECORD_BATCH_OVERHEAD bytes there)."""
    return BatchHeader._make(BATCH_HEADER.unpack_from(buf, offset))


def read_legacy_header(buf: BytesLike, offset: int, magic: int) -> BatchHeader:
    """A legacy message's header in BatchHeader's shape (one record, no
    producer, offset = last offset; v0 has no timestamp)."""
    if magic == 0:
        position, size, crc, magic, attributes = LEGACY_HEADER_V0.unpack_from(buf, offset)
        timestamp = -1
    else:
        position, size, crc, magic, attributes, timestamp = LEGACY_HEADER_V1.unpack_from(
            buf, offset
        )
    return BatchHeader(
        position,
        size,
        NO_PARTITION_LEADER_EPOCH,
        magic,
        crc,
        attributes & (LEGACY_CODEC_MASK | LEGACY_TIMESTAMP_TYPE_MASK),
        0,
        timestamp,
        timestamp,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        1,
    )


def check_batch(buf: BytesLike, offset: int, size: int) -> None:
    """Raise CorruptRecordException unless the batch of ``size`` bytes at
    ``offset`` has a v2 header and a matching CRC-32C (or is a legacy
    message with a matching CRC-32)."""
    magic = buf[offset + MAGIC_OFFSET] if size > MAGIC_OFFSET else -1
    if magic in LEGACY_MIN_SIZE:
        if size < LEGACY_MIN_SIZE[magic]:
            raise CorruptRecordException(f"Legacy message size {size} is below the minimum")
        stored = struct.unpack_from(">I", buf, offset + LEGACY_CRC_AT)[0]
        computed = zlib.crc32(memoryview(buf)[offset + LEGACY_MAGIC_AT : offset + size])
        if stored != computed:
            raise CorruptRecordException(
                f"Message is corrupt (stored crc = {stored}, computed crc = {computed})"
            )
        return
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordException(
            f"Record batch size {size} is smaller than the minimum {RECORD_BATCH_OVERHEAD}"
        )
    magic = buf[offset + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        raise CorruptRecordException(
            f"Invalid magic {magic} in record batch at offset "
            f"{struct.unpack_from('>q', buf, offset)[0]}"
        )
    stored = struct.unpack_from(">I", buf, offset + CRC_OFFSET)[0]
    view = memoryview(buf)[offset + ATTRIBUTES_OFFSET : offset + size]
    computed = crc32c(view)
    if stored != computed:
        raise CorruptRecordException(
            f"Record batch is corrupt (stored crc = {stored}, computed crc = {computed})"
        )


class FileHandle:
    """Owns a file descriptor; it is closed when the last holder lets go.

    The segment's FileRecords and every FileRegion a read handed out hold
    the handle, so deleting or closing a segment while a fetch response is
    still being sent never closes the descriptor under sendfile (or lets the
    number be reused for another file): POSIX keeps the unlinked file
    readable until the region is sent and dropped.
    """

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int):
        self.fd = fd
        weakref.finalize(self, os.close, fd)

    def fileno(self) -> int:
        return self.fd


class FileRecords(FileState):
    """An append-only .log file. ``handle`` is what FileRegions carry. The
    descriptor and size (``_fd``, ``_size``) are FileState's C fields: the
    append kernel (kfast._ext.log_append) reads and advances them."""

    __slots__ = ("path", "handle", "__weakref__")
    # None once closed (FileRegions still holding it keep the descriptor open).
    handle: FileHandle | None

    def __init__(self, path: str, *, create: bool = True, preallocate_bytes: int = 0):
        """Open ``path``; a new file is preallocated to ``preallocate_bytes``
        when asked (log.preallocate) and trimmed by ``trim()`` at roll/close.
        The size of an existing file is its length: a preallocated file is
        only ever reopened trimmed (clean shutdown) or recovered (crash)."""
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        if hasattr(os, "O_CLOEXEC"):
            flags |= os.O_CLOEXEC
        existed = os.path.exists(path)
        self._fd = os.open(path, flags, 0o644)
        self.handle = FileHandle(self._fd)
        self._size = os.fstat(self._fd).st_size
        self._allocated = self._size
        if not existed and preallocate_bytes > 0:
            try:
                os.posix_fallocate(self._fd, 0, preallocate_bytes)
            except (AttributeError, OSError):
                os.ftruncate(self._fd, preallocate_bytes)  # sparse, but the same layout
            self._size = 0
            self._allocated = preallocate_bytes

    def trim(self) -> None:
        """Cut a preallocated file down to the bytes written, and give back
        the blocks reserved past them (FileState.reserve)."""
        if self._fd >= 0 and os.fstat(self._fd).st_size != self._size:
            os.ftruncate(self._fd, self._size)
        self.release_reserved()

    def fileno(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._fd < 0

    # -- writes ---------------------------------------------------------------
    def append(self, data: BytesLike) -> int:
        """Write ``data`` at the end; returns bytes written. On an OSError the
        file is truncated back to its previous size before re-raising."""
        position = self._size
        total = len(data)
        self.reserve(position + total)
        try:
            written = self._pwrite(data, position)
            if written < total:  # short write (rare): continue from where it stopped
                view = memoryview(data)
                while written < total:
                    written += self._pwrite(view[written:], position + written)
        except OSError:
            self._rollback(position)
            raise
        self._size = position + total
        return total

    def append_many(self, buffers: Sequence[BytesLike]) -> int:
        """Write several buffers with one pwritev (falls back to a loop for the
        remainder after a short write)."""
        position = self._size
        total = sum(len(b) for b in buffers)
        self.reserve(position + total)
        try:
            written = self._pwritev(buffers, position)
            if written < total:
                rest = b"".join(bytes(b) for b in buffers)[written:]
                view = memoryview(rest)
                done = 0
                while done < len(view):
                    done += self._pwrite(view[done:], position + written + done)
        except OSError:
            self._rollback(position)
            raise
        self._size = position + total
        return total

    # The two system calls, separate so a test can wrap them to inject faults.
    def _pwrite(self, data: Buffer, position: int) -> int:
        return os.pwrite(self._fd, data, position)

    def _pwritev(self, buffers: Sequence[Buffer], position: int) -> int:
        return os.pwritev(self._fd, buffers, position)

    def _rollback(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            pass
        self._allocated = min(self._allocated, size)  # ftruncate frees blocks past it

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the bytes removed."""
        if size < 0 or size > self._size:
            raise ValueError(
                f"Attempt to truncate log segment {self.path} to {size} bytes "
                f"failed, size of this log segment is {self._size} bytes."
            )
        removed = self._size - size
        if removed:
            os.ftruncate(self._fd, size)
            self._size = size
            self._allocated = min(self._allocated, size)
        return removed

    def flush(self) -> None:
        if self._fd >= 0:  # a segment deleted while a background flush ran
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            # The descriptor closes now, or when the last FileRegion of it is dropped.
            self._fd = -1
            self.handle = None

    def rename_to(self, path: str) -> None:
        os.replace(self.path, path)
        self.path = path

    # -- reads ----------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    @overload
    def batches_from(
        self, start: int = 0, end: int | None = None, *, full: Literal[True]
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]: ...
    @overload
    def batches_from(
        self, start: int = 0, end: int | None = None, *, full: Literal[False] = False
    ) -> Iterator[tuple[int, BatchHeader, None]]: ...
    @overload
    def batches_from(
        self, start: int = 0, end: int | None = None, *, full: bool = False
    ) -> Iterator[tuple[int, BatchHeader, memoryview | None]]: ...
    def batches_from(
        self, start: int = 0, end: int | None = None, *, full: bool = False
    ) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        """Yield ``(position, header, buffer_view)`` for each batch starting at
        ``start`` (a batch boundary) before ``end``.

        ``buffer_view`` is a memoryview of the whole batch when ``full`` (for
        CRC checks and record decoding), else None. Iteration stops quietly at
        a torn tail (fewer bytes left than the batch claims: the last write did
        not finish); a batch that cannot be a v2 batch raises
        CorruptRecordException. Nothing is allocated for what a length field
        merely claims: a length is checked against the file size first.
        """
        end = self._size if end is None else min(end, self._size)
        chunk = _FULL_SCAN_CHUNK if full else _FIRST_SCAN_CHUNK
        position = start
        buf = b""
        buf_start = start
        fd = self._fd
        while position + LOG_OVERHEAD <= end:
            rel = position - buf_start
            if rel + RECORD_BATCH_OVERHEAD > len(buf):
                if buf and chunk < _SCAN_CHUNK:
                    chunk *= 2
                buf = os.pread(fd, min(chunk, end - position), position)
                buf_start, rel = position, 0
            if len(buf) - rel <= MAGIC_OFFSET:
                return  # torn before the magic byte
            batch_length = struct.unpack_from(">i", buf, rel + LENGTH_OFFSET)[0]
            size = LOG_OVERHEAD + batch_length
            magic = buf[rel + MAGIC_OFFSET]
            min_size = (
                RECORD_BATCH_OVERHEAD
                if magic == CURRENT_MAGIC
                else LEGACY_MIN_SIZE.get(magic, RECORD_BATCH_OVERHEAD)
            )
            if position + size > end:
                return  # torn: the batch runs past the end of the file
            if size < min_size:
                raise CorruptRecordException(
                    f"Found record size {size} smaller than minimum record overhead "
                    f"({min_size}) in file {self.path} at position {position}."
                )
            if magic == CURRENT_MAGIC:
                header = read_header(buf, rel)
            elif magic in LEGACY_MIN_SIZE:
                header = read_legacy_header(buf, rel, magic)
            else:
                raise CorruptRecordException(
                    f"Invalid magic {magic} in batch at position {position} of {self.path}"
                )
            view: memoryview | None = None
            if full:
                if rel + size > len(buf):
                    buf = os.pread(fd, max(size, min(chunk, end - position)), position)
                    buf_start, rel = position, 0
                    if len(buf) < size:
                        return
                view = memoryview(buf)[rel : rel + size]
            yield position, header, view
            position += size

    def __repr__(self) -> str:
        return f"FileRecords({self.path!r}, size={self._size})"
