"""ProducerIdControlManager: producer id blocks handed to brokers.

Brokers give idempotent and transactional producers ids out of blocks the
controller allocates (AllocateProducerIds); each allocation is a
ProducerIdsRecord holding the next unallocated id, so ids are never reused,
across restarts included.
"""

from __future__ import annotations

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.records import ProducerIdsRecord
from kfast.protocol import errors

# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdControlManager:
    def __init__(self) -> None:
        self.next_producer_id = 0

    def generate_next_producer_id(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[tuple[int, int]]:
        """Response: (first id, block size)."""
        first = self.next_producer_id
        if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
            raise errors.UnknownServerException("Exhausted all producerIds.")
        record = ProducerIdsRecord(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            next_producer_id=first + PRODUCER_ID_BLOCK_SIZE,
        )
        return ControllerResult((first, PRODUCER_ID_BLOCK_SIZE), [record])

    def replay(self, record: ProducerIdsRecord) -> None:
        # Ids only move forward, whatever order blocks were recorded in.
        self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
