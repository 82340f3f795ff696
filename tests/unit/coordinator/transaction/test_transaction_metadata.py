"""TransactionState and TransactionMetadata transitions (metadata.py), after
Kafka's TransactionMetadataTest."""

import pytest

from kfast.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    TV_0,
    TV_2,
    IllegalStateError,
    TransactionMetadata,
    is_epoch_exhausted,
)
from kfast.coordinator.transaction.metadata import (
    TransactionState as S,
)
from kfast.coordinator.transaction.records import decode_key, decode_value
from kfast.protocol import errors as E

TP0, TP1 = ("t", 0), ("t", 1)


def metadata(
    state=S.EMPTY, epoch=5, last_epoch=-1, partitions=(), start=-1, tv=TV_0, producer_id=100
):
    return TransactionMetadata(
        "txn", producer_id, -1, -1, epoch, last_epoch, 60000, state, partitions, start, 1000, tv
    )


def transit_and_complete(md, transit):
    md.complete_transition_to(transit)
    return md


def test_state_table_is_kafkas():
    assert [s.id for s in S] == list(range(8))
    assert S.from_id(7) is S.PREPARE_EPOCH_FENCE and S.from_name("PrepareAbort") is S.PREPARE_ABORT
    assert S.from_name("Nope") is None
    with pytest.raises(IllegalStateError):
        S.from_id(8)
    assert S.PREPARE_ABORT.valid_previous_states == {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }
    assert S.PREPARE_COMMIT.valid_previous_states == {S.ONGOING}
    assert S.DEAD.valid_previous_states == {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_epoch_exhaustion_boundary():
    assert not is_epoch_exhausted(MAX_PRODUCER_EPOCH - 2)
    assert is_epoch_exhausted(MAX_PRODUCER_EPOCH - 1) and is_epoch_exhausted(MAX_PRODUCER_EPOCH)


def test_new_producer_gets_epoch_zero():
    md = metadata(epoch=-1)
    transit = md.prepare_increment_producer_epoch(30000, None, 2000)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (0, -1)
    md.complete_transition_to(transit)
    assert (md.state, md.producer_epoch, md.txn_timeout_ms, md.txn_last_update_timestamp) == (
        S.EMPTY,
        0,
        30000,
        2000,
    )


def test_kip360_expected_epoch_current_bumps_and_remembers_last():
    md = metadata(epoch=5)
    transit = md.prepare_increment_producer_epoch(60000, 5, 2000)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (6, 5)
    md.complete_transition_to(transit)
    # A retry with the epoch it held before the bump gets the same epoch.
    retry = md.prepare_increment_producer_epoch(60000, 5, 3000)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (6, 5)


def test_kip360_unknown_expected_epoch_is_fenced():
    md = metadata(epoch=5, last_epoch=4)
    with pytest.raises(E.ProducerFencedException):
        md.prepare_increment_producer_epoch(60000, 3, 2000)
    assert md.pending_state is None


def test_increment_on_exhausted_epoch_is_refused():
    md = metadata(epoch=MAX_PRODUCER_EPOCH - 1)
    with pytest.raises(IllegalStateError):
        md.prepare_increment_producer_epoch(60000, None, 2000)


def test_producer_id_rotation():
    md = metadata(epoch=MAX_PRODUCER_EPOCH - 1)
    transit = md.prepare_producer_id_rotation(200, 60000, 2000, record_last_epoch=True)
    assert (
        transit.producer_id,
        transit.producer_epoch,
        transit.last_producer_epoch,
        transit.prev_producer_id,
    ) == (200, 0, MAX_PRODUCER_EPOCH - 1, 100)
    md.complete_transition_to(transit)
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id) == (200, 0, 100)


def test_rotation_refused_while_transaction_pending():
    md = metadata(state=S.ONGOING, partitions=[TP0], start=10)
    with pytest.raises(IllegalStateError):
        md.prepare_producer_id_rotation(200, 60000, 2000, False)


def test_add_partitions_sets_start_time_once():
    md = metadata()
    md.complete_transition_to(md.prepare_add_partitions({TP0}, 2000, TV_0))
    assert (md.state, md.topic_partitions, md.txn_start_timestamp) == (S.ONGOING, {TP0}, 2000)
    md.complete_transition_to(md.prepare_add_partitions({TP1}, 3000, TV_0))
    assert (md.topic_partitions, md.txn_start_timestamp, md.txn_last_update_timestamp) == (
        {TP0, TP1},
        2000,
        3000,
    )


def test_pending_transition_blocks_another():
    md = metadata()
    md.prepare_add_partitions({TP0}, 2000, TV_0)
    assert md.pending_transition_in_progress
    with pytest.raises(IllegalStateError):
        md.prepare_add_partitions({TP1}, 2000, TV_0)


def test_invalid_previous_state_is_refused():
    md = metadata()
    with pytest.raises(IllegalStateError):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, 2000, False)
    assert md.pending_state is None


def test_commit_v0_keeps_epoch_and_complete():
    md = metadata(state=S.ONGOING, partitions=[TP0], start=1500)
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, 2000, False)
    assert transit.producer_epoch == 5
    md.complete_transition_to(transit)
    md.remove_partition(TP0)
    md.complete_transition_to(md.prepare_complete(3000))
    assert (md.state, md.producer_epoch, md.topic_partitions, md.txn_start_timestamp) == (
        S.COMPLETE_COMMIT,
        5,
        set(),
        1500,
    )


def test_commit_v2_bumps_epoch():
    md = metadata(state=S.ONGOING, partitions=[TP0], start=1500, tv=TV_2)
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, -1, 2000, False)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (6, 5)
    md.complete_transition_to(transit)
    md.complete_transition_to(md.prepare_complete(3000))
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_COMMIT, 100, 6)


def test_v2_epoch_overflow_moves_to_next_producer_id():
    md = metadata(
        state=S.ONGOING, epoch=MAX_PRODUCER_EPOCH - 1, partitions=[TP0], start=1500, tv=TV_2
    )
    md.complete_transition_to(md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 300, 2000, False))
    assert (md.producer_id, md.producer_epoch, md.next_producer_id) == (
        100,
        MAX_PRODUCER_EPOCH,
        300,
    )
    complete = md.prepare_complete(3000)
    assert (
        complete.producer_id,
        complete.producer_epoch,
        complete.last_producer_epoch,
        complete.next_producer_id,
        complete.prev_producer_id,
    ) == (300, 0, MAX_PRODUCER_EPOCH - 1, -1, 100)
    md.complete_transition_to(complete)
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id) == (300, 0, 100)


def test_v2_abort_from_empty_uses_abort_time_as_start():
    md = metadata(tv=TV_2)
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, -1, 2000, True)
    assert transit.txn_start_timestamp == 2000
    md.complete_transition_to(transit)
    md.complete_transition_to(md.prepare_complete(3000))
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 6)


def test_fence_bumps_once_and_not_after_failed_fence():
    md = metadata(state=S.ONGOING, partitions=[TP0], start=1500)
    assert md.prepare_fence_producer_epoch().producer_epoch == 6
    md.pending_state = None
    md.has_failed_epoch_fence = True
    assert md.prepare_fence_producer_epoch().producer_epoch == 5


def test_fence_never_passes_max():
    md = metadata(state=S.ONGOING, epoch=MAX_PRODUCER_EPOCH, partitions=[TP0], start=1500)
    assert md.prepare_fence_producer_epoch().producer_epoch == MAX_PRODUCER_EPOCH


def test_fence_state_is_never_installed():
    md = metadata(state=S.ONGOING, partitions=[TP0], start=1500)
    with pytest.raises(IllegalStateError):
        md.complete_transition_to(md.prepare_fence_producer_epoch())


def test_complete_transition_checks_pending_and_epoch():
    md = metadata()
    transit = md.prepare_add_partitions({TP0}, 2000, TV_0)
    with pytest.raises(IllegalStateError):
        md.complete_transition_to(transit._replace(producer_epoch=9))
    md.pending_state = None
    with pytest.raises(IllegalStateError):
        md.complete_transition_to(transit)


def test_dead_and_remove_partition_rules():
    md = metadata(epoch=-1)
    assert md.prepare_dead().txn_state is S.DEAD
    with pytest.raises(IllegalStateError):
        metadata(state=S.ONGOING, partitions=[TP0]).remove_partition(TP0)


def test_record_round_trip_through_the_log_value():
    md = metadata(state=S.ONGOING, partitions=[TP0, TP1, ("u", 3)], start=1500, tv=TV_2)
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 300, 2000, False)
    key, value = transit.record("txn", 2)
    assert decode_key(key) == "txn"
    loaded = TransactionMetadata.from_log_value("txn", decode_value(value))
    md.complete_transition_to(transit)
    assert loaded.persisted_view() == md.persisted_view()
    assert loaded.last_producer_epoch == -1  # not in the log, as in Kafka
    # Log version 0 drops the tagged ids.
    loaded0 = TransactionMetadata.from_log_value("txn", decode_value(transit.record("txn", 0)[1]))
    assert loaded0.persisted_view(0) == md.persisted_view(0)
    assert loaded0.next_producer_id == -1


def test_empty_record_has_no_partitions():
    md = metadata(epoch=-1)
    key, value = md.prepare_increment_producer_epoch(60000, None, 2000).record("txn", 1)
    assert decode_value(value).transaction_partitions is None
