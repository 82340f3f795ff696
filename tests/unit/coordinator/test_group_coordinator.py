"""The classic group state machine, driven without sockets on a manual clock."""

from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.consumer_protocol import encode_subscription
from kfast.protocol import errors as E

from .harness import Harness

G = "group"


def form_group(h, n, **kwargs):
    """n members joined and synced; returns their member ids (leader first)."""
    first = h.join(G, **kwargs)[0]
    ids = [first["member_id"]]
    pending = []
    for _ in range(n - 1):
        pending.append(h.join(G, **kwargs))
    if n > 1:
        rejoin = h.join(G, member_id=ids[0], **kwargs)
        assert rejoin and all(p for p in pending)
        ids += [p[0]["member_id"] for p in pending]
    generation = h.coordinator.groups[G].generation_id
    leader = h.coordinator.groups[G].leader_id
    syncs = [
        h.sync(G, generation, m, {m: m.encode() for m in ids} if m == leader else None) for m in ids
    ]
    assert all(s and s[0][0] == 0 for s in syncs)
    assert h.coordinator.groups[G].is_(ClassicGroupState.STABLE)
    return ids


def test_single_member_join_and_sync():
    h = Harness()
    [result] = h.join(G)
    assert result["error_code"] == 0
    assert result["generation_id"] == 1
    assert result["leader"] == result["member_id"]
    assert result["protocol_name"] == "range"
    assert [m[0] for m in result["members"]] == [result["member_id"]]
    group = h.coordinator.groups[G]
    assert group.is_(ClassicGroupState.COMPLETING_REBALANCE)
    [sync] = h.sync(G, 1, result["member_id"], {result["member_id"]: b"A"})
    assert sync == (0, "consumer", "range", b"A")
    assert group.is_(ClassicGroupState.STABLE)
    assert len(h.log) == 1  # the group's metadata record


def test_second_member_triggers_rebalance_and_both_get_the_new_generation():
    h = Harness()
    a = h.join(G)[0]["member_id"]
    h.sync(G, 1, a, {a: b"x"})
    waiting = h.join(G)
    assert waiting == []
    assert h.coordinator.groups[G].is_(ClassicGroupState.PREPARING_REBALANCE)
    assert h.coordinator.heartbeat(G, a, None, 1) == E.RebalanceInProgressException.code
    leader_result = h.join(G, member_id=a)
    assert leader_result[0]["generation_id"] == 2 and waiting[0]["generation_id"] == 2
    assert len(leader_result[0]["members"]) == 2
    assert waiting[0]["members"] == []
    assert waiting[0]["leader"] == a


def test_member_id_required_round_trip():
    h = Harness()
    [first] = h.join(G, require_known=True)
    assert first["error_code"] == E.MemberIdRequiredException.code
    assert first["member_id"].startswith("c-")
    assert first["member_id"] in h.coordinator.groups[G].pending_members
    [second] = h.join(G, member_id=first["member_id"], require_known=True)
    assert second["error_code"] == 0 and second["member_id"] == first["member_id"]


def test_pending_member_that_never_joins_expires():
    h = Harness()
    [first] = h.join(G, require_known=True, session=500)
    h.timer.advance(501)
    assert first["member_id"] not in h.coordinator.groups[G].pending_members
    [again] = h.join(G, member_id=first["member_id"])
    assert again["error_code"] == E.UnknownMemberIdException.code


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    a, b = form_group(h, 2)
    for _ in range(2):
        h.timer.advance(400)
        assert h.coordinator.heartbeat(G, a, None, 2) == 0
    group = h.coordinator.groups[G]
    assert b in group.members
    h.timer.advance(201)  # b silent for 1001 ms > its 1000 ms session; a's is renewed
    assert h.coordinator.heartbeat(G, a, None, 2) == E.RebalanceInProgressException.code
    assert b not in group.members
    assert group.is_(ClassicGroupState.PREPARING_REBALANCE)
    [rejoin] = h.join(G, member_id=a)
    assert rejoin["generation_id"] == 3 and [m[0] for m in rejoin["members"]] == [a]


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    a, b = form_group(h, 2, session=5000, rebalance=2000)
    c = h.join(G, session=5000, rebalance=2000)
    a_join = h.join(G, member_id=a, session=5000, rebalance=2000)
    assert not a_join and not c
    h.timer.advance(2001)
    assert a_join[0]["error_code"] == 0 and c[0]["error_code"] == 0
    assert set(h.coordinator.groups[G].members) == {a, c[0]["member_id"]}
    assert h.coordinator.heartbeat(G, b, None, 3) == E.UnknownMemberIdException.code


def test_initial_rebalance_delay_collects_members_into_one_generation():
    h = Harness(**{"group.initial.rebalance.delay.ms": 100})
    joins = [h.join(G, rebalance=5000) for _ in range(3)]
    h.timer.advance(50)
    joins.append(h.join(G, rebalance=5000))
    assert not any(joins)
    h.timer.advance(100)  # a member arrived during the first delay: one more delay
    assert not any(joins)
    h.timer.advance(101)
    assert all(j and j[0]["generation_id"] == 1 for j in joins)


def test_static_member_rejoin_keeps_assignment_without_rebalance():
    h = Harness()
    a, b = form_group(h, 2, instance_id=None)
    static = Harness()
    s1 = static.join(G, instance_id="i1")[0]["member_id"]
    s2_wait = static.join(G, instance_id="i2")
    static.join(G, member_id=s1, instance_id="i1")
    s2 = s2_wait[0]["member_id"]
    static.sync(G, 2, s1, {s1: b"P1", s2: b"P2"}, instance_id="i1")
    static.sync(G, 2, s2, instance_id="i2")
    group = static.coordinator.groups[G]
    assert group.is_(ClassicGroupState.STABLE)
    [again] = static.join(G, instance_id="i2")  # restarted: no member id
    assert again["error_code"] == 0 and again["generation_id"] == 2
    assert again["member_id"] != s2
    assert group.is_(ClassicGroupState.STABLE)
    assert static.sync(G, 2, again["member_id"], instance_id="i2")[0][3] == b"P2"
    assert static.coordinator.heartbeat(G, s2, "i2", 2) == E.FencedInstanceIdException.code


def test_static_leader_rejoin_gets_members_and_skip_assignment():
    h = Harness()
    s1 = h.join(G, instance_id="i1")[0]["member_id"]
    h.sync(G, 1, s1, {s1: b"P"}, instance_id="i1")
    [again] = h.join(G, instance_id="i1")
    assert again["skip_assignment"] is True
    assert [m[0] for m in again["members"]] == [again["member_id"]]


def test_protocol_selection_and_consistency():
    h = Harness()
    sub = encode_subscription(["t"])
    a = h.join(G, protocols=[("roundrobin", sub), ("range", sub)])[0]["member_id"]
    assert h.coordinator.groups[G].protocol_name == "roundrobin"
    h.sync(G, 1, a)
    waiting = h.join(G, protocols=[("range", sub), ("roundrobin", sub)])
    h.join(G, member_id=a, protocols=[("roundrobin", sub), ("range", sub)])
    # one vote each: the tie goes to the first member's preference
    assert waiting[0]["protocol_name"] == "roundrobin"
    [bad] = h.join(G, protocols=[("sticky", sub)])
    assert bad["error_code"] == E.InconsistentGroupProtocolException.code
    results = []
    h.coordinator.join_group(
        G, "", None, "c", "/h", 1000, 1000, "connect", [("range", sub)], False, results.append
    )
    assert results[0]["error_code"] == E.InconsistentGroupProtocolException.code


def test_most_votes_win():
    h = Harness(**{"group.initial.rebalance.delay.ms": 100})
    sub = encode_subscription(["t"])
    prefs = [
        [("range", sub), ("rr", sub)],
        [("rr", sub), ("range", sub)],
        [("rr", sub), ("range", sub)],
    ]
    joins = [h.join(G, protocols=p) for p in prefs]
    h.timer.advance(201)  # members arrived in the first delay: a second one
    assert {j[0]["protocol_name"] for j in joins} == {"rr"}


def test_session_timeout_bounds_and_group_size():
    h = Harness(**{"group.max.session.timeout.ms": 5000, "group.max.size": 1})
    assert h.join(G, session=5)[0]["error_code"] == E.InvalidSessionTimeoutException.code
    assert h.join(G, session=5001)[0]["error_code"] == E.InvalidSessionTimeoutException.code
    assert h.join(G)[0]["error_code"] == 0
    assert h.join(G)[0]["error_code"] == E.GroupMaxSizeReachedException.code
    assert h.join("")[0]["error_code"] == E.InvalidGroupIdException.code


def test_sync_errors():
    h = Harness()
    a, b = form_group(h, 2)
    assert h.sync(G, 1, a)[0][0] == E.IllegalGenerationException.code
    assert h.sync(G, 2, "nobody")[0][0] == E.UnknownMemberIdException.code
    h.join(G)  # a third member: the group prepares a rebalance
    assert h.sync(G, 2, a)[0][0] == E.RebalanceInProgressException.code
    assert h.coordinator.heartbeat(G, a, None, 1) == E.IllegalGenerationException.code


def test_follower_sync_waits_for_leader_and_failed_store_rebalances():
    h = Harness()
    a = h.join(G)[0]["member_id"]
    wait_b = h.join(G)
    h.join(G, member_id=a)
    b = wait_b[0]["member_id"]
    follower = h.sync(G, 2, b)
    assert follower == []
    h.fail_next = E.NotCoordinatorException.code
    leader = h.sync(G, 2, a, {a: b"1", b: b"2"})
    assert leader == follower == [(E.NotCoordinatorException.code, None, None, b"")]
    group = h.coordinator.groups[G]
    assert group.is_(ClassicGroupState.PREPARING_REBALANCE)
    assert all(m.assignment == b"" for m in group.members.values())


def test_leave_group():
    h = Harness()
    a, b = form_group(h, 2)
    top, results = h.coordinator.leave_group(G, [(b, None), ("ghost", None)])
    assert top == 0 and results == [0, E.UnknownMemberIdException.code]
    assert h.coordinator.groups[G].is_(ClassicGroupState.PREPARING_REBALANCE)
    assert h.join(G, member_id=a)[0]["generation_id"] == 3
    top, results = h.coordinator.leave_group(G, [("", "nope")])
    assert results == [E.UnknownMemberIdException.code]
    _, results = h.coordinator.leave_group(G, [(a, None)])
    assert results == [0] and h.coordinator.groups[G].is_(ClassicGroupState.EMPTY)


def test_static_leave_with_wrong_member_id_is_fenced():
    h = Harness()
    s = h.join(G, instance_id="i")[0]["member_id"]
    _, results = h.coordinator.leave_group(G, [("other", "i")])
    assert results == [E.FencedInstanceIdException.code]
    _, results = h.coordinator.leave_group(G, [("", "i")])
    assert results == [0] and s not in h.coordinator.groups[G].members
