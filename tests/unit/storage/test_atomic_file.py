"""kfast.storage.atomic_file: the one way kfast replaces a file whole."""

import os
import stat

import pytest

from kfast.storage import atomic_file
from kfast.storage.atomic_file import TEMP_FILE_SUFFIX, atomic_writer, fsync_dir, write_atomically


def test_write_creates_then_replaces_and_leaves_no_temp_file(tmp_path):
    target = str(tmp_path / "checkpoint")
    write_atomically(target, b"old\n")
    assert open(target, "rb").read() == b"old\n"
    write_atomically(target, b"new\n")
    assert open(target, "rb").read() == b"new\n"
    assert os.listdir(tmp_path) == ["checkpoint"]


def test_streaming_writer_publishes_only_when_the_block_ends(tmp_path):
    target = str(tmp_path / "00000000000000000010-0000000001.checkpoint")
    write_atomically(target, b"old")
    with atomic_writer(target, temp_suffix=".part") as f:
        f.write(b"first ")
        f.write(b"second")
        # Mid-write: the target is still the old file, the new one is the temp.
        assert open(target, "rb").read() == b"old"
        assert os.path.exists(target + ".part")
    assert open(target, "rb").read() == b"first second"
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(target)]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = str(tmp_path / "leader-epoch-checkpoint")
    write_atomically(target, b"0\n0\n")
    with pytest.raises(RuntimeError):
        with atomic_writer(target) as f:
            f.write(b"half")
            raise RuntimeError("the writer failed")
    assert open(target, "rb").read() == b"0\n0\n"
    assert os.listdir(tmp_path) == ["leader-epoch-checkpoint"]


def test_a_stale_temp_file_from_a_crash_is_overwritten(tmp_path):
    target = str(tmp_path / "partition.metadata")
    with open(target + TEMP_FILE_SUFFIX, "wb") as f:
        f.write(b"torn leftovers that are longer than the new contents")
    write_atomically(target, b"version: 0\n")
    assert open(target, "rb").read() == b"version: 0\n"
    assert os.listdir(tmp_path) == ["partition.metadata"]


def _record_steps(monkeypatch):
    """Spy on the system calls the helper makes, in order."""
    steps = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        steps.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(src, dst):
        steps.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(atomic_file.os, "fsync", fsync)
    monkeypatch.setattr(atomic_file.os, "replace", replace)
    return steps


def test_sync_fsyncs_the_file_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    steps = _record_steps(monkeypatch)
    write_atomically(str(tmp_path / "meta.properties"), b"version=1\n")
    assert steps == ["fsync file", "rename", "fsync dir"]


def test_without_sync_the_file_is_still_renamed_into_place_but_not_fsynced(tmp_path, monkeypatch):
    steps = _record_steps(monkeypatch)
    write_atomically(str(tmp_path / "00000000000000000000.snapshot"), b"state", sync=False)
    assert steps == ["rename"]
    assert open(tmp_path / "00000000000000000000.snapshot", "rb").read() == b"state"


def test_fsync_dir_skips_a_directory_it_cannot_open(tmp_path):
    # A write whose data is already renamed into place must not fail here.
    assert fsync_dir(str(tmp_path / "missing")) is None
