"""LogDirFailureChannel and LogManager after a disk error (Kafka's
LogDirFailureChannel / LogManager.handleLogDirFailure); the real full disk
is in tests/e2e/test_log_dir_failure.py."""

import errno
import os

import pytest

from kfast.protocol.errors import KafkaStorageException
from kfast.storage import manager as manager_module
from kfast.storage.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from kfast.storage.manager import CLEAN_SHUTDOWN_FILE

from .batches import make_batch
from .test_manager import manager

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def test_a_dir_goes_offline_once_and_the_listener_hears_it_once():
    channel = LogDirFailureChannel()
    heard = []
    channel.listener = heard.append
    assert channel.maybe_add_offline_log_dir("/d1", "Error while flushing", ENOSPC)
    assert not channel.maybe_add_offline_log_dir("/d1", "Error while appending", ENOSPC)
    assert heard == ["/d1"] and channel.has_offline_log_dir("/d1")
    assert channel.offline_log_dirs == {"/d1": "Error while flushing"}


def test_running_out_of_descriptors_is_not_a_failed_dir():
    assert is_log_dir_failure(ENOSPC) and is_log_dir_failure(OSError(errno.EIO, "I/O error"))
    assert not is_log_dir_failure(OSError(errno.EMFILE, "Too many open files"))
    assert not is_log_dir_failure(OSError(errno.ENFILE, "Too many open files in system"))


def test_an_io_error_of_a_log_takes_its_dir_offline_and_the_other_dir_serves(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    first, second = m.get_or_create_log("a", 0), m.get_or_create_log("a", 1)
    assert (m.log_dir_of("a", 0), m.log_dir_of("a", 1)) == (d1, d2)
    first.append_as_leader(make_batch(2), leader_epoch=0)
    error = first._storage_error(ENOSPC, "appending records")
    assert isinstance(error, KafkaStorageException) and "No space left" in str(error)
    assert first.offline and m.failure_channel.has_offline_log_dir(d1)
    with pytest.raises(KafkaStorageException):
        first.append_as_leader(make_batch(1), leader_epoch=0)
    assert m.live_log_dirs == [d2]
    assert m.handle_log_dir_failure(d1) == [("a", 0)]
    assert m.handle_log_dir_failure(d1) == []
    assert m.get_log("a", 0) is None
    # New partitions and the surviving log use the online dir only.
    m.get_or_create_log("b", 0)
    assert m.log_dir_of("b", 0) == d2
    second.append_as_leader(make_batch(1), leader_epoch=0)
    m.shutdown()
    assert os.path.exists(os.path.join(d2, CLEAN_SHUTDOWN_FILE))
    assert not os.path.exists(os.path.join(d1, CLEAN_SHUTDOWN_FILE))


def test_a_failed_flush_at_shutdown_leaves_that_dir_to_recovery(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    log = m.get_or_create_log("a", 0)
    m.get_or_create_log("a", 1)
    log.append_as_leader(make_batch(3), leader_epoch=0)

    def failing_flush(offset=None):
        raise log._storage_error(OSError(errno.EIO, "Input/output error"), "flushing")

    log.flush = failing_flush
    m.shutdown()  # no exception: the dir is reported and skipped
    assert m.failure_channel.has_offline_log_dir(d1)
    assert not os.path.exists(os.path.join(d1, CLEAN_SHUTDOWN_FILE))
    assert os.path.exists(os.path.join(d2, CLEAN_SHUTDOWN_FILE))


def test_a_log_that_cannot_be_created_in_a_failing_dir_is_created_in_another(tmp_path, monkeypatch):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    real_log = manager_module.Log

    def log_failing_in_d1(path, *args, **kwargs):
        if path.startswith(d1 + os.sep):
            os.makedirs(path)  # half made, as a full disk leaves it
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_log(path, *args, **kwargs)

    monkeypatch.setattr(manager_module, "Log", log_failing_in_d1)
    log = m.get_or_create_log("a", 0)
    assert m.log_dir_of("a", 0) == d2 and log.dir.startswith(d2)
    assert not os.path.exists(os.path.join(d1, "a-0"))
    assert m.failure_channel.has_offline_log_dir(d1)
    # No online dir left: the creation fails with KAFKA_STORAGE_ERROR.
    m.failure_channel.maybe_add_offline_log_dir(d2, "test", ENOSPC)
    with pytest.raises(KafkaStorageException):
        m.get_or_create_log("a", 1)
    m.shutdown()


def test_a_start_with_every_dir_unreadable_fails_with_one_message(tmp_path, monkeypatch):
    m = manager(tmp_path, dirs=("d1", "d2"), start=False)

    def unreadable(d):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(m, "_load_dir", unreadable)
    with pytest.raises(KafkaStorageException, match="Shutdown broker because all log dirs in"):
        m.startup()


def test_a_start_with_one_dir_unreadable_serves_the_other(tmp_path, monkeypatch):
    m = manager(tmp_path, dirs=("d1", "d2"), start=False)
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    real = m._load_dir

    def load(d):
        if d == d1:
            raise OSError(errno.EIO, "Input/output error")
        real(d)

    monkeypatch.setattr(m, "_load_dir", load)
    m.startup()
    assert m.live_log_dirs == [d2] and d1 in m.offline_dirs
    m.shutdown()
