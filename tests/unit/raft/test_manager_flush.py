"""RaftManager runs the metadata log's fsync on its own thread: the event
loop goes on while it runs, and a proposal commits once it is done."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kfast.protocol import errors
from kfast.raft.election_state import MemoryQuorumStateStore
from kfast.raft.log import MemoryReplicatedLog
from kfast.raft.manager import RaftManager


class GatedLog(MemoryReplicatedLog):
    """A log whose fsync waits for ``gate`` (a slow disk), and notes the
    threads it ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.flushes: list[tuple[str, int | None]] = []

    def flush(self, offset: int | None = None) -> None:
        self.flushes.append((threading.current_thread().name, offset))
        if not self.gate.wait(10):
            raise TimeoutError("the test never opened the gate")
        super().flush(offset)


def quorum_of_one(log: GatedLog) -> RaftManager:
    return RaftManager(1, {1: None}, "cluster", log, MemoryQuorumStateStore(), codec=None)  # type: ignore[arg-type]


def test_a_proposal_commits_once_the_fsync_on_the_io_thread_is_done():
    async def main():
        log = GatedLog()
        log.gate.set()  # start-up's flush (of an empty log) runs on the loop
        manager = quorum_of_one(log)
        await manager.start()
        # Let the LeaderChange's flush finish, then hold the disk.
        while manager.client.high_watermark < 1:
            await asyncio.sleep(0.001)
        log.gate.clear()
        offset = manager.propose(["a"])
        committed = manager.wait_committed(offset)
        second = manager.wait_committed(manager.propose(["b"]))
        # The loop runs while the fsync waits; nothing is committed yet.
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert not committed.done() and manager.client.high_watermark == offset
        thread, flushing_to = log.flushes[-1]
        assert thread.startswith("raft-io-1") and flushing_to == offset + 1
        log.gate.set()
        assert await asyncio.wait_for(committed, 5) == offset
        # "b", appended while the first fsync ran, went into the next one.
        assert await asyncio.wait_for(second, 5) == offset + 1
        assert log.flushed_offset == offset + 2
        assert all(name.startswith("raft-io-1") for name, _ in log.flushes[1:])
        await manager.shutdown()

    asyncio.run(main())


def test_shutdown_waits_for_the_running_fsync_and_fails_the_waiters():
    async def main():
        log = GatedLog()
        log.gate.set()
        manager = quorum_of_one(log)
        await manager.start()
        while manager.client.high_watermark < 1:
            await asyncio.sleep(0.001)
        log.gate.clear()
        committed = manager.wait_committed(manager.propose(["a"]))
        await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(manager.shutdown())
        await asyncio.sleep(0.01)
        assert not stopping.done()  # the log must not close under the fsync
        log.gate.set()
        await asyncio.wait_for(stopping, 5)
        with pytest.raises(errors.NotControllerException):
            await committed

    asyncio.run(main())


class FailingLog(MemoryReplicatedLog):
    """A log whose fsync fails once ``failing`` is set (a disk that errs)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def flush(self, offset: int | None = None) -> None:
        if self.failing:
            raise OSError(5, "Input/output error")
        super().flush(offset)


def test_a_failed_fsync_halts_the_node_and_commits_nothing():
    """Kafka halts on a failed fsync of the metadata log: the manager tells
    its node (on_fatal) once, and what the fsync was for never commits."""

    async def main():
        log = FailingLog()
        told: list[str] = []
        manager = RaftManager(
            1, {1: None}, "cluster", log, MemoryQuorumStateStore(), codec=None, on_fatal=told.append
        )  # type: ignore[arg-type]
        await manager.start()
        while manager.client.high_watermark < 1:
            await asyncio.sleep(0.001)
        log.failing = True
        offset = manager.propose(["a"])
        committed = manager.wait_committed(offset)
        while not told:
            await asyncio.sleep(0.001)
        manager.propose(["b"])  # nothing more is flushed
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert (
            len(told) == 1 and "fsync of the metadata log" in told[0] and "Input/output" in told[0]
        )
        assert not committed.done() and manager.client.high_watermark == offset
        await manager.shutdown()
        with pytest.raises(errors.NotControllerException):
            await committed

    asyncio.run(main())
