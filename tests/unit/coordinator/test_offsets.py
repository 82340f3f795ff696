"""Committed offsets, retention, deletion and replay of __consumer_offsets."""

from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.records import OffsetCommitValue, decode_key
from kfast.protocol import errors as E

from .harness import Harness
from .test_group_coordinator import G, form_group


def fetched(h, group, tps=None):
    return {
        (t, p): (v.offset, v.metadata) if v else None
        for t, p, v in h.coordinator.fetch_offsets(group, tps)
    }


def test_standalone_commit_and_fetch():
    h = Harness()
    assert h.commit("solo", {("t", 0): (5, "m0"), ("t", 1): (7, "")}) == {("t", 0): 0, ("t", 1): 0}
    assert fetched(h, "solo") == {("t", 0): (5, "m0"), ("t", 1): (7, "")}
    assert fetched(h, "solo", [("t", 0), ("t", 9)]) == {("t", 0): (5, "m0"), ("t", 9): None}
    assert h.coordinator.groups["solo"].is_(ClassicGroupState.EMPTY)
    assert len(h.log) == 2


def test_metadata_too_large_rejects_only_that_partition():
    h = Harness(**{"offset.metadata.max.bytes": 4})
    assert h.commit(G, {("t", 0): (1, "12345"), ("t", 1): (2, "1234")}) == {
        ("t", 0): E.OffsetMetadataTooLarge.code,
        ("t", 1): 0,
    }
    assert fetched(h, G) == {("t", 1): (2, "1234")}


def test_member_commit_checks_generation_and_member():
    h = Harness()
    (a,) = form_group(h, 1)
    assert h.commit(G, {("t", 0): (1, "")}, a, 1) == {("t", 0): 0}
    assert h.commit(G, {("t", 0): (2, "")}, a, 7) == {("t", 0): E.IllegalGenerationException.code}
    assert h.commit(G, {("t", 0): (2, "")}, "x", 1) == {("t", 0): E.UnknownMemberIdException.code}
    assert h.commit(G, {("t", 0): (2, "")}) == {("t", 0): E.UnknownMemberIdException.code}
    assert h.commit("nogroup", {("t", 0): (2, "")}, "x", 3) == {
        ("t", 0): E.IllegalGenerationException.code
    }
    assert fetched(h, G) == {("t", 0): (1, "")}


def test_failed_append_commits_nothing():
    h = Harness()
    h.fail_next = E.NotCoordinatorException.code
    assert h.commit("g", {("t", 0): (1, "")}) == {("t", 0): E.NotCoordinatorException.code}
    assert fetched(h, "g") == {}


def test_offset_commit_counts_as_heartbeat():
    h = Harness()
    (a,) = form_group(h, 1)
    for _ in range(3):
        h.timer.advance(600)
        assert h.commit(G, {("t", 0): (1, "")}, a, 1) == {("t", 0): 0}
    assert a in h.coordinator.groups[G].members


def test_offsets_of_empty_group_expire_after_retention():
    h = Harness(**{"offsets.retention.minutes": 1})
    h.commit("old", {("t", 0): (1, "")})
    (a,) = form_group(h, 1)
    h.commit(G, {("t", 0): (3, "")}, a, 1)
    h.timer.advance(30_000)
    assert h.coordinator.cleanup_expired_offsets() == 0
    h.timer.advance(30_001)
    # "old" never had members: its offsets expire a retention after the
    # commit and the group goes. G became empty only when its member's
    # session expired and that rebalance ended (about 3 s in), so its
    # retention runs from then and it keeps its offset.
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert "old" not in h.coordinator.groups
    assert fetched(h, G) == {("t", 0): (3, "")}
    tombstones = [decode_key(k) for k, v in h.log if v is None]
    assert {type(k).__name__ for k in tombstones} == {"OffsetCommitKey", "GroupMetadataKey"}


def test_delete_groups():
    h = Harness()
    h.commit("empty", {("t", 0): (1, "")})
    form_group(h, 1)
    results = []
    h.coordinator.delete_groups(["empty", G, "missing"], results.append)
    assert results == [
        {"empty": 0, G: E.GroupNotEmptyException.code, "missing": E.GroupIdNotFoundException.code}
    ]
    assert "empty" not in h.coordinator.groups and fetched(h, "empty") == {}
    assert "empty" not in h.replayed().groups


def test_delete_offsets_refuses_subscribed_topics():
    h = Harness()
    (a,) = form_group(h, 1, topics=("t",))
    h.commit(G, {("t", 0): (1, ""), ("u", 0): (2, "")}, a, 1)
    results = []
    h.coordinator.delete_offsets(G, [("t", 0), ("u", 0)], lambda *r: results.append(r))
    assert results == [(0, {("t", 0): E.GroupSubscribedToTopicException.code, ("u", 0): 0})]
    assert fetched(h, G) == {("t", 0): (1, "")}
    h.coordinator.delete_offsets("nope", [("t", 0)], lambda *r: results.append(r))
    assert results[-1] == (E.GroupIdNotFoundException.code, {})


def test_replay_rebuilds_live_state():
    h = Harness()
    a, b = form_group(h, 2)
    h.commit(G, {("t", 0): (10, "x"), ("t", 1): (11, "")}, a, 2)
    h.commit(G, {("t", 0): (12, "y")}, b, 2)
    h.commit("solo", {("s", 0): (1, "")})
    h.commit("gone", {("s", 0): (1, "")})
    h.coordinator.delete_groups(["gone"], lambda r: None)
    replayed = h.replayed()
    assert replayed.snapshot() == h.coordinator.snapshot()
    assert replayed.offsets[G][("t", 0)] == OffsetCommitValue(12, -1, "y", 1_000_000)
    assert replayed.groups[G].generation_id == 2


def test_replay_of_uncompacted_log_keeps_latest_per_key():
    h = Harness()
    for offset in range(5):
        h.commit("g", {("t", 0): (offset, str(offset))})
    assert len(h.log) == 5
    assert h.replayed().offsets["g"][("t", 0)].offset == 4


def test_loaded_members_must_heartbeat_within_their_session():
    h = Harness()
    (a,) = form_group(h, 1)
    fresh = Harness()
    for key, value in h.log:
        fresh.coordinator.replay(key, value)
    fresh.coordinator.on_loaded([G])
    group = fresh.coordinator.groups[G]
    assert group.is_("Stable") and a in group.members
    fresh.timer.advance(1001)
    assert a not in group.members and group.is_(ClassicGroupState.EMPTY)
