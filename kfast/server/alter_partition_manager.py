"""AlterPartitionManager: a partition leader's ISR changes on their way to
the active controller (Kafka's DefaultAlterPartitionManager, KIP-497).

The replica manager submits a proposed ISR for a partition it leads (a
follower caught up, or fell behind for replica.lag.time.max.ms); proposals
are batched into one AlterPartition request at a time (v3: ISR members with
their broker epochs), carrying the leader epoch and partition epoch they
were made at, so the controller refuses one made from a stale view
(INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH). An accepted change is applied
from the response at once (the metadata log brings the same state a little
later).

A proposal the leader cannot see answered keeps the partition in its
pending state, whose maximal ISR (the committed one plus the proposal)
bounds the high watermark, as Kafka's Partition.handleAlterPartitionError
does: only a refusal that says the change was not applied and the leader's
partition epoch is current (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA)
returns it to the committed ISR, and the next fetch or expiration check
proposes again. A refusal from a stale view, or NEW_LEADER_ELECTED -- the
change was written and completed a reassignment that moved the leadership
to a replica the proposal added -- waits for the metadata that replaces
it; a request not answered (no controller, a top-level error, a partition
missing from the response) is sent again. Going back to the committed ISR
on NEW_LEADER_ELECTED let the old leader's high watermark pass the new
leader's log end: it acknowledged records the new leader never had.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from kfast.protocol import AlterPartitionRequest, AlterPartitionResponse, errors

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker
    from kfast.server.controller_channel import ControllerSend
    from kfast.server.partition import Partition
    from kfast.server.replica_manager import PartitionKey

    # A proposal: (partition, proposed ISR, its leader epoch, its partition epoch).
    _Proposal = tuple[Partition, tuple[int, ...], int, int]

logger = logging.getLogger(__name__)

# v3: new_isr_with_epochs (KIP-903); kfast's controllers answer v0-v3.
ALTER_PARTITION_VERSION = 3
_TIMEOUT_S = 10.0
# Before a request nobody answered is sent again (Kafka: 50 ms after a
# top-level error).
_RETRY_BACKOFF_S = 0.05

# Partition-level refusals after which the committed ISR is the controller's
# too: the change was not applied and the partition epoch is current.
RESET_TO_COMMITTED = frozenset(
    e.code for e in (errors.OperationNotAttemptedException, errors.IneligibleReplicaException)
)
# Refusals that leave the proposal pending until metadata replaces it: the
# leader's view is stale, or (NEW_LEADER_ELECTED) the change was applied.
AWAIT_METADATA = frozenset(
    e.code
    for e in (
        errors.UnknownTopicOrPartitionException,
        errors.UnknownTopicIdException,
        errors.FencedLeaderEpochException,
        errors.InvalidUpdateVersionException,
        errors.InvalidRequestException,
        errors.NewLeaderElectedException,
    )
)


class AlterPartitionManager:
    def __init__(self, broker: KafkaBroker, send: ControllerSend) -> None:
        """``send(request, version=..., timeout=...)``: deliver to the active
        controller (ControllerChannel.send)."""
        replica_manager = broker.replica_manager
        if replica_manager is None:
            raise ValueError("ISR changes need the started broker's replica manager")
        self.broker = broker
        self._replica_manager = replica_manager
        self._send = send
        self._unsent: dict[PartitionKey, _Proposal] = {}
        self._task: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, proposed: tuple[int, ...]) -> None:
        self._unsent[partition.key] = (
            partition,
            proposed,
            partition.leader_epoch,
            partition.partition_epoch,
        )
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._send_all())

    async def _send_all(self) -> None:
        while self._unsent:
            batch, self._unsent = self._unsent, {}
            try:
                response = await self._send(
                    self._request(batch), version=ALTER_PARTITION_VERSION, timeout=_TIMEOUT_S
                )
                if response.error_code:
                    raise errors.for_code(response.error_code)("AlterPartition refused")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # It may have been applied: the proposals stay pending.
                logger.info(
                    "AlterPartition for %d partition(s) failed: %s; sending again",
                    len(batch),
                    exc,
                )
                for entry in batch.values():
                    self._send_again(entry)
                await asyncio.sleep(_RETRY_BACKOFF_S)
                continue
            if self._handle_response(batch, response):
                await asyncio.sleep(_RETRY_BACKOFF_S)

    def _request(self, batch: dict[PartitionKey, _Proposal]) -> AlterPartitionRequest:
        topics: dict[uuid.UUID, AlterPartitionRequest.TopicData] = {}
        for partition, proposed, leader_epoch, partition_epoch in batch.values():
            topic = topics.get(partition.topic_id)
            if topic is None:
                topic = topics[partition.topic_id] = AlterPartitionRequest.TopicData(
                    topic_name=partition.topic, topic_id=partition.topic_id, partitions=[]
                )
            topic.partitions.append(
                AlterPartitionRequest.PartitionData(
                    partition_index=partition.partition,
                    leader_epoch=leader_epoch,
                    new_isr_with_epochs=[
                        AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=-1)
                        for b in proposed
                    ],
                    leader_recovery_state=0,
                    partition_epoch=partition_epoch,
                )
            )
        return AlterPartitionRequest(
            broker_id=self.broker.node_id,
            broker_epoch=self.broker.broker_epoch,
            topics=list(topics.values()),
        )

    def _handle_response(
        self, batch: dict[PartitionKey, _Proposal], response: AlterPartitionResponse
    ) -> bool:
        """Apply the answers; returns whether a proposal is to be sent again."""
        replica_manager = self._replica_manager
        answered = set()
        again = False
        by_id = {p.topic_id: p.topic for p, *_ in batch.values()}
        for topic in response.topics:
            name = by_id.get(topic.topic_id)
            if name is None:
                continue  # not asked about: nothing of it is in the batch
            for data in topic.partitions:
                key = (name, data.partition_index)
                entry = batch.get(key)
                if entry is None:
                    continue
                answered.add(key)
                partition = entry[0]
                if data.error_code:
                    logger.info(
                        "AlterPartition of %s-%d refused: %s",
                        partition.topic,
                        partition.partition,
                        errors.for_code(data.error_code).__name__,
                    )
                    again |= self._refused(entry, data.error_code)
                else:
                    before = len(partition.isr)
                    if partition.on_isr_committed(
                        data.leader_epoch, tuple(data.isr), data.partition_epoch
                    ):
                        replica_manager.complete_delayed_requests(partition.key)
                    replica_manager.replica_stats.count_isr_change(before, len(partition.isr))
        for key, entry in batch.items():
            if key not in answered:
                again |= self._send_again(entry)
        return again

    def _refused(self, entry: _Proposal, error_code: int) -> bool:
        """Kafka's handleAlterPartitionError: back to the committed ISR
        (RESET_TO_COMMITTED), pending until metadata (AWAIT_METADATA), or
        sent again -- for the proposal the answer was made for only (metadata
        may have cleared it and a newer one be pending)."""
        if not _is_current(entry) or error_code in AWAIT_METADATA:
            return False
        if error_code in RESET_TO_COMMITTED:
            self._replica_manager.on_isr_change_failed(entry[0])
            return False
        return self._send_again(entry)

    def _send_again(self, entry: _Proposal) -> bool:
        """Queue a proposal nobody answered, unless the partition has moved
        on or a newer proposal is queued; returns whether it was queued."""
        key = entry[0].key
        if not _is_current(entry) or key in self._unsent:
            return False
        self._unsent[key] = entry
        return True

    async def shutdown(self) -> None:
        self._unsent.clear()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _is_current(entry: _Proposal) -> bool:
    """The partition is still in the pending state this proposal made."""
    partition, proposed, leader_epoch, partition_epoch = entry
    return (
        partition.is_leader
        and partition.pending_isr == proposed
        and partition.leader_epoch == leader_epoch
        and partition.partition_epoch == partition_epoch
    )
