"""TransactionCoordinator handlers, error paths and background work, after
Kafka's TransactionCoordinatorTest / TransactionStateManagerTest."""

import pytest

from kfast.coordinator.group.records import partition_for
from kfast.coordinator.transaction.metadata import MAX_PRODUCER_EPOCH
from kfast.coordinator.transaction.metadata import TransactionState as S
from kfast.coordinator.transaction.results import EndTxnResult, InitProducerIdResult
from kfast.protocol import errors as E

from .support import FIRST_PRODUCER_ID as PID
from .support import Harness

NONE = 0
TP0, TP1 = ("orders", 0), ("orders", 1)


@pytest.fixture
def h():
    return Harness()


def begin(h, tid="txn", tv=0, partitions=(TP0,), now_ms=0):
    result = h.init(tid, now_ms)
    assert h.add(tid, result.producer_id, result.producer_epoch, partitions, now_ms, tv) == NONE
    return result.producer_id, result.producer_epoch


# -- InitProducerId ------------------------------------------------------------------------
def test_null_transactional_id_gets_a_fresh_producer_id(h):
    assert h.init(None) == InitProducerIdResult(NONE, PID, 0)
    assert h.init(None) == InitProducerIdResult(NONE, PID + 1, 0)
    assert all(not records for records in h.log.values())


@pytest.mark.parametrize(
    "kwargs, code",
    [
        (dict(transactional_id=""), E.InvalidRequestException.code),
        (dict(transactional_id="t", producer_id=5), E.InvalidRequestException.code),
        (dict(transactional_id="t", timeout_ms=900001), E.InvalidTxnTimeoutException.code),
        (dict(transactional_id="t", timeout_ms=0), E.InvalidTxnTimeoutException.code),
    ],
)
def test_init_rejects_bad_requests(h, kwargs, code):
    assert h.init(**kwargs) == InitProducerIdResult(code)


def test_init_answers_not_coordinator_and_load_in_progress(h):
    index = h.coordinator.state.partition_for("t")
    h.coordinator.unload_partition(index)
    assert h.init("t").error_code == E.NotCoordinatorException.code
    h.coordinator.load_partition(index, 1)
    assert h.init("t").error_code == E.CoordinatorLoadInProgressException.code


def test_init_passes_the_allocators_error_on(h):
    h.allocator_error = E.CoordinatorLoadInProgressException()
    assert h.init("t").error_code == E.CoordinatorLoadInProgressException.code
    assert h.init(None).error_code == E.CoordinatorLoadInProgressException.code


def test_init_new_and_again_bumps_the_epoch(h):
    assert h.init("t", now_ms=5) == InitProducerIdResult(NONE, PID, 0)
    assert h.init("t", now_ms=6) == InitProducerIdResult(NONE, PID, 1)
    md = h.metadata("t")
    assert (md.state, md.producer_epoch, md.txn_last_update_timestamp) == (S.EMPTY, 1, 6)
    assert len(h.log[h.coordinator.state.partition_for("t")]) == 2


def test_init_with_ongoing_transaction_aborts_it_first(h):
    # shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState
    producer_id, epoch = begin(h, tv=0)
    assert h.init("txn") == InitProducerIdResult(E.ConcurrentTransactionsException.code)
    [markers] = h.markers
    assert (markers.committed, markers.producer_id, markers.producer_epoch) == (
        False,
        producer_id,
        epoch + 1,
    )
    assert h.metadata("txn").state is S.PREPARE_ABORT
    # While the markers are being written the client keeps retrying.
    assert h.init("txn").error_code == E.ConcurrentTransactionsException.code
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_ABORT
    assert h.init("txn") == InitProducerIdResult(NONE, producer_id, epoch + 2)


def test_init_with_ongoing_v2_transaction_bumps_once(h):
    # KAFKA-19367: the abort's own bump is the fence.
    producer_id, epoch = begin(h, tv=2)
    assert h.init("txn").error_code == E.ConcurrentTransactionsException.code
    assert h.markers[0].producer_epoch == epoch + 1
    h.write_markers()
    assert h.init("txn") == InitProducerIdResult(NONE, producer_id, epoch + 2)


def test_init_while_a_transition_is_pending(h):
    producer_id, epoch = begin(h)
    h.end("txn", producer_id, epoch, True)
    assert h.metadata("txn").pending_state is S.COMPLETE_COMMIT  # markers under way
    assert h.init("txn").error_code == E.ConcurrentTransactionsException.code


def test_kip360_init_with_current_epoch_and_its_retry(h):
    assert h.init("t").producer_epoch == 0
    assert h.init("t", producer_id=PID, producer_epoch=0) == InitProducerIdResult(NONE, PID, 1)
    # The response was lost: the retry names epoch 0 again and gets epoch 1.
    assert h.init("t", producer_id=PID, producer_epoch=0) == InitProducerIdResult(NONE, PID, 1)


def test_kip360_init_with_unknown_producer_or_epoch_is_fenced(h):
    h.init("t")
    h.init("t")
    assert (
        h.init("t", producer_id=PID + 7, producer_epoch=1).error_code
        == E.ProducerFencedException.code
    )
    # Epoch 0 is neither current (1) nor the last (-1 after a plain bump).
    assert (
        h.init("t", producer_id=PID, producer_epoch=0).error_code == E.ProducerFencedException.code
    )


def test_init_on_exhausted_epoch_rotates_the_producer_id(h):
    h.init("t")
    h.metadata("t").producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert h.init("t") == InitProducerIdResult(NONE, PID + 1, 0)
    md = h.metadata("t")
    assert (md.prev_producer_id, md.last_producer_epoch) == (PID, -1)
    # A KIP-360 producer still on the old id at the exhausted epoch is a retry.
    h.metadata("t").producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert h.init(
        "t", producer_id=PID + 1, producer_epoch=MAX_PRODUCER_EPOCH - 1
    ) == InitProducerIdResult(NONE, PID + 2, 0)
    assert h.init(
        "t", producer_id=PID + 1, producer_epoch=MAX_PRODUCER_EPOCH - 1
    ) == InitProducerIdResult(NONE, PID + 2, 0)


@pytest.mark.parametrize(
    "append_error, code",
    [
        (E.NotEnoughReplicasException.code, E.CoordinatorNotAvailableException.code),
        (E.TimeoutException.code, E.CoordinatorNotAvailableException.code),
        (E.NotLeaderOrFollowerException.code, E.NotCoordinatorException.code),
        (E.RecordTooLargeException.code, E.UnknownServerException.code),
    ],
)
def test_init_append_errors_are_mapped_and_leave_no_pending_state(h, append_error, code):
    h.append_errors.append(append_error)
    assert h.init("t").error_code == code
    md = h.metadata("t")
    assert (md.pending_state, md.producer_epoch) == (None, -1)
    assert h.init("t") == InitProducerIdResult(NONE, PID, 0)


def test_failed_fence_does_not_burn_another_epoch(h):
    # KAFKA-9666 (transaction version 0/1 fencing).
    h.coordinator.state.transaction_version_level = 0
    producer_id, epoch = begin(h)
    h.append_errors.append(E.NotEnoughReplicasException.code)
    assert h.init("txn").error_code == E.CoordinatorNotAvailableException.code
    md = h.metadata("txn")
    assert (md.producer_epoch, md.has_failed_epoch_fence, md.state) == (epoch + 1, True, S.ONGOING)
    assert h.init("txn").error_code == E.ConcurrentTransactionsException.code
    assert h.markers[0].producer_epoch == epoch + 1


# -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
def test_add_partitions_errors(h):
    assert h.add("", PID, 0, [TP0]) == E.InvalidRequestException.code
    assert h.add("nobody", PID, 0, [TP0]) == E.InvalidPidMappingException.code
    h.init("t")
    assert h.add("t", PID + 1, 0, [TP0]) == E.InvalidPidMappingException.code
    assert h.add("t", PID, 3, [TP0]) == E.ProducerFencedException.code
    assert h.add("t", PID, 0, [TP0]) == NONE
    written = len(h.log[h.coordinator.state.partition_for("t")])
    assert h.add("t", PID, 0, [TP0]) == NONE  # already in: nothing written
    assert len(h.log[h.coordinator.state.partition_for("t")]) == written
    h.end("t", PID, 0, True)
    assert h.add("t", PID, 0, [TP1]) == E.ConcurrentTransactionsException.code


def test_add_partitions_starts_the_transaction(h):
    h.init("t", now_ms=1)
    h.add("t", PID, 0, [TP0], now_ms=10)
    h.add("t", PID, 0, [TP1], now_ms=20)
    md = h.metadata("t")
    assert (md.state, md.topic_partitions, md.txn_start_timestamp) == (S.ONGOING, {TP0, TP1}, 10)


def test_add_partitions_append_failure_keeps_the_state(h):
    h.init("t")
    h.append_errors.append(E.NotLeaderOrFollowerException.code)
    assert h.add("t", PID, 0, [TP0]) == E.NotCoordinatorException.code
    md = h.metadata("t")
    assert (md.state, md.pending_state, md.topic_partitions) == (S.EMPTY, None, set())


def test_verify_partitions(h):
    begin(h, "t")
    verify = h.coordinator.handle_verify_partitions
    assert verify("t", PID, 0, [TP0, TP1]) == {TP0: NONE, TP1: E.TransactionAbortableException.code}
    assert verify("t", PID, 1, [TP0]) == {TP0: E.ProducerFencedException.code}
    assert verify("t", PID + 1, 0, [TP0]) == {TP0: E.InvalidPidMappingException.code}
    assert verify("", PID, 0, [TP0]) == {TP0: E.InvalidRequestException.code}
    h.end("t", PID, 0, True)
    assert verify("t", PID, 0, [TP0]) == {TP0: E.ConcurrentTransactionsException.code}


def test_add_offsets_adds_the_groups_offsets_partition(h):
    h.init("t")
    assert h.run(h.coordinator.handle_add_offsets("t", PID, 0, "my-group", 0)) == NONE
    assert h.metadata("t").topic_partitions == {
        ("__consumer_offsets", partition_for("my-group", 50))
    }


# -- EndTxn --------------------------------------------------------------------------------
def test_end_v0_commit_and_its_retries(h):
    producer_id, epoch = begin(h)
    assert h.end("txn", producer_id, epoch, True) == EndTxnResult(NONE)
    [markers] = h.markers
    assert (
        markers.committed,
        markers.producer_epoch,
        markers.partitions,
        markers.coordinator_epoch,
        markers.transaction_version,
    ) == (True, epoch, {TP0}, 0, 0)
    # The completion is pending while markers are written: any end waits.
    assert (
        h.end("txn", producer_id, epoch, True).error_code == E.ConcurrentTransactionsException.code
    )
    assert (
        h.end("txn", producer_id, epoch, False).error_code == E.ConcurrentTransactionsException.code
    )
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_COMMIT
    assert h.end("txn", producer_id, epoch, True) == EndTxnResult(NONE)  # retry
    assert h.end("txn", producer_id, epoch, False).error_code == E.InvalidTxnStateException.code


def test_end_v0_errors(h):
    assert h.end("", PID, 0, True).error_code == E.InvalidRequestException.code
    assert h.end("nobody", PID, 0, True).error_code == E.InvalidPidMappingException.code
    h.init("t")
    assert h.end("t", PID, 0, True).error_code == E.InvalidTxnStateException.code  # Empty
    h.add("t", PID, 0, [TP0])
    assert h.end("t", PID + 1, 0, True).error_code == E.InvalidPidMappingException.code
    assert h.end("t", PID, 1, True).error_code == E.ProducerFencedException.code
    h.append_errors.append(E.NotEnoughReplicasException.code)
    assert h.end("t", PID, 0, True).error_code == E.CoordinatorNotAvailableException.code
    assert (h.metadata("t").state, h.metadata("t").pending_state) == (S.ONGOING, None)


def test_end_v2_bumps_and_answers_the_new_epoch(h):
    producer_id, epoch = begin(h, tv=2)
    assert h.end("txn", producer_id, epoch, True, tv=2) == EndTxnResult(
        NONE, producer_id, epoch + 1
    )
    assert h.markers[0].producer_epoch == epoch + 1 and h.markers[0].transaction_version == 2
    # Retry while the markers are written: CONCURRENT_TRANSACTIONS.
    assert (
        h.end("txn", producer_id, epoch, True, tv=2).error_code
        == E.ConcurrentTransactionsException.code
    )
    h.write_markers()
    # Retry after: NONE with the current id and epoch.
    assert h.end("txn", producer_id, epoch, True, tv=2) == EndTxnResult(
        NONE, producer_id, epoch + 1
    )
    assert (
        h.end("txn", producer_id, epoch, False, tv=2).error_code == E.InvalidTxnStateException.code
    )
    # The current epoch committing again: no transaction.
    assert (
        h.end("txn", producer_id, epoch + 1, True, tv=2).error_code
        == E.InvalidTxnStateException.code
    )
    assert (
        h.end("txn", producer_id, epoch + 2, True, tv=2).error_code
        == E.ProducerFencedException.code
    )


def test_end_v2_abort_without_partitions_completes_at_once(h):
    h.init("t")
    assert h.end("t", PID, 0, False, tv=2) == EndTxnResult(NONE, PID, 1)
    assert h.markers == []
    md = h.metadata("t")
    assert (md.state, md.producer_epoch, md.pending_state) == (S.COMPLETE_ABORT, 1, None)
    assert h.end("t", PID, 0, False, tv=2) == EndTxnResult(NONE, PID, 1)  # retry
    assert h.end("t", PID, 0, True, tv=2).error_code == E.InvalidTxnStateException.code
    assert h.end("t", PID, 1, False, tv=2) == EndTxnResult(NONE, PID, 2)  # next abort


def test_end_v2_from_empty_with_a_stale_epoch_is_fenced(h):
    h.init("t")
    h.init("t")
    assert h.end("t", PID, 0, False, tv=2).error_code == E.ProducerFencedException.code
    assert h.end("t", PID, 1, True, tv=2).error_code == E.InvalidTxnStateException.code


def test_end_v2_epoch_overflow_moves_to_the_next_producer_id(h):
    # KAFKA-18660: the client continues with the new id at epoch 0.
    h.init("t")
    h.metadata("t").producer_epoch = MAX_PRODUCER_EPOCH - 1
    h.add("t", PID, MAX_PRODUCER_EPOCH - 1, [TP0], tv=2)
    assert h.end("t", PID, MAX_PRODUCER_EPOCH - 1, True, tv=2) == EndTxnResult(NONE, PID + 1, 0)
    [markers] = h.markers
    assert (markers.producer_id, markers.producer_epoch) == (PID, MAX_PRODUCER_EPOCH)
    h.write_markers()
    md = h.metadata("t")
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id) == (PID + 1, 0, PID)
    # The retry on the old id is recognised.
    assert h.end("t", PID, MAX_PRODUCER_EPOCH - 1, True, tv=2) == EndTxnResult(NONE, PID + 1, 0)


def test_add_partitions_during_overflow_completion_is_concurrent(h):
    h.init("t")
    h.metadata("t").producer_epoch = MAX_PRODUCER_EPOCH - 1
    h.add("t", PID, MAX_PRODUCER_EPOCH - 1, [TP0], tv=2)
    h.end("t", PID, MAX_PRODUCER_EPOCH - 1, True, tv=2)
    # The client already uses the next id, which is only pending.
    assert h.add("t", PID + 1, 0, [TP1], tv=2) == E.ConcurrentTransactionsException.code


def test_v2_partitions_added_by_their_leaders_start_each_transaction(h):
    """Transaction version 2: no AddPartitionsToTxn from the client; the
    partition leader's add (a Produce v12 or TxnOffsetCommit v5) opens the
    next transaction at the epoch EndTxn v5 answered."""
    h.init("t", now_ms=1)
    assert h.add("t", PID, 0, [TP0], now_ms=2, tv=2) == NONE
    md = h.metadata("t")
    assert (md.state, md.txn_start_timestamp, md.client_transaction_version) == (S.ONGOING, 2, 2)
    assert h.add("t", PID, 0, [TP0], now_ms=3, tv=2) == NONE  # already in: no write
    assert h.end("t", PID, 0, True, tv=2) == EndTxnResult(NONE, PID, 1)
    # Until the markers are written the next transaction must wait: its
    # first write would otherwise join the one being committed.
    assert h.add("t", PID, 1, [TP1], tv=2) == E.ConcurrentTransactionsException.code
    h.write_markers()
    # A write of the ended transaction (the old epoch) is fenced.
    assert h.add("t", PID, 0, [TP1], tv=2) == E.ProducerFencedException.code
    assert h.add("t", PID, 1, [TP1], now_ms=9, tv=2) == NONE
    md = h.metadata("t")
    assert (md.state, md.producer_epoch, md.topic_partitions, md.txn_start_timestamp) == (
        S.ONGOING,
        1,
        {TP1},
        9,
    )
    assert h.end("t", PID, 1, False, tv=2) == EndTxnResult(NONE, PID, 2)
    h.write_markers()
    assert (h.metadata("t").state, h.metadata("t").producer_epoch) == (S.COMPLETE_ABORT, 2)
    # The log holds version 2 and the bumped epochs: a reload agrees.
    other = h.replayed()
    replayed = other.state.loading[other.state.partition_for("t")].transactions["t"]
    assert replayed.persisted_view() == h.metadata("t").persisted_view()
    assert replayed.client_transaction_version == 2


def test_v2_verify_only_still_answers_per_partition(h):
    """A version 1 write (Produce v11) on a version 2 cluster: verified, not added."""
    h.init("t")
    h.add("t", PID, 0, [TP0], tv=2)
    assert h.coordinator.handle_verify_partitions("t", PID, 0, [TP0, TP1]) == {
        TP0: NONE,
        TP1: E.TransactionAbortableException.code,
    }
    assert h.metadata("t").topic_partitions == {TP0}


# -- markers -------------------------------------------------------------------------------
def test_completion_waits_for_every_partition(h):
    producer_id, epoch = begin(h, partitions=(TP0, TP1))
    h.end("txn", producer_id, epoch, True)
    h.write_markers(only=[TP0])
    assert (h.metadata("txn").state, h.metadata("txn").topic_partitions) == (
        S.PREPARE_COMMIT,
        {TP1},
    )
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_COMMIT


def test_cancelled_or_stale_markers_complete_nothing(h):
    producer_id, epoch = begin(h)
    h.end("txn", producer_id, epoch, True)
    [markers] = h.markers
    h.coordinator.cancel_markers(markers)
    assert h.run(h.coordinator.complete_markers(markers, markers.partitions, 0)) is None
    assert h.metadata("txn").state is S.PREPARE_COMMIT


def test_completion_append_is_retried_when_unavailable(h):
    producer_id, epoch = begin(h)
    h.end("txn", producer_id, epoch, True)
    h.append_errors.append(E.NotEnoughReplicasException.code)
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_COMMIT


def test_load_resends_markers_of_decided_transactions(h):
    producer_id, epoch = begin(h, partitions=(TP0, TP1))
    h.end("txn", producer_id, epoch, True)
    h.markers.clear()  # the coordinator dies before sending
    index = h.coordinator.state.partition_for("txn")
    records = list(h.log[index])
    h.coordinator.unload_partition(index)
    h.coordinator.load_partition(index, 5)
    for key, value in records:
        h.coordinator.replay(key, value)
    assert h.run(h.coordinator.complete_load(index, 5, 100)) is None
    [markers] = h.markers
    assert (markers.coordinator_epoch, markers.partitions, markers.committed) == (
        5,
        {TP0, TP1},
        True,
    )
    h.write_markers(now_ms=100)
    assert h.metadata("txn").state is S.COMPLETE_COMMIT


def test_markers_of_a_previous_coordinator_epoch_are_ignored(h):
    producer_id, epoch = begin(h)
    h.end("txn", producer_id, epoch, True)
    [old] = h.markers
    index = h.coordinator.state.partition_for("txn")
    records = list(h.log[index])
    h.coordinator.load_partition(index, 9)
    for key, value in records:
        h.coordinator.replay(key, value)
    h.markers.clear()
    h.run(h.coordinator.complete_load(index, 9, 0))
    assert h.run(h.coordinator.complete_markers(old, old.partitions, 0)) is None
    assert h.metadata("txn").state is S.PREPARE_COMMIT
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_COMMIT


# -- timeouts and expiration ---------------------------------------------------------------
def test_timed_out_transaction_is_fenced_and_aborted(h):
    producer_id, epoch = begin(h, now_ms=1000)
    assert h.run(h.coordinator.abort_timed_out_transactions(61000)) is None  # not yet
    assert h.markers == []
    h.run(h.coordinator.abort_timed_out_transactions(61001))
    [markers] = h.markers
    assert (markers.committed, markers.producer_epoch) == (False, epoch + 1)
    h.write_markers()
    assert h.metadata("txn").state is S.COMPLETE_ABORT
    # The old producer is fenced.
    assert h.end("txn", producer_id, epoch, True).error_code == E.ProducerFencedException.code
    assert h.add("txn", producer_id, epoch, [TP1]) == E.ProducerFencedException.code


def test_idle_transactional_ids_expire(h):
    h.init("idle", now_ms=0)
    begin(h, "busy", now_ms=0)
    expiration = 7 * 24 * 3600 * 1000
    h.run(h.coordinator.expire_transactional_ids(expiration - 1))
    assert h.metadata("idle") is not None
    h.run(h.coordinator.expire_transactional_ids(expiration))
    assert h.metadata("idle") is None and h.metadata("busy") is not None
    index = h.coordinator.state.partition_for("idle")
    assert h.log[index][-1][1] is None  # the tombstone
    assert h.replayed().state.get("idle").metadata is None


def test_failed_tombstone_keeps_the_id(h):
    h.init("idle")
    h.append_errors.append(E.NotEnoughReplicasException.code)
    h.run(h.coordinator.expire_transactional_ids(10**12))
    md = h.metadata("idle")
    assert md is not None and md.pending_state is None


# -- DescribeTransactions / ListTransactions -----------------------------------------------
def test_describe(h):
    describe = h.coordinator.handle_describe_transactions
    assert describe("nobody").error_code == E.TransactionalIdNotFoundException.code
    assert describe("").error_code == E.InvalidRequestException.code
    begin(h, "t", partitions=(TP1, TP0, ("a", 3)), now_ms=7)
    entry = describe("t")
    assert (
        entry.error_code,
        entry.producer_id,
        entry.producer_epoch,
        entry.transaction_state,
        entry.transaction_timeout_ms,
        entry.transaction_start_time_ms,
    ) == (NONE, PID, 0, "Ongoing", 60000, 7)
    assert [(t.topic, t.partitions) for t in entry.topics] == [("a", [3]), ("orders", [0, 1])]
    h.coordinator.unload_partition(h.coordinator.state.partition_for("t"))
    assert describe("t").error_code == E.NotCoordinatorException.code


def test_list_filters(h):
    begin(h, "orders-1", now_ms=0)
    h.init("orders-2", now_ms=0)
    h.init("billing", now_ms=0)
    lst = h.coordinator.handle_list_transactions

    def ids(response):
        assert response.error_code == NONE
        return sorted(s.transactional_id for s in response.transaction_states)

    assert ids(lst()) == ["billing", "orders-1", "orders-2"]
    assert ids(lst(state_filters=["Ongoing"])) == ["orders-1"]
    assert ids(lst(producer_id_filters=[PID + 1])) == ["orders-2"]
    assert ids(lst(transactional_id_pattern="orders-.*")) == ["orders-1", "orders-2"]
    assert ids(lst(transactional_id_pattern="orders")) == []  # whole-id match
    # Duration: only transactions running longer than the filter (start -1
    # for ids with no transaction counts from the epoch, as in Kafka).
    assert "orders-1" in ids(lst(duration_filter_ms=10, now_ms=11))
    assert "orders-1" not in ids(lst(duration_filter_ms=10, now_ms=10))
    response = lst(state_filters=["Ongoing", "Sleeping"])
    assert response.unknown_state_filters == ["Sleeping"] and ids(response) == ["orders-1"]
    assert lst(transactional_id_pattern="(").error_code == E.InvalidRegularExpression.code
    h.coordinator.load_partition(0, 3)
    assert lst().error_code == E.CoordinatorLoadInProgressException.code


def test_replay_rebuilds_what_was_written(h):
    begin(h, "a", tv=2)
    h.end("a", PID, 0, True, tv=2)
    h.write_markers()
    begin(h, "b")
    h.init("c")
    other = h.replayed()
    for tid in ("a", "b", "c"):
        assert other.state.get(tid).error_code == E.CoordinatorLoadInProgressException.code
    for index in range(4):
        other.complete_load(index, 1, 0)
    for tid in ("a", "b", "c"):
        assert other.state.get(tid).metadata.persisted_view() == h.metadata(tid).persisted_view()
