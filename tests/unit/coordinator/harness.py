"""A GroupCoordinator on a manual clock with an in-memory log, for tests."""

from __future__ import annotations

from kfast._ext.timer import TimingWheel
from kfast.config import KafkaConfig
from kfast.coordinator.group.consumer_protocol import encode_subscription
from kfast.coordinator.group.coordinator import GroupCoordinator


class ManualTimer:
    def __init__(self):
        self.now_ms = 0
        self.wheel = TimingWheel(1, 20, 0, clock=lambda: self.now_ms / 1000.0)

    def schedule(self, delay_ms, callback):
        return self.wheel.schedule(delay_ms, callback)

    def advance(self, ms: int) -> None:
        # One millisecond at a time, so a task scheduled by an expiring one
        # is timed from its parent's expiry, as on the real loop.
        for _ in range(ms):
            self.now_ms += 1
            for task in self.wheel.advance_clock(self.now_ms):
                task()


class Harness:
    """``log`` holds every (key, value) appended, in order; ``fail_next``
    makes the next append fail with that error code."""

    def __init__(self, **overrides):
        props = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 10}
        props.update(overrides)
        self.timer = ManualTimer()
        self.log: list = []
        self.fail_next = 0
        self.coordinator = GroupCoordinator(
            KafkaConfig(props), self.timer, self._write, lambda: 1_000_000 + self.timer.now_ms
        )

    def _write(self, group_id, records, done, transaction=None):
        code, self.fail_next = self.fail_next, 0
        if not code:
            self.log.extend(records)
        done(code)

    # -- client actions -----------------------------------------------------------------
    def join(
        self,
        group,
        member_id="",
        instance_id=None,
        topics=("t",),
        protocols=None,
        session=1000,
        rebalance=2000,
        require_known=False,
        client_id="c",
    ):
        results = []
        protocols = protocols or [("range", encode_subscription(list(topics)))]
        self.coordinator.join_group(
            group,
            member_id,
            instance_id,
            client_id,
            "/h",
            session,
            rebalance,
            "consumer",
            protocols,
            require_known,
            results.append,
        )
        return results

    def sync(self, group, generation, member_id, assignments=None, instance_id=None):
        results = []
        self.coordinator.sync_group(
            group, generation, member_id, instance_id, None, None, assignments or {}, results.append
        )
        return results

    def commit(self, group, offsets, member_id="", generation=-1, instance_id=None):
        results = []
        self.coordinator.commit_offsets(
            group,
            member_id,
            instance_id,
            generation,
            {tp: (o, -1, md) for tp, (o, md) in offsets.items()},
            -1,
            results.append,
        )
        return results[0]

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator rebuilt from the log."""
        fresh = Harness()
        for key, value in self.log:
            fresh.coordinator.replay(key, value)
        return fresh.coordinator


def capture_results(manager) -> list:
    """The results ``manager`` hands to be run (every CoordinatorResult, in
    order): its runner wrapped to keep them."""
    results: list = []
    run = manager.run

    def capture(group_id, result, *rest):
        results.append(result)
        run(group_id, result, *rest)

    manager.run = capture
    return results
