"""Handlers return a CoordinatorResult (response, records): nothing changes
until the coordinator has appended the records, then it replays the same
record objects (not their bytes) and answers the response."""

from __future__ import annotations

from kfast.coordinator.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from kfast.protocol import errors as E
from tests.unit.coordinator.harness import Harness

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
