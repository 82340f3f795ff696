"""Handlers return a CoordinatorResult (response, records): nothing changes
until the coordinator has appended the records, then it replays the same
record objects (not their bytes) and answers the response."""

from __future__ import annotations

import uuid

from kfast.coordinator.group import records as R
from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kfast.protocol import errors as E

from .harness import Harness, capture_results

G = "g"
TP = ("t", 0)
EXPIRE = 5_000_000  # an expire timestamp: the record is written in the v1 format


def test_commit_offset_result_carries_the_records_and_applies_nothing():
    h = Harness()
    manager = h.coordinator.offset_manager
    result = manager.commit_offset(
        G, "", None, -1, {TP: (42, 7, "m"), ("t", 1): (1, -1, "x" * 5000)}, -1
    )
    assert result.response == {("t", 1): E.OffsetMetadataTooLarge.code, TP: 0}
    assert [(k, v.offset, v.leader_epoch, v.metadata) for k, v in result.records] == [
        (OffsetCommitKey(G, "t", 0), 42, 7, "m")
    ]
    assert result.error_response(E.NotCoordinatorException.code)[TP] == (
        E.NotCoordinatorException.code
    )
    # A handler decides; the state changes only when the runtime replays.
    assert h.coordinator.fetch_offsets(G, [TP]) == [("t", 0, None)]
    assert h.log == []
    for key, value in result.records:
        h.coordinator.replay_record(key, value)
    assert h.coordinator.fetch_offsets(G, [TP])[0][2].offset == 42


def test_commit_replays_the_record_objects_not_their_encoding():
    # The v1 (with expiry) encoding has no leader epoch: a replay of the
    # appended bytes would lose it, the replay of the objects keeps it.
    h = Harness()
    out: list = []
    h.coordinator.commit_offsets(G, "", None, -1, {TP: (42, 7, "m")}, EXPIRE, out.append)
    assert out == [{TP: 0}]
    [(key_bytes, value_bytes)] = h.log
    key = decode_key(key_bytes)
    assert decode_value(key, value_bytes).leader_epoch == -1
    value = h.coordinator.fetch_offsets(G, [TP])[0][2]
    assert isinstance(value, OffsetCommitValue)
    assert (value.offset, value.leader_epoch, value.expire_timestamp) == (42, 7, EXPIRE)


def test_failed_append_replays_nothing_and_answers_its_error():
    h = Harness()
    h.fail_next = E.NotEnoughReplicasException.code
    out: list = []
    h.coordinator.commit_offsets(G, "", None, -1, {TP: (42, -1, "")}, -1, out.append)
    assert out == [{TP: E.NotEnoughReplicasException.code}]
    assert h.coordinator.fetch_offsets(G, [TP]) == [("t", 0, None)]


def test_transactional_commit_result_is_replayed_as_the_producers_pending_offsets():
    h = Harness()
    result = h.coordinator.offset_manager.commit_transactional_offset(
        G, "", None, -1, {TP: (9, -1, "")}
    )
    assert [k for k, _ in result.records] == [OffsetCommitKey(G, "t", 0)]
    assert not h.coordinator.has_pending_offset(G, TP)
    out: list = []
    h.coordinator.commit_transactional_offsets(
        G, "", None, -1, 77, 0, {TP: (9, -1, "")}, out.append
    )
    assert out == [{TP: 0}]
    assert h.coordinator.has_pending_offset(G, TP)
    assert (
        h.coordinator.fetch_offsets(G, [TP], require_stable=True)[0][2]
        == E.UnstableOffsetCommitException.code
    )
    h.coordinator.complete_transaction(77, True, lambda group_id: True)
    assert h.coordinator.fetch_offsets(G, [TP])[0][2].offset == 9


# -- KIP-848 ConsumerGroupHeartbeat --------------------------------------------------------
CG = "cg"
TOPIC_ID = uuid.UUID(int=7)


def _beat(h: Harness, member_id: str = "", epoch: int = 0) -> dict:
    """A ConsumerGroupHeartbeat (epoch 0: a join subscribing to "t")."""
    topics = ["t"] if epoch == 0 else None
    cluster = {"t": (TOPIC_ID, 2)}
    return h.coordinator.consumer_group_heartbeat(
        CG, member_id, epoch, None, None, 5000, topics, None, None, "c", "/h", cluster
    )


def test_heartbeat_result_carries_the_records_the_coordinator_appends():
    h = Harness()
    results = capture_results(h.coordinator.consumer_group_manager)
    response = _beat(h)
    [result] = results
    assert result.response is response and response["member_epoch"] == 1
    # Applied as the heartbeat decided (as Kafka's runtime replays at once):
    # not replayed again after the append.
    assert result.replay is False
    assert [(encode_key(k), encode_value(v)) for k, v in result.records] == h.log
    kinds = {type(k) for k, _ in result.records}
    assert {R.ConsumerGroupMetadataKey, R.ConsumerGroupMemberMetadataKey} <= kinds
    # The same record objects rebuild the group in a fresh coordinator.
    fresh = Harness()
    for key, value in result.records:
        fresh.coordinator.replay_record(key, value)
    assert (
        fresh.coordinator.snapshot()["consumer_groups"]
        == h.coordinator.snapshot()["consumer_groups"]
    )


def test_heartbeat_whose_append_fails_answers_the_error_and_leaves_the_state_as_before():
    h = Harness()
    first = _beat(h)
    before = h.coordinator.snapshot()
    written = list(h.log)
    h.fail_next = E.NotEnoughReplicasException.code
    response = _beat(h)  # a second member joins: its append fails
    assert response["error_code"] == E.NotEnoughReplicasException.code
    assert response["member_epoch"] == -1 and h.log == written
    # The replayed change is reverted (Kafka's runtime reverts to its snapshot).
    assert h.coordinator.snapshot() == before
    # The first member carries on as if nothing happened.
    again = _beat(h, first["member_id"], first["member_epoch"])
    assert again["error_code"] == 0 and again["member_epoch"] == first["member_epoch"]
    assert h.log == written


def test_a_failed_first_join_leaves_no_group():
    h = Harness()
    h.fail_next = E.NotEnoughReplicasException.code
    assert _beat(h)["error_code"] == E.NotEnoughReplicasException.code
    assert CG not in h.coordinator.consumer_groups
    assert h.coordinator.heartbeat_purgatory.watched() == 0


def test_delete_offsets_result_carries_the_tombstones_replayed_after_the_append():
    h = Harness()
    h.commit(G, {TP: (5, ""), ("t", 1): (6, "")})
    result = h.coordinator.offset_manager.delete_offsets(G, [TP, ("t", 2)])
    assert result.records == [(OffsetCommitKey(G, "t", 0), None)]
    assert result.response == (0, {TP: 0, ("t", 2): 0})
    assert result.error_response(E.NotCoordinatorException.code) == (
        E.NotCoordinatorException.code,
        {},
    )
    assert h.coordinator.fetch_offsets(G, [TP])[0][2].offset == 5  # nothing applied yet
    out: list = []
    h.fail_next = E.NotEnoughReplicasException.code
    h.coordinator.delete_offsets(G, [TP], lambda *r: out.append(r))
    assert out == [(E.NotEnoughReplicasException.code, {})]
    assert h.coordinator.fetch_offsets(G, [TP])[0][2].offset == 5
    h.coordinator.delete_offsets(G, [TP], lambda *r: out.append(r))
    assert out[-1] == (0, {TP: 0})
    assert h.coordinator.fetch_offsets(G, [TP, ("t", 1)])[0][2] is None
    assert h.coordinator.fetch_offsets(G, [("t", 1)])[0][2].offset == 6


# -- classic groups ------------------------------------------------------------------------
def test_classic_group_record_goes_through_a_result_not_replayed():
    h = Harness()
    results = capture_results(h.coordinator.classic_group_manager)
    [joined] = h.join(G)
    member_id = joined["member_id"]
    group = h.coordinator.groups[G]
    [synced] = h.sync(G, joined["generation_id"], member_id, {member_id: b"plan"})
    assert synced[0] == 0
    # The JoinGroup's and the join phase's results store nothing.
    [result] = [r for r in results if r.records]
    [(key, value)] = result.records
    assert key == R.GroupMetadataKey(G)
    assert [(m.member_id, m.assignment) for m in value.members] == [(member_id, b"plan")]
    # The group was changed as SyncGroup decided: replaying would swap in a
    # new ClassicGroup object; the live one stays.
    assert result.replay is False
    assert h.coordinator.groups[G] is group
    assert group.is_(ClassicGroupState.STABLE)
    assert h.log == [(encode_key(key), encode_value(value))]


def test_delete_groups_runs_one_result_per_group_replayed_after_the_append():
    h = Harness()
    h.commit(G, {TP: (5, "")})
    h.commit("other", {TP: (6, "")})
    manager = h.coordinator.offset_manager
    results = capture_results(manager)
    out: list = []
    h.fail_next = E.NotEnoughReplicasException.code
    h.coordinator.delete_groups([G, "other", "missing"], out.append)
    assert out == [
        {
            "missing": E.GroupIdNotFoundException.code,
            G: E.NotEnoughReplicasException.code,
            "other": 0,
        }
    ]
    assert [r.records for r in results] == [
        [(OffsetCommitKey(G, "t", 0), None), (R.GroupMetadataKey(G), None)],
        [(OffsetCommitKey("other", "t", 0), None), (R.GroupMetadataKey("other"), None)],
    ]
    assert all(r.replay for r in results)
    # The failed group is untouched; the other's tombstones were replayed.
    assert h.coordinator.fetch_offsets(G, [TP])[0][2].offset == 5
    assert G in h.coordinator.groups
    assert "other" not in h.coordinator.groups
    assert h.coordinator.fetch_offsets("other", [TP]) == [("t", 0, None)]


def test_offset_expiration_runs_a_result_applied_as_the_group_is_when_committed():
    h = Harness()
    h.commit(G, {TP: (5, "")})
    manager = h.coordinator.offset_manager
    results = capture_results(manager)
    assert manager.cleanup_expired_offsets(now=10**13) == 1
    [result] = results
    assert result.records == [(OffsetCommitKey(G, "t", 0), None), (R.GroupMetadataKey(G), None)]
    assert result.replay is False  # its callback applies them
    assert G not in h.coordinator.groups
    assert h.coordinator.fetch_offsets(G, [TP]) == [("t", 0, None)]
    assert h.log[-2:] == [(encode_key(k), None) for k, _ in result.records]
