"""AlterPartitionManager's answers to a leader's ISR proposal, as Kafka's
Partition.handleAlterPartitionError: the proposal stays pending (its
maximal ISR bounds the high watermark) unless the controller says it did
not apply it at a current partition epoch; a request nobody answered is
sent again.

The leader is broker 1 of replication_simulation's three, with ISR (1, 3);
2 catches up to the high watermark (2), not to the log end (3): while the
proposal (1, 3, 2) is pending it holds the high watermark at 2."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kfast.controller.metadata.image import PartitionRegistration
from kfast.protocol import AlterPartitionResponse
from kfast.protocol.errors import (
    IneligibleReplicaException,
    InvalidUpdateVersionException,
    NewLeaderElectedException,
    NotControllerException,
    UnknownServerException,
)
from kfast.server.alter_partition_manager import AlterPartitionManager
from kfast.storage.producer_state import ORIGIN_CLIENT

from .replication_simulation import TOPIC_ID, ReplicationSimulation, batch

PROPOSED = (1, 3, 2)


@pytest.fixture
def leader(tmp_path):
    """Broker 1's Partition: ISR (1, 3), log end 2, 3 at 2, HW 2; 2 is back
    and has fetched offset 1 (the leader does not know yet)."""
    sim = ReplicationSimulation(str(tmp_path), min_insync=2)
    sim.step(("produce", -1, 1, 0))
    sim.step(("replicate",))
    sim.step(("down", 2, True))
    sim.step(("metadata", 1))
    sim.step(("up", 2))
    sim.step(("produce", -1, 1, 0))
    for follower in (3, 3, 2):
        sim.step(("fetch", follower, 1 << 20, True))
    partition = sim.brokers[1].partition
    assert partition.isr == (1, 3) and partition.log.high_watermark == 2
    yield partition
    sim.close()


class FakeReplicaManager:
    def __init__(self) -> None:
        self.failed: list[object] = []
        self.replica_stats = SimpleNamespace(count_isr_change=lambda before, after: None)

    def on_isr_change_failed(self, partition) -> None:
        self.failed.append(partition)
        partition.abort_isr_change()

    def complete_delayed_requests(self, key) -> None:
        pass


def answer(error_code: int = 0, partition_epoch: int = 0, isr=PROPOSED):
    return AlterPartitionResponse(
        error_code=0,
        topics=[
            AlterPartitionResponse.TopicData(
                topic_id=TOPIC_ID,
                partitions=[
                    AlterPartitionResponse.PartitionData(
                        partition_index=0,
                        error_code=error_code,
                        leader_id=1,
                        leader_epoch=0,
                        isr=list(isr),
                        partition_epoch=partition_epoch,
                    )
                ],
            )
        ],
    )


def propose(partition, replies):
    """2's fetch at 2 (= HW) proposes (1, 3, 2); while that is in flight
    the leader appends offset 2 and 3 fetches it. Answers the requests with
    ``replies`` (a response or an exception each); returns the replica
    manager and the requests sent."""
    sent = []

    async def send(request, version, timeout):
        sent.append(request)
        reply = replies[min(len(sent), len(replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def main():
        broker = SimpleNamespace(replica_manager=FakeReplicaManager(), node_id=1, broker_epoch=5)
        manager = AlterPartitionManager(broker, send)
        # ReplicaManager._update_followers and propose_isr.
        partition.update_follower_fetch_state(2, 2, 0, 0)
        assert partition.isr_to_expand(2) == PROPOSED
        partition.begin_isr_change(PROPOSED)
        manager.submit(partition, PROPOSED)
        partition.append_records_to_leader(batch(b"x"), ORIGIN_CLIENT, -1)
        partition.update_follower_fetch_state(3, 3, 0, 0)
        assert partition.log.high_watermark == 2  # 2 is at 2
        await asyncio.wait_for(manager._task, 5)
        return broker.replica_manager

    return asyncio.run(main()), sent


def test_new_leader_elected_keeps_the_proposal_pending(leader):
    # The change was written (a reassignment completed, 2 leads now): the
    # old leader must not count the committed ISR (1, 3) alone.
    manager, sent = propose(leader, [answer(NewLeaderElectedException.code)])
    assert len(sent) == 1 and not manager.failed
    assert leader.pending_isr == PROPOSED
    assert not leader.maybe_increment_high_watermark()
    assert leader.log.high_watermark == 2


def test_a_stale_partition_epoch_waits_for_metadata(leader):
    manager, sent = propose(leader, [answer(InvalidUpdateVersionException.code)])
    assert len(sent) == 1 and not manager.failed and leader.pending_isr == PROPOSED
    # The metadata with the controller's newer partition epoch replaces it.
    registration = SimpleNamespace(
        replicas=(1, 2, 3), isr=(1, 3), leader=1, leader_epoch=0, partition_epoch=7
    )
    leader.apply_registration(registration)
    assert leader.pending_isr is None


def test_an_ineligible_replica_returns_to_the_committed_isr(leader):
    manager, sent = propose(leader, [answer(IneligibleReplicaException.code)])
    assert len(sent) == 1 and manager.failed == [leader]
    assert leader.pending_isr is None and leader.maximal_isr == (1, 3)
    assert leader.log.high_watermark == 3


@pytest.mark.parametrize(
    "failure",
    [NotControllerException("no controller answered"), answer(UnknownServerException.code)],
    ids=["undelivered", "unexpected error"],
)
def test_a_proposal_nobody_answered_is_sent_again(leader, failure):
    manager, sent = propose(leader, [failure, answer(partition_epoch=leader.partition_epoch + 1)])
    assert len(sent) == 2 and not manager.failed
    assert leader.pending_isr is None and leader.isr == PROPOSED


def test_a_registration_older_than_the_answer_is_skipped(leader):
    # The answer brings partition epoch 2 before the metadata log does; the
    # publisher re-applying epoch 1 from the image (another partition of
    # the topic changed) must not put back ISR (1, 3): the high watermark
    # would pass 2, which the controller counts in the ISR.
    stale = PartitionRegistration(
        replicas=(1, 2, 3), isr=(1, 3), leader=1, leader_epoch=0, partition_epoch=1
    )
    assert leader.partition_epoch == 1
    manager, sent = propose(leader, [answer(partition_epoch=2)])
    assert leader.isr == PROPOSED and leader.partition_epoch == 2
    assert not leader.apply_registration(stale)
    assert leader.isr == PROPOSED and leader.partition_epoch == 2
    assert leader.log.high_watermark == 2
