"""SystemTimer on real event loops (uvloop and asyncio): callbacks fire on
time, cancelled ones never do, and the loop timer is armed sparingly."""

import asyncio
import time

import pytest
import uvloop

from kfast.server_common.timer import SystemTimer, _clock_for

WAIT_S = 10.0  # generous: a slow CI machine must not fail these


@pytest.fixture(params=["uvloop", "asyncio"])
def loop(request):
    loop = uvloop.new_event_loop() if request.param == "uvloop" else asyncio.new_event_loop()
    yield loop
    loop.close()


def run(loop, coroutine_function):
    return loop.run_until_complete(asyncio.wait_for(coroutine_function(), WAIT_S))


def test_callback_fires_no_earlier_than_its_delay(loop):
    async def main():
        timer = SystemTimer()
        fired = loop.create_future()
        loop_start = loop.time()
        start = timer.now_ms()
        timer.schedule(30, lambda: fired.set_result((timer.now_ms(), loop.time())))
        assert timer.size == 1
        fired_at, loop_fired_at = await fired
        assert fired_at >= start + 30
        # Not early by the loop's own clock either, beyond the 1 ms tick
        # (the expiration counts from the current ms, rounded down).
        assert loop_fired_at >= loop_start + 0.029 - 1e-9
        assert timer.size == 0

    run(loop, main)


def test_cancelled_callback_never_fires(loop):
    async def main():
        timer = SystemTimer()
        ran = []
        done = loop.create_future()
        cancelled = timer.schedule(10, lambda: ran.append("cancelled"))
        timer.schedule(40, lambda: done.set_result(None))
        assert cancelled.cancel() is True
        await done
        assert ran == []
        assert cancelled.is_cancelled

    run(loop, main)


def test_callbacks_run_in_expiration_order(loop):
    async def main():
        timer = SystemTimer()
        order = []
        done = loop.create_future()
        handles = [
            (timer.schedule(delay, lambda d=delay: order.append(d)), delay)
            for delay in (45, 5, 25, 0, 15)
        ]
        timer.schedule(60, lambda: done.set_result(None))
        await done
        # By expiration (a loaded machine may stretch the scheduling itself
        # over several ms, so the order is that of the handles' expirations).
        expected = [d for h, d in sorted(handles, key=lambda hd: hd[0].expiration_ms)]
        assert order == expected
        assert sorted(order) == [0, 5, 15, 25, 45]

    run(loop, main)


def test_many_callbacks_in_one_bucket_arm_the_loop_once(loop):
    async def main():
        timer = SystemTimer()
        count = 10_000
        fired = []
        done = loop.create_future()

        def task():
            fired.append(1)
            if len(fired) == count:
                done.set_result(None)

        handles = [timer.schedule(50, task) for _ in range(count)]
        # The clock may tick while scheduling (more often on a loaded
        # machine), spreading the tasks over a few expirations and buckets:
        # at most one arm per distinct expiration, not per task.
        expirations = {handle.expiration_ms for handle in handles}
        assert timer.arm_count <= len(expirations)
        await done
        # 50 ms sits in a level-2 bucket: at most one wake there and one in
        # level 1 after the cascade, per distinct expiration.
        assert timer.arm_count <= 1 + 2 * len(expirations)
        assert timer.size == 0

    run(loop, main)


def test_cancelling_everything_arms_nothing_more(loop):
    async def main():
        timer = SystemTimer()
        handles = [timer.schedule(20, lambda: None) for _ in range(1000)]
        for handle in handles:
            handle.cancel()
        assert timer.arm_count == 1
        assert timer.size == 0
        # The emptied bucket wakes the loop once; then nothing is armed.
        done = loop.create_future()
        timer.schedule(60, lambda: done.set_result(None))
        await done
        assert timer.arm_count <= 3
        assert timer._handle is None

    run(loop, main)


def test_an_earlier_callback_rearms_the_loop(loop):
    async def main():
        timer = SystemTimer()
        late = timer.schedule(60_000, lambda: None)
        fired = loop.create_future()
        timer.schedule(10, lambda: fired.set_result(True))
        assert timer.arm_count == 2
        assert await fired
        assert late.is_pending
        timer.shutdown()

    run(loop, main)


def test_zero_delay_runs_on_a_later_iteration_not_inside_schedule(loop):
    async def main():
        timer = SystemTimer()
        fired = loop.create_future()
        timer.schedule(0, lambda: fired.set_result(True))
        assert not fired.done()
        assert await fired

    run(loop, main)


def test_callback_can_schedule_another(loop):
    async def main():
        timer = SystemTimer()
        done = loop.create_future()
        timer.schedule(5, lambda: timer.schedule(5, lambda: done.set_result(True)))
        assert await done

    run(loop, main)


def test_failing_callback_is_reported_and_others_still_run(loop):
    async def main():
        timer = SystemTimer()
        reported = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        done = loop.create_future()

        def fail():
            raise ValueError("boom")

        timer.schedule(5, fail)
        timer.schedule(5, lambda: done.set_result(True))
        assert await done
        assert len(reported) == 1
        assert isinstance(reported[0]["exception"], ValueError)

    run(loop, main)


def test_shutdown_cancels_pending_and_refuses_new(loop):
    async def main():
        timer = SystemTimer()
        ran = []
        handles = [timer.schedule(d, lambda: ran.append(1)) for d in (0, 10, 5000)]
        assert timer.shutdown() == 3
        assert all(h.is_cancelled for h in handles)
        assert timer.is_shutdown
        with pytest.raises(RuntimeError):
            timer.schedule(1, lambda: None)
        # Give the loop a chance to misfire: a fresh future resolved by the
        # loop after a real timer would have run.
        probe = loop.create_future()
        loop.call_later(0.03, probe.set_result, None)
        await probe
        assert ran == []

    run(loop, main)


def test_explicit_loop_outside_a_coroutine(loop):
    timer = SystemTimer(loop)
    fired = loop.create_future()
    timer.schedule(1, lambda: fired.set_result(True))
    assert loop.run_until_complete(asyncio.wait_for(fired, WAIT_S))


def test_wheel_reads_monotonic_only_when_it_is_the_loops_clock(loop):
    assert _clock_for(loop) is time.monotonic

    class SkewedLoop:
        def __init__(self, skew_s):
            self.skew_s = skew_s

        def time(self):
            return time.monotonic() + self.skew_s

    ahead, far_behind = SkewedLoop(0.5), SkewedLoop(-0.5)
    assert _clock_for(ahead) == ahead.time
    assert _clock_for(far_behind) == far_behind.time
