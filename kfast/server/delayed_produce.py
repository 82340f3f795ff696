"""DelayedProduce and DelayedDeleteRecords: requests that wait for their
offsets to be acknowledged by the in-sync replicas (Kafka's
kafka.server.DelayedProduce / DelayedDeleteRecords).

A produce with acks=-1 is answered when every partition it appended to has
a high watermark at or past the end of its append, or when the request's
timeout expires (REQUEST_TIMED_OUT for the partitions still waiting). The
replica manager calls ``check_and_complete(partition key)`` whenever a high
watermark moves. On one node the high watermark follows each append, so the
first try completes it; with followers, their fetches move it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kfast.protocol.errors import (
    NotEnoughReplicasAfterAppendException,
    NotLeaderOrFollowerException,
    TimeoutException,
)
from kfast.server_common.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kfast.protocol import DeleteRecordsResponse, ProduceResponse
    from kfast.server.partition import Partition


class PartitionProduceResult(Protocol):
    """What an append to one partition fills in: the Produce response's
    PartitionProduceResponse, or a coordinator's AppendResult."""

    error_code: int
    error_message: str | None
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: list[ProduceResponse.BatchIndexAndErrorMessage]


class ProducePartitionStatus:
    """One partition of a delayed produce: the offset the high watermark must
    reach and the response being built."""

    __slots__ = ("partition", "required_offset", "response", "acks_pending")

    def __init__(
        self, partition: Partition, required_offset: int, response: PartitionProduceResult
    ) -> None:
        self.partition = partition
        self.required_offset = required_offset
        self.response = response  # PartitionProduceResponse, error_code 0
        self.acks_pending = True


class DelayedProduce(DelayedOperation):
    def __init__(
        self, delay_ms: int, statuses: list[ProducePartitionStatus], future: asyncio.Future[None]
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.future = future

    def try_complete(self) -> bool:
        for status in self.statuses:
            if not status.acks_pending:
                continue
            partition = status.partition
            if not partition.is_leader:
                status.response.error_code = NotLeaderOrFollowerException.code
                status.acks_pending = False
            elif partition.log.high_watermark >= status.required_offset:
                # Replicated by the ISR -- but if the ISR shrank below
                # min.insync.replicas meanwhile, the write is not as durable
                # as asked (Kafka's checkEnoughReplicasReachOffset).
                if len(partition.maximal_isr) < partition.log.config["min.insync.replicas"]:
                    status.response.error_code = NotEnoughReplicasAfterAppendException.code
                status.acks_pending = False
        if any(status.acks_pending for status in self.statuses):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses:
            if status.acks_pending:
                status.response.error_code = TimeoutException.code
                status.acks_pending = False
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass


class DelayedDeleteRecords(DelayedOperation):
    """Waits until the low watermark (smallest log start offset over the
    replicas) of every partition reaches the requested offset. The leader's
    own log start offset has moved before this is created; followers move
    theirs when they see it in fetch responses."""

    def __init__(
        self,
        delay_ms: int,
        statuses: list[tuple[Partition, int, DeleteRecordsResponse.DeleteRecordsPartitionResult]],
        future: asyncio.Future[None],
        broker_alive: Callable[[int], bool] = lambda broker_id: True,
    ) -> None:
        # statuses: (partition, requested_offset, result) with result a
        # DeleteRecordsPartitionResult whose low_watermark is filled in here.
        super().__init__(delay_ms)
        self.statuses = statuses
        self.future = future
        self.broker_alive = broker_alive
        self._pending = [True] * len(statuses)

    def try_complete(self) -> bool:
        for i, (partition, requested, result) in enumerate(self.statuses):
            if not self._pending[i]:
                continue
            if not partition.is_leader:
                result.error_code = NotLeaderOrFollowerException.code
                self._pending[i] = False
                continue
            low_watermark = partition.log.log_start_offset
            # Kafka's lowWatermarkIfLeader: over every live (registered,
            # unfenced) replica's reported start (a follower not heard from
            # yet holds it back); a dead one would hold it back until timeout.
            for replica_id, state in partition.replica_states.items():
                if self.broker_alive(replica_id):
                    low_watermark = min(low_watermark, state.log_start_offset)
            if low_watermark >= requested:
                result.low_watermark = low_watermark
                self._pending[i] = False
        if any(self._pending):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for i, (_, _, result) in enumerate(self.statuses):
            if self._pending[i]:
                result.error_code = TimeoutException.code
                self._pending[i] = False
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass
