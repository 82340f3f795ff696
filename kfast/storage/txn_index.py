"""TransactionIndex: the aborted transactions of a segment (.txnindex).

    entry := version int16 (= 0), producerId int64, firstOffset int64,
             lastOffset int64, lastStableOffset int64              (34 bytes)

One entry per aborted transaction whose ABORT marker is in this segment, in
marker order (lastOffset increases). A read_committed fetch asks for the
aborted transactions overlapping its offset range so the consumer can drop
their records. The file is created on the first entry and is small, so it is
kept in memory as well and appended to with plain writes.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kfast.protocol.errors import CorruptRecordException
from kfast.storage.atomic_file import write_atomically

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    # True when no later segment can hold an aborted txn overlapping the range.
    is_complete: bool


class TransactionIndex:
    __slots__ = ("path", "start_offset", "_entries")

    def __init__(self, start_offset: int, path: str):
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            usable = len(data) - len(data) % ENTRY_SIZE  # ignore a torn tail
            for pos in range(0, usable, ENTRY_SIZE):
                version, *fields = _ENTRY.unpack_from(data, pos)
                if version != VERSION:
                    raise CorruptRecordException(
                        f"Unexpected aborted transaction version {version} in {path}"
                    )
                self._entries.append(AbortedTxn(*fields))

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{self._entries[-1].last_offset} of index {self.path}"
            )
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(VERSION, *txn))
        self._entries.append(txn)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions that overlap [fetch_offset, upper_bound_offset)."""
        found = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        keep = [t for t in self._entries if t.last_offset < offset]
        if len(keep) != len(self._entries):
            self._rewrite(keep)

    def reset(self) -> None:
        self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        if not entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        # Not fsynced: flush() syncs it with its segment, and after a crash
        # recovery rebuilds it from the .log (LogSegment.recover).
        write_atomically(self.path, b"".join(_ENTRY.pack(VERSION, *t) for t in entries), sync=False)

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename_to(self, path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        pass
