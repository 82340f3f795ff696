"""TransactionCoordinatorRuntime: runs the TransactionCoordinator inside a
broker, on the CoordinatorRuntime it shares with the group coordinator
(kfast.coordinator.runtime).

* Ownership: a transactional id belongs to partition ``partition_for(id)``
  of __transaction_state; the coordinator epoch of a partition is the
  leader epoch this broker loaded it in, so markers of a deposed
  coordinator are fenced by the partitions' producer state.
* Loading: each loaded partition hands back its decided transactions,
  whose markers are sent again. The broker calls ``load_all`` when the
  leadership of __transaction_state changes (Kafka's
  onElection/onResignation), so a new coordinator finishes what the old
  one decided without waiting for a client.
* Effects: every CoordinatorResult (results.py) goes through ``run``: its
  markers to the marker channel, its appends to the log (one batch each,
  acks=-1, no compression), its answer to whoever waits. A completion
  append that fails retriably is written again after RETRY_BACKOFF_MS.
* Background work on the broker's timer: aborting transactions past their
  timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms) and
  removing idle transactional ids
  (transaction.remove.expired.transaction.cleanup.interval.ms).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

from kfast.controller.topics import TRANSACTION_STATE_TOPIC_NAME
from kfast.coordinator.partition_writer import ConfigLookup, PartitionWriter
from kfast.coordinator.runtime import CoordinatorRuntime, keyed_records, wall_clock_ms
from kfast.coordinator.transaction.coordinator import TransactionCoordinator
from kfast.coordinator.transaction.records import UnknownRecordTypeError, partition_for
from kfast.coordinator.transaction.results import CoordinatorResult, TxnLogAppend, TxnMarkers
from kfast.records import RecordBatch
from kfast.server_common.purgatory import Timer, TimerHandle

logger = logging.getLogger(__name__)

# Before writing again an append that failed retriably (Kafka's
# retry.backoff.ms default).
RETRY_BACKOFF_MS = 100

Reply = Callable[[object], None]


class TransactionCoordinatorRuntime(CoordinatorRuntime):
    """``partitions``: __transaction_state on the hosting broker;
    ``producer_id_allocator()``: a producer id now, or a KafkaError (e.g.
    COORDINATOR_LOAD_IN_PROGRESS while no block is at hand);
    ``send_markers(markers)``: the marker channel, which answers through
    ``complete_markers`` / ``cancel_markers``; ``transaction_version_level``:
    the cluster's finalized transaction.version."""

    def __init__(
        self,
        config: ConfigLookup,
        timer: Timer,
        partitions: PartitionWriter,
        producer_id_allocator: Callable[[], int],
        send_markers: Callable[[TxnMarkers], None],
        transaction_version_level: int = 0,
    ) -> None:
        super().__init__(
            TRANSACTION_STATE_TOPIC_NAME,
            config["transaction.state.log.num.partitions"],
            config["transaction.state.log.load.buffer.size"],
            partitions,
        )
        self.timer = timer
        self.send_markers = send_markers
        self.coordinator = TransactionCoordinator(
            config, producer_id_allocator, transaction_version_level
        )
        self._abort_interval_ms = config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ]
        self._expire_interval_ms = config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ]
        self._timer_entries: dict[str, TimerHandle] = {}
        self._schedule("abort", self._abort_interval_ms, self._abort_timed_out_transactions)
        self._schedule("expire", self._expire_interval_ms, self._expire_transactional_ids)

    # -- ownership ---------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def check_coordinator(self, transactional_id: str) -> int:
        """0 when this broker coordinates ``transactional_id`` (its partition
        loaded), else the error code for the request."""
        return self.check_coordinator_partition(self.partition_for(transactional_id))

    def set_transaction_version_level(self, level: int) -> None:
        """The finalized transaction.version changed (metadata image)."""
        self.coordinator.state.transaction_version_level = level

    # -- loading -----------------------------------------------------------------------
    def _begin_load(self, index: int, leader_epoch: int) -> None:
        self.coordinator.load_partition(index, leader_epoch)

    def _replay_batch(self, index: int, batch: RecordBatch) -> int:
        applied = 0
        for offset, key, value in keyed_records(batch):
            try:
                self.coordinator.replay(key, value)
            except UnknownRecordTypeError as exc:
                logger.debug("skipping offset %d of %s-%d: %s", offset, self.topic, index, exc)
                continue
            applied += 1
        return applied

    def _complete_load(self, index: int, leader_epoch: int) -> None:
        self.run(self.coordinator.complete_load(index, leader_epoch, wall_clock_ms()))

    def _unload_partition(self, index: int) -> None:
        self.coordinator.unload_partition(index)

    # -- effects -----------------------------------------------------------------------
    def run(
        self, result: CoordinatorResult, reply: Reply | None = None, append_delay_ms: int = 0
    ) -> None:
        """Carry out ``result``: markers to the channel, appends to the log
        (after ``append_delay_ms``), the answer to ``reply``. The answer to
        a request that waits for an append comes from that append's
        completion, through the same ``reply``."""
        for markers in result.markers:
            self.send_markers(markers)
        for append in result.appends:
            if append_delay_ms > 0:
                self.timer.schedule(append_delay_ms, partial(self._append, append, reply))
            else:
                self._append(append, reply)
        if result.response is not None and reply is not None:
            reply(result.response)

    def _append(self, append: TxnLogAppend, reply: Reply | None) -> None:
        if self._stopped:
            return

        def committed(append_error: int) -> None:
            result = self.coordinator.complete_append(append, append_error, wall_clock_ms())
            # A failed append answered with another one is a retry
            # (completing a transaction): not at once.
            self.run(result, reply, RETRY_BACKOFF_MS if append_error else 0)

        self.append(append.partition, append.records, append.timeout_ms, committed)

    # -- markers -----------------------------------------------------------------------
    def markers_wanted(self, markers: TxnMarkers) -> bool:
        return not self._stopped and self.coordinator.markers_wanted(markers)

    def complete_markers(self, markers: TxnMarkers, partitions: Iterable[tuple[str, int]]) -> None:
        """The markers of ``partitions`` are written (or given up on)."""
        if not self._stopped:
            self.run(self.coordinator.complete_markers(markers, partitions, wall_clock_ms()))

    def cancel_markers(self, markers: TxnMarkers) -> None:
        """A partition refused the markers for good (fenced)."""
        self.coordinator.cancel_markers(markers)

    # -- background work ---------------------------------------------------------------
    def _schedule(self, name: str, interval_ms: int, job: Callable[[], None]) -> None:
        if self._stopped:
            return

        def fire() -> None:
            try:
                job()
            except Exception:
                logger.exception("transaction coordinator job %s failed", name)
            self._schedule(name, interval_ms, job)

        self._timer_entries[name] = self.timer.schedule(interval_ms, fire)

    def _abort_timed_out_transactions(self) -> None:
        # Also the catch-up for a leadership change nobody told us about.
        self.load_all()
        self.run(self.coordinator.abort_timed_out_transactions(wall_clock_ms()))

    def _expire_transactional_ids(self) -> None:
        self.run(self.coordinator.expire_transactional_ids(wall_clock_ms()))

    # -- life cycle --------------------------------------------------------------------
    def shutdown(self) -> None:
        self._stop_loading()
        for entry in self._timer_entries.values():
            entry.cancel()
        self._timer_entries.clear()
        self.loaded.clear()
        self.coordinator.shutdown()
