"""Client unit tests: one real kfast broker per module, and a runner that
drives a coroutine on asyncio's loop or uvloop (the client must work on both)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from kfast.testing import KfastBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"num.partitions": 1}, data_dir=str(tmp_path_factory.mktemp("kfast-client"))
    )
    instance.start()
    yield instance
    instance.close()


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    """run(coroutine) -> its result, on a fresh loop of the parametrized kind."""

    def runner(coroutine):
        loop = asyncio.new_event_loop() if request.param == "asyncio" else uvloop.new_event_loop()
        try:
            return loop.run_until_complete(coroutine)
        finally:
            loop.close()

    return runner
