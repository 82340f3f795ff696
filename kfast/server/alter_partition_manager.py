"""AlterPartitionManager: a partition leader's ISR changes on their way to
the active controller (Kafka's DefaultAlterPartitionManager, KIP-497).

The replica manager submits a proposed ISR for a partition it leads (a
follower caught up, or fell behind for replica.lag.time.max.ms); proposals
are batched into one AlterPartition request at a time (v3: ISR members with
their broker epochs), carrying the leader epoch and partition epoch they
were made at, so the controller refuses one made from a stale view
(INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH). An accepted change is applied
from the response at once (the metadata log brings the same state a little
later); a refused or undeliverable one returns the partition to its
committed ISR, and the next fetch or expiration check proposes again.
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
                logger.info("AlterPartition for %d partition(s) failed: %s", len(batch), exc)
                for entry in batch.values():
                    self._refused(entry)
                continue
            self._handle_response(batch, response)

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
    ) -> None:
        replica_manager = self._replica_manager
        answered = set()
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
                    self._refused(entry)
                else:
                    before = len(partition.isr)
                    if partition.on_isr_committed(
                        data.leader_epoch, tuple(data.isr), data.partition_epoch
                    ):
                        replica_manager.complete_delayed_requests(partition.key)
                    replica_manager.replica_stats.count_isr_change(before, len(partition.isr))
        for key, entry in batch.items():
            if key not in answered:
                self._refused(entry)

    def _refused(self, entry: _Proposal) -> None:
        """Back to the committed ISR -- unless the partition has moved on
        since (metadata cleared this proposal and a newer one is pending):
        an answer only concerns the proposal it was made for."""
        partition, proposed, leader_epoch, partition_epoch = entry
        if (
            partition.pending_isr == proposed
            and partition.leader_epoch == leader_epoch
            and partition.partition_epoch == partition_epoch
        ):
            self._replica_manager.on_isr_change_failed(partition)

    async def shutdown(self) -> None:
        self._unsent.clear()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
