"""kill -9 in the middle of replacing a file: the file kfast reads afterwards
holds the old contents or the new, never a mix, and a temp file the crash
left behind is never read in its place.

Each writer that goes through kfast.storage.atomic_file runs in a child
process (this file run as a script) that SIGKILLs itself at one step of the
write: half-way through writing the temp file, before fsyncing it, before
the rename, after the rename (before the directory fsync). The parent then
reads the target with kfast's own reader, as a restart would. A second test
kills a child that rewrites a metadata snapshot in a loop at arbitrary
moments.
"""

import functools
import os
import random
import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest

from kfast.controller.metadata.records import TopicRecord, decode_record, encode_record
from kfast.raft.snapshots import (
    PARTIAL_SUFFIX,
    iter_snapshot_batches,
    list_snapshots,
    read_snapshot_file,
    snapshot_name,
    write_snapshot_file,
)
from kfast.storage import atomic_file
from kfast.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kfast.storage.loader import remove_temp_files
from kfast.storage.producer_state import (
    ProducerStateEntry,
    ProducerStateManager,
)
from kfast.storage.producer_state import (
    read_snapshot as read_producer_snapshot,
)
from kfast.storage.producer_state import (
    write_snapshot as write_producer_snapshot,
)
from kfast.storage.txn_index import AbortedTxn, TransactionIndex


def write_metadata_snapshot(directory: str, end_offset: int, epoch: int, records: list) -> None:
    """A metadata snapshot written in several pieces (one per batch)."""
    path = os.path.join(directory, snapshot_name(end_offset, epoch))
    write_snapshot_file(path, iter_snapshot_batches(records, epoch, encode_record))


def read_snapshot(path: str) -> list | None:
    return read_snapshot_file(path, lambda value: decode_record(value)[0])


# -- the writers: old contents (written by the parent), new contents (by the child) --
class OffsetCheckpoint:
    synced = True
    old = {("t", 0): 1}
    new = {("t", p): 1000 + p for p in range(2000)}

    @staticmethod
    def path(directory):
        return os.path.join(directory, RECOVERY_POINT_CHECKPOINT)

    def write_old(self, directory):
        OffsetCheckpointFile(self.path(directory)).write(self.old)

    def write_new(self, directory):
        OffsetCheckpointFile(self.path(directory)).write(self.new)

    def read(self, directory):
        return OffsetCheckpointFile(self.path(directory)).read()


class ProducerSnapshot:
    """Rewritten at the same offset, as after a truncation to that offset."""

    synced = True
    old = [1]
    new = list(range(1, 2001))

    @staticmethod
    def path(directory):
        return os.path.join(directory, "00000000000000000100.snapshot")

    def write_old(self, directory):
        write_producer_snapshot(self.path(directory), [ProducerStateEntry(p) for p in self.old])

    def write_new(self, directory):
        write_producer_snapshot(self.path(directory), [ProducerStateEntry(p) for p in self.new])

    def read(self, directory):
        remove_temp_files(directory)  # what opening the partition does first
        assert ProducerStateManager(directory).snapshot_offsets() == [100]
        return [e.producer_id for e in read_producer_snapshot(self.path(directory))]


class TransactionIndexTruncation:
    synced = False  # rebuilt by recovery after a crash, so not fsynced
    old = [AbortedTxn(7, 10 * i, 10 * i + 5, 10 * i) for i in range(1, 4)]
    new = old[:1]

    @staticmethod
    def path(directory):
        return os.path.join(directory, "00000000000000000000.txnindex")

    def write_old(self, directory):
        index = TransactionIndex(0, self.path(directory))
        for txn in self.old:
            index.append(txn)

    def write_new(self, directory):
        TransactionIndex(0, self.path(directory)).truncate_to(self.old[1].last_offset)

    def read(self, directory):
        remove_temp_files(directory)
        return TransactionIndex(0, self.path(directory)).entries


class MetadataSnapshot:
    """A new snapshot file next to the previous one: 'old' is the directory
    without it, 'new' with it (complete)."""

    synced = True
    old = [(10, ["a"])]
    new = [(10, ["a"]), (20, [f"t{i}" for i in range(2500)])]

    @staticmethod
    def _records(names):
        return [
            TopicRecord(name=name, topic_id=uuid.UUID(int=i + 1)) for i, name in enumerate(names)
        ]

    def write_old(self, directory):
        ((end_offset, names),) = self.old
        write_metadata_snapshot(directory, end_offset, 1, self._records(names))

    def write_new(self, directory):
        end_offset, names = self.new[-1]
        write_metadata_snapshot(directory, end_offset, 1, self._records(names))

    def read(self, directory):
        found = []
        for end_offset, _, path in list_snapshots(directory):
            records = read_snapshot(path)
            assert records is not None, f"{path} is listed but not a whole snapshot"
            found.append((end_offset, [r.name for r in records]))
        # A temp file the crash left is never listed as a snapshot.
        assert all(not path.endswith(PARTIAL_SUFFIX) for _, _, path in list_snapshots(directory))
        for name in os.listdir(directory):
            if name.endswith(PARTIAL_SUFFIX):
                os.unlink(os.path.join(directory, name))
        return found


WRITERS = {
    cls.__name__: cls()
    for cls in (OffsetCheckpoint, ProducerSnapshot, TransactionIndexTruncation, MetadataSnapshot)
}

# Where the child kills itself, and whether the target then holds the new contents.
KILL_POINTS = {
    "half-way through the temp file": False,
    "before fsyncing the temp file": False,
    "before the rename": False,
    "after the rename, before fsyncing the directory": True,
}
SYNC_ONLY = {"before fsyncing the temp file", "after the rename, before fsyncing the directory"}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at(point: str) -> None:
    """Make this process SIGKILL itself at ``point`` of the next atomic write."""
    if point == "half-way through the temp file":

        class TornFile:
            def __init__(self, f):
                self._f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self._f.__exit__(*exc)

            def write(self, data):
                self._f.write(bytes(data[: len(data) // 2]))
                self._f.flush()  # the half reaches the file, as a write(2) would
                _die()

        real_open = open
        atomic_file.open = lambda path, mode: TornFile(real_open(path, mode))
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        if point == (
            "after the rename, before fsyncing the directory"
            if is_dir
            else "before fsyncing the temp file"
        ):
            _die()
        real_fsync(fd)

    def replace(src, dst):
        if point == "before the rename":
            _die()
        real_replace(src, dst)

    os.fsync, os.replace = fsync, replace


def _run_child(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdout=subprocess.PIPE,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


@pytest.mark.parametrize(
    "writer,point",
    [
        (writer, point)
        for writer, spec in sorted(WRITERS.items())
        for point in KILL_POINTS
        if spec.synced or point not in SYNC_ONLY
    ],
)
def test_a_write_killed_at_any_step_leaves_the_old_or_the_new_file(tmp_path, writer, point):
    spec = WRITERS[writer]
    directory = str(tmp_path)
    spec.write_old(directory)
    assert spec.read(directory) == spec.old
    child = _run_child("kill-at", writer, point, directory)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, "the child did not reach the kill point"
    assert spec.read(directory) == (spec.new if KILL_POINTS[point] else spec.old)
    # The next write over whatever the crash left behind succeeds.
    spec.write_new(directory)
    assert spec.read(directory) == spec.new


@functools.lru_cache(maxsize=2)
def _versioned_snapshot(parity: int) -> list:
    """The records of every other version (built once, so the child spends
    its time writing). Several record batches: the file is written in
    several pieces."""
    return [TopicRecord(name=f"v{parity}-{i}", topic_id=uuid.UUID(int=i + 1)) for i in range(3000)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_a_snapshot_rewritten_in_a_loop_survives_kill9_at_any_moment(tmp_path, seed):
    directory = str(tmp_path)
    child = _run_child("rewrite-loop", directory)
    rng = random.Random(seed)
    kill_after = rng.randint(2, 6)
    acknowledged = 0
    try:
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged == 1:
                first_ack = time.monotonic()
            if acknowledged >= kill_after:
                break
        # The kill lands at a random moment of the write cycle (not right
        # after an acknowledgement, where the parent's reaction would put it).
        cycle = (time.monotonic() - first_ack) / (acknowledged - 1)
        time.sleep(rng.uniform(0, cycle))
        os.kill(child.pid, signal.SIGKILL)
        for line in child.stdout:
            acknowledged = int(line)
    finally:
        child.kill()
        child.wait()
    assert acknowledged >= kill_after
    ((_, _, path),) = list_snapshots(directory)
    records = read_snapshot(path)
    assert records is not None, "the snapshot file is torn"
    # Consecutive versions differ, so this is "the last acknowledged or the next".
    assert records in (
        _versioned_snapshot(acknowledged % 2),
        _versioned_snapshot((acknowledged + 1) % 2),
    )


def _child_main(argv: list[str]) -> None:
    if argv[0] == "kill-at":
        _, writer, point, directory = argv
        _kill_at(point)
        WRITERS[writer].write_new(directory)
    elif argv[0] == "rewrite-loop":
        version = 1
        while True:
            write_metadata_snapshot(argv[1], 20, 1, _versioned_snapshot(version % 2))
            sys.stdout.write(f"{version}\n")
            sys.stdout.flush()
            version += 1


if __name__ == "__main__":
    _child_main(sys.argv[1:])
