"""FileRegion: a byte range of an open file that travels to a socket by sendfile.

The log's read path returns FileRegions instead of bytes; the protocol encoder
writes their length where a `records` field goes and leaves the region in the
response's part list; the network layer sends bytes parts with write/writev
and FileRegion parts with sendfile(2), so record bytes never enter Python.
"""

from __future__ import annotations


class FileRegion:
    """``length`` bytes of ``file`` starting at ``position``.

    ``file`` is any object with ``fileno()`` (a segment's open file). Holding
    the object keeps the descriptor open while the response is in flight, even
    if the segment is deleted meanwhile (POSIX keeps unlinked files readable).
    """

    __slots__ = ("file", "position", "length")

    def __init__(self, file, position: int, length: int):
        if position < 0 or length < 0:
            raise ValueError("FileRegion position and length must be >= 0")
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """Copy the bytes into memory (for TLS connections and for tests)."""
        import os

        return os.pread(self.file.fileno(), self.length, self.position)

    def __repr__(self) -> str:
        return (
            f"FileRegion(fd={self.file.fileno()}, position={self.position}, length={self.length})"
        )
