"""GroupCoordinatorRuntime through its PartitionWriter alone (no broker):
who coordinates a group, and what an offset commit answers when the append
to __consumer_offsets fails."""

import asyncio

import pytest

from kfast.protocol import errors as E

from .test_runtime_load import FakeBroker, written_log


class FakeOffsetsTopic(FakeBroker):
    """Partition 0 of __consumer_offsets as the test sets it up: this
    broker's replica (or none), the leader in the metadata, and the error
    the next appends fail with."""

    def __init__(self, log):
        super().__init__(log)
        self.has_replica = True
        self.leader_in_metadata: int | None = self.node_id
        self.append_error = 0

    def replica(self, index):
        return self.partition if index == 0 and self.has_replica else None

    def metadata_leader(self, index):
        return self.leader_in_metadata if index == 0 else None

    def append(self, index, batch, timeout_ms, on_committed):
        assert index == 0 and timeout_ms == 5000  # offsets.commit.timeout.ms
        self.appended += 1
        on_committed(self.append_error)


@pytest.fixture
def offsets_topic(tmp_path):
    return FakeOffsetsTopic(written_log(tmp_path, []))


def test_without_a_replica_the_metadata_decides_the_answer(offsets_topic):
    runtime = offsets_topic.runtime()
    offsets_topic.has_replica = False
    offsets_topic.leader_in_metadata = None  # no such partition yet
    assert runtime.check_coordinator("g") == E.CoordinatorNotAvailableException.code
    offsets_topic.leader_in_metadata = 2  # another broker leads it
    assert runtime.check_coordinator("g") == E.NotCoordinatorException.code
    offsets_topic.leader_in_metadata = offsets_topic.node_id  # ours, log not created yet
    assert runtime.check_coordinator("g") == E.CoordinatorLoadInProgressException.code
    assert not runtime.loaded


def test_a_replica_it_leads_is_loaded_and_unloaded_when_leadership_moves(offsets_topic):
    async def main():
        runtime = offsets_topic.runtime()
        assert runtime.check_coordinator("g") == 0 and runtime.loaded == {0}
        offsets_topic.partition.is_leader = False
        assert runtime.check_coordinator("g") == E.NotCoordinatorException.code
        assert runtime.loaded == set()

    asyncio.run(main())


@pytest.mark.parametrize(
    "append_error,answer",
    [
        (0, 0),
        (E.NotLeaderOrFollowerException.code, E.NotCoordinatorException.code),
        (E.TimeoutException.code, E.CoordinatorNotAvailableException.code),
        (E.RecordTooLargeException.code, E.InvalidCommitOffsetSizeException.code),
        (E.CorruptRecordException.code, E.UnknownServerException.code),
    ],
)
def test_an_offset_commit_answers_what_the_append_did(offsets_topic, append_error, answer):
    async def main():
        runtime = offsets_topic.runtime()
        assert runtime.check_coordinator("g") == 0
        offsets_topic.append_error = append_error
        results = []
        runtime.coordinator.commit_offsets(
            "g", "", None, -1, {("t", 0): (5, -1, "")}, -1, results.append
        )
        return results

    assert asyncio.run(main()) == [{("t", 0): answer}]
    assert offsets_topic.appended == 1
