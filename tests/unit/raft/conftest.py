"""Fixtures shared by the ReplicatedLog tests: every behavioural test of a
ReplicatedLog runs against each implementation (in memory, on disk)."""

from __future__ import annotations

import json
import shutil
import tempfile

import pytest

from kfast.raft.file_log import FileReplicatedLog
from kfast.raft.log import MemoryReplicatedLog


class JsonSerde:
    """Data records as JSON values: what the tests append are str/list/int."""

    @staticmethod
    def encode(record) -> bytes:
        return json.dumps(record).encode()

    @staticmethod
    def decode(value: bytes):
        return json.loads(value)


class FileLogs:
    """New FileReplicatedLogs, each in its own metadata log dir, all removed
    at teardown. Segments as small as LogConfig allows (tests that need
    several roll them with ``log.log.roll()``)."""

    def __init__(self, segment_bytes: int = 1 << 20):
        self.root = tempfile.mkdtemp(prefix="kfast-raft-log-")
        self.segment_bytes = segment_bytes
        self.count = 0
        self.opened: list[FileReplicatedLog] = []

    def new_dir(self) -> str:
        self.count += 1
        return f"{self.root}/{self.count}"

    def open(self, directory: str) -> FileReplicatedLog:
        log = FileReplicatedLog(directory, JsonSerde(), segment_bytes=self.segment_bytes)
        log.open()
        self.opened.append(log)
        return log

    def __call__(self) -> FileReplicatedLog:
        return self.open(self.new_dir())

    def cleanup(self) -> None:
        for log in self.opened:
            if log.log is not None:
                log.log.close_handlers()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(params=["memory", "file"])
def make_log(request):
    """A factory of empty ReplicatedLogs of one implementation. (A factory,
    not a log: hypothesis tests make several per example.)"""
    if request.param == "memory":
        yield MemoryReplicatedLog
        return
    logs = FileLogs()
    yield logs
    logs.cleanup()


@pytest.fixture
def file_logs():
    logs = FileLogs()
    yield logs
    logs.cleanup()
