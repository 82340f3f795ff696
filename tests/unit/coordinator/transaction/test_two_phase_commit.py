"""Two-phase commit participation (KIP-939) in the transaction coordinator:
InitProducerId with enable2Pc / keepPreparedTxn, and the timeout rule of a
two-phase commit transaction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.coordinator.transaction.metadata import (
    TWO_PHASE_COMMIT_TIMEOUT_MS,
)
from kfast.coordinator.transaction.metadata import (
    TransactionState as S,
)
from kfast.coordinator.transaction.records import decode_value
from kfast.protocol import errors as E

from .support import Harness

TP0 = ("orders", 0)
NONE = 0


@pytest.fixture
def h():
    return Harness(**{"transaction.two.phase.commit.enable": True})


def begin_2pc(h, tid="txn", now_ms=0, timeout_ms=60000):
    result = h.init(tid, now_ms, timeout_ms=timeout_ms, enable_two_phase_commit=True)
    assert result.error_code == NONE
    assert h.add(tid, result.producer_id, result.producer_epoch, [TP0], now_ms, 2) == NONE
    return result.producer_id, result.producer_epoch


def test_refused_while_the_broker_setting_is_false():
    h = Harness()
    assert (
        h.init("txn", enable_two_phase_commit=True).error_code
        == E.TransactionalIdAuthorizationException.code
    )
    assert h.metadata("txn") is None  # nothing written


def test_keep_prepared_txn_is_unsupported(h):
    begin_2pc(h)
    answer = h.init("txn", enable_two_phase_commit=True, keep_prepared_txn=True)
    assert answer.error_code == E.UnsupportedVersionException.code
    assert h.metadata("txn").state is S.ONGOING  # the transaction is untouched


def test_two_phase_commit_transaction_never_times_out(h):
    begin_2pc(h, "2pc", now_ms=1000)
    plain = h.init("plain", 1000)
    assert h.add("plain", plain.producer_id, plain.producer_epoch, [TP0], 1000, 2) == NONE
    # A plain one times out after its 60 s; the 2PC one not even after years.
    h.run(h.coordinator.abort_timed_out_transactions(10**13))
    [markers] = h.markers
    assert markers.transactional_id == "plain"
    h.write_markers()
    assert h.metadata("plain").state is S.COMPLETE_ABORT
    assert h.metadata("2pc").state is S.ONGOING


def test_the_mark_is_the_stored_timeout_and_survives_replay(h):
    begin_2pc(h, timeout_ms=5)
    metadata = h.metadata("txn")
    assert metadata.txn_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS == 2**31 - 1
    assert metadata.is_distributed_two_phase_commit_txn
    index = h.coordinator.state.partition_for("txn")
    assert decode_value(h.log[index][-1][1]).transaction_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS
    replayed = h.replayed()
    replayed.complete_load(index, 1, 0)
    again = replayed.state.get("txn").metadata
    assert again.is_distributed_two_phase_commit_txn and again.state is S.ONGOING
    assert replayed.abort_timed_out_transactions(10**13).appends == ()


def test_the_timeout_of_a_two_phase_commit_producer_is_not_checked(h):
    # transaction.max.timeout.ms is 900000: a plain producer asking more is refused.
    assert h.init("plain", timeout_ms=10**9).error_code == E.InvalidTxnTimeoutException.code
    assert h.init("2pc", timeout_ms=10**9, enable_two_phase_commit=True).error_code == NONE


def test_without_enable2pc_an_ongoing_transaction_is_aborted_and_the_mark_goes(h):
    producer_id, epoch = begin_2pc(h)
    assert h.init("txn").error_code == E.ConcurrentTransactionsException.code
    [markers] = h.markers
    assert (markers.committed, markers.producer_id) == (False, producer_id)
    h.write_markers()
    answer = h.init("txn")
    assert answer.error_code == NONE and answer.producer_epoch > epoch
    assert not h.metadata("txn").is_distributed_two_phase_commit_txn
    assert h.metadata("txn").txn_timeout_ms == 60000


def test_commit_of_a_two_phase_commit_transaction(h):
    producer_id, epoch = begin_2pc(h)
    assert h.end("txn", producer_id, epoch, True, tv=2).error_code == NONE
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_COMMIT
    assert h.metadata("txn").is_distributed_two_phase_commit_txn


@settings(max_examples=30, deadline=None)
@given(
    start=st.integers(0, 10**12),
    elapsed=st.integers(0, 10**13),
    timeout=st.integers(1, 900000),
    two_phase=st.booleans(),
)
def test_timed_out_exactly_when_not_two_phase_and_past_the_timeout(
    start, elapsed, timeout, two_phase
):
    h = Harness(**{"transaction.two.phase.commit.enable": True})
    result = h.init("txn", start, timeout_ms=timeout, enable_two_phase_commit=two_phase)
    assert h.add("txn", result.producer_id, result.producer_epoch, [TP0], start, 2) == NONE
    timed_out = [
        t.transactional_id for t in h.coordinator.state.timed_out_transactions(start + elapsed)
    ]
    assert timed_out == ([] if two_phase or elapsed <= timeout else ["txn"])
