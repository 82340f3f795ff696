"""GroupCoordinatorRuntime loads a __consumer_offsets partition in slices:
a small one within the request that asks, a large one over several loop
iterations while its groups are answered COORDINATOR_LOAD_IN_PROGRESS."""

import asyncio
import uuid

from kfast.config import KafkaConfig, LogConfig
from kfast.coordinator import runtime as runtime_module
from kfast.coordinator.group.runtime import GroupCoordinatorRuntime
from kfast.protocol import errors as E
from kfast.records import RecordBatchBuilder
from kfast.storage.log import Log

from .harness import Harness, ManualTimer

T = uuid.UUID(int=7)
# A slice long enough for these small partitions on a loaded machine: the
# tests that load "within the request" are about what one slice covers, not
# about how fast this machine replays.
ONE_SLICE_MS = 60_000.0


class FakePartition:
    def __init__(self, log):
        self.log = log
        self.is_leader = True


class FakeBroker:
    """What the runtime is given: config, timer, and a PartitionWriter with
    one partition of __consumer_offsets, led by this broker."""

    def __init__(self, log):
        self.config = KafkaConfig({"offsets.topic.num.partitions": 1})
        self.timer = ManualTimer()
        self.partition = FakePartition(log)
        self.node_id = 1
        self.appended = 0

    def runtime(self) -> GroupCoordinatorRuntime:
        return GroupCoordinatorRuntime(self.config, self.timer, self)

    # -- PartitionWriter ---------------------------------------------------------------
    def replica(self, index):
        return self.partition if index == 0 else None

    def metadata_leader(self, index):
        return self.node_id if index == 0 else None

    def append(self, index, batch, timeout_ms, on_committed):
        self.appended += 1
        on_committed(0)  # committed at once


def written_log(tmp_path, records):
    """A partition log holding ``records``, one batch each (as the
    coordinator appends them)."""
    log = Log(str(tmp_path / "__consumer_offsets-0"), LogConfig())
    for key, value in records:
        builder = RecordBatchBuilder(0)
        builder.append(1, key, value)
        log.append_as_leader(bytes(builder.build()), now=1)
    log.update_high_watermark(log.log_end_offset)
    return log


def history():
    """A coordinator's records: a KIP-848 group and many offset commits."""
    h = Harness()
    response = h.coordinator.consumer_group_heartbeat(
        "cg", "", 0, None, None, 5000, ["t"], None, None, "c", "/h", {"t": (T, 4)}
    )
    for i in range(200):
        h.commit("cg", {("t", i % 4): (i, "")}, response["member_id"], 1)
        h.commit(f"g{i % 7}", {("t", 0): (i, "")})
    return h


def test_a_small_partition_loads_within_the_request(tmp_path, monkeypatch):
    h = history()
    broker = FakeBroker(written_log(tmp_path, h.log))
    monkeypatch.setattr(runtime_module, "LOAD_SLICE_MS", ONE_SLICE_MS)

    async def main():
        runtime = broker.runtime()
        assert runtime.check_coordinator("cg") == 0
        return runtime

    runtime = asyncio.run(main())
    assert runtime.loaded == {0} and not runtime.loading
    assert runtime.coordinator.snapshot() == h.replayed().snapshot()


def test_a_large_partition_loads_over_several_loop_iterations(tmp_path, monkeypatch):
    h = history()
    broker = FakeBroker(written_log(tmp_path, h.log))
    monkeypatch.setattr(runtime_module, "LOAD_SLICE_MS", 0.0)  # one batch per slice

    async def main():
        runtime = broker.runtime()
        other_work = []
        loop = asyncio.get_running_loop()
        assert runtime.check_coordinator("cg") == E.CoordinatorLoadInProgressException.code
        loop.call_soon(other_work.append, "served")
        assert runtime.check_coordinator("g1") == E.CoordinatorLoadInProgressException.code
        iterations = 0
        while runtime.loading:
            assert iterations < 10 * len(h.log)
            await asyncio.sleep(0)  # yield to the loop: the load's slices run
            iterations += 1
        # the loop ran other callbacks while the partition was loading
        assert other_work == ["served"] and iterations > len(h.log) // 2
        assert runtime.check_coordinator("cg") == 0
        return runtime

    runtime = asyncio.run(main())
    assert runtime.coordinator.snapshot() == h.replayed().snapshot()
    # the loaded member got a session timeout: silent, it expires
    group = runtime.coordinator.consumer_groups["cg"]
    assert len(group.members) == 1
    broker.timer.advance(runtime.coordinator.group_config("cg", "consumer.session.timeout.ms") + 1)
    assert group.members == {} and broker.appended == 1  # its tombstones


def test_losing_leadership_while_loading_drops_the_partial_state(tmp_path, monkeypatch):
    h = history()
    broker = FakeBroker(written_log(tmp_path, h.log))
    monkeypatch.setattr(runtime_module, "LOAD_SLICE_MS", 0.0)

    async def main():
        runtime = broker.runtime()
        assert runtime.check_coordinator("cg") == E.CoordinatorLoadInProgressException.code
        for _ in range(5):
            await asyncio.sleep(0)
        assert runtime.loading
        broker.partition.is_leader = False
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not runtime.loading and not runtime.loaded
        assert runtime.check_coordinator("cg") == E.NotCoordinatorException.code
        return runtime

    runtime = asyncio.run(main())
    assert runtime.coordinator.groups == {} and runtime.coordinator.consumer_groups == {}
    assert runtime.coordinator.offsets == {}


def test_records_of_unknown_types_are_skipped(tmp_path, monkeypatch):
    h = history()
    # a Kafka 4.x ConsumerGroupRegularExpression record (type 16) kfast does not model
    foreign = [(b"\x00\x10\x00\x02cg\x00\x02t.", b"\x00\x00\x00")]
    broker = FakeBroker(written_log(tmp_path, foreign + h.log))
    monkeypatch.setattr(runtime_module, "LOAD_SLICE_MS", ONE_SLICE_MS)

    async def main():
        runtime = broker.runtime()
        assert runtime.check_coordinator("cg") == 0
        return runtime

    runtime = asyncio.run(main())
    assert runtime.coordinator.snapshot() == h.replayed().snapshot()
