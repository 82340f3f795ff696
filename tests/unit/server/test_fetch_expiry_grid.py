"""The expiry grid of waiting fetches (issue 21 item 5): long polls that
expire within one grid step are answered by one wake-up of the event loop,
never before max_wait_ms and at most 4 % after it."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import given
from hypothesis import strategies as st

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import PartitionRegistration
from kfast.server.delayed_fetch import expiry_step_ms
from kfast.server.replica_manager import FetchParams, PartitionFetchRequest, ReplicaManager
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

NODE = 1
FETCHES = 10


@given(st.integers(0, 10**6))
def test_expiry_step_is_within_four_percent_and_divides_the_level_1_interval(max_wait_ms):
    step = expiry_step_ms(max_wait_ms)
    assert step * 25 <= max_wait_ms
    assert step == 0 or 20 % step == 0
    if max_wait_ms >= 500:
        assert step == 20  # librdkafka's default fetch.wait.max.ms and up
    if max_wait_ms < 50:
        assert step == 0  # no step fits in 4 %: its own millisecond


class CountingTimer(SystemTimer):
    """Counts the loop wake-ups the timer asks for."""

    wakes = 0

    def _on_wake(self) -> None:
        self.wakes += 1
        super()._on_wake()


def test_long_polls_parked_at_different_milliseconds_expire_together(tmp_path):
    """Ten caught-up long polls (max_wait 500 ms, librdkafka's default)
    parked a few ms apart: each deadline is on the 20 ms grid, and the
    timer wakes the loop fewer times than there are fetches (before the
    grid: one wake-up per fetch at its own millisecond, plus cascades)."""
    config = KafkaConfig({"node.id": "1", "log.dirs": str(tmp_path)})
    log_manager = LogManager(config, cluster_id="c1")
    log_manager.startup()

    async def main() -> None:
        timer = CountingTimer(asyncio.get_running_loop())
        manager = ReplicaManager(NODE, log_manager, timer, config)
        log = log_manager.get_or_create_log("t", 0)
        registration = PartitionRegistration(
            replicas=(NODE,), isr=(NODE,), leader=NODE, leader_epoch=0, partition_epoch=0
        )
        manager.apply_partition("t", uuid.uuid4(), 0, registration, log)
        params = FetchParams(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        fetches = []
        deadlines = set()
        for _ in range(FETCHES):
            parked_at = timer.now_ms()
            fetch = manager.fetch_messages(params, [PartitionFetchRequest(("t", 0), 0, 1 << 20)])
            assert isinstance(fetch, asyncio.Future)
            fetches.append(fetch)
            (operation,) = [op for op in manager.fetch_purgatory.waiting() if op.future is fetch]
            deadline = operation._timer_entry.expiration_ms
            # Never before max_wait_ms, at most one step after it.
            assert 500 <= deadline - parked_at <= 500 + 20 + 1
            deadlines.add(deadline)
            await asyncio.sleep(0.002)  # park the next one at a later millisecond
        span = max(deadlines) - min(deadlines)
        assert all(deadline % 20 == 0 for deadline in deadlines)
        assert len(deadlines) <= span // 20 + 1
        timer.wakes = 0
        for fetch in fetches:
            ((_, data),) = await fetch
            assert (data.error_code, data.size) == (0, 0)
        # One wake-up per grid point, plus at most two overflow-bucket
        # cascades (level 2's 400 ms bucket, level 1's 20 ms one).
        assert timer.wakes <= len(deadlines) + 2 < FETCHES

    try:
        asyncio.run(asyncio.wait_for(main(), 10))
    finally:
        log_manager.shutdown()
