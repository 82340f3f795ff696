"""A test runtime for the TransactionCoordinator: appends complete at once
(or with an injected error) and land in a per-partition log; markers wait
until the test writes them."""

from __future__ import annotations

from collections import deque

from kfast.coordinator.transaction.coordinator import TransactionCoordinator
from kfast.coordinator.transaction.records import decode_key

PARTITIONS = 4
FIRST_PRODUCER_ID = 1000


def config(**overrides):
    values = {
        "transaction.state.log.num.partitions": PARTITIONS,
        "transactional.id.expiration.ms": 7 * 24 * 3600 * 1000,
        "transaction.max.timeout.ms": 900000,
        "request.timeout.ms": 30000,
        "offsets.topic.num.partitions": 50,
        "transaction.two.phase.commit.enable": False,
    }
    values.update(overrides)
    return values


class Harness:
    def __init__(self, transaction_version_level: int = 2, **overrides):
        self.next_producer_id = FIRST_PRODUCER_ID
        self.allocator_error = None
        self.coordinator_config = config(**overrides)
        self.coordinator = TransactionCoordinator(
            self.coordinator_config, self._allocate, transaction_version_level
        )
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        self.append_errors: deque[int] = deque()
        self.markers: list = []
        self.coordinator_epoch = 0
        for index in range(PARTITIONS):
            self.coordinator.load_partition(index, 0)
            self.coordinator.complete_load(index, 0, 0)

    def _allocate(self) -> int:
        if self.allocator_error is not None:
            raise self.allocator_error
        self.next_producer_id += 1
        return self.next_producer_id - 1

    # -- running results -------------------------------------------------------------------
    def run(self, result, now_ms: int = 0):
        """Complete the result's appends (recording what was written) and
        queue its markers; the response it ends with."""
        response = result.response
        for append in result.appends:
            error = self.append_errors.popleft() if self.append_errors else 0
            if error == 0:
                self.log[append.partition].extend(append.records)
            followup = self.run(self.coordinator.complete_append(append, error, now_ms), now_ms)
            if followup is not None:
                response = followup
        self.markers.extend(result.markers)
        return response

    def write_markers(self, now_ms: int = 0, only=None) -> None:
        """Every queued marker written (or just those of partitions ``only``)."""
        queued, self.markers = self.markers, []
        for markers in queued:
            partitions = markers.partitions if only is None else markers.partitions & set(only)
            self.run(self.coordinator.complete_markers(markers, partitions, now_ms), now_ms)
            if partitions != markers.partitions:
                self.markers.append(markers)

    # -- requests --------------------------------------------------------------------------
    def init(
        self,
        transactional_id,
        now_ms=0,
        timeout_ms=60000,
        producer_id=-1,
        producer_epoch=-1,
        enable_two_phase_commit=False,
        keep_prepared_txn=False,
    ):
        return self.run(
            self.coordinator.handle_init_producer_id(
                transactional_id,
                timeout_ms,
                now_ms,
                producer_id,
                producer_epoch,
                enable_two_phase_commit,
                keep_prepared_txn,
            ),
            now_ms,
        )

    def add(self, transactional_id, producer_id, epoch, partitions, now_ms=0, tv=0):
        return self.run(
            self.coordinator.handle_add_partitions(
                transactional_id, producer_id, epoch, partitions, now_ms, tv
            ),
            now_ms,
        )

    def end(self, transactional_id, producer_id, epoch, committed, tv=0, now_ms=0):
        return self.run(
            self.coordinator.handle_end_transaction(
                transactional_id, producer_id, epoch, committed, tv, now_ms
            ),
            now_ms,
        )

    def metadata(self, transactional_id):
        return self.coordinator.state.get(transactional_id).metadata

    # -- replay ----------------------------------------------------------------------------
    def replayed(self, now_ms: int = 0) -> TransactionCoordinator:
        """A fresh coordinator loaded from the records written so far."""
        other = TransactionCoordinator(
            self.coordinator_config,
            self._allocate,
            self.coordinator.state.transaction_version_level,
        )
        for index, records in self.log.items():
            other.load_partition(index, 1)
            for key, value in records:
                assert other.state.partition_for(decode_key(key)) == index
                other.replay(key, value)
        return other
