"""Sparse indexes of a log segment: OffsetIndex and TimeIndex.

Both files are arrays of fixed-size big-endian entries (grammar below; the
offsets and sizes have their one home in ``kfast/_ext/layout.pxd``, whose
names ``kfast._ext.layout`` shares). While a segment is active its index files are
preallocated to ``segment.index.bytes`` (rounded down to a whole entry, as a
sparse file) and its entries are kept in a buffer written to the file with
pwrite; inactive indexes are memory-mapped for reading. Nothing is ever
stored through a mapping (see ``AbstractIndex._reserve``: no SIGBUS on a
full disk); everything past ``entries`` is zero. A file opened from disk
counts *all* its bytes as entries, which is why indexes are trimmed to their
valid size on roll and on close, exactly as Kafka does: a kfast index file
and a Kafka index file are interchangeable.

    .index      entry := relativeOffset int32, position int32        (8 bytes)
    .timeindex  entry := timestamp int64, relativeOffset int32        (12 bytes)

relativeOffset is the offset minus the segment's base offset; position is a
byte position in the segment's .log file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from kfast._ext.index import (
    FileMapping,
    first_unordered_slot,
    largest_lower_bound_slot,
    offset_index_lookup,
)
from kfast._ext.layout import (
    INDEX_RELATIVE_OFFSET_MAX,
    INDEX_RELATIVE_OFFSET_WIDTH,
    INDEX_TIMESTAMP_WIDTH,
    OFFSET_INDEX_ENTRY,
    OFFSET_INDEX_ENTRY_SIZE,
    OFFSET_INDEX_RELATIVE_OFFSET_AT,
    TIME_INDEX_ENTRY,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_RELATIVE_OFFSET_AT,
    TIME_INDEX_TIMESTAMP_AT,
)
from kfast._ext.log_append import INDEX_LAST_STALE, IndexState

NO_TIMESTAMP = -1
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class CorruptIndexException(Exception):
    """An index file failed its sanity check (Kafka's CorruptIndexException);
    the log loader rebuilds the index from the segment's .log."""


class IndexOffsetOverflowException(Exception):
    """An offset does not fit the index's int32 relative-offset field."""


class InvalidOffsetException(Exception):
    """An index append would break the index's ordering (a bug, as in Kafka)."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


_make_offset_position = OffsetPosition._make
# An index's entry type: OffsetPosition or TimestampOffset.
EntryT = TypeVar("EntryT", OffsetPosition, TimestampOffset)
# AbstractIndex._last after entries_written: read the last entry back on demand.
_STALE = INDEX_LAST_STALE


def _round_down(value: int, factor: int) -> int:
    return factor * (value // factor)


class AbstractIndex(IndexState, Generic[EntryT]):
    """A sorted array of fixed-size entries; subclasses define the entry.

    Entries are sorted by the key at ``KEY_POS`` (``KEY_WIDTH`` bytes). The
    search itself is the Cython kernel in ``kfast._ext.index``.

    Two ways to hold the entries, one file format:
    - *mapped* (indexes opened from disk, rolled segments): the file is
      memory-mapped, nothing is copied and untouched pages cost nothing;
    - *buffered* (the active segment): entries live in a growing bytearray
      and reach the (preallocated) file on ``flush``, on roll and on close.
      Writing into a shared mapping while the kernel writes the file's dirty
      pages back costs a page fault per append (the page is write-protected
      for writeback), which showed up as a third of the append time for
      1 MiB batches. An unflushed active index is never trusted after a
      crash anyway: recovery rebuilds it from the .log.
    """

    ENTRY_SIZE: int
    KEY_POS: int
    KEY_WIDTH: int
    # Byte of the int32 relative offset in an entry (truncation searches by it).
    OFFSET_POS: int
    # Whether the key must strictly increase (used by the sanity check).
    STRICT: bool = True

    # _view, _entries, _max_entries and _last are IndexState's C fields (the
    # append kernel writes entries and counts them); entries_written is its.
    __slots__ = (
        "path",
        "base_offset",
        "max_index_size",
        "_writable",
        "_closed",
        "_buffered",
        "_flushed",
        "_length",
        "_io_lock",
        "_unsynced",
    )

    # No descriptor is kept open (as Kafka's AbstractIndex closes its
    # RandomAccessFile once mapped): a mapping outlives the descriptor it was
    # made from (FileMapping: Python's mmap would keep a dup of it), and the
    # buffered active index reaches its file only on flush, resize and trim.
    # A partition holds one descriptor (its active .log), not three.

    def __init__(
        self,
        path: str,
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        discard_entries: bool = False,
    ):
        """Open (or create) the index at ``path``. ``discard_entries``: the
        caller rebuilds the index (recovery), so the file is neither mapped
        nor read - after kill -9 it is still at its preallocated size, and
        touching its last page cost ~1.5 ms per index."""
        # Whether the file may hold writes no fsync has covered: flush()
        # skips the fsync of an index nothing was written to since the last
        # one (a metadata log flushes after every batch; its indexes rarely
        # get an entry).
        self._unsynced = True
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        newly_created = not os.path.exists(path)
        self._writable = writable or newly_created
        self._closed = False
        if newly_created:
            if max_index_size < self.ENTRY_SIZE:
                raise ValueError(f"Invalid max index size: {max_index_size}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o644)
            try:
                os.ftruncate(fd, _round_down(max_index_size, self.ENTRY_SIZE))
            finally:
                os.close(fd)
        self._view = None
        self._buffered = False
        self._flushed = 0
        # flush() runs on an executor thread while the event loop appends:
        # writing pending entries, resizing and truncating take this lock
        # (appends do not: they only add past what a flush reads).
        self._io_lock = threading.RLock()
        if discard_entries and not newly_created:
            self._length = os.stat(path).st_size
            self._max_entries = self._length // self.ENTRY_SIZE
            self._entries = 0
            self._last = None
            self._view = bytearray()
            self._buffered = True
            return
        self._map(os.stat(path).st_size)
        # A new file has no entries; an existing file is all entries.
        self._entries = 0 if newly_created else self._length // self.ENTRY_SIZE
        self._refresh_last()
        if newly_created:
            self._buffer()

    def _open(self) -> int:
        """A descriptor for one operation on the file (the caller closes it)."""
        return os.open(self.path, (os.O_RDWR if self._writable else os.O_RDONLY) | _O_CLOEXEC)

    def _ftruncate(self, size: int) -> None:
        self._unsynced = True
        fd = self._open()
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    # -- mapping and buffering ---------------------------------------------
    def _map(self, length: int) -> None:
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        if self._buffered:
            return
        if length == 0:
            self._view = None  # mmap cannot map an empty file
        else:
            fd = self._open()
            try:
                self._view = FileMapping(fd, length, self._writable)
            finally:
                os.close(fd)

    def _unmap(self) -> None:
        if not self._buffered and self._view is not None:
            self._view.close()
        self._view = None

    def _buffer(self) -> None:
        """Switch to buffered mode (the segment is becoming active)."""
        if self._buffered or not self._writable:
            return
        used = self._entries * self.ENTRY_SIZE
        data = bytearray(self._view[:used]) if self._view is not None else bytearray()
        self._unmap()
        self._view = data
        self._buffered = True
        self._flushed = self._entries

    def _unbuffer(self) -> None:
        """Write pending entries and go back to a mapping of the file."""
        if not self._buffered:
            return
        self._write_pending()
        self._buffered = False
        self._view = None
        self._map(self._length)

    def _write_pending(self) -> None:
        self._write_pending_and(None)

    def _write_pending_and(self, then: Callable[[int], object] | None) -> None:
        """Write the entries not yet in the file, then ``then(fd)`` (fsync,
        ftruncate) on the same descriptor."""
        with self._io_lock:
            size = self.ENTRY_SIZE
            entries = self._entries
            if entries == self._flushed and then is None:
                return
            self._unsynced = self._unsynced or entries != self._flushed or then is not os.fsync
            fd = self._open()
            try:
                if entries > self._flushed:
                    start = self._flushed * size
                    # A bytearray slice is a copy: no buffer export that would stop
                    # the appending thread from growing the bytearray.
                    os.pwrite(fd, self._view[start : entries * size], start)
                elif entries < self._flushed:
                    start = entries * size
                    end = min(self._flushed * size, self._length)
                    if end > start:
                        os.pwrite(fd, bytes(end - start), start)  # entries removed by truncation
                self._flushed = entries
                if then is not None:
                    then(fd)
                if then is os.fsync:
                    self._unsynced = False
            finally:
                os.close(fd)

    def _reserve(self, end: int) -> None:
        """Make room to write entries up to byte ``end``, in the buffer: an
        index is never written through its mapping. A store to a page of a
        sparse (preallocated) file that has no block yet faults it in, and
        on a full disk that fault is SIGBUS, which kills the process; a
        pwrite of the buffer fails with ENOSPC instead, which takes the log
        dir offline."""
        if not self._buffered:
            self._buffer()
        if len(self._view) < end:
            self._ensure_capacity(end)

    def _ensure_capacity(self, end: int) -> None:
        view = self._view
        if len(view) < end:
            view.extend(bytes(max(end - len(view), min(len(view), 1 << 20), 4096)))

    # -- size --------------------------------------------------------------
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Bytes the file currently occupies (preallocated size while active)."""
        return self._length

    def resize(self, new_size: int) -> bool:
        """Grow or shrink the file to ``new_size`` rounded down to whole
        entries, keeping the entries; returns whether the size changed.
        Growing means the segment is (again) active: writes are buffered."""
        with self._io_lock:
            return self._resize(new_size)

    def _resize(self, new_size: int) -> bool:
        rounded = _round_down(new_size, self.ENTRY_SIZE)
        rounded = max(rounded, self._entries * self.ENTRY_SIZE)
        if rounded == self._length:
            if rounded > self._entries * self.ENTRY_SIZE:
                self._buffer()
            return False
        if self._buffered:
            self._write_pending_and(lambda fd: os.ftruncate(fd, rounded))
            self._map(rounded)
        else:
            self._unmap()
            self._ftruncate(rounded)
            self._map(rounded)
        if rounded > self._entries * self.ENTRY_SIZE:
            self._buffer()
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to its entries (roll and close) and map it."""
        with self._io_lock:
            self._resize(self._entries * self.ENTRY_SIZE)
            self._unbuffer()

    # -- search ------------------------------------------------------------
    def _largest_lower_bound_slot(
        self, target: int, key_pos: int | None = None, key_width: int | None = None
    ) -> int:
        if self._entries == 0:
            return -1
        return largest_lower_bound_slot(
            self._view,
            self._entries,
            self.ENTRY_SIZE,
            self.KEY_POS if key_pos is None else key_pos,
            self.KEY_WIDTH if key_width is None else key_width,
            target,
        )

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > INDEX_RELATIVE_OFFSET_MAX:
            raise IndexOffsetOverflowException(
                f"Integer overflow for offset: {offset} ({self.path})"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INDEX_RELATIVE_OFFSET_MAX

    # -- truncation ----------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset`` (replica truncation).
        Both entry formats hold a relative offset that never decreases, at
        byte OFFSET_POS: the search is by it, whatever the index's key."""
        relative = offset - self.base_offset
        if relative < 0:
            self._truncate_to_entries(0)
            return
        slot = self._largest_lower_bound_slot(
            min(relative, INDEX_RELATIVE_OFFSET_MAX), self.OFFSET_POS, INDEX_RELATIVE_OFFSET_WIDTH
        )
        if slot < 0:
            new_entries = 0
        elif self.raw_entry(slot).offset == offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its size, zero-filled)."""
        self._truncate_to_entries(0)

    def reset(self, max_index_size: int) -> None:
        """Start over empty and buffered, the file at ``max_index_size``
        (recovery rebuilds the index this way). The old bytes are not zeroed
        (that wrote the whole preallocated file: ~8 ms per partition after
        kill -9): only the first ``entries`` of an index file mean anything,
        and the file is cut to them at roll and close, or rebuilt again
        after another crash."""
        with self._io_lock:
            rounded = _round_down(max_index_size, self.ENTRY_SIZE)
            self._unmap()
            self._buffered = False
            if rounded != self._length:
                self._ftruncate(rounded)
            self._length, self._max_entries = rounded, rounded // self.ENTRY_SIZE
            self._entries = 0
            self._last = None
            self._view = bytearray()
            self._buffered = True
            self._flushed = 0

    def _truncate_to_entries(self, entries: int) -> None:
        with self._io_lock:
            self._truncate_locked(entries)

    def _truncate_locked(self, entries: int) -> None:
        if entries < self._entries:
            start = entries * self.ENTRY_SIZE
            end = self._entries * self.ENTRY_SIZE
            if self._buffered:
                del self._view[start:]
            elif self._view is not None:
                if not self._writable:
                    raise PermissionError(f"{self.path} is open read-only")
                # Through the file, not the mapping (see _reserve).
                fd = self._open()
                try:
                    os.pwrite(fd, bytes(end - start), start)
                finally:
                    os.close(fd)
        self._entries = entries
        self._refresh_last()

    def _refresh_last(self) -> None:
        """Cache the last entry so appends need not read the entries back."""
        self._last = self.raw_entry(self._entries - 1) if self._entries else None

    def _last_or_none(self) -> EntryT | None:
        # _last is an entry, None, or _STALE (a C field: Any to mypy).
        last: EntryT | None = self._last
        if last is _STALE:
            self._refresh_last()
            last = self._last
        return last

    # -- life cycle ----------------------------------------------------------
    def flush(self) -> None:
        with self._io_lock:
            if self._closed:
                return
            if self._buffered:
                if self._unsynced or self._entries != self._flushed:
                    self._write_pending_and(os.fsync)
            elif self._view is not None:
                self._view.flush()

    def close(self) -> None:
        if self._closed:
            return
        if self._writable:
            self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def close_handler(self) -> None:
        """Release the file without writing anything (before a rename or
        delete, or as a crash leaves it)."""
        self._unmap()
        self._buffered = False
        self._closed = True

    def rename_to(self, path: str) -> None:
        os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close_handler()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def raw_entry(self, slot: int) -> EntryT:
        raise NotImplementedError  # defined by each entry format

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexException unless the file is a whole number of
        entries with sorted keys (a zero-filled or torn index fails here)."""
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexException(
                f"Index file {self.path} is corrupt: its size {self._length} is not "
                f"a multiple of {self.ENTRY_SIZE}"
            )
        if self._entries > 1:
            bad = first_unordered_slot(
                self._view,
                self._entries,
                self.ENTRY_SIZE,
                self.KEY_POS,
                self.KEY_WIDTH,
                self.STRICT,
            )
            if bad >= 0:
                raise CorruptIndexException(
                    f"Index file {self.path} is corrupt: entry {bad} is out of order"
                )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path!r}, base_offset={self.base_offset}, "
            f"entries={self._entries}/{self._max_entries})"
        )


class OffsetIndex(AbstractIndex[OffsetPosition]):
    """Maps offsets to positions in the .log: entry (relativeOffset, position).

    ``lookup(offset)`` gives the largest indexed offset <= offset and the
    position of the batch it was indexed at; the caller scans batch headers
    forward from there.
    """

    ENTRY_SIZE = OFFSET_INDEX_ENTRY_SIZE
    KEY_POS = OFFSET_INDEX_RELATIVE_OFFSET_AT
    KEY_WIDTH = INDEX_RELATIVE_OFFSET_WIDTH
    OFFSET_POS = OFFSET_INDEX_RELATIVE_OFFSET_AT
    _ENTRY = OFFSET_INDEX_ENTRY

    __slots__ = ()

    def entry(self, slot: int) -> OffsetPosition:
        if slot < 0 or slot >= self._entries:
            raise IndexError(f"slot {slot} outside 0..{self._entries - 1} of {self.path}")
        relative, position = self._ENTRY.unpack_from(self._view, slot * OFFSET_INDEX_ENTRY_SIZE)
        return OffsetPosition(self.base_offset + relative, position)

    raw_entry = entry

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def last_entry(self) -> OffsetPosition:
        last = self._last_or_none()
        return last if last is not None else OffsetPosition(self.base_offset, 0)

    def position_floor(self, target_position: int) -> int:
        """Largest indexed position <= ``target_position`` (a batch boundary),
        else 0. Positions grow with offsets, so this is a binary search too."""
        low, high = 0, self._entries - 1
        found = 0
        while low <= high:
            middle = (low + high) >> 1
            position = self._ENTRY.unpack_from(self._view, middle * OFFSET_INDEX_ENTRY_SIZE)[1]
            if position <= target_position:
                found, low = position, middle + 1
            else:
                high = middle - 1
        return found

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target_offset, else (base_offset, 0)."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return _make_offset_position(
            offset_index_lookup(self._view, self._entries, self.base_offset, target_offset)
        )

    def append(self, offset: int, position: int) -> None:
        if self._entries >= self._max_entries:
            raise IndexError(
                f"Attempt to append to a full index (size = {self._entries}) {self.path}"
            )
        relative = offset - self.base_offset
        if relative < 0 or relative > INDEX_RELATIVE_OFFSET_MAX:
            self._relative_offset(offset)  # raises IndexOffsetOverflowException
        last = self._last_or_none()
        if last is not None and offset <= last[0]:
            raise InvalidOffsetException(
                f"Attempt to append an offset ({offset}) to position {self._entries} no "
                f"larger than the last offset appended ({last[0]}) to {self.path}"
            )
        start = self._entries * OFFSET_INDEX_ENTRY_SIZE
        self._reserve(start + OFFSET_INDEX_ENTRY_SIZE)
        self._ENTRY.pack_into(self._view, start, relative, position)
        self._entries += 1
        self._last = OffsetPosition(offset, position)

    def sanity_check(self, log_size: int | None = None) -> None:
        super().sanity_check(log_size)
        if self._entries:
            last = self.last_entry()
            if last.offset < self.base_offset:
                raise CorruptIndexException(
                    f"Corrupt index found, index file ({self.path}) has non-zero size but the "
                    f"last offset is {last.offset} which is less than the base offset "
                    f"{self.base_offset}."
                )
            if log_size is not None and last.position >= max(log_size, 1):
                raise CorruptIndexException(
                    f"Index file {self.path} is corrupt: position {last.position} is past the "
                    f"end of the log ({log_size} bytes)"
                )


class TimeIndex(AbstractIndex[TimestampOffset]):
    """Maps timestamps to offsets: entry (timestamp, relativeOffset).

    An entry is appended only when its timestamp is larger than the last
    one's, so a lookup finds the first offset whose batch may hold a record
    at or after a timestamp. One slot is kept free for the entry written when
    the segment rolls, so the index is "full" one entry early.
    """

    ENTRY_SIZE = TIME_INDEX_ENTRY_SIZE
    KEY_POS = TIME_INDEX_TIMESTAMP_AT
    KEY_WIDTH = INDEX_TIMESTAMP_WIDTH
    OFFSET_POS = TIME_INDEX_RELATIVE_OFFSET_AT
    _ENTRY = TIME_INDEX_ENTRY

    __slots__ = ()

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def entry(self, slot: int) -> TimestampOffset:
        if slot < 0 or slot >= self._entries:
            raise IndexError(f"slot {slot} outside 0..{self._entries - 1} of {self.path}")
        timestamp, relative = self._ENTRY.unpack_from(self._view, slot * TIME_INDEX_ENTRY_SIZE)
        return TimestampOffset(timestamp, self.base_offset + relative)

    raw_entry = entry

    def last_entry(self) -> TimestampOffset:
        last = self._last_or_none()
        return last if last is not None else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, else (NO_TIMESTAMP, base_offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last
        entry's. ``skip_full_check`` uses the slot reserved for the roll."""
        last = self.last_entry()
        if self._entries and timestamp == last.timestamp and offset >= last.offset:
            return  # nothing new: not an append, so fullness does not matter
        if not skip_full_check and self.is_full():
            raise IndexError(
                f"Attempt to append to a full time index (size = {self._entries}) {self.path}"
            )
        if self._entries >= self._max_entries:
            raise IndexError(f"Attempt to append to a full time index {self.path}")
        if self._entries and offset < last.offset:
            raise InvalidOffsetException(
                f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                f"the last offset appended ({last.offset}) to {self.path}"
            )
        if self._entries and timestamp < last.timestamp:
            raise InvalidOffsetException(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger "
                f"than the last timestamp appended ({last.timestamp}) to {self.path}"
            )
        if self._entries == 0 or timestamp > last.timestamp:
            start = self._entries * TIME_INDEX_ENTRY_SIZE
            self._reserve(start + TIME_INDEX_ENTRY_SIZE)
            self._ENTRY.pack_into(self._view, start, timestamp, self._relative_offset(offset))
            self._entries += 1
            self._last = TimestampOffset(timestamp, offset)

    def sanity_check(self, log_size: int | None = None) -> None:
        super().sanity_check(log_size)
        if self._entries:
            last = self.last_entry()
            if last.offset < self.base_offset:
                raise CorruptIndexException(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                    f"but the last offset is {last.offset} which is less than the first offset "
                    f"{self.base_offset}"
                )
            if (
                self._entries > 1
                and first_unordered_slot(
                    self._view,
                    self._entries,
                    TIME_INDEX_ENTRY_SIZE,
                    TIME_INDEX_RELATIVE_OFFSET_AT,
                    INDEX_RELATIVE_OFFSET_WIDTH,
                    False,
                )
                >= 0
            ):
                raise CorruptIndexException(
                    f"Time index file {self.path} is corrupt: offsets are out of order"
                )
