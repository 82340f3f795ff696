"""End-to-end fixtures: real Kafka clients against a real kfast broker.

``broker``: one in-process broker per test module (kfast.testing), with
num.partitions=1 so auto-created topics are predictable. ``serve``: starts
``kfast serve`` subprocesses (restart and kill -9 tests).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from kfast.testing import KfastBroker


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker({"num.partitions": 1},
                           data_dir=str(tmp_path_factory.mktemp("kfast-e2e")))
    instance.start()
    yield instance
    instance.close()


@pytest.fixture
def topic(request) -> str:
    """A fresh topic name per test."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """A ``kfast serve`` subprocess on a fixed port and data dir."""

    def __init__(self, data_dir: str, port: int, overrides=()):
        self.data_dir = data_dir
        self.port = port
        self.overrides = list(overrides)
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []
        self._ready = threading.Event()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kfast", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--override", f"log.dirs={self.data_dir}"]
        for item in self.overrides:
            cmd += ["--override", item]
        return cmd

    def start(self, timeout: float = 30.0) -> "ServeProcess":
        self._ready.clear()
        self.output = []
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(self.command(), stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=str(REPO))
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError("kfast serve did not become ready:\n" + "".join(self.output))
        return self

    def _pump(self, proc) -> None:
        for line in proc.stderr:
            self.output.append(line)
            if " ready in " in line:
                self._ready.set()

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def serve(tmp_path):
    """Factory of ServeProcess instances sharing one data dir and port."""
    started = []
    port = free_port()

    def make(*overrides) -> ServeProcess:
        process = ServeProcess(str(tmp_path / "data"), port, overrides)
        started.append(process)
        return process

    yield make
    for process in started:
        process.kill()


def wait_until(condition, timeout: float = 15.0, message: str = "condition"):
    """Poll a client-side result with a deadline (for client APIs that
    offer no completion event)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")
