"""kfast.server.futures.then: a done-callback chain carries a result, an
exception and a cancellation as ``await`` in a coroutine would."""

from __future__ import annotations

import asyncio

import pytest

from kfast.server.futures import then


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_result_exception_error_handler_and_cancellation():
    async def main():
        loop = asyncio.get_running_loop()
        source = loop.create_future()
        chained = then(source, lambda value: value * 2)
        assert not chained.done()
        source.set_result(21)
        assert await chained == 42

        source = loop.create_future()
        chained = then(source, lambda value: value)
        source.set_exception(KeyError("gone"))
        with pytest.raises(KeyError):
            await chained

        source = loop.create_future()
        chained = then(source, lambda value: value, lambda exc: f"handled {exc!r}")
        source.set_exception(ValueError("bad"))
        assert await chained == "handled ValueError('bad')"

        # A failing function fails the chained future.
        source = loop.create_future()
        chained = then(source, lambda value: 1 // value)
        source.set_result(0)
        with pytest.raises(ZeroDivisionError):
            await chained

        source = loop.create_future()
        chained = then(source, lambda value: value)
        source.cancel()
        with pytest.raises(asyncio.CancelledError):
            await chained

        # The chained future cancelled first (its connection closed): the
        # source's later outcome is dropped, not raised.
        source = loop.create_future()
        chained = then(source, lambda value: value)
        chained.cancel()
        source.set_result(1)
        await asyncio.sleep(0)
        assert chained.cancelled()

    run(main())
