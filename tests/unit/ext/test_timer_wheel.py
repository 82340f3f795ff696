"""Timing wheel kernel: the worked numbers of docs/architecture.md, O(1)
cancel, the expiry queue, and a state-machine comparison against a plain model."""

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kfast._ext.timer import TimerTaskEntry, TimingWheel


def test_two_ms_task_goes_to_level_one_bucket_two():
    wheel = TimingWheel(tick_ms=1, wheel_size=20)
    entry = wheel.add(2, "t")
    assert (entry.level, entry.bucket_index, entry.bucket_expiration_ms) == (1, 2, 2)
    assert wheel.next_expiration() == 2
    assert wheel.advance_clock(1) == []
    assert wheel.advance_clock(2) == ["t"]
    assert entry.is_expired and not entry.is_pending


def test_same_delay_eight_ms_later_goes_to_bucket_ten():
    wheel = TimingWheel()
    wheel.advance_clock(8)
    entry = wheel.add(8 + 2, "t")
    assert (entry.level, entry.bucket_index) == (1, 10)


def test_nineteen_ms_task_reuses_an_expired_bucket():
    wheel = TimingWheel()
    early = wheel.add(7, "early")
    assert (early.level, early.bucket_index) == (1, 7)
    assert wheel.advance_clock(8) == ["early"]
    late = wheel.add(8 + 19, "late")
    # Bucket 7 served expiration 7 and now serves 27.
    assert (late.level, late.bucket_index, late.bucket_expiration_ms) == (1, 7, 27)
    assert wheel.advance_clock(26) == []
    assert wheel.advance_clock(27) == ["late"]


def test_overflow_levels_have_the_documented_ticks():
    wheel = TimingWheel()
    wheel.add(10_000, "t")
    assert wheel.levels == 4
    assert [wheel.level_tick_ms(level) for level in (1, 2, 3, 4)] == [1, 20, 400, 8000]


def test_350_ms_task_goes_to_level_two_bucket_17():
    wheel = TimingWheel()
    entry = wheel.add(350, "t")
    assert (entry.level, entry.bucket_index, entry.bucket_expiration_ms) == (2, 17, 340)
    assert wheel.levels == 2


def test_450_ms_task_cascades_level_three_then_two_then_one():
    wheel = TimingWheel()
    entry = wheel.add(450, "t")
    assert (entry.level, entry.bucket_index, entry.bucket_expiration_ms) == (3, 1, 400)
    assert wheel.next_expiration() == 400
    assert wheel.advance_clock(400) == []
    # 50 ms left: more than level 1 spans, so level 2.
    assert (entry.level, entry.bucket_index, entry.bucket_expiration_ms) == (2, 2, 440)
    assert wheel.next_expiration() == 440
    assert wheel.advance_clock(440) == []
    # 10 ms left: level 1.
    assert (entry.level, entry.bucket_index, entry.bucket_expiration_ms) == (1, 10, 450)
    assert wheel.advance_clock(449) == []
    assert wheel.advance_clock(450) == ["t"]
    assert wheel.size == 0


def test_one_advance_cascades_through_every_level():
    wheel = TimingWheel()
    wheel.add(450, "t")
    assert wheel.advance_clock(10_123) == ["t"]
    assert wheel.current_time == 10_123
    # Each level's time is a multiple of its tick.
    assert [wheel.level_current_time(level) for level in (1, 2, 3)] == [10_123, 10_120, 10_000]


def test_clock_jumps_between_non_empty_buckets_only():
    wheel = TimingWheel()
    wheel.add(5, "a")
    wheel.add(3_000, "b")
    assert wheel.next_expiration() == 5
    assert wheel.advance_clock(5) == ["a"]
    # The next queued bucket is a coarse one, not the next tick.
    assert wheel.next_expiration() == 2_800


def test_current_time_is_a_multiple_of_tick():
    wheel = TimingWheel(tick_ms=10, wheel_size=8, start_ms=1234)
    assert wheel.current_time == 1230
    wheel.advance_clock(1299)
    assert wheel.current_time == 1290


def test_cancel_unlinks_in_place_and_is_idempotent():
    wheel = TimingWheel()
    entries = [wheel.add(5, i) for i in range(5)]
    assert wheel.size == 5
    assert entries[2].cancel() is True
    assert entries[2].is_cancelled and entries[2].level is None
    assert entries[2].cancel() is False
    assert wheel.size == 4
    assert wheel.advance_clock(5) == [0, 1, 3, 4]
    assert entries[0].cancel() is False  # already expired


def test_cancelled_bucket_is_skipped_by_next_expiration():
    wheel = TimingWheel()
    first = wheel.add(3, "a")
    wheel.add(9, "b")
    first.cancel()
    assert wheel.next_expiration() == 9
    # The emptied bucket is queued again when it gets a new task.
    wheel.add(3, "c")
    assert wheel.next_expiration() == 3
    assert wheel.advance_clock(9) == ["c", "b"]


def test_tasks_already_expired_are_handed_out_by_the_next_advance():
    wheel = TimingWheel(start_ms=100)
    late = wheel.add(50, "late")
    now = wheel.add(100, "now")  # within the current tick
    assert late.level == 0 and now.level == 0
    assert wheel.next_expiration() == 100
    assert wheel.size == 2
    # Even an advance that moves no time hands out due tasks.
    assert wheel.advance_clock(100) == ["late", "now"]
    assert wheel.size == 0
    assert wheel.next_expiration() is None


def test_cancel_works_on_due_tasks():
    wheel = TimingWheel()
    entry = wheel.add(0, "t")
    assert entry.cancel()
    assert wheel.advance_clock(1) == []
    assert wheel.next_expiration() is None


def test_on_earlier_expiration_reports_only_earlier_buckets():
    wheel = TimingWheel()
    calls = []
    wheel.on_earlier_expiration = calls.append
    wheel.add(50, "a")  # first bucket: earlier than nothing
    wheel.add(50, "b")  # same bucket
    wheel.add(60, "c")  # later bucket
    wheel.add(45, "d")  # same level-2 bucket as 50 (40..59)
    wheel.add(15, "g")  # earlier bucket, level 1
    wheel.add(0, "e")  # due now
    wheel.add(1, "f")  # due list already non-empty
    assert calls == [40, 15, 0]


def test_on_earlier_expiration_is_silent_during_advance():
    wheel = TimingWheel()
    calls = []
    wheel.add(450, "t")
    wheel.on_earlier_expiration = calls.append
    wheel.advance_clock(400)  # cascades into a new, earliest bucket
    assert calls == []


def test_many_tasks_one_bucket_one_queue_slot():
    wheel = TimingWheel()
    calls = []
    wheel.on_earlier_expiration = calls.append
    for i in range(1000):
        wheel.add(30_000, i)
    assert calls == [24_000]
    assert wheel.advance_clock(30_000) == list(range(1000))


def test_schedule_reads_the_clock():
    now = [12.3456]
    wheel = TimingWheel(clock=lambda: now[0], start_ms=12_000)
    assert wheel.now_ms() == 12_345
    entry = wheel.schedule(100, "t")
    assert entry.expiration_ms == 12_445
    now[0] = 12.445
    assert wheel.advance_clock(wheel.now_ms()) == ["t"]


def test_schedule_saturates_instead_of_overflowing():
    wheel = TimingWheel(clock=lambda: 1.0)
    entry = wheel.schedule(2**63 - 1, "never")
    assert entry.expiration_ms == 2**63 - 1
    assert entry.is_pending
    assert wheel.advance_clock(10**15) == []


def test_schedule_without_clock_raises():
    with pytest.raises(TypeError):
        TimingWheel().schedule(5, "t")


def test_close_cancels_everything_and_refuses_new_tasks():
    wheel = TimingWheel()
    entries = [wheel.add(d, d) for d in (0, 5, 500, 50_000)]
    assert wheel.close() == 4
    assert all(e.is_cancelled for e in entries)
    assert wheel.size == 0 and wheel.next_expiration() is None
    assert wheel.advance_clock(10**6) == []
    with pytest.raises(RuntimeError):
        wheel.add(10, "late")


def test_entries_are_not_constructible_directly():
    with pytest.raises(TypeError):
        TimerTaskEntry()


@pytest.mark.parametrize("kwargs", [dict(tick_ms=0), dict(wheel_size=1), dict(start_ms=-1)])
def test_invalid_geometry_is_rejected(kwargs):
    with pytest.raises(ValueError):
        TimingWheel(**kwargs)


def test_far_expirations_build_many_levels():
    wheel = TimingWheel(tick_ms=1, wheel_size=2)
    entry = wheel.add(2**62, "far")
    assert wheel.levels >= 62
    assert wheel.advance_clock(2**62 - 1) == []
    assert wheel.advance_clock(2**62) == ["far"]
    assert entry.is_expired


class WheelVersusModel(RuleBasedStateMachine):
    """Random add/cancel/advance interleavings against a model that knows
    only the contract: a task fires at the first advance_clock whose time
    reaches its expiration rounded down to the tick (or at once, if it was
    already expired when added), exactly once, unless cancelled first."""

    @initialize(
        tick=st.sampled_from([1, 1, 3, 10]),
        wheel_size=st.sampled_from([2, 3, 8, 20]),
        start=st.integers(0, 5_000),
    )
    def setup(self, tick, wheel_size, start):
        self.tick = tick
        self.wheel = TimingWheel(tick_ms=tick, wheel_size=wheel_size, start_ms=start)
        self.now = start - start % tick
        self.pending = {}  # task id -> (expiration, entry)
        self.finished = {}  # fired or cancelled: task id -> entry
        self.next_id = 0
        self.added_due = set()  # ids that went straight to the due list

    def _due_tick(self, expiration):
        return expiration - expiration % self.tick

    @rule(delay=st.one_of(st.integers(0, 100), st.integers(0, 100_000)), jitter=st.integers(-3, 3))
    def add(self, delay, jitter):
        expiration = max(0, self.now + delay + jitter)
        task = self.next_id
        self.next_id += 1
        entry = self.wheel.add(expiration, task)
        self.pending[task] = (expiration, entry)
        if self._due_tick(expiration) <= self.now:
            assert entry.level == 0
            self.added_due.add(task)
        else:
            assert entry.level >= 1
            assert entry.bucket_expiration_ms <= self._due_tick(expiration)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def cancel(self, data):
        task = data.draw(st.sampled_from(sorted(self.pending)))
        _, entry = self.pending.pop(task)
        assert entry.cancel() is True
        assert entry.cancel() is False
        self.finished[task] = entry

    @precondition(lambda self: self.finished)
    @rule(data=st.data())
    def cancel_finished(self, data):
        # A handle whose task fired or was cancelled stays inert.
        task = data.draw(st.sampled_from(sorted(self.finished)))
        assert self.finished[task].cancel() is False

    @rule(step=st.one_of(st.integers(0, 30), st.integers(0, 120_000)))
    def advance(self, step):
        self._advance_to(self.now + step)

    @rule()
    def advance_to_next_expiration(self):
        nxt = self.wheel.next_expiration()
        if nxt is not None:
            self._advance_to(nxt)

    def _advance_to(self, target):
        fired = self.wheel.advance_clock(target)
        self.now = max(self.now, target - target % self.tick)
        expected = {t for t, (exp, _) in self.pending.items() if self._due_tick(exp) <= self.now}
        assert len(fired) == len(set(fired)), "a task fired twice"
        assert set(fired) == expected
        # Due-list tasks come first (in the order added), then the rest in
        # expiration order at tick granularity.
        due = [t for t in fired if t in self.added_due]
        assert fired[: len(due)] == sorted(due)
        ticks = [self._due_tick(self.pending[t][0]) for t in fired[len(due) :]]
        assert ticks == sorted(ticks)
        for task in fired:
            _, entry = self.pending.pop(task)
            assert entry.is_expired
            self.finished[task] = entry
        assert self.wheel.current_time == self.now

    @invariant()
    def sizes_agree(self):
        assert self.wheel.size == len(self.pending)

    @invariant()
    def structure_is_consistent(self):
        # Linked lists, bucket expirations, the expiry heap and the
        # one-queue-slot-per-bucket rule (see TimingWheel._check_invariants).
        self.wheel._check_invariants()

    @invariant()
    def next_expiration_bounds_the_earliest_task(self):
        nxt = self.wheel.next_expiration()
        if not self.pending:
            assert nxt is None
            return
        earliest = min(self._due_tick(exp) for exp, _ in self.pending.values())
        assert nxt is not None
        # The earliest non-empty bucket may be a coarse one expiring before
        # its tasks, never after the earliest of them.
        assert nxt <= max(earliest, self.now)
        if earliest > self.now:
            # Nothing fires early: advancing to just before the first
            # bucket would expire nothing (checked by the model on advance).
            assert nxt > self.now


TestWheelVersusModel = pytest.mark.slow(WheelVersusModel.TestCase)
