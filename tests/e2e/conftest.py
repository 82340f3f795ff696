"""End-to-end fixtures: real Kafka clients against a real kfast broker.

``broker``: one in-process broker per test module (kfast.testing), with
num.partitions=1 so auto-created topics are predictable. ``serve``: starts
``kfast serve`` subprocesses (restart and kill -9 tests).
"""
from __future__ import annotations

import uuid

import pytest

from e2e_support import REPO, ServeProcess, free_port, wait_until  # noqa: F401
from kfast.testing import KfastBroker


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
