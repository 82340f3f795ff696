"""The offset/epoch rules every ReplicatedLog shares, run against each
implementation (``make_log``: MemoryReplicatedLog and FileReplicatedLog, see
conftest.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfast.raft.log import (
    DIVERGING,
    SNAPSHOT,
    VALID,
    Batch,
    OffsetAndEpoch,
    ReplicatedLog,
    truncation_offset,
    validate_offset_and_epoch,
)
from kfast.raft.snapshots import snapshot_bytes

from .conftest import JsonSerde


def log_with(make_log, *epochs_and_sizes) -> ReplicatedLog:
    log = make_log()
    for epoch, size in epochs_and_sizes:
        log.append_as_leader([f"r{log.end_offset + i}" for i in range(size)], epoch)
    return log


def all_batches(log) -> tuple[Batch, ...]:
    return log.read(log.start_offset, 1 << 30)


def snapshot_data(records, epoch: int) -> bytes:
    """A whole snapshot file (what a FileReplicatedLog accepts)."""
    return snapshot_bytes(records, epoch, JsonSerde.encode)


def test_end_offset_for_epoch_is_the_start_of_the_next_epoch(make_log):
    log = log_with(make_log, (1, 2), (1, 1), (3, 4), (5, 1))  # epochs 1@0, 3@3, 5@7; end 8
    assert log.epochs == [(1, 0), (3, 3), (5, 7)]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)  # largest epoch <= 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(7, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(8, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(8, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)


def test_validate_offset_and_epoch(make_log):
    leader = log_with(make_log, (1, 2), (3, 4))  # 1@0..1, 3@2..5
    assert validate_offset_and_epoch(leader, 0, 0).kind == VALID
    assert validate_offset_and_epoch(leader, 2, 1).kind == VALID
    assert validate_offset_and_epoch(leader, 6, 3).kind == VALID
    # A replica that wrote offsets 2.. in epoch 2, which this log never had.
    assert validate_offset_and_epoch(leader, 4, 2) == (DIVERGING, OffsetAndEpoch(2, 1))
    # A replica ahead of the leader within an epoch.
    assert validate_offset_and_epoch(leader, 3, 1) == (DIVERGING, OffsetAndEpoch(2, 1))


def test_a_diverging_follower_truncates_to_where_the_logs_agree(make_log):
    follower = log_with(make_log, (1, 2), (2, 3))  # 1@0..1, 2@2..4
    leader = log_with(make_log, (1, 2), (3, 1))
    verdict = validate_offset_and_epoch(leader, follower.end_offset, follower.last_fetched_epoch)
    assert verdict.kind == DIVERGING
    offset = truncation_offset(follower, verdict.offset_and_epoch)
    assert offset == 2
    follower.truncate_to(offset)
    assert follower.end_offset == 2 and follower.last_fetched_epoch == 1
    assert validate_offset_and_epoch(leader, 2, 1).kind == VALID


def test_truncation_must_be_on_a_batch_boundary_and_above_the_start(make_log):
    log = log_with(make_log, (1, 3))
    with pytest.raises(ValueError):
        log.truncate_to(1)
    log.truncate_to(0)
    assert log.end_offset == 0 and log.epochs == []


def test_appends_keep_epochs_and_offsets_in_order(make_log):
    log = log_with(make_log, (2, 1))
    with pytest.raises(ValueError):
        log.append_as_leader(["x"], 1)
    with pytest.raises(ValueError):
        log.append_as_follower([Batch(5, 2, ("x",))])
    log.append_as_follower([Batch(1, 2, ("x",)), Batch(2, 4, ("y", "z"))])
    assert log.end_offset == 4 and log.last_fetched_epoch == 4
    assert [b.base_offset for b in log.read(1, 10)] == [1, 2]
    with pytest.raises(ValueError):
        log.read(3, 10)  # inside a batch


def test_snapshot_trims_the_log_and_answers_for_old_epochs(make_log):
    log = log_with(make_log, (1, 2), (2, 2), (3, 2))  # 1@0, 2@2, 3@4; end 6
    snapshot_id = OffsetAndEpoch(4, 2)
    log.create_snapshot(snapshot_id, snapshot_data(["s"], 2))
    log.delete_before_snapshot(snapshot_id)
    assert log.start_offset == 4 and log.end_offset == 6
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(6, 3)
    assert validate_offset_and_epoch(log, 2, 1) == (SNAPSHOT, snapshot_id)
    assert validate_offset_and_epoch(log, 4, 1) == (SNAPSHOT, snapshot_id)
    assert validate_offset_and_epoch(log, 4, 2).kind == VALID
    follower = make_log()
    follower.install_snapshot(snapshot_id, snapshot_data(["s"], 2))
    assert (follower.start_offset, follower.end_offset, follower.last_fetched_epoch) == (4, 4, 2)
    assert (
        validate_offset_and_epoch(log, follower.end_offset, follower.last_fetched_epoch).kind
        == VALID
    )
    follower.append_as_follower(log.read(4, 10))
    follower.truncate_to(4)
    assert follower.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)


@pytest.mark.slow
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=10),
    st.integers(0, 10),
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), max_size=8),
)
def test_truncation_then_fetch_converges_to_the_leader(
    make_log, leader_steps, common, divergent_steps
):
    """A follower that shares a prefix of the leader's log and then wrote
    batches in epochs whose leaders the leader never saw (what Raft's one
    leader per epoch allows) is cut back to exactly the shared prefix by the
    fetch protocol's rule, and appending the rest makes the logs identical."""
    leader = make_log()
    epoch = 0
    for gap, size in leader_steps:
        epoch += 2 * gap  # the leader's epochs are even
        leader.append_as_leader([f"L{leader.end_offset + i}" for i in range(size)], epoch)
    follower = make_log()
    follower.append_as_follower(all_batches(leader)[:common])
    epoch = follower.last_fetched_epoch
    for gap, size in divergent_steps:
        epoch += 2 * gap + 1 if epoch % 2 == 0 else 2 * gap  # the follower's own: odd
        follower.append_as_leader([f"F{follower.end_offset + i}" for i in range(size)], epoch)
    shared = len(all_batches(leader)[:common])
    for _ in range(50):
        verdict = validate_offset_and_epoch(
            leader, follower.end_offset, follower.last_fetched_epoch
        )
        if verdict.kind == VALID:
            break
        follower.truncate_to(truncation_offset(follower, verdict.offset_and_epoch))
    else:
        pytest.fail("no agreement after 50 rounds")
    assert all_batches(follower) == all_batches(leader)[: len(all_batches(follower))]
    assert len(all_batches(follower)) >= shared
    follower.append_as_follower(leader.read(follower.end_offset, 100))
    assert all_batches(follower) == all_batches(leader)
