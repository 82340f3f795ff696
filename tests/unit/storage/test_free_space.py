"""FreeSpaceMonitor: the threshold, the statvfs rate limit per dir, recovery
without a restart, and the LogManager placing new logs where there is room."""

from __future__ import annotations

import logging
import os

import pytest

from kfast.config import KafkaConfig
from kfast.storage.free_space import FreeSpaceMonitor
from kfast.storage.manager import LogManager

GIB = 1 << 30
MIB = 1 << 20


class FakeDisks:
    """statvfs over made-up filesystems of 4 KiB blocks, counting calls."""

    def __init__(self) -> None:
        self.total: dict[str, int] = {}
        self.free: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def statvfs(self, path: str) -> os.statvfs_result:
        self.calls[path] = self.calls.get(path, 0) + 1
        if path not in self.total:
            raise FileNotFoundError(path)
        block = 4096
        blocks, avail = self.total[path] // block, self.free[path] // block
        # (bsize, frsize, blocks, bfree, bavail, files, ffree, favail, flag, namemax)
        return os.statvfs_result((block, block, blocks, avail, avail, 0, 0, 0, 0, 255))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _monitor(
    disks: FakeDisks,
    clock: Clock,
    nbytes: int = GIB,
    percent: float = 5.0,
    dirs: tuple[str, ...] | list[str] = (),
):
    return FreeSpaceMonitor(nbytes, percent, 500, dirs=dirs, clock=clock, statvfs=disks.statvfs)


def test_the_threshold_is_the_smaller_of_bytes_and_percent() -> None:
    monitor = FreeSpaceMonitor(GIB, 5.0, 1000)
    assert monitor.threshold(64 * MIB) == int(64 * MIB * 0.05)
    assert monitor.threshold(1000 * GIB) == GIB
    assert FreeSpaceMonitor(0, 5.0, 1000).threshold(64 * MIB) == 0
    assert FreeSpaceMonitor(GIB, 0, 1000).threshold(64 * MIB) == 0


def test_writes_are_refused_below_the_threshold_and_accepted_again_once_freed(caplog) -> None:
    disks, clock = FakeDisks(), Clock()
    disks.total["/d"] = 64 * MIB
    disks.free["/d"] = 10 * MIB
    monitor = _monitor(disks, clock)
    assert monitor.low_space_message("/d") is None
    disks.free["/d"] = 2 * MIB  # below 5% of 64 MiB = 3.2 MiB
    clock.now += 0.5
    with caplog.at_level(logging.INFO, logger="kfast.storage.free_space"):
        message = monitor.low_space_message("/d")
        assert message is not None
        assert "/d has 2.0 MiB free, below the 3.2 MiB kept free" in message
        assert "kfast.log.dirs.min.free.bytes" in message
        clock.now += 0.5
        assert monitor.low_space_message("/d") == message
        disks.free["/d"] = 20 * MIB
        clock.now += 0.5
        assert monitor.low_space_message("/d") is None
    # One line each way, not one per check.
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


def test_statvfs_runs_at_most_once_per_interval_per_dir() -> None:
    disks, clock = FakeDisks(), Clock()
    for d in ("/a", "/b"):
        disks.total[d], disks.free[d] = 64 * MIB, 1 * MIB
    monitor = _monitor(disks, clock)
    for _ in range(1000):
        assert monitor.low_space_message("/a") is not None
        assert monitor.low_space_message("/b") is not None
        clock.now += 0.0001  # 1000 checks within 100 ms
    assert disks.calls == {"/a": 1, "/b": 1}
    disks.free["/a"] = 32 * MIB
    assert monitor.low_space_message("/a") is not None  # cached until the interval ends
    clock.now += 0.5
    assert monitor.low_space_message("/a") is None
    assert disks.calls["/a"] == 2


def test_a_dir_statvfs_cannot_read_is_not_low_and_a_zero_setting_never_checks() -> None:
    disks, clock = FakeDisks(), Clock()
    assert _monitor(disks, clock).low_space_message("/gone") is None
    disks.total["/d"], disks.free["/d"] = 64 * MIB, 0
    assert _monitor(disks, clock, nbytes=0).low_space_message("/d") is None
    assert _monitor(disks, clock, percent=0).low_space_message("/d") is None
    assert "/d" not in disks.calls


@pytest.fixture
def two_dirs(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    config = KafkaConfig({"node.id": 1, "log.dirs": ",".join(dirs)})
    manager = LogManager(config, cluster_id="c")
    manager.startup()
    disks, clock = FakeDisks(), Clock()
    for d in dirs:
        disks.total[d], disks.free[d] = 64 * MIB, 32 * MIB
    manager.free_space = _monitor(disks, clock, dirs=dirs)
    yield manager, dirs, disks, clock
    manager.shutdown()


def test_new_logs_go_to_a_dir_with_room_and_none_is_refused_only_when_all_are_low(
    two_dirs,
) -> None:
    manager, (a, b), disks, clock = two_dirs
    disks.free[a] = MIB
    assert manager.all_dirs_low_message() is None
    for p in range(3):
        manager.get_or_create_log("t", p)
        assert manager.log_dir_of("t", p) == b
    assert manager.low_space_message("t", 0) is None
    disks.free[b] = MIB
    clock.now += 1
    message = manager.all_dirs_low_message()
    assert message is not None and a in message and b in message
    assert manager.low_space_message("t", 0) is not None
    assert manager.low_space_message("t", 99) is None  # not hosted: not this check's answer


def test_the_produce_check_reads_nothing_while_every_dir_has_room_and_sees_one_go_low(
    two_dirs,
) -> None:
    manager, (a, b), disks, clock = two_dirs
    manager.get_or_create_log("t", 0)
    log_dir = manager.log_dir_of("t", 0)
    assert manager.low_space_message("t", 0) is None
    reads = dict(disks.calls)
    monitor = manager.free_space
    asked: list[str] = []
    per_dir = monitor.low_space_message
    monitor.low_space_message = lambda d: asked.append(d) or per_dir(d)  # type: ignore[method-assign]
    for _ in range(100):
        clock.now += 0.001
        assert manager.low_space_message("t", 0) is None
    # Within the interval: no statvfs, and no per-dir question either.
    assert disks.calls == reads and asked == []
    disks.free[log_dir] = MIB
    clock.now += 0.5
    message = manager.low_space_message("t", 0)
    assert message is not None and log_dir in message
    # Every due dir was read at once, the other one too: none is left
    # unread to keep the shortcut off.
    assert disks.calls == {d: reads[d] + 1 for d in (a, b)}
    disks.free[log_dir] = 32 * MIB
    clock.now += 0.5
    assert manager.low_space_message("t", 0) is None
    reads = dict(disks.calls)
    clock.now += 0.1
    assert manager.low_space_message("t", 0) is None
    assert disks.calls == reads


def test_a_dir_given_at_construction_is_read_at_the_first_question() -> None:
    disks, clock = FakeDisks(), Clock()
    for d in ("/a", "/b"):
        disks.total[d], disks.free[d] = 64 * MIB, 32 * MIB
    disks.free["/b"] = MIB
    monitor = _monitor(disks, clock, dirs=["/a", "/b"])
    assert monitor.roomy_until == 0.0  # nothing read yet: no shortcut
    assert monitor.low_space_message("/a") is None
    assert disks.calls == {"/a": 1, "/b": 1}
    assert monitor.roomy_until == 0.0  # /b is low
    assert monitor.low_space_message("/b") is not None
    assert _monitor(disks, clock, nbytes=0, dirs=["/a"]).roomy_until == float("inf")
