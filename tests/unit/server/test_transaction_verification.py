"""KIP-890's verification state on a real partition log: a guard per
producer until its transactional write (or marker) is appended; the append
needs the guard still held; pipelined later sequences wait for the lowest;
a newer epoch restarts the count."""

from __future__ import annotations

import pytest

from kfast.config import LogConfig
from kfast.protocol import errors as E
from kfast.records import CONTROL_TYPE_ABORT, RecordBatchBuilder, build_control_batch
from kfast.server.transaction_verification import (
    answer,
    check_verified,
    clear_after_append,
    needs_verification,
)
from kfast.storage.log import Log
from kfast.storage.producer_state import ORIGIN_COORDINATOR

PID = 42


def txn_batch(sequence: int, epoch: int = 0) -> bytes:
    builder = RecordBatchBuilder(
        0, producer_id=PID, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
    )
    builder.append(1, None, b"v")
    return bytes(builder.build())


@pytest.fixture
def log(tmp_path):
    found = Log(str(tmp_path / "t-0"), LogConfig())
    yield found
    found.close()


def append(log, records, guard):
    check_verified(log, records, guard)
    log.append_as_leader(records, 0)
    clear_after_append(log, records)


def test_the_first_write_needs_the_guard_the_next_ones_do_not(log):
    state = log.producer_state
    guard = state.maybe_create_verification_state(PID, 0, 0, now_ms=1).guard
    with pytest.raises(E.InvalidTxnStateException):
        append(log, txn_batch(0), None)  # no verification
    append(log, txn_batch(0), guard)
    assert state.has_ongoing_transaction(PID) and PID not in state.verification_states
    append(log, txn_batch(1), None)  # ongoing: no question asked


def test_a_marker_in_between_makes_the_verified_guard_stale(log):
    state = log.producer_state
    guard = state.maybe_create_verification_state(PID, 0, 0, now_ms=1).guard
    marker = bytes(build_control_batch(CONTROL_TYPE_ABORT, PID, 0, 0, 1))
    log.append_as_leader(marker, 0, ORIGIN_COORDINATOR)
    clear_after_append(log, marker)
    with pytest.raises(E.InvalidTxnStateException):
        append(log, txn_batch(0), guard)
    # A new verification hands out a new guard.
    assert state.maybe_create_verification_state(PID, 0, 0, now_ms=2).guard is not guard


def test_pipelined_later_sequences_wait_for_the_lowest(log):
    state = log.producer_state
    guard = state.maybe_create_verification_state(PID, 5, 0, now_ms=1).guard
    assert state.maybe_create_verification_state(PID, 3, 0, now_ms=1).guard is guard
    with pytest.raises(E.OutOfOrderSequenceException):
        check_verified(log, txn_batch(5), guard)
    check_verified(log, txn_batch(3), guard)
    # A newer epoch starts the count again.
    state.maybe_create_verification_state(PID, 9, 1, now_ms=1)
    check_verified(log, txn_batch(9, epoch=1), guard)


def test_unanswered_verifications_expire_with_the_producers(log):
    state = log.producer_state
    state.maybe_create_verification_state(PID, 0, 0, now_ms=1)
    state.remove_expired_producers(1 + state.producer_id_expiration_ms)
    assert PID not in state.verification_states


def test_version_2_next_transaction_is_verified_while_the_last_awaits_its_marker(log):
    """Transaction version 2: a batch one epoch ahead starts the next
    transaction even though this partition still holds the previous one
    open; it must be verified (added), not slipped into the open one."""
    state = log.producer_state
    guard = state.maybe_create_verification_state(PID, 0, 0, now_ms=1).guard
    append(log, txn_batch(0), guard)
    assert state.has_ongoing_transaction(PID, 0)
    assert not state.has_ongoing_transaction(PID, 1)
    assert needs_verification(state, PID, 1) and not needs_verification(state, PID, 0)
    with pytest.raises(E.InvalidTxnStateException):
        append(log, txn_batch(0, epoch=1), None)
    # The bumped marker ends the transaction; a straggler of it is left to
    # the append, which fences it by the marker's epoch.
    marker = bytes(build_control_batch(CONTROL_TYPE_ABORT, PID, 1, 0, 1))
    log.append_as_leader(marker, 0, ORIGIN_COORDINATOR)
    clear_after_append(log, marker)
    assert not needs_verification(state, PID, 0)
    with pytest.raises(E.InvalidProducerEpochException):
        append(log, txn_batch(1, epoch=0), None)
    guard = state.maybe_create_verification_state(PID, 0, 1, now_ms=2).guard
    append(log, txn_batch(0, epoch=1), guard)
    assert state.has_ongoing_transaction(PID, 1)


def test_coordinator_answers_as_produce_errors():
    abortable = E.TransactionAbortableException.code
    assert answer(abortable, 9)[0] == E.InvalidTxnStateException.code
    assert answer(abortable, 11)[0] == abortable
    assert answer(E.ProducerFencedException.code, 9)[0] == E.InvalidProducerEpochException.code
    assert answer(E.NotCoordinatorException.code, 9)[0] == E.NotEnoughReplicasException.code
    assert answer(E.InvalidProducerEpochException.code, 9) == (
        E.InvalidProducerEpochException.code,
        None,
    )
