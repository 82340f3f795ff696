"""DelayedDeleteRecords: the low watermark it waits for is over the live
replicas only (Kafka's lowWatermarkIfLeader skips brokers that are not
hasAliveBroker: unregistered or fenced)."""

import asyncio
from types import SimpleNamespace

import pytest

from kfast.protocol import DeleteRecordsResponse
from kfast.server.delayed_produce import DelayedDeleteRecords
from kfast.server.partition import ReplicaState


def _partition(follower_starts: dict[int, int]) -> SimpleNamespace:
    states = {}
    for broker_id, start in follower_starts.items():
        states[broker_id] = ReplicaState()
        states[broker_id].log_start_offset = start
    return SimpleNamespace(
        is_leader=True, log=SimpleNamespace(log_start_offset=13), replica_states=states
    )


@pytest.fixture
def future():
    loop = asyncio.new_event_loop()
    yield loop.create_future()
    loop.close()


def _operation(partition, future, broker_alive):
    result = DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=0)
    operation = DelayedDeleteRecords(30_000, [(partition, 13, result)], future, broker_alive)
    return operation, result


def test_a_dead_follower_does_not_hold_the_low_watermark_back(future):
    # Follower 3 died (fenced) before it saw the new log start.
    partition = _partition({2: 13, 3: 0})
    operation, result = _operation(partition, future, lambda broker_id: broker_id != 3)
    assert operation.try_complete() and future.done()
    assert (result.error_code, result.low_watermark) == (0, 13)


def test_a_live_follower_behind_holds_it_back(future):
    partition = _partition({2: 13, 3: 0})
    operation, result = _operation(partition, future, lambda broker_id: True)
    assert not operation.try_complete() and not future.done()
    partition.replica_states[3].log_start_offset = 13  # its next fetch
    assert operation.try_complete() and future.done()
    assert (result.error_code, result.low_watermark) == (0, 13)
