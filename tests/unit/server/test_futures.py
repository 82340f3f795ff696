"""kfast.server.futures.then: a done-callback chain carries a result, an
exception and a cancellation as ``await`` in a coroutine would."""

from __future__ import annotations

import asyncio

import pytest

from kfast.server.futures import ChainedFuture, complete_soon, run_completions, then


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


def test_a_chain_completes_in_one_loop_pass():
    """then(then(then(source))): once the source's own done callback has run
    (one pass of the loop), the whole chain is done -- each later hop runs
    in the call that completes the one before, not a pass later each."""

    async def main():
        loop = asyncio.get_running_loop()
        source = loop.create_future()
        first = then(source, lambda value: value + 1)
        second = then(first, lambda value: value * 10)
        third = then(second, lambda value: f"<{value}>")
        source.set_result(1)
        await asyncio.sleep(0)  # the loop runs the source's done callback
        assert third.done() and third.result() == "<20>"

        # Errors and cancellation travel the chain the same way.
        source = loop.create_future()
        last = then(then(source, lambda value: value), lambda value: value)
        source.set_exception(KeyError("gone"))
        await asyncio.sleep(0)
        assert isinstance(last.exception(), KeyError)
        source = loop.create_future()
        last = then(then(source, lambda value: value), lambda value: value)
        source.cancel()
        await asyncio.sleep(0)
        assert last.cancelled()

    run(main())


def test_chained_future_callbacks_now_and_scheduled():
    async def main():
        loop = asyncio.get_running_loop()
        failures = []
        loop.set_exception_handler(lambda _, context: failures.append(context["exception"]))
        chained = ChainedFuture(loop=loop)
        seen = []
        chained.add_done_now(lambda f: seen.append(("now", f.result())))
        chained.add_done_callback(lambda f: seen.append(("scheduled", f.result())))
        dropped = seen.append
        chained.add_done_now(dropped)
        assert chained.remove_done_callback(dropped) == 1

        def broken(_):
            raise RuntimeError("callback bug")

        chained.add_done_now(broken)
        chained.set_result(5)
        # In the completing call: the now-callbacks, and a failing one is
        # reported to the loop without stopping the others.
        assert seen == [("now", 5)]
        assert [str(exc) for exc in failures] == ["callback bug"]
        await asyncio.sleep(0)
        assert seen == [("now", 5), ("scheduled", 5)]
        # Added once done: called at once.
        chained.add_done_now(lambda f: seen.append(("late", f.result())))
        assert seen[-1] == ("late", 5)
        assert await chained == 5

        cancelled = ChainedFuture(loop=loop)
        cancelled.add_done_now(lambda f: seen.append(("cancelled", f.cancelled())))
        assert cancelled.cancel()
        assert seen[-1] == ("cancelled", True)
        assert not cancelled.cancel()

    run(main())


def test_complete_soon_sets_the_result_on_the_next_pass_or_when_run():
    async def main():
        loop = asyncio.get_running_loop()
        # Outside a network callback: on the loop's next pass, in order.
        first, second = loop.create_future(), loop.create_future()
        complete_soon(first, 1)
        complete_soon(second, 2)
        assert not first.done() and not second.done()
        await asyncio.sleep(0)
        assert (first.result(), second.result()) == (1, 2)

        # run_completions (the network layer's, at the end of a readable
        # callback) sets them at once; a future cancelled meanwhile is skipped.
        chained = ChainedFuture(loop=loop)
        seen = []
        then(chained, lambda value: value).add_done_now(lambda f: seen.append(f.result()))
        cancelled = loop.create_future()
        complete_soon(cancelled, "dropped")
        complete_soon(chained, "woken")
        cancelled.cancel()
        run_completions()
        assert seen == ["woken"] and cancelled.cancelled()
        await asyncio.sleep(0)  # the scheduled pass finds nothing left

    run(main())
