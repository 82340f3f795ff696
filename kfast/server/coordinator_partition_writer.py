"""CoordinatorPartitionWriter: a coordinator's internal topic on this broker
(Kafka's CoordinatorPartitionWriter over the ReplicaManager).

Implements kfast.coordinator.partition_writer.PartitionWriter for one
topic: replicas come from the ReplicaManager, leaders from the metadata
image the broker holds now, and appends go through the leader append path
with acks=-1, so a coordinator record counts only once the in-sync
replicas have it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kfast.storage.producer_state import ORIGIN_COORDINATOR

if TYPE_CHECKING:
    from kfast.protocol import ProduceResponse
    from kfast.server.broker import KafkaBroker
    from kfast.server.partition import Partition

# acks=-1: the coordinator hears back once the high watermark covers its batch.
_ALL_IN_SYNC_REPLICAS = -1


class AppendResult:
    """The per-partition produce result ReplicaManager.append_records fills in
    (for an append that answers no Produce request)."""

    __slots__ = (
        "error_code",
        "error_message",
        "base_offset",
        "log_append_time_ms",
        "log_start_offset",
        "record_errors",
    )

    def __init__(self) -> None:
        self.error_code = 0
        self.error_message: str | None = None
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1
        self.record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] = []


class CoordinatorPartitionWriter:
    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        # The broker, not its parts: the metadata image is replaced on every
        # update and is read at each call. The replica manager stays.
        replica_manager = broker.replica_manager
        if replica_manager is None:
            raise ValueError("a coordinator's partitions need the started broker's replicas")
        self._broker = broker
        self._replica_manager = replica_manager
        self.topic = topic

    @property
    def node_id(self) -> int:
        return self._broker.node_id

    def replica(self, index: int) -> Partition | None:
        return self._replica_manager.get_partition(self.topic, index)

    def metadata_leader(self, index: int) -> int | None:
        image = self._broker.metadata_image
        topic = image.topics_by_name.get(self.topic) if image is not None else None
        if topic is None or index not in topic.partitions:
            return None
        return topic.partitions[index].leader

    def append(
        self, index: int, batch: bytes, timeout_ms: int, on_committed: Callable[[int], None]
    ) -> None:
        result = AppendResult()
        waiting = self._replica_manager.append_records(
            timeout_ms,
            _ALL_IN_SYNC_REPLICAS,
            [(self.topic, index, batch, result)],
            ORIGIN_COORDINATOR,
        )
        if waiting is None:
            on_committed(result.error_code)
        else:
            waiting.add_done_callback(lambda _: on_committed(result.error_code))
