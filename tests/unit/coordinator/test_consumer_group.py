"""KIP-848 groups: epochs, server-side assignment, revoke before assign."""

import uuid

from kfast.protocol import errors as E

from .harness import Harness

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 4)}
G = "cg"


def beat(h, member_id="", epoch=0, owned=None, topics=("t",), cluster=TOPICS, **kw):
    return h.coordinator.consumer_group_heartbeat(
        G,
        member_id,
        epoch,
        None,
        None,
        kw.get("rebalance", 5000),
        list(topics) if topics is not None else None,
        kw.get("assignor"),
        owned,
        "client",
        "/h",
        cluster,
    )


def partitions(response):
    a = response["assignment"]
    return None if a is None else {p for tp in a["topic_partitions"] for p in tp["partitions"]}


def test_first_member_gets_everything():
    h = Harness()
    r = beat(h)
    assert r["error_code"] == 0 and r["member_epoch"] == 1
    assert partitions(r) == {0, 1, 2, 3}
    assert h.coordinator.consumer_groups[G].state == "Stable"


def test_second_member_waits_for_revocation_before_getting_partitions():
    h = Harness()
    a = beat(h)
    b = beat(h)
    group = h.coordinator.consumer_groups[G]
    assert b["member_epoch"] == 2 and partitions(b) == set()  # still owned by a
    assert group.state == "Reconciling"
    # a is told to drop two partitions, keeping its epoch until it does
    a2 = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    assert a2["member_epoch"] == 1 and len(partitions(a2)) == 2
    kept = partitions(a2)
    # b still cannot have them: a has not confirmed the revocation
    assert partitions(beat(h, b["member_id"], 2, owned={})) == set()
    a3 = beat(h, a["member_id"], 1, owned={T: kept})
    assert a3["member_epoch"] == 2 and partitions(a3) == kept
    b3 = beat(h, b["member_id"], 2, owned={})
    assert partitions(b3) == {0, 1, 2, 3} - kept
    assert group.state == "Stable"


def test_fencing_and_unknown_member():
    h = Harness()
    a = beat(h)
    assert beat(h, a["member_id"], 5)["error_code"] == E.FencedMemberEpochException.code
    assert beat(h, "ghost", 1)["error_code"] == E.UnknownMemberIdException.code
    assert beat(h, topics=None)["error_code"] == E.InvalidRequestException.code
    assert beat(h, assignor="nope")["error_code"] == E.UnsupportedAssignorException.code


def test_leave_and_session_expiry_free_partitions():
    h = Harness(**{"group.consumer.session.timeout.ms": 1000})
    a = beat(h)
    b = beat(h)
    beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    left = beat(h, b["member_id"], -1)
    assert left["member_epoch"] == -1
    # a still owes its revocation (as in Kafka, a new target waits for it)
    r = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    assert partitions(r) == {0, 1} and r["member_epoch"] == 1
    r = beat(h, a["member_id"], 1, owned={T: {0, 1}})
    assert partitions(r) == {0, 1, 2, 3} and r["member_epoch"] == 3
    c = beat(h)
    h.timer.advance(1001)  # neither a nor c heartbeats: both expire
    assert h.coordinator.consumer_groups[G].members == {}
    assert (
        beat(h, c["member_id"], c["member_epoch"])["error_code"] == E.UnknownMemberIdException.code
    )


def test_new_partitions_bump_the_epoch():
    h = Harness()
    a = beat(h)
    grown = {"t": (T, 6)}
    r = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}}, cluster=grown)
    assert r["member_epoch"] == 2 and partitions(r) == set(range(6))


def test_offset_commit_checks_member_epoch():
    h = Harness()
    a = beat(h)
    commit = {("t", 0): (3, -1, "")}
    out = []
    h.coordinator.commit_offsets(G, a["member_id"], None, 1, commit, -1, out.append)
    h.coordinator.commit_offsets(G, a["member_id"], None, 0, commit, -1, out.append)
    h.coordinator.commit_offsets(G, a["member_id"], None, 9, commit, -1, out.append)
    h.coordinator.commit_offsets(G, "x", None, 1, commit, -1, out.append)
    assert [o[("t", 0)] for o in out] == [
        0,
        E.StaleMemberEpochException.code,
        E.FencedMemberEpochException.code,
        E.UnknownMemberIdException.code,
    ]


def test_describe_and_delete():
    h = Harness()
    a = beat(h)
    described = h.coordinator.consumer_group_describe(G, {T: "t"})
    assert described["group_state"] == "Stable" and described["assignor_name"] == "uniform"
    [member] = described["members"]
    assert member["assignment"]["topic_partitions"][0]["topic_name"] == "t"
    results = []
    h.coordinator.delete_groups([G], results.append)
    assert results == [{G: E.GroupNotEmptyException.code}]
    beat(h, a["member_id"], -1)
    h.coordinator.delete_groups([G], results.append)
    assert results[-1] == {G: 0} and G not in h.coordinator.consumer_groups


def test_regex_subscription_follows_new_topics():
    h = Harness()
    other = uuid.UUID(int=8)
    r = h.coordinator.consumer_group_heartbeat(
        G,
        "",
        0,
        None,
        None,
        5000,
        None,
        None,
        None,
        "c",
        "/h",
        {"t": (T, 2), "__consumer_offsets": (uuid.UUID(int=9), 50)},
        "t.*",
    )
    assert r["error_code"] == 0 and partitions(r) == {0, 1}
    grown = {"t": (T, 2), "t2": (other, 3), "__consumer_offsets": (uuid.UUID(int=9), 50)}
    r2 = h.coordinator.consumer_group_heartbeat(
        G, r["member_id"], r["member_epoch"], None, None, -1, None, None, None, "c", "/h", grown
    )
    assigned = {
        t: set(tp["partitions"])
        for tp in r2["assignment"]["topic_partitions"]
        for t in [tp["topic_id"]]
    }
    assert assigned == {T: {0, 1}, other: {0, 1, 2}}
    bad = h.coordinator.consumer_group_heartbeat(
        G, "", 0, None, None, 5000, None, None, None, "c", "/h", grown, "("
    )
    assert bad["error_code"] == E.InvalidRegularExpression.code


def test_member_that_does_not_revoke_in_time_is_fenced():
    h = Harness()
    a = beat(h, rebalance=300)
    b = beat(h, rebalance=300)
    r = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}}, rebalance=300)
    assert len(partitions(r)) == 2  # told to revoke two
    beat(h, b["member_id"], b["member_epoch"], owned={})
    h.timer.advance(301)  # a never confirms
    group = h.coordinator.consumer_groups[G]
    assert a["member_id"] not in group.members
    r = beat(h, b["member_id"], group.members[b["member_id"]].member_epoch, owned={})
    assert partitions(r) == {0, 1, 2, 3}


def test_offsets_of_an_empty_consumer_group_expire():
    h = Harness(**{"offsets.retention.minutes": 1, "group.consumer.session.timeout.ms": 120_000})
    a = beat(h)
    out = []
    h.coordinator.commit_offsets(
        G, a["member_id"], None, 1, {("t", 0): (3, -1, "")}, -1, out.append
    )
    h.timer.advance(61_000)
    assert h.coordinator.cleanup_expired_offsets() == 0  # a member: kept
    beat(h, a["member_id"], -1)
    assert h.coordinator.cleanup_expired_offsets() == 1
    assert h.coordinator.fetch_offsets(G, None) == []


def static_beat(h, instance, member_id="", epoch=0, owned=None):
    return h.coordinator.consumer_group_heartbeat(
        G, member_id, epoch, instance, None, 5000, ["t"], None, owned, "c", "/h", TOPICS
    )


def test_static_member_rejoins_with_its_assignment_and_epoch():
    h = Harness()
    a = static_beat(h, "ia")
    b = static_beat(h, "ib")
    a = static_beat(h, "ia", a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    a = static_beat(h, "ia", a["member_id"], 1, owned={T: partitions(a)})
    b = static_beat(h, "ib", b["member_id"], 2, owned={})
    group = h.coordinator.consumer_groups[G]
    assert group.state == "Stable"
    epoch, mine = group.group_epoch, partitions(b)
    assert static_beat(h, "ib")["error_code"] == E.UnreleasedInstanceIdException.code
    assert static_beat(h, "ib", b["member_id"], -2)["member_epoch"] == -2
    again = static_beat(h, "ib")  # restarted: new member id
    assert again["error_code"] == 0 and again["member_id"] != b["member_id"]
    assert partitions(again) == mine and again["member_epoch"] == 2
    assert group.group_epoch == epoch  # no rebalance


def test_classic_join_to_a_live_consumer_group_is_inconsistent():
    h = Harness()
    a = beat(h)
    assert h.join(G)[0]["error_code"] == E.InconsistentGroupProtocolException.code
    beat(h, a["member_id"], -1)
    assert h.join(G)[0]["error_code"] == 0  # empty: the classic group takes over
    assert G not in h.coordinator.consumer_groups
