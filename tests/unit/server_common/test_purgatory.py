"""DelayedOperationPurgatory: watch, complete on events, expire on time,
purge completed operations; on a manual clock and on real event loops."""

import asyncio

import pytest
import uvloop
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kfast._ext.timer import TimingWheel
from kfast.server_common.purgatory import DelayedOperation, DelayedOperationPurgatory
from kfast.server_common.timer import SystemTimer


class ManualTimer:
    """A TimingWheel on a clock the test moves; expired callbacks run when
    the test advances it (what SystemTimer does on the loop)."""

    def __init__(self):
        self.now_ms = 0
        self.wheel = TimingWheel(clock=lambda: self.now_ms / 1000)
        self.schedule = self.wheel.schedule

    @property
    def size(self):
        return self.wheel.size

    def advance(self, ms):
        self.now_ms += ms
        for task in self.wheel.advance_clock(self.now_ms):
            task()


class Recorder(DelayedOperation):
    """Completes when ``ready`` is set; records what happened to it."""

    def __init__(self, delay_ms, ready=False, on_complete_hook=None):
        super().__init__(delay_ms)
        self.ready = ready
        self.events = []
        self.tries = 0
        self.on_complete_hook = on_complete_hook

    def try_complete(self):
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self):
        self.events.append("complete")
        if self.on_complete_hook is not None:
            self.on_complete_hook(self)

    def on_expiration(self):
        self.events.append("expire")


@pytest.fixture
def timer():
    return ManualTimer()


@pytest.fixture
def purgatory(timer):
    return DelayedOperationPurgatory("Test", timer)


def test_completes_immediately_when_possible(timer, purgatory):
    op = Recorder(1000, ready=True)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.events == ["complete"] and op.is_completed
    assert op.tries == 1
    assert purgatory.watched() == 0
    assert purgatory.delayed() == 0 and timer.size == 0


def test_watch_skips_the_tries_and_still_completes_or_expires(timer, purgatory):
    # For a caller that has just checked (a fetch that read its partitions).
    woken, idle = Recorder(1000), Recorder(500)
    purgatory.watch(woken, ["a"])
    purgatory.watch(idle, ["a", "b"])
    assert woken.tries == idle.tries == 0
    assert purgatory.delayed() == 2 and purgatory.watched() == 3
    assert (purgatory.pending("a"), purgatory.pending("b"), purgatory.pending("c")) == (2, 1, 0)
    woken.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert woken.events == ["complete"] and idle.tries == 1
    assert purgatory.pending("a") == 1
    timer.advance(500)
    assert idle.events == ["complete", "expire"]
    assert purgatory.delayed() == 0 and timer.size == 0
    with pytest.raises(ValueError):
        purgatory.watch(idle, ["a"])  # completed already
    with pytest.raises(ValueError):
        purgatory.watch(Recorder(10), [])


def test_watched_operation_completes_once_on_any_key(timer, purgatory):
    op = Recorder(1000)
    assert purgatory.try_complete_else_watch(op, ["a", "b", "c"]) is False
    assert op.tries == 2  # before and after watching
    assert [purgatory.watched(k) for k in "abc"] == [1, 1, 1]
    assert purgatory.delayed() == 1 and timer.size == 1
    assert purgatory.check_and_complete("b") == 0  # not ready yet
    op.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert purgatory.check_and_complete("a") == 0
    assert purgatory.check_and_complete("c") == 0
    assert op.events == ["complete"]
    # Checking a key drops completed operations from its list.
    assert purgatory.watched() == 0
    # Completion cancelled the timeout.
    assert purgatory.delayed() == 0 and timer.size == 0
    timer.advance(5000)
    assert op.events == ["complete"]


def test_check_of_unknown_key_completes_nothing(purgatory):
    assert purgatory.check_and_complete("nobody") == 0


def test_expiry_completes_then_reports_expiration(timer, purgatory):
    op = Recorder(250)
    purgatory.try_complete_else_watch(op, ["a"])
    timer.advance(249)
    assert op.events == []
    timer.advance(1)
    assert op.events == ["complete", "expire"]
    assert purgatory.delayed() == 0 and timer.size == 0
    # Still in the watch list until checked or purged; then removed.
    assert purgatory.watched("a") == 1
    op.ready = True
    assert purgatory.check_and_complete("a") == 0
    assert purgatory.watched("a") == 0
    assert op.events == ["complete", "expire"]


def test_force_complete_is_exactly_once(timer, purgatory):
    op = Recorder(100)
    purgatory.try_complete_else_watch(op, ["a"])
    assert op.force_complete() is True
    assert op.force_complete() is False
    timer.advance(1000)
    assert op.events == ["complete"]


def test_event_between_first_try_and_watch_is_not_missed(timer, purgatory):
    class ReadyOnSecondTry(Recorder):
        def try_complete(self):
            self.ready = self.tries >= 1
            return super().try_complete()

    op = ReadyOnSecondTry(100)
    assert purgatory.try_complete_else_watch(op, ["a"]) is True
    assert op.events == ["complete"]
    assert timer.size == 0 and purgatory.delayed() == 0


def test_zero_delay_expires_on_the_next_advance(timer, purgatory):
    op = Recorder(0)
    assert purgatory.try_complete_else_watch(op, ["a"]) is False
    assert op.events == []
    timer.advance(0)
    assert op.events == ["complete", "expire"]


def test_completed_operations_are_purged_from_watch_lists(timer):
    purgatory = DelayedOperationPurgatory("Test", timer, purge_interval=10)
    peak = 0
    for i in range(100):
        op = Recorder(60_000)
        purgatory.try_complete_else_watch(op, ["shared", f"own-{i}"])
        op.ready = True
        assert purgatory.check_and_complete(f"own-{i}") == 1
        peak = max(peak, purgatory.watched("shared"))
    # Every op completed through its own key and lingered in "shared"
    # until a purge; purges keep that bounded by the interval.
    assert peak <= 12
    assert purgatory.watched("shared") <= 12
    assert purgatory.delayed() == 0 and timer.size == 0


def test_purge_completed_sweeps_every_list(timer, purgatory):
    ops = [Recorder(100) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["x", "y"])
    ops[0].force_complete()
    ops[1].force_complete()
    assert purgatory.watched() == 6
    assert purgatory.purge_completed() == 4
    assert purgatory.watched("x") == 1 and purgatory.watched("y") == 1


def test_cancel_for_key_drops_timeouts_without_completing(timer, purgatory):
    ops = [Recorder(100) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["group"])
    other = Recorder(100)
    purgatory.try_complete_else_watch(other, ["other"])
    assert purgatory.cancel_for_key("group") == ops
    assert purgatory.watched("group") == 0
    assert purgatory.delayed() == 1 and timer.size == 1
    timer.advance(1000)
    assert all(op.events == [] and not op.is_completed for op in ops)
    assert other.events == ["complete", "expire"]
    assert purgatory.cancel_for_key("group") == []


def test_completion_may_watch_new_operations_under_the_same_key(timer, purgatory):
    late = Recorder(100)

    def watch_another(_op):
        purgatory.try_complete_else_watch(late, ["k"])

    first = Recorder(100, on_complete_hook=watch_another)
    purgatory.try_complete_else_watch(first, ["k"])
    first.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert purgatory.watched("k") == 1  # only the new, pending one
    late.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert late.events == ["complete"]


def test_nested_check_sees_operations_the_outer_check_passed(timer, purgatory):
    # A completion that makes an earlier-checked operation ready and checks
    # the key again must complete it at once.
    second = Recorder(100)
    trigger = Recorder(100)
    purgatory.try_complete_else_watch(second, ["k"])

    def release_second(_op):
        second.ready = True
        purgatory.check_and_complete("k")

    trigger.on_complete_hook = release_second
    purgatory.try_complete_else_watch(trigger, ["k"])
    trigger.ready = True
    purgatory.check_and_complete("k")
    assert second.events == ["complete"]
    assert purgatory.watched("k") == 0


def test_an_operation_is_watched_once(timer, purgatory):
    op = Recorder(100)
    purgatory.try_complete_else_watch(op, ["a"])
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(op, ["b"])
    done = Recorder(100, ready=True)
    assert purgatory.try_complete_else_watch(done, ["a"])
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(done, ["a"])
    assert purgatory.delayed() == 1 and timer.size == 1


def test_empty_watch_keys_are_rejected(purgatory):
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(Recorder(10), [])


def test_shutdown_cancels_timeouts_and_forgets_watches(timer, purgatory):
    ops = [Recorder(50) for _ in range(4)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 2])
    purgatory.shutdown()
    assert purgatory.watched() == 0 and purgatory.delayed() == 0 and timer.size == 0
    timer.advance(100)
    assert all(op.events == [] for op in ops)
    with pytest.raises(RuntimeError):
        purgatory.try_complete_else_watch(Recorder(10), ["a"])


def test_operations_need_the_three_callbacks():
    class Incomplete(DelayedOperation):
        def try_complete(self):
            return False

    with pytest.raises(TypeError):
        Incomplete(10)


@pytest.fixture(params=["uvloop", "asyncio"])
def loop(request):
    loop = uvloop.new_event_loop() if request.param == "uvloop" else asyncio.new_event_loop()
    yield loop
    loop.close()


def test_purgatory_on_a_real_loop(loop):
    class Awaited(Recorder):
        def __init__(self, delay_ms, future):
            super().__init__(delay_ms)
            self.future = future

        def on_complete(self):
            super().on_complete()
            if not self.future.done():
                self.future.set_result(list(self.events))

        def on_expiration(self):
            super().on_expiration()

    async def main():
        timer = SystemTimer()
        purgatory = DelayedOperationPurgatory("Fetch", timer)
        expiring = Awaited(20, loop.create_future())
        completing = Awaited(60_000, loop.create_future())
        purgatory.try_complete_else_watch(expiring, [("topic", 0)])
        purgatory.try_complete_else_watch(completing, [("topic", 1)])
        assert timer.size == 2 and purgatory.delayed() == 2
        completing.ready = True
        loop.call_soon(purgatory.check_and_complete, ("topic", 1))
        assert await completing.future == ["complete"]
        await expiring.future
        # on_expiration runs right after on_complete, in the same callback.
        assert expiring.events == ["complete", "expire"]
        assert completing.events == ["complete"]
        assert timer.size == 0 and purgatory.delayed() == 0

    loop.run_until_complete(asyncio.wait_for(main(), 10.0))


class PurgatoryVersusModel(RuleBasedStateMachine):
    """Random watches, events and clock moves: every operation completes
    exactly once, expires iff nothing completed it before its deadline, and
    the counters agree with the operations still waiting."""

    KEYS = ["p0", "p1", "p2", "p3"]

    @initialize(purge_interval=st.sampled_from([0, 2, 1000]))
    def setup(self, purge_interval):
        self.timer = ManualTimer()
        self.purgatory = DelayedOperationPurgatory("Model", self.timer, purge_interval)
        self.ops = []  # (operation, keys, deadline_ms)

    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True),
        delay=st.integers(0, 200),
        ready=st.booleans(),
    )
    def watch(self, keys, delay, ready):
        op = Recorder(delay, ready=ready)
        completed = self.purgatory.try_complete_else_watch(op, keys)
        assert completed == ready
        self.ops.append((op, keys, self.timer.now_ms + delay))

    @precondition(lambda self: self.ops)
    @rule(data=st.data())
    def event(self, data):
        op, keys, _ = data.draw(st.sampled_from(self.ops))
        op.ready = True
        key = data.draw(st.sampled_from(keys))
        was_completed = op.is_completed
        completed = self.purgatory.check_and_complete(key)
        assert op.is_completed
        assert completed >= (0 if was_completed else 1)

    @rule(ms=st.integers(0, 120))
    def advance(self, ms):
        self.timer.advance(ms)
        for op, _, deadline in self.ops:
            if deadline <= self.timer.now_ms:
                assert op.is_completed

    @invariant()
    def each_operation_completes_at_most_once(self):
        for op, _, deadline in self.ops:
            assert op.events in ([], ["complete"], ["complete", "expire"])
            if "expire" in op.events:
                assert deadline <= self.timer.now_ms

    @invariant()
    def counters_match_waiting_operations(self):
        waiting = [op for op, _, _ in self.ops if not op.is_completed]
        assert self.purgatory.delayed() == len(waiting) == self.timer.size
        for op, keys, _ in self.ops:
            if not op.is_completed:
                for key in keys:
                    assert op in self.purgatory._watchers[key]


TestPurgatoryVersusModel = pytest.mark.slow(PurgatoryVersusModel.TestCase)
