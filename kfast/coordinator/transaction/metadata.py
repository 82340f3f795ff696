"""TransactionState and TransactionMetadata: one transactional id's state
and its legal transitions (Kafka's TransactionState, TransactionMetadata and
TxnTransitMetadata).

A transition happens in two steps, because the state may change only once
__transaction_state holds it: a ``prepare_*`` method checks the move, marks
it pending and returns the TxnTransitMetadata to write; once the record is
replicated the coordinator calls ``complete_transition_to(transit)`` (or
clears ``pending_state`` if the write failed). While a transition is pending
no other may start, which is what makes concurrent requests for one id answer
CONCURRENT_TRANSACTIONS.

Epochs (KIP-360, KIP-890): a producer id's epoch only grows; the coordinator
never hands out Short.MAX_VALUE (32767) so that it can always fence the
current holder by one more bump, so from MAX - 1 on the epoch is exhausted
and the next bump moves the id to a fresh producer id at epoch 0. With
transaction version 2 (KIP-890 part 2) every commit or abort bumps the epoch,
and a commit or abort at an exhausted epoch carries the next producer id,
which the completion switches to.

Transaction versions are Kafka's ``transaction.version`` feature levels: 0
(original protocol), 1 (flexible __transaction_state records), 2 (epoch
bump per transaction).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, NamedTuple, NoReturn

from kfast.config import INT_MAX
from kfast.coordinator.transaction.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PartitionsSchema,
    TransactionLogValue,
    encode_key,
    encode_value,
    value_version,
)
from kfast.protocol import errors as E

__all__ = [
    "TransactionState",
    "TxnTransitMetadata",
    "TransactionMetadata",
    "IllegalStateError",
    "MAX_PRODUCER_EPOCH",
    "TV_0",
    "TV_1",
    "TV_2",
    "supports_epoch_bump",
    "is_epoch_exhausted",
    "TWO_PHASE_COMMIT_TIMEOUT_MS",
]

MAX_PRODUCER_EPOCH = (1 << 15) - 1
TV_0, TV_1, TV_2 = 0, 1, 2
# A two-phase commit producer's transactions never time out (KIP-939): Kafka
# stores Integer.MAX_VALUE as their timeout, so the mark survives a replay of
# __transaction_state without a field of its own.
TWO_PHASE_COMMIT_TIMEOUT_MS = INT_MAX

TopicPartition = tuple[str, int]


def supports_epoch_bump(transaction_version: int) -> bool:
    """Transaction version 2: every commit or abort bumps the epoch."""
    return transaction_version >= TV_2


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No epoch may be handed out after this one (MAX is kept for fencing)."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


class IllegalStateError(RuntimeError):
    """A transition Kafka's coordinator treats as a bug (its
    IllegalStateException): the state machine refuses it and stays as it was."""


class TransactionState(enum.Enum):
    """Each state: its id in __transaction_state, the name DescribeTransactions
    and ListTransactions use, and whether an idle transactional id in it may
    expire (transactional.id.expiration.ms)."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool):
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS_STATES[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return _BY_ID[state_id]
        except KeyError:
            raise IllegalStateError(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_S = TransactionState
# Transaction version 2 lets an abort start from Empty or a completed
# transaction: a client unsure of the coordinator's state may always abort.
_VALID_PREVIOUS_STATES = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
_BY_ID = {state.id: state for state in TransactionState}
_BY_NAME = {state.state_name: state for state in TransactionState}
PREPARE_STATES = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
COMPLETE_STATES = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class TxnTransitMetadata(NamedTuple):
    """The metadata a pending transition writes (and then installs)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int

    def log_value(self) -> TransactionLogValue:
        """The TransactionLogValue Kafka writes for this transition (null
        partitions in Empty; prev/next producer id are tagged, v1 only)."""
        if self.txn_state is _S.EMPTY and self.topic_partitions:
            raise IllegalStateError(f"Empty transaction with partitions: {self}")
        partitions = None
        if self.txn_state is not _S.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(self.topic_partitions):
                by_topic.setdefault(topic, []).append(partition)
            partitions = [PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
        return TransactionLogValue(
            producer_id=self.producer_id,
            previous_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=self.txn_state.id,
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp,
            client_transaction_version=self.client_transaction_version,
        )

    def record(self, transactional_id: str, transaction_version_level: int) -> tuple[bytes, bytes]:
        """(key, value) of the __transaction_state record, at the value
        version the cluster's transaction.version level calls for."""
        return (
            encode_key(transactional_id),
            encode_value(self.log_value(), value_version(transaction_version_level)),
        )


class TransactionMetadata:
    """One transactional id's state as the coordinator holds it."""

    __slots__ = (
        "transactional_id",
        "producer_id",
        "prev_producer_id",
        "next_producer_id",
        "producer_epoch",
        "last_producer_epoch",
        "txn_timeout_ms",
        "state",
        "topic_partitions",
        "txn_start_timestamp",
        "txn_last_update_timestamp",
        "client_transaction_version",
        "pending_state",
        "has_failed_epoch_fence",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        prev_producer_id: int,
        next_producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState,
        topic_partitions: Iterable[TopicPartition] = (),
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int = -1,
        client_transaction_version: int = TV_0,
    ):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending_state: TransactionState | None = None
        # A fence whose write failed already bumped the epoch in memory; the
        # next fence reuses that epoch instead of burning another one
        # (KAFKA-9666: retried InitProducerIds must not exhaust the epochs).
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log_value(
        cls, transactional_id: str, value: TransactionLogValue
    ) -> TransactionMetadata:
        """The metadata a loaded record describes. The last epoch is not in
        the log, so it comes back as NO_PRODUCER_EPOCH, as in Kafka."""
        state = TransactionState.from_id(value.transaction_status)
        partitions: set[TopicPartition] = set()
        if state is not _S.EMPTY:
            for entry in value.transaction_partitions or ():
                partitions.update((entry.topic, p) for p in entry.partition_ids)
        return cls(
            transactional_id,
            value.producer_id,
            value.previous_producer_id,
            value.next_producer_id,
            value.producer_epoch,
            NO_PRODUCER_EPOCH,
            value.transaction_timeout_ms,
            state,
            partitions,
            value.transaction_start_timestamp_ms,
            value.transaction_last_update_timestamp_ms,
            value.client_transaction_version,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, "
            f"state={self.state.name}, pending={self.pending_state and self.pending_state.name}, "
            f"partitions={sorted(self.topic_partitions)}, tv={self.client_transaction_version})"
        )

    # -- queries -------------------------------------------------------------------------
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_distributed_two_phase_commit_txn(self) -> bool:
        """Started by a producer with enable2Pc: the coordinator never aborts
        it on a timeout; its external transaction manager decides."""
        return self.txn_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    # -- partitions whose markers are written ----------------------------------------------
    def remove_partition(self, topic_partition: TopicPartition) -> None:
        """Forget a partition whose marker is written (PrepareCommit/Abort only)."""
        if self.state not in PREPARE_STATES:
            raise IllegalStateError(
                f"{self.transactional_id}: removing a partition whose marker was written "
                f"in state {self.state.name}"
            )
        self.topic_partitions.discard(topic_partition)

    # -- prepare ---------------------------------------------------------------------------
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch so the current holder is fenced before its ongoing
        transaction is aborted. Never past MAX (KAFKA-20090), and not again
        after a fence whose write failed (KAFKA-9666)."""
        if self.has_failed_epoch_fence or self.producer_epoch == MAX_PRODUCER_EPOCH:
            bumped = self.producer_epoch
        else:
            bumped = self.producer_epoch + 1
        return self._prepare(_S.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata:
        """InitProducerId on the same producer id. ``expected_producer_epoch``
        is the epoch a KIP-360 producer says it holds (None for a new
        producer). Raises ProducerFencedException when it is neither the
        current nor the previous epoch."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(
                f"cannot allocate any more producer epochs for producer id {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            # A new producer (epoch -1 becomes 0) or one that gave up its
            # epoch: bump, and forget the last epoch so a zombie retry fails.
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_epoch == self.producer_epoch
        ):
            # The producer recovers from an error and nobody took over since.
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the same epoch again.
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise E.ProducerFencedException(
                f"expected epoch {expected_producer_epoch} is neither the current epoch "
                f"{self.producer_epoch} nor the previous {self.last_producer_epoch}"
            )
        return self._prepare(
            _S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=update_timestamp,
        )

    def prepare_producer_id_rotation(
        self,
        new_producer_id: int,
        new_txn_timeout_ms: int,
        update_timestamp: int,
        record_last_epoch: bool,
    ) -> TxnTransitMetadata:
        """Exhausted epochs: continue on a fresh producer id at epoch 0.
        ``record_last_epoch`` keeps the old epoch so that a KIP-360 retry of
        this very request is recognised."""
        if self.has_pending_transaction:
            raise IllegalStateError("cannot rotate producer ids while a transaction is pending")
        return self._prepare(
            _S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=update_timestamp,
        )

    def prepare_add_partitions(
        self,
        added: Iterable[TopicPartition],
        update_timestamp: int,
        client_transaction_version: int,
    ) -> TxnTransitMetadata:
        """Ongoing with ``added`` partitions; a transaction starts (its start
        time set) when the first partition joins."""
        if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            start = update_timestamp
        else:
            start = self.txn_start_timestamp
        return self._prepare(
            _S.ONGOING,
            topic_partitions=frozenset(self.topic_partitions) | set(added),
            txn_start_timestamp=start,
            txn_last_update_timestamp=update_timestamp,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        client_transaction_version: int,
        next_producer_id: int,
        update_timestamp: int,
        no_partition_added: bool,
    ) -> TxnTransitMetadata:
        """PrepareCommit or PrepareAbort. Transaction version 2 bumps the
        epoch here (the markers carry the bumped epoch, which fences any
        late write of this transaction); ``next_producer_id`` is the id to
        move to when that bump exhausts the epochs."""
        if supports_epoch_bump(client_transaction_version):
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        # A version 2 abort may come with no partition added: the start time
        # is then unknown but required, so the abort's own time stands in.
        start = update_timestamp if no_partition_added else self.txn_start_timestamp
        return self._prepare(
            new_state,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            next_producer_id=next_producer_id,
            txn_start_timestamp=start,
            txn_last_update_timestamp=update_timestamp,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """CompleteCommit or CompleteAbort, once every marker is written. On
        an epoch overflow (version 2) the producer id moves to the next one
        at epoch 0; the last epoch stays MAX - 1, the last the client saw."""
        # The prepare record is durable, so a failed fence is behind us.
        self.has_failed_epoch_fence = False
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        if (
            supports_epoch_bump(self.client_transaction_version)
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(
            new_state,
            producer_id=producer_id,
            producer_epoch=epoch,
            next_producer_id=NO_PRODUCER_ID,
            topic_partitions=frozenset(),
            txn_last_update_timestamp=update_timestamp,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expires (its tombstone is written next)."""
        return self._prepare(_S.DEAD, topic_partitions=frozenset())

    def _prepare(self, state: TransactionState, **changes: Any) -> TxnTransitMetadata:
        """``changes``: TxnTransitMetadata fields that differ from the current
        metadata's (each of its own type)."""
        if self.pending_state is not None:
            raise IllegalStateError(
                f"{self.transactional_id}: preparing a transition to {state.name} while "
                f"{self.pending_state.name} is pending"
            )
        transit = TxnTransitMetadata(
            producer_id=changes.get("producer_id", self.producer_id),
            # The id before this transition: a retry after a producer id
            # change recognises itself by it.
            prev_producer_id=self.producer_id,
            next_producer_id=changes.get("next_producer_id", self.next_producer_id),
            producer_epoch=changes.get("producer_epoch", self.producer_epoch),
            last_producer_epoch=changes.get("last_producer_epoch", self.last_producer_epoch),
            txn_timeout_ms=changes.get("txn_timeout_ms", self.txn_timeout_ms),
            txn_state=state,
            topic_partitions=changes.get("topic_partitions", frozenset(self.topic_partitions)),
            txn_start_timestamp=changes.get("txn_start_timestamp", self.txn_start_timestamp),
            txn_last_update_timestamp=changes.get(
                "txn_last_update_timestamp", self.txn_last_update_timestamp
            ),
            client_transaction_version=changes.get(
                "client_transaction_version", self.client_transaction_version
            ),
        )
        if transit.producer_id < 0:
            raise IllegalStateError(f"illegal new producer id {transit.producer_id}")
        # A new metadata stays at epoch -1 until its first InitProducerId
        # completes, and may expire before it does.
        if state is not _S.DEAD and not 0 <= transit.producer_epoch <= MAX_PRODUCER_EPOCH:
            raise IllegalStateError(f"illegal new producer epoch {transit.producer_epoch}")
        if self.state not in state.valid_previous_states:
            raise IllegalStateError(
                f"{self.transactional_id}: {state.name} cannot follow {self.state.name}"
            )
        self.pending_state = state
        return transit

    # -- complete --------------------------------------------------------------------------
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Install a transition whose record is replicated, after checking it
        is the pending one and consistent with the current metadata."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(
                f"{self.transactional_id}: completing a transition with none pending"
            )
        if to_state is not transit.txn_state or not self._is_consistent(to_state, transit):
            self._fail(transit)
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _is_consistent(self, to_state: TransactionState, transit: TxnTransitMetadata) -> bool:
        """Kafka's completeTransitionTo checks, per target state."""
        if to_state is _S.EMPTY:  # InitProducerId
            return not (
                (
                    self.producer_epoch != transit.producer_epoch
                    and not self._valid_epoch_bump(transit)
                )
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            )
        if to_state is _S.ONGOING:  # AddPartitions
            return (
                self._valid_producer_epoch(transit)
                and transit.topic_partitions >= self.topic_partitions
                and self.txn_timeout_ms == transit.txn_timeout_ms
            )
        if to_state in PREPARE_STATES:  # EndTxn
            # Version 2 may abort from Empty or a completed transaction, whose
            # start time the transit replaces.
            empty_abort = (
                to_state is _S.PREPARE_ABORT
                and supports_epoch_bump(transit.client_transaction_version)
                and self.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
            )
            return (
                self._valid_producer_epoch(transit)
                and self.topic_partitions == transit.topic_partitions
                and self.txn_timeout_ms == transit.txn_timeout_ms
                and (empty_abort or self.txn_start_timestamp == transit.txn_start_timestamp)
            )
        if to_state in COMPLETE_STATES:  # markers written
            return (
                self._valid_producer_epoch(transit)
                and self.txn_timeout_ms == transit.txn_timeout_ms
                and transit.txn_start_timestamp != -1
            )
        # PrepareEpochFence is immediately replaced by PrepareAbort, and an
        # expired id is removed, never installed as Dead.
        return False

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        version2 = supports_epoch_bump(transit.client_transaction_version)
        if version2 and transit.txn_state in COMPLETE_STATES and transit.producer_epoch == 0:
            # Epoch overflow: the completion moved to the next producer id.
            return (
                transit.last_producer_epoch == self.last_producer_epoch
                and transit.prev_producer_id == self.producer_id
            )
        if version2 and transit.txn_state in PREPARE_STATES:
            # The prepare record carries the bumped epoch.
            return (
                transit.last_producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id
            )
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalStateError(
            f"{self.transactional_id}: illegal transition from {self!r} to {transit}"
        )

    # -- comparisons (tests, replay checks) ------------------------------------------------
    def persisted_view(self, transaction_version_level: int = TV_2) -> tuple[object, ...]:
        """What a record of this metadata holds, to compare a live metadata
        with one rebuilt by replay (log version 0 has no prev/next ids)."""
        tagged = value_version(transaction_version_level) >= 1
        return (
            self.transactional_id,
            self.producer_id,
            self.prev_producer_id if tagged else NO_PRODUCER_ID,
            self.next_producer_id if tagged else NO_PRODUCER_ID,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.topic_partitions) if self.state is not _S.EMPTY else frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version if tagged else TV_0,
        )
