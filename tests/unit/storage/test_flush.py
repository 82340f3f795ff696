"""Flush policy: flush.messages, flush.ms, recovery point, and the scheduler entry points."""

import os

from kfast.config import KafkaConfig, LogConfig
from kfast.storage.log import Log
from kfast.storage.manager import LogManager
from kfast.storage.segment import LogSegment

from .batches import make_batch


def count_fsyncs(monkeypatch):
    calls = []
    original = os.fsync

    def fsync(fd):
        calls.append(fd)
        return original(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_default_leaves_flushing_to_the_page_cache(tmp_path, monkeypatch):
    log = Log(str(tmp_path / "f-0"), LogConfig())
    calls = count_fsyncs(monkeypatch)
    for _ in range(50):
        log.append_as_leader(make_batch(2))
    # (The leader-epoch checkpoint is written once when the epoch starts.)
    assert log.active_segment.log.fileno() not in calls
    assert log.recovery_point == 0
    log.close()


def test_flush_messages(tmp_path, monkeypatch):
    log = Log(str(tmp_path / "f-0"), LogConfig({"flush.messages": "5"}))
    calls = count_fsyncs(monkeypatch)
    log.append_as_leader(make_batch(2))
    log.append_as_leader(make_batch(2))
    fd = log.active_segment.log.fileno()
    assert log.recovery_point == 0 and fd not in calls
    log.append_as_leader(make_batch(2))  # 6 unflushed messages >= 5
    assert log.recovery_point == 6 and fd in calls
    log.close()


def test_flush_ms_via_manager(tmp_path, monkeypatch):
    config = KafkaConfig(
        {"log.dirs": str(tmp_path / "d"), "node.id": "1", "log.flush.interval.ms": "1000"}
    )
    clock = [1_000_000]
    manager = LogManager(config, cluster_id="abcdefghijklmnopqrstuv", time_ms=lambda: clock[0])
    manager.startup()
    log = manager.get_or_create_log("f", 0)
    log.append_as_leader(make_batch(3, timestamp=clock[0]), now=clock[0])
    assert manager.flush_dirty_logs(clock[0] + 10) == 0
    assert manager.flush_dirty_logs(clock[0] + 1000) == 1
    assert log.recovery_point == 3
    manager.checkpoint_recovery_offsets()
    text = (tmp_path / "d" / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\nf 0 3\n"
    manager.shutdown()


def test_flush_covers_rolled_segments(tmp_path, monkeypatch):
    log = Log(str(tmp_path / "f-0"), LogConfig({"segment.bytes": "1048576"}))
    while log.num_segments < 3:
        log.append_as_leader(make_batch(5, 2000))
    flushed = []
    original = LogSegment.flush
    monkeypatch.setattr(
        LogSegment, "flush", lambda self: (flushed.append(self.base_offset), original(self))
    )
    log.flush()
    assert flushed == [s.base_offset for s in log.segments]
    assert log.recovery_point == log.log_end_offset
    flushed.clear()
    log.flush()
    assert flushed == []  # nothing new
    log.append_as_leader(make_batch(1))
    log.flush()
    assert flushed == [log.active_segment.base_offset]
    log.close()


def test_flush_on_another_thread_while_appending(tmp_path):
    """The broker's executor flushes while the event loop appends and rolls."""
    import threading

    log = Log(
        str(tmp_path / "f-0"),
        LogConfig({"segment.bytes": "1048576", "index.interval.bytes": "100"}),
    )
    stop = threading.Event()
    errors = []

    def flusher():
        while not stop.is_set():
            try:
                log.flush()
            except Exception as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(1500):
            log.append_as_leader(make_batch(2, 1000))
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert log.num_segments >= 3
    log.flush()
    log.close()
    reopened = Log(
        str(tmp_path / "f-0"), LogConfig({"segment.bytes": "1048576"}), had_clean_shutdown=True
    )
    for segment in reopened.segments:
        segment.sanity_check_indexes()
    assert reopened.log_end_offset == 3000
    reopened.close()


def test_flush_messages_can_be_handed_to_the_broker(tmp_path, monkeypatch):
    requested = []
    log = Log(
        str(tmp_path / "f-0"), LogConfig({"flush.messages": "4"}), flush_requester=requested.append
    )
    calls = count_fsyncs(monkeypatch)
    for _ in range(5):
        log.append_as_leader(make_batch(2))
    # Every 4 messages the log asks; it never fsyncs on the appending thread.
    assert requested == [log, log]
    assert log.active_segment.log.fileno() not in calls
    assert log.recovery_point == 0
    requested[0].flush()  # what the broker's executor does
    assert log.recovery_point == 10
    log.close()
