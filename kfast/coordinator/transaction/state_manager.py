"""TransactionStateManager: the transactional ids of the __transaction_state
partitions this broker leads (Kafka's TransactionStateManager).

* Ownership: an id belongs to partition ``partition_for(id)``. A partition is
  loaded at a coordinator epoch (its leader epoch): ``begin_load``, one
  ``replay(key, value)`` per record of its log, ``complete_load``. Requests
  for an id of a partition not loaded get NOT_COORDINATOR, and
  COORDINATOR_LOAD_IN_PROGRESS while it loads. ``unload`` forgets it.
* Replay: the latest record of an id wins and a tombstone removes it, so an
  uncompacted log gives the same state. A loaded PrepareCommit/PrepareAbort
  is a decision whose markers may not all be written: ``complete_load``
  hands those back so the coordinator sends the markers again.
* Appends: ``append`` turns a prepared transition into the record to write
  and, when the write completes, installs the transition (or clears the
  pending state on failure), checking that the partition was not reloaded
  meanwhile (a different coordinator epoch answers NOT_COORDINATOR).
* Background work: open transactions past their timeout
  (``timed_out_transactions``) and idle ids past
  transactional.id.expiration.ms (``expire_transactional_ids``, tombstones).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from kfast.coordinator.runtime import coordinator_error
from kfast.coordinator.transaction.metadata import (
    TV_2,
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kfast.coordinator.transaction.records import (
    decode_key,
    decode_value,
    encode_key,
    partition_for,
)
from kfast.coordinator.transaction.results import CoordinatorResult, TxnLogAppend
from kfast.protocol import ListTransactionsResponse
from kfast.protocol import errors as E

logger = logging.getLogger(__name__)

NONE = 0
# Tombstones per append when expiring ids: a batch far below
# message.max.bytes (Kafka fills one batch up to the partition's limit).
MAX_TOMBSTONES_PER_APPEND = 1000


class _Partition:
    """A __transaction_state partition's ids, at the epoch it was loaded in."""

    __slots__ = ("coordinator_epoch", "transactions")

    def __init__(self, coordinator_epoch: int):
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}


class Lookup(NamedTuple):
    """An id's metadata with the coordinator epoch of its partition, or the
    error that stands in for it."""

    error_code: int
    coordinator_epoch: int = -1
    metadata: TransactionMetadata | None = None


class TimedOutTransaction(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int


def _install(metadata: TransactionMetadata, transit: TxnTransitMetadata) -> int:
    """Complete a replicated transition: NONE, or UNKNOWN_SERVER_ERROR if it
    no longer fits the metadata (the pending state is dropped)."""
    try:
        metadata.complete_transition_to(transit)
    except IllegalStateError:
        logger.exception("installing the transition of %s failed", metadata.transactional_id)
        metadata.pending_state = None
        return E.UnknownServerException.code
    return NONE


class TransactionStateManager:
    def __init__(
        self,
        num_partitions: int,
        transactional_id_expiration_ms: int,
        transaction_max_timeout_ms: int,
        request_timeout_ms: int = 30000,
        transaction_version_level: int = TV_2,
    ):
        self.num_partitions = num_partitions
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.transaction_max_timeout_ms = transaction_max_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        # The cluster's finalized transaction.version level: the value
        # version written, and the protocol internal aborts follow. The
        # runtime updates it when the metadata image changes.
        self.transaction_version_level = transaction_version_level
        self.partitions: dict[int, _Partition] = {}
        self.loading: dict[int, _Partition] = {}

    # -- ownership -------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def get(self, transactional_id: str) -> Lookup:
        index = self.partition_for(transactional_id)
        if index in self.loading:
            return Lookup(E.CoordinatorLoadInProgressException.code)
        partition = self.partitions.get(index)
        if partition is None:
            return Lookup(E.NotCoordinatorException.code)
        return Lookup(
            NONE, partition.coordinator_epoch, partition.transactions.get(transactional_id)
        )

    def put_if_not_exists(self, metadata: TransactionMetadata) -> Lookup:
        found = self.get(metadata.transactional_id)
        if found.error_code or found.metadata is not None:
            return found
        self.partitions[self.partition_for(metadata.transactional_id)].transactions[
            metadata.transactional_id
        ] = metadata
        return Lookup(NONE, found.coordinator_epoch, metadata)

    def transactions(self) -> Iterator[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every id of the loaded partitions."""
        for partition in self.partitions.values():
            for metadata in partition.transactions.values():
                yield partition.coordinator_epoch, metadata

    def validate_transaction_timeout(
        self, txn_timeout_ms: int, enable_two_phase_commit: bool = False
    ) -> bool:
        """A two-phase commit producer's timeout is not checked: it is
        replaced by TWO_PHASE_COMMIT_TIMEOUT_MS (Kafka's
        validateTransactionTimeoutMs)."""
        return enable_two_phase_commit or 0 < txn_timeout_ms <= self.transaction_max_timeout_ms

    # -- loading ---------------------------------------------------------------------------
    def begin_load(self, index: int, coordinator_epoch: int) -> None:
        """Start loading partition ``index`` (this broker became its leader at
        ``coordinator_epoch``); whatever was held for it is dropped."""
        self.partitions.pop(index, None)
        self.loading[index] = _Partition(coordinator_epoch)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of a loading partition. UnknownRecordTypeError
        for a record a loader skips (an unknown key or value version)."""
        transactional_id = decode_key(key)
        index = self.partition_for(transactional_id)
        partition = self.loading.get(index)
        if partition is None:
            raise IllegalStateError(
                f"replaying a record of partition {index}, which is not loading"
            )
        decoded = decode_value(value)
        if decoded is None:
            partition.transactions.pop(transactional_id, None)
        else:
            partition.transactions[transactional_id] = TransactionMetadata.from_log_value(
                transactional_id, decoded
            )

    def complete_load(self, index: int, coordinator_epoch: int) -> list[TransactionMetadata]:
        """Finish loading: the partition serves requests from now on. Returns
        its ids in PrepareCommit/PrepareAbort, whose markers must be sent
        (again). Nothing if the load was superseded (another epoch, unload)."""
        partition = self.loading.get(index)
        if partition is None or partition.coordinator_epoch != coordinator_epoch:
            return []
        del self.loading[index]
        self.partitions[index] = partition
        return [
            m
            for m in partition.transactions.values()
            if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
        ]

    def unload(self, index: int, coordinator_epoch: int | None = None) -> None:
        """Forget partition ``index`` (another broker leads it now). With a
        coordinator epoch, only a load or cache of that epoch goes."""
        for held in (self.loading, self.partitions):
            partition = held.get(index)
            if partition is not None and coordinator_epoch in (None, partition.coordinator_epoch):
                del held[index]

    # -- appends ---------------------------------------------------------------------------
    def append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        on_done: Callable[[int, int], CoordinatorResult],
        now_ms: int,
        retry_on: frozenset[int] = frozenset(),
    ) -> CoordinatorResult:
        """Write ``transit`` for ``transactional_id``; ``on_done(error, now_ms)``
        follows the write. On success the transition is installed first; on
        failure the pending state is cleared, unless the error is in
        ``retry_on`` (the caller writes again)."""
        found = self.get(transactional_id)
        if found.error_code:
            return on_done(found.error_code, now_ms)
        if found.metadata is None or found.coordinator_epoch != coordinator_epoch:
            return on_done(E.NotCoordinatorException.code, now_ms)
        key, value = transit.record(transactional_id, self.transaction_version_level)

        def complete(append_error: int, now_ms: int) -> CoordinatorResult:
            # Kafka's appendTransactionToLog passes unexpected errors through.
            error = coordinator_error(append_error)
            current = self.get(transactional_id)
            # None when the id's partition was reloaded or lost meanwhile.
            metadata = (
                None
                if current.error_code or current.coordinator_epoch != coordinator_epoch
                else current.metadata
            )
            if error == NONE:
                if current.error_code:
                    error = current.error_code
                elif metadata is None:
                    # Reloaded meanwhile: the client finds the coordinator again.
                    error = E.NotCoordinatorException.code
                else:
                    error = _install(metadata, transit)
            elif metadata is not None and error not in retry_on:
                metadata.pending_state = None
            return on_done(error, now_ms)

        # The write waits for the ISR up to the transaction's timeout, as
        # Kafka's; a two-phase commit transaction has none, so request.timeout.ms.
        timeout_ms = (
            self.request_timeout_ms
            if transit.txn_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS
            else transit.txn_timeout_ms
        )
        return CoordinatorResult(
            appends=(
                TxnLogAppend(
                    self.partition_for(transactional_id), [(key, value)], timeout_ms, complete
                ),
            )
        )

    # -- timeouts and expiration -----------------------------------------------------------
    def timed_out_transactions(self, now_ms: int) -> list[TimedOutTransaction]:
        """Ongoing transactions open longer than their timeout (a best
        effort: the abort checks the metadata again)."""
        return [
            TimedOutTransaction(m.transactional_id, m.producer_id, m.producer_epoch)
            for _, m in self.transactions()
            if m.pending_state is None
            and m.state is TransactionState.ONGOING
            and not m.is_distributed_two_phase_commit_txn
            and m.txn_start_timestamp + m.txn_timeout_ms < now_ms
        ]

    def expire_transactional_ids(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for ids idle for transactional.id.expiration.ms in a
        state that allows it; each id leaves the cache once its tombstone
        is written (Kafka's removeExpiredTransactionalIds)."""
        appends = []
        for index, partition in self.partitions.items():
            expired: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for metadata in partition.transactions.values():
                if (
                    metadata.pending_state is None
                    and metadata.state.expiration_allowed
                    and metadata.txn_last_update_timestamp
                    <= now_ms - self.transactional_id_expiration_ms
                ):
                    expired.append((metadata, metadata.prepare_dead()))
            for start in range(0, len(expired), MAX_TOMBSTONES_PER_APPEND):
                chunk = expired[start : start + MAX_TOMBSTONES_PER_APPEND]
                appends.append(
                    TxnLogAppend(
                        index,
                        [(encode_key(m.transactional_id), None) for m, _ in chunk],
                        self.request_timeout_ms,
                        self._tombstones_written(index, partition.coordinator_epoch, chunk),
                    )
                )
        return CoordinatorResult(appends=tuple(appends))

    def _tombstones_written(
        self,
        index: int,
        coordinator_epoch: int,
        expired: list[tuple[TransactionMetadata, TxnTransitMetadata]],
    ) -> Callable[[int, int], CoordinatorResult]:
        def complete(append_error: int, now_ms: int) -> CoordinatorResult:
            partition = self.partitions.get(index)
            if partition is None:
                return CoordinatorResult()
            for metadata, transit in expired:
                current = partition.transactions.get(metadata.transactional_id)
                if current is None:
                    continue
                if (
                    append_error == NONE
                    and partition.coordinator_epoch == coordinator_epoch
                    and current.pending_state is TransactionState.DEAD
                    and current.producer_epoch == transit.producer_epoch
                ):
                    del partition.transactions[metadata.transactional_id]
                else:
                    logger.warning(
                        "failed to remove expired transactional id %s (error %d)",
                        metadata.transactional_id,
                        append_error,
                    )
                    current.pending_state = None
            return CoordinatorResult()

        return complete

    # -- listing ---------------------------------------------------------------------------
    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int,
        transactional_id_pattern: str | None,
        now_ms: int,
    ) -> ListTransactionsResponse:
        """ListTransactionsResponse of the loaded partitions (Kafka's
        listTransactionStates, with KIP-994's duration and KIP-1152's
        pattern filters)."""
        if self.loading:
            return ListTransactionsResponse(error_code=E.CoordinatorLoadInProgressException.code)
        pattern = None
        if transactional_id_pattern:
            try:
                pattern = re.compile(transactional_id_pattern)
            except re.error:
                return ListTransactionsResponse(error_code=E.InvalidRegularExpression.code)
        unknown, states = [], set()
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        producer_ids = set(producer_id_filters)
        listed = []
        for _, metadata in self.transactions():
            # Dead is the moment of expiration: never listed.
            if metadata.state is TransactionState.DEAD:
                continue
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if state_filters and metadata.state not in states:
                continue
            if (
                duration_filter_ms >= 0
                and now_ms - metadata.txn_start_timestamp <= duration_filter_ms
            ):
                continue
            if pattern is not None and pattern.fullmatch(metadata.transactional_id) is None:
                continue
            listed.append(
                ListTransactionsResponse.TransactionState(
                    transactional_id=metadata.transactional_id,
                    producer_id=metadata.producer_id,
                    transaction_state=metadata.state.state_name,
                )
            )
        return ListTransactionsResponse(
            error_code=NONE, unknown_state_filters=unknown, transaction_states=listed
        )
