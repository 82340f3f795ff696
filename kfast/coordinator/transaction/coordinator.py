"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn (and its
KIP-890 verify-only form), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions for the transactional ids of the __transaction_state
partitions this broker leads, plus the work no client asks for: sending the
markers of a decided transaction, aborting timed-out transactions, expiring
idle ids (Kafka's TransactionCoordinator and the completion half of its
TransactionMarkerChannelManager).

A deterministic state machine: time comes in as ``now_ms``, producer ids
from the injected ``producer_id_allocator()`` (it returns an id or raises a
KafkaError, e.g. COORDINATOR_LOAD_IN_PROGRESS while no block is at hand),
and every effect goes out as a CoordinatorResult (results.py): records to
append, markers to write, the answer. The state changes when an append
completes (``complete_append``), never before, so what the log holds and what
the coordinator believes cannot drift; ``load_partition`` + ``replay`` +
``complete_load`` rebuild it from the log.

A transaction ends in two writes: EndTxn appends PrepareCommit or
PrepareAbort (the decision; the client is answered once it is replicated),
then the markers go to every partition of the transaction, and when the last
is written ``complete_markers`` returns the CompleteCommit/CompleteAbort
append. A coordinator that loads a partition with a decision whose markers
were not all confirmed sends them again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.coordinator.group.records import partition_for
from kfast.coordinator.partition_writer import ConfigLookup
from kfast.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    TV_0,
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    supports_epoch_bump,
)
from kfast.coordinator.transaction.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kfast.coordinator.transaction.results import (
    CoordinatorResult,
    EndTxnResult,
    InitProducerIdResult,
    PendingCompleteTxn,
    TxnLogAppend,
    TxnMarkers,
)
from kfast.coordinator.transaction.state_manager import Lookup, TransactionStateManager
from kfast.protocol import DescribeTransactionsResponse, ListTransactionsResponse
from kfast.protocol import errors as E

logger = logging.getLogger(__name__)

NONE = 0
_S = TransactionState
_CONCURRENT = E.ConcurrentTransactionsException.code
_FENCED = E.ProducerFencedException.code
_BAD_MAPPING = E.InvalidPidMappingException.code
_BAD_STATE = E.InvalidTxnStateException.code
_INVALID_REQUEST = E.InvalidRequestException.code
_RETRY_COMPLETION_ON = frozenset({E.CoordinatorNotAvailableException.code})
_EMPTY = CoordinatorResult()


# respond(error code, producer id, producer epoch): an EndTxn's answer, or
# InitProducerId's after the abort an epoch fence starts.
# None: no client waits (the coordinator's own abort of a timed-out transaction).
Respond = Callable[[int, int, int], EndTxnResult | InitProducerIdResult | None]
# (error code, the transition to append or None when nothing is written).
Prepared = tuple[int, TxnTransitMetadata | None]


class _EndTxn(NamedTuple):
    """One end of a transaction as _end_transaction's steps read it."""

    producer_id: int
    producer_epoch: int
    committed: bool
    from_client: bool  # false: the coordinator's own abort after an epoch fence
    is_epoch_fence: bool
    client_transaction_version: int
    version2: bool  # the client's transaction version bumps the epoch at every end
    now_ms: int


def _end_not_written(
    metadata: TransactionMetadata,
    end: _EndTxn,
    code: int,
    current: tuple[int, int],
    respond: Respond,
) -> EndTxnResult | InitProducerIdResult | None:
    """The answer of an end that appends nothing: a retry answered NONE
    (with the current id and epoch under transaction version 2), or the error."""
    if end.is_epoch_fence and metadata.pending_state is _S.PREPARE_EPOCH_FENCE:
        # The abort did not start (no producer id for the rotation):
        # the fence must not block the id for good.
        metadata.pending_state = None
    if code == NONE and end.version2:
        return respond(NONE, *current)
    return respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


def _end_v2_epoch(metadata: TransactionMetadata, end: _EndTxn) -> tuple[bool, bool, bool]:
    """(the epoch is valid, the end is a retry, a retry across an epoch
    overflow) under transaction version 2."""
    is_epoch_fence, producer_epoch = end.is_epoch_fence, end.producer_epoch
    retry_on_overflow = (
        not is_epoch_fence
        and metadata.prev_producer_id == end.producer_id
        and producer_epoch == MAX_PRODUCER_EPOCH - 1
        and metadata.producer_epoch == 0
    )
    retry_on_epoch_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
    state = metadata.state
    if is_epoch_fence:
        valid_epoch = (
            not end.from_client or producer_epoch == metadata.producer_epoch
        ) and producer_epoch >= metadata.producer_epoch
    elif state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        valid_epoch = retry_on_epoch_bump
    elif state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
        valid_epoch = (
            retry_on_epoch_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        )
    else:
        valid_epoch = producer_epoch == metadata.producer_epoch
    return valid_epoch, retry_on_epoch_bump or retry_on_overflow, retry_on_overflow


class TransactionCoordinator:
    """``config``: the broker's configuration (transaction.*, transactional.*,
    offsets.topic.num.partitions, request.timeout.ms by Kafka's names);
    ``transaction_version_level``: the cluster's finalized transaction.version
    (``self.state.transaction_version_level`` follows later changes)."""

    def __init__(
        self,
        config: ConfigLookup,
        producer_id_allocator: Callable[[], int],
        transaction_version_level: int = 2,
    ) -> None:
        self.state = TransactionStateManager(
            config["transaction.state.log.num.partitions"],
            config["transactional.id.expiration.ms"],
            config["transaction.max.timeout.ms"],
            config["request.timeout.ms"],
            transaction_version_level,
        )
        self.offsets_topic_partitions = config["offsets.topic.num.partitions"]
        self.two_phase_commit_enabled = config["transaction.two.phase.commit.enable"]
        self.producer_id_allocator = producer_id_allocator
        self.pending_markers: dict[str, PendingCompleteTxn] = {}
        self.active = True

    def _new_producer_id(self) -> tuple[int, int]:
        """(error code, producer id) from the allocator."""
        try:
            return NONE, self.producer_id_allocator()
        except E.KafkaError as exc:
            return exc.code, NO_PRODUCER_ID

    # -- InitProducerId --------------------------------------------------------------------
    def handle_init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        now_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        enable_two_phase_commit: bool = False,
        keep_prepared_txn: bool = False,
    ) -> CoordinatorResult:
        """``producer_id``/``producer_epoch``: what a KIP-360 producer holds
        (InitProducerId v3+), -1/-1 otherwise. ``enable_two_phase_commit``
        (v6, KIP-939): the producer's transactions never time out; refused
        with TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless
        transaction.two.phase.commit.enable. ``keep_prepared_txn`` (v6):
        answered UNSUPPORTED_VERSION, as Kafka's coordinator answers it while
        the recovery of a prepared transaction is not served."""

        def error(code: int) -> CoordinatorResult:
            return CoordinatorResult(InitProducerIdResult(code))

        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return error(_INVALID_REQUEST)  # KafkaApis: half a pair
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if transactional_id is None:
            # An idempotent producer: a fresh id at epoch 0, nothing to store.
            code, new_id = self._new_producer_id()
            return error(code) if code else CoordinatorResult(InitProducerIdResult(NONE, new_id, 0))
        code = self._check_init_producer_id(
            transactional_id, transaction_timeout_ms, enable_two_phase_commit, keep_prepared_txn
        )
        if code:
            return error(code)
        if enable_two_phase_commit:
            transaction_timeout_ms = TWO_PHASE_COMMIT_TIMEOUT_MS
        found = self._metadata_for_init(transactional_id, transaction_timeout_ms, now_ms)
        metadata, coordinator_epoch = found.metadata, found.coordinator_epoch
        if found.error_code or metadata is None:  # (never without an error)
            return error(found.error_code)
        code, transit = self._prepare_init_producer_id(
            metadata, transaction_timeout_ms, expected, now_ms
        )
        if transit is None:
            return error(code)
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            return self._abort_fenced_transaction(transactional_id, transit, now_ms)

        def written(code: int, _now_ms: int) -> CoordinatorResult:
            if code:
                return error(code)
            return CoordinatorResult(
                InitProducerIdResult(NONE, transit.producer_id, transit.producer_epoch)
            )

        return self.state.append(transactional_id, coordinator_epoch, transit, written, now_ms)

    def _abort_fenced_transaction(
        self, transactional_id: str, fence: TxnTransitMetadata, now_ms: int
    ) -> CoordinatorResult:
        """The previous holder left a transaction open: abort it under a
        bumped epoch (never handed out) and let the client retry, which
        bumps again -- onto a new producer id if the fence exhausted it."""

        def answer(code: int, _producer_id: int, _epoch: int) -> InitProducerIdResult:
            return InitProducerIdResult(code or _CONCURRENT)

        return self._end_transaction(
            transactional_id,
            fence.producer_id,
            fence.producer_epoch,
            False,
            False,
            self.state.transaction_version_level,
            answer,
            now_ms,
        )

    def _check_init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        enable_two_phase_commit: bool,
        keep_prepared_txn: bool,
    ) -> int:
        """The error of an InitProducerId with a transactional id that no
        state is needed to refuse, else NONE."""
        if not transactional_id:
            return _INVALID_REQUEST
        if enable_two_phase_commit and not self.two_phase_commit_enabled:
            # Not UNSUPPORTED_*: a client cannot probe the broker's setting.
            return E.TransactionalIdAuthorizationException.code
        if keep_prepared_txn:
            return E.UnsupportedVersionException.code
        if not self.state.validate_transaction_timeout(
            transaction_timeout_ms, enable_two_phase_commit
        ):
            return E.InvalidTxnTimeoutException.code
        return NONE

    def _metadata_for_init(
        self, transactional_id: str, transaction_timeout_ms: int, now_ms: int
    ) -> Lookup:
        """The id's metadata; a new one (Empty, a fresh producer id) if it
        has none."""
        found = self.state.get(transactional_id)
        if found.error_code or found.metadata is not None:
            return found
        code, new_id = self._new_producer_id()
        if code:
            return Lookup(code)
        return self.state.put_if_not_exists(
            TransactionMetadata(
                transactional_id,
                new_id,
                NO_PRODUCER_ID,
                NO_PRODUCER_ID,
                NO_PRODUCER_EPOCH,
                NO_PRODUCER_EPOCH,
                transaction_timeout_ms,
                _S.EMPTY,
                (),
                -1,
                now_ms,
                TV_0,
            )
        )

    def _prepare_init_producer_id(
        self,
        metadata: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        now_ms: int,
    ) -> Prepared:
        if metadata.pending_transition_in_progress:
            return _CONCURRENT, None
        if expected is not None:
            expected_id, expected_epoch = expected
            # Fenced unless: the metadata is new (a producer recovering from
            # UNKNOWN_PRODUCER_ID may take it), the id is current (the epoch
            # is checked by the bump), or it is the previous id at an
            # exhausted epoch (a retry of a rotation it never heard of).
            if not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected_id == metadata.producer_id
                or (
                    expected_id == metadata.prev_producer_id
                    and expected_epoch >= MAX_PRODUCER_EPOCH - 1
                )
            ):
                return _FENCED, None
        state = metadata.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return _CONCURRENT, None
        if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                code, new_id = self._new_producer_id()
                if code:
                    return code, None
                return NONE, metadata.prepare_producer_id_rotation(
                    new_id, timeout_ms, now_ms, expected is not None
                )
            try:
                return NONE, metadata.prepare_increment_producer_epoch(
                    timeout_ms, None if expected is None else expected[1], now_ms
                )
            except E.ProducerFencedException:
                return _FENCED, None
        if state is _S.ONGOING:
            return NONE, metadata.prepare_fence_producer_epoch()
        raise IllegalStateError(f"{metadata.transactional_id} found in state {state.name}")

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        now_ms: int,
        client_transaction_version: int = TV_0,
    ) -> CoordinatorResult:
        """The response is one error code for every partition (the API layer
        builds the per-partition results)."""
        partitions = frozenset(partitions)
        if not transactional_id:
            return CoordinatorResult(_INVALID_REQUEST)
        found = self.state.get(transactional_id)
        if found.error_code:
            return CoordinatorResult(found.error_code)
        metadata = found.metadata
        if metadata is None:
            return CoordinatorResult(_BAD_MAPPING)
        # Pending first: across a version 2 epoch overflow the producer may
        # already use the next producer id, which is only pending here.
        if metadata.pending_transition_in_progress:
            return CoordinatorResult(_CONCURRENT)
        if metadata.producer_id != producer_id:
            return CoordinatorResult(_BAD_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return CoordinatorResult(_FENCED)
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return CoordinatorResult(_CONCURRENT)
        if metadata.state is _S.ONGOING and partitions <= metadata.topic_partitions:
            return CoordinatorResult(NONE)  # nothing new to write
        transit = metadata.prepare_add_partitions(partitions, now_ms, client_transaction_version)
        return self.state.append(
            transactional_id,
            found.coordinator_epoch,
            transit,
            lambda code, _now: CoordinatorResult(code),
            now_ms,
        )

    def handle_verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn with verify_only (KIP-890 part 1, sent by a
        partition leader before it appends a transactional batch): per
        partition, NONE if it is in the transaction, TRANSACTION_ABORTABLE
        if not. Pending transitions are not checked: the append that follows
        validates again."""
        partitions = frozenset(partitions)

        def every(code: int) -> dict[tuple[str, int], int]:
            return dict.fromkeys(partitions, code)

        if not transactional_id:
            return every(_INVALID_REQUEST)
        found = self.state.get(transactional_id)
        if found.error_code:
            return every(found.error_code)
        metadata = found.metadata
        if metadata is None or metadata.producer_id != producer_id:
            return every(_BAD_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return every(_FENCED)
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return every(_CONCURRENT)
        return {
            tp: NONE if tp in metadata.topic_partitions else E.TransactionAbortableException.code
            for tp in partitions
        }

    def handle_add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
    ) -> CoordinatorResult:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the
        transaction (its TxnOffsetCommit records get the markers too)."""
        offsets_partition = (
            GROUP_METADATA_TOPIC_NAME,
            partition_for(group_id, self.offsets_topic_partitions),
        )
        return self.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, [offsets_partition], now_ms, TV_0
        )

    # -- EndTxn ----------------------------------------------------------------------------
    def handle_end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        client_transaction_version: int,
        now_ms: int,
    ) -> CoordinatorResult:
        """``client_transaction_version``: 2 for EndTxn v5+ (KIP-890 part 2),
        else 0."""
        return self._end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            committed,
            True,
            client_transaction_version,
            EndTxnResult,
            now_ms,
        )

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        from_client: bool,
        client_transaction_version: int,
        respond: Respond,
        now_ms: int,
    ) -> CoordinatorResult:
        """EndTxn from a client, or an abort the coordinator starts itself
        (``from_client`` false: after an epoch fence). ``respond(error,
        producer_id, epoch)`` builds the answer."""
        if not transactional_id:
            return CoordinatorResult(respond(_INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        found = self.state.get(transactional_id)
        if found.error_code or found.metadata is None:
            code = found.error_code or _BAD_MAPPING
            return CoordinatorResult(respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        metadata = found.metadata
        end = _EndTxn(
            producer_id,
            producer_epoch,
            committed,
            from_client,
            metadata.pending_state is _S.PREPARE_EPOCH_FENCE,
            client_transaction_version,
            supports_epoch_bump(client_transaction_version),
            now_ms,
        )
        current = (metadata.producer_id, metadata.producer_epoch)
        if end.version2:
            code, transit = self._prepare_end_v2(metadata, end)
        else:
            code, transit = self._prepare_end_v1(metadata, end)
        if transit is None:
            return CoordinatorResult(_end_not_written(metadata, end, code, current, respond))
        coordinator_epoch = found.coordinator_epoch

        def written(code: int, now_ms: int) -> CoordinatorResult:
            if code:
                if end.is_epoch_fence and not end.version2:
                    self._keep_failed_epoch_fence(transactional_id, coordinator_epoch)
                return CoordinatorResult(respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
            return self._send_markers(
                transactional_id,
                coordinator_epoch,
                producer_id,
                producer_epoch,
                committed,
                end.version2,
                respond,
                now_ms,
            )

        return self.state.append(transactional_id, coordinator_epoch, transit, written, now_ms)

    def _keep_failed_epoch_fence(self, transactional_id: str, coordinator_epoch: int) -> None:
        """The bumped epoch of a fence whose abort failed to append stays in
        memory, unwritten: the next fence reuses it (KAFKA-9666)."""
        again = self.state.get(transactional_id)
        if (
            not again.error_code
            and again.metadata is not None
            and again.coordinator_epoch == coordinator_epoch
        ):
            again.metadata.has_failed_epoch_fence = True

    def _prepare_end_v1(self, metadata: TransactionMetadata, end: _EndTxn) -> Prepared:
        """Transaction versions 0 and 1: the epoch stays; a retry of a
        completed end is answered NONE by its state."""
        if metadata.producer_id != end.producer_id:
            return _BAD_MAPPING, None
        # A client must hold the current epoch; the coordinator's own abort
        # carries the fencing epoch, which may be higher.
        if (
            end.from_client and end.producer_epoch != metadata.producer_epoch
        ) or end.producer_epoch < metadata.producer_epoch:
            return _FENCED, None
        if metadata.pending_transition_in_progress and not end.is_epoch_fence:
            return _CONCURRENT, None
        state = metadata.state
        if state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if end.committed else _S.PREPARE_ABORT
            if next_state is _S.PREPARE_ABORT and end.is_epoch_fence:
                # The fence's epoch becomes the transaction's, in memory now
                # and in the log with the PrepareAbort.
                metadata.pending_state = None
                metadata.producer_epoch = end.producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            return NONE, metadata.prepare_abort_or_commit(
                next_state, TV_0, NO_PRODUCER_ID, end.now_ms, False
            )
        return self._end_in_other_state(metadata, state, end.committed, retry=True), None

    def _prepare_end_v2(self, metadata: TransactionMetadata, end: _EndTxn) -> Prepared:
        """Transaction version 2: every end bumps the epoch, so the epoch
        tells a retry (the client's epoch is one behind) from the next
        transaction's end (the same epoch):

            state           Abort retry / current   Commit retry / current
            Empty           FENCED / bump           FENCED / INVALID_TXN_STATE
            CompleteAbort   NONE / bump             INVALID_TXN_STATE / same
            CompleteCommit  INVALID_TXN_STATE / bump  NONE / INVALID_TXN_STATE
        """
        valid_epoch, is_retry, retry_on_overflow = _end_v2_epoch(metadata, end)
        if metadata.producer_id != end.producer_id and not retry_on_overflow:
            return _BAD_MAPPING, None
        if not valid_epoch:
            return _FENCED, None
        if metadata.pending_transition_in_progress and not end.is_epoch_fence:
            return _CONCURRENT, None
        state, committed = metadata.state, end.committed
        if state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
            return self._prepare_end_v2_transition(metadata, end, next_state, False)
        if state is _S.COMPLETE_COMMIT:
            if committed:
                return (NONE if is_retry else _BAD_STATE), None
            if is_retry:
                return _BAD_STATE, None
            return self._prepare_end_v2_transition(metadata, end, _S.PREPARE_ABORT, True)
        if state is _S.COMPLETE_ABORT:
            if committed:
                return _BAD_STATE, None
            if is_retry:
                return NONE, None
            return self._prepare_end_v2_transition(metadata, end, _S.PREPARE_ABORT, True)
        if state is _S.EMPTY:
            if committed:
                return _BAD_STATE, None
            return self._prepare_end_v2_transition(metadata, end, _S.PREPARE_ABORT, True)
        return self._end_in_other_state(metadata, state, committed, retry=False), None

    def _prepare_end_v2_transition(
        self,
        metadata: TransactionMetadata,
        end: _EndTxn,
        next_state: TransactionState,
        no_partition_added: bool,
    ) -> Prepared:
        next_producer_id = NO_PRODUCER_ID
        # The bump below exhausts the epochs: the completion moves to a
        # new producer id (also for the coordinator's own abort,
        # KAFKA-20090).
        if metadata.is_producer_epoch_exhausted:
            code, next_producer_id = self._new_producer_id()
            if code:
                return code, None
        if end.is_epoch_fence:
            # The abort's own bump fences; no second bump (KAFKA-19367).
            metadata.pending_state = None
        return NONE, metadata.prepare_abort_or_commit(
            next_state,
            end.client_transaction_version,
            next_producer_id,
            end.now_ms,
            no_partition_added,
        )

    @staticmethod
    def _end_in_other_state(
        metadata: TransactionMetadata, state: TransactionState, committed: bool, retry: bool
    ) -> int:
        """The answer when no prepare is written: a decision under way is
        CONCURRENT_TRANSACTIONS (the client retries until it completes), a
        completed one NONE when ``retry`` allows it, the other outcome
        INVALID_TXN_STATE."""
        if state in (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT, _S.PREPARE_ABORT, _S.COMPLETE_ABORT):
            same_outcome = committed == (state in (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT))
            if not same_outcome:
                return _BAD_STATE
            if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return _CONCURRENT
            return NONE if retry else _BAD_STATE
        if state is _S.EMPTY:
            return _BAD_STATE
        raise IllegalStateError(f"{metadata.transactional_id} found in state {state.name}")

    # -- markers ---------------------------------------------------------------------------
    def _send_markers(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        version2: bool,
        respond: Respond,
        now_ms: int,
    ) -> CoordinatorResult:
        """The decision is replicated: check it is still ours, answer, and
        hand out the markers."""
        found = self.state.get(transactional_id)
        if found.error_code:
            return CoordinatorResult(respond(found.error_code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        metadata = found.metadata
        code = NONE
        if metadata is None or found.coordinator_epoch != coordinator_epoch:
            code = E.NotCoordinatorException.code
        elif metadata.producer_id != producer_id:
            code = _BAD_MAPPING
        elif metadata.producer_epoch != producer_epoch and not (
            version2 and metadata.producer_epoch == producer_epoch + 1
        ):
            code = _FENCED
        elif metadata.pending_transition_in_progress:
            code = _CONCURRENT
        elif metadata.state is not (_S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT):
            code = _BAD_STATE
        if code or metadata is None:
            return CoordinatorResult(respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        complete = metadata.prepare_complete(now_ms)
        # A version 2 client continues with the completed id and epoch (the
        # next producer id at epoch 0 after an overflow, KAFKA-18660).
        answer = (
            respond(NONE, complete.producer_id, complete.producer_epoch)
            if version2
            else respond(NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        )
        return CoordinatorResult(answer) + self._markers_for(
            transactional_id, coordinator_epoch, metadata, complete, committed, now_ms
        )

    def _markers_for(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
        committed: bool,
        now_ms: int,
    ) -> CoordinatorResult:
        pending = PendingCompleteTxn(transactional_id, coordinator_epoch, metadata, complete)
        self.pending_markers[transactional_id] = pending
        markers: tuple[TxnMarkers, ...] = ()
        if metadata.topic_partitions:
            markers = (
                TxnMarkers(
                    transactional_id,
                    metadata.producer_id,
                    metadata.producer_epoch,
                    committed,
                    coordinator_epoch,
                    frozenset(metadata.topic_partitions),
                    metadata.client_transaction_version,
                    pending,
                ),
            )
        return CoordinatorResult(markers=markers) + self._maybe_write_completion(
            transactional_id, now_ms
        )

    def complete_markers(
        self, markers: TxnMarkers, partitions: Iterable[tuple[str, int]], now_ms: int
    ) -> CoordinatorResult:
        """The markers of ``partitions`` are written (or given up, see
        TxnMarkers). After the last partition of the transaction: the
        CompleteCommit/CompleteAbort append."""
        pending = markers._pending
        transactional_id = markers.transactional_id
        if self.pending_markers.get(transactional_id) is not pending:
            return _EMPTY  # superseded or cancelled
        found = self.state.get(transactional_id)
        if (
            found.error_code
            or found.metadata is not pending.metadata
            or found.coordinator_epoch != markers.coordinator_epoch
        ):
            # No longer ours, or reloaded: the loading coordinator resends.
            del self.pending_markers[transactional_id]
            return _EMPTY
        for topic_partition in partitions:
            if topic_partition in markers.partitions:
                pending.metadata.remove_partition(topic_partition)
        return self._maybe_write_completion(transactional_id, now_ms)

    def markers_wanted(self, markers: TxnMarkers) -> bool:
        """Whether ``markers`` are still to be written: the marker channel
        stops retrying those of a transaction that was cancelled, completed
        or moved to another coordinator."""
        return self.pending_markers.get(markers.transactional_id) is markers._pending

    def cancel_markers(self, markers: TxnMarkers) -> None:
        """Stop a transaction's markers (the producer or coordinator epoch
        moved on: INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""
        if self.pending_markers.get(markers.transactional_id) is markers._pending:
            del self.pending_markers[markers.transactional_id]

    def _maybe_write_completion(self, transactional_id: str, now_ms: int) -> CoordinatorResult:
        pending = self.pending_markers.get(transactional_id)
        if pending is None or pending.metadata.topic_partitions:
            return _EMPTY
        del self.pending_markers[transactional_id]
        return self._write_completion(pending, now_ms)

    def _write_completion(self, pending: PendingCompleteTxn, now_ms: int) -> CoordinatorResult:
        found = self.state.get(pending.transactional_id)
        if (
            found.error_code
            or found.metadata is not pending.metadata
            or found.coordinator_epoch != pending.coordinator_epoch
        ):
            return _EMPTY

        def written(code: int, now_ms: int) -> CoordinatorResult:
            if code in _RETRY_COMPLETION_ON:
                # Still pending: write it again (after the runtime's backoff).
                return self._write_completion(pending, now_ms)
            if code not in (
                NONE,
                E.NotCoordinatorException.code,
                E.CoordinatorLoadInProgressException.code,
            ):
                logger.error(
                    "completing the transaction of %s failed: %s",
                    pending.transactional_id,
                    E.for_code(code).__name__,
                )
            return _EMPTY

        return self.state.append(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.transit,
            written,
            now_ms,
            _RETRY_COMPLETION_ON,
        )

    def complete_append(
        self, append: TxnLogAppend, error_code: int, now_ms: int
    ) -> CoordinatorResult:
        """An append of a CoordinatorResult is done: ``error_code`` is 0 once
        replicated, else the produce error."""
        return append._on_complete(error_code, now_ms)

    # -- partitions ------------------------------------------------------------------------
    def load_partition(self, index: int, coordinator_epoch: int) -> None:
        """Start loading partition ``index``, led by this broker from
        ``coordinator_epoch`` on; then ``replay`` its records and
        ``complete_load``."""
        self._drop_markers(index)
        self.state.begin_load(index, coordinator_epoch)

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.state.replay(key, value)

    def complete_load(self, index: int, coordinator_epoch: int, now_ms: int) -> CoordinatorResult:
        """The partition serves requests; decided transactions get their
        markers sent again (Kafka's loadTransactionsForTxnTopicPartition)."""
        result = _EMPTY
        for metadata in self.state.complete_load(index, coordinator_epoch):
            complete = metadata.prepare_complete(now_ms)
            result += self._markers_for(
                metadata.transactional_id,
                coordinator_epoch,
                metadata,
                complete,
                metadata.state is _S.PREPARE_COMMIT,
                now_ms,
            )
        return result

    def unload_partition(self, index: int, coordinator_epoch: int | None = None) -> None:
        """Another broker leads partition ``index`` now."""
        self._drop_markers(index)
        self.state.unload(index, coordinator_epoch)

    def _drop_markers(self, index: int) -> None:
        for transactional_id in [
            t for t in self.pending_markers if self.state.partition_for(t) == index
        ]:
            del self.pending_markers[transactional_id]

    def shutdown(self) -> None:
        self.active = False
        self.pending_markers.clear()
        self.state.partitions.clear()
        self.state.loading.clear()

    # -- timeouts and expiration -----------------------------------------------------------
    def abort_timed_out_transactions(self, now_ms: int) -> CoordinatorResult:
        """Fence and abort every ongoing transaction past its timeout
        (transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
        result = _EMPTY
        for timed_out in self.state.timed_out_transactions(now_ms):
            found = self.state.get(timed_out.transactional_id)
            metadata = found.metadata
            if (
                found.error_code
                or metadata is None
                or metadata.producer_id != timed_out.producer_id
                or metadata.pending_transition_in_progress
            ):
                continue
            fence = metadata.prepare_fence_producer_epoch()
            result += self._end_transaction(
                timed_out.transactional_id,
                fence.producer_id,
                fence.producer_epoch,
                False,
                False,
                self.state.transaction_version_level,
                lambda *_: None,
                now_ms,
            )
        return result

    def expire_transactional_ids(self, now_ms: int) -> CoordinatorResult:
        """Tombstones for ids idle past transactional.id.expiration.ms
        (transaction.remove.expired.transaction.cleanup.interval.ms)."""
        return self.state.expire_transactional_ids(now_ms)

    # -- DescribeTransactions / ListTransactions -------------------------------------------
    def handle_describe_transactions(
        self, transactional_id: str
    ) -> DescribeTransactionsResponse.TransactionState:
        """One DescribeTransactionsResponse.TransactionState."""
        entry = DescribeTransactionsResponse.TransactionState(transactional_id=transactional_id)
        if not self.active:
            entry.error_code = E.CoordinatorNotAvailableException.code
            return entry
        if not transactional_id:
            entry.error_code = _INVALID_REQUEST
            return entry
        found = self.state.get(transactional_id)
        metadata = found.metadata
        if found.error_code:
            entry.error_code = found.error_code
        elif metadata is None or metadata.state is _S.DEAD:
            entry.error_code = E.TransactionalIdNotFoundException.code
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(metadata.topic_partitions):
                by_topic.setdefault(topic, []).append(partition)
            entry.error_code = NONE
            entry.producer_id = metadata.producer_id
            entry.producer_epoch = metadata.producer_epoch
            entry.transaction_state = metadata.state.state_name
            entry.transaction_timeout_ms = metadata.txn_timeout_ms
            entry.transaction_start_time_ms = metadata.txn_start_timestamp
            entry.topics = [
                DescribeTransactionsResponse.TopicData(topic=t, partitions=ps)
                for t, ps in by_topic.items()
            ]
        return entry

    def handle_list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
        now_ms: int = 0,
    ) -> ListTransactionsResponse:
        """ListTransactionsResponse (before the API layer's ACL filtering)."""
        if not self.active:
            return ListTransactionsResponse(error_code=E.CoordinatorNotAvailableException.code)
        return self.state.list_transactions(
            state_filters, producer_id_filters, duration_filter_ms, transactional_id_pattern, now_ms
        )
