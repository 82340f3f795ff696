"""Replacing a file so that a crash leaves the old contents or the new, never a mix.

Every small file kfast rewrites whole (offset and leader-epoch checkpoints,
partition.metadata, meta.properties, the clean-shutdown marker, producer
state snapshots, a truncated .txnindex, KRaft snapshots) goes through
``atomic_writer``; Kafka does the same with ``Utils.atomicMoveWithFallback``
and ``Utils.flushDir``. The steps, and what a crash after each leaves:

1. write ``<target><temp_suffix>`` (created or truncated)  -> target untouched
2. fsync the temp file                                     -> target untouched
3. rename it over the target (atomic on POSIX)             -> target is new
4. fsync the directory                                     -> the rename survives
                                                              a power loss too

Without step 2 a power loss after the rename can leave the target empty
or partly written: the rename may reach the disk before the file's data.
Without step 4 a power loss can bring the old file back.

A temp file left by a crash is never read as the target: each temp suffix
is one its directory's readers skip (``.tmp``: the log loader deletes it in
a partition directory and checkpoint readers open only their own name;
``.part``: a KRaft snapshot's, which the snapshot listing does not match and
cleanup deletes). The next write of the same target truncates it.

``sync=False`` skips steps 2 and 4: the file is still replaced whole if the
process dies, but a power loss may lose it. It is for files something else
makes durable or rebuilds (a producer snapshot taken at a segment roll, a
transaction index that recovery rebuilds from the log).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

TEMP_FILE_SUFFIX = ".tmp"


@contextmanager
def atomic_writer(
    path: str, sync: bool = True, temp_suffix: str = TEMP_FILE_SUFFIX
) -> Iterator[BinaryIO]:
    """A binary file to write the new contents of ``path`` into, for a
    writer that produces them piece by piece. When the block ends the file
    replaces ``path``; if the block raises, ``path`` is left as it was and
    the temp file is removed."""
    temp = path + temp_suffix
    try:
        with open(temp, "wb") as f:
            yield f
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


def write_atomically(
    path: str, data: bytes, sync: bool = True, temp_suffix: str = TEMP_FILE_SUFFIX
) -> None:
    """Replace ``path`` with ``data`` (see the module docstring)."""
    with atomic_writer(path, sync, temp_suffix) as f:
        f.write(data)


def fsync_dir(directory: str) -> None:
    """Make a rename or create in ``directory`` durable.

    Best effort: some file systems (and platforms) cannot open or fsync a
    directory; there a rename is as durable as the file system makes it,
    and failing the write for it would only take the broker down.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
