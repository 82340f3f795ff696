"""Helpers shared by the e2e tests (imported by name: a test module's
``from conftest import ...`` would be ambiguous across test directories)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kfast.testing.ports import free_port  # noqa: F401 (the e2e tests' name)

REPO = Path(__file__).resolve().parents[2]


class ServeProcess:
    """A ``kfast serve`` subprocess on a fixed port and data dir."""

    def __init__(self, data_dir: str, port: int, overrides=(), fd_limit: int | None = None):
        self.data_dir = data_dir
        self.port = port
        self.overrides = list(overrides)
        # RLIMIT_NOFILE of the broker (ulimit -n), None: inherited.
        self.fd_limit = fd_limit
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []
        self._ready = threading.Event()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "kfast",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
        ]
        for item in self.overrides:
            cmd += ["--override", item]
        return cmd

    def start(self, timeout: float = 30.0) -> ServeProcess:
        self._ready.clear()
        self.output = []
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            self.command(),
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(REPO),
            preexec_fn=self._limit_fds,
        )
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError("kfast serve did not become ready:\n" + "".join(self.output))
        return self

    def _limit_fds(self) -> None:
        if self.fd_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (self.fd_limit, self.fd_limit))

    def open_fds(self) -> int:
        """Descriptors the broker process holds now."""
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

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


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
