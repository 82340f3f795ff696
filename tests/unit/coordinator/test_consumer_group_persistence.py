"""KIP-848 groups on __consumer_offsets: what the heartbeats write, replay
rebuilding the same groups, and members carrying on after a restart."""

import uuid

from kfast.coordinator.group import records as R
from kfast.protocol import errors as E

from .harness import Harness

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)
TOPICS = {"t": (T, 4), "u": (U, 2)}
G = "cg"


def beat(
    h,
    member_id="",
    epoch=0,
    owned=None,
    topics=("t",),
    cluster=TOPICS,
    instance=None,
    regex=None,
    rebalance=5000,
    assignor=None,
    callback=None,
):
    return h.coordinator.consumer_group_heartbeat(
        G,
        member_id,
        epoch,
        instance,
        "rack-1",
        rebalance,
        list(topics) if topics is not None else None,
        assignor,
        owned,
        "client",
        "/10.0.0.1",
        cluster,
        regex,
        callback,
    )


def owned_of(response):
    a = response["assignment"]
    out = {}
    for tp in (a or {"topic_partitions": []})["topic_partitions"]:
        out.setdefault(tp["topic_id"], set()).update(tp["partitions"])
    return out


def decoded(log):
    return [
        (R.decode_key(k), None if v is None else R.decode_value(R.decode_key(k), v)) for k, v in log
    ]


def assert_replay_matches(h):
    fresh = h.replayed()
    assert fresh.snapshot() == h.coordinator.snapshot()
    return fresh


def test_every_step_of_a_rebalance_replays_to_the_same_state():
    h = Harness()
    a = beat(h, topics=("t", "u"), assignor="range")
    assert_replay_matches(h)
    b = beat(h, instance="inst-b", regex="u.*", topics=())
    assert_replay_matches(h)
    # a is told to revoke; the pending revocation is part of the state
    a = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}, U: {0, 1}}, topics=("t", "u"))
    group = h.coordinator.consumer_groups[G]
    assert group.members[a["member_id"]].state == "UNREVOKED_PARTITIONS"
    assert_replay_matches(h)
    a = beat(h, a["member_id"], 1, owned=owned_of(a), topics=("t", "u"))
    b = beat(h, b["member_id"], b["member_epoch"], owned={}, topics=(), instance="inst-b")
    assert group.state == "Stable"
    fresh = assert_replay_matches(h)
    member_b = fresh.consumer_groups[G].members[b["member_id"]]
    assert (member_b.instance_id, member_b.rack_id, member_b.subscribed_topic_regex.pattern) == (
        "inst-b",
        "rack-1",
        "u.*",
    )
    assert member_b.subscribed_topic_names == ["u"]  # the regex's resolution
    # a leaves: its records are deleted
    beat(h, a["member_id"], -1)
    fresh = assert_replay_matches(h)
    assert list(fresh.consumer_groups[G].members) == [b["member_id"]]
    keys = {k for k, v in decoded(h.log) if v is None}
    assert R.ConsumerGroupMemberMetadataKey(G, a["member_id"]) in keys
    assert R.ConsumerGroupCurrentMemberAssignmentKey(G, a["member_id"]) in keys
    assert R.ConsumerGroupTargetAssignmentMemberKey(G, a["member_id"]) in keys


def test_a_steady_heartbeat_writes_nothing():
    h = Harness()
    a = beat(h)
    written = len(h.log)
    assert written > 0
    beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    beat(h, a["member_id"], 1)
    assert len(h.log) == written


def test_the_records_kafka_writes_for_a_first_member():
    h = Harness()
    a = beat(h)
    mid = a["member_id"]
    types = [type(k).__name__ for k, _ in decoded(h.log)]
    assert types == [
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupMetadataKey",
        "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupCurrentMemberAssignmentKey",
    ]
    values = dict(decoded(h.log))
    assert values[R.ConsumerGroupMetadataKey(G)].epoch == 1
    assert values[R.ConsumerGroupTargetAssignmentMetadataKey(G)].assignment_epoch == 1
    current = values[R.ConsumerGroupCurrentMemberAssignmentKey(G, mid)]
    assert (current.member_epoch, current.previous_member_epoch, current.state) == (1, 0, 0)
    assert [(tp.topic_id, tp.partitions) for tp in current.assigned_partitions] == [
        (T, [0, 1, 2, 3])
    ]
    meta = values[R.ConsumerGroupMemberMetadataKey(G, mid)]
    assert (
        meta.client_id,
        meta.client_host,
        meta.subscribed_topic_names,
        meta.rebalance_timeout_ms,
    ) == ("client", "/10.0.0.1", ["t"], 5000)
    [topic] = values[R.ConsumerGroupPartitionMetadataKey(G)].topics
    assert (topic.topic_id, topic.topic_name, topic.num_partitions) == (T, "t", 4)


def test_a_member_continues_with_its_epoch_after_a_restart():
    h = Harness(**{"group.consumer.session.timeout.ms": 1000})
    a = beat(h)
    b = beat(h)
    a = beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    a = beat(h, a["member_id"], 1, owned=owned_of(a))
    b = beat(h, b["member_id"], 2, owned={})
    before = h.coordinator.consumer_groups[G]
    assert before.state == "Stable"
    restarted = Harness(**{"group.consumer.session.timeout.ms": 1000})
    for key, value in h.log:
        restarted.coordinator.replay(key, value)
    restarted.coordinator.on_loaded([G])
    group = restarted.coordinator.consumer_groups[G]
    assert group.state == "Stable" and group.group_epoch == before.group_epoch
    again = beat(restarted, b["member_id"], 2, owned=owned_of(b))
    assert again["error_code"] == 0 and again["member_epoch"] == 2
    # the assignment is sent again (the restarted coordinator never sent it)
    assert owned_of(again) == owned_of(b)
    assert group.group_epoch == before.group_epoch  # no rebalance
    assert not restarted.log  # nothing changed
    # a never comes back: its session, started at load, expires
    restarted.timer.advance(999)
    beat(restarted, b["member_id"], 2)
    assert a["member_id"] in group.members
    restarted.timer.advance(2)
    assert a["member_id"] not in group.members
    assert group.group_epoch == before.group_epoch + 1
    gone = {k for k, v in decoded(restarted.log) if v is None}
    assert R.ConsumerGroupMemberMetadataKey(G, a["member_id"]) in gone
    fresh = Harness()
    for key, value in h.log + restarted.log:
        fresh.coordinator.replay(key, value)
    assert fresh.coordinator.snapshot() == restarted.coordinator.snapshot()


def test_a_failed_append_answers_the_error_and_is_written_again():
    h = Harness()
    a = beat(h)
    h.fail_next = E.NotCoordinatorException.code
    b = beat(h)
    assert b["error_code"] == E.NotCoordinatorException.code
    assert len(h.replayed().consumer_groups[G].members) == 1
    # the next change writes what the failed append lost
    beat(h, a["member_id"], 1, owned={T: {0, 1, 2, 3}})
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_the_response_waits_for_the_append():
    h = Harness()
    pending = []
    h.coordinator.writer = lambda group_id, records, done: pending.append((records, done))
    answers = []
    assert beat(h, callback=answers.append) is None
    assert answers == [] and len(pending) == 1
    records, done = pending[0]
    done(0)
    assert answers[0]["error_code"] == 0 and answers[0]["member_epoch"] == 1


def test_deleting_the_group_writes_tombstones_for_every_record():
    h = Harness()
    a = beat(h)
    beat(h, a["member_id"], -1)
    results = []
    h.coordinator.delete_groups([G], results.append)
    assert results == [{G: 0}]
    fresh = h.replayed()
    assert G not in fresh.consumer_groups and G not in fresh.groups
    live = {}
    for key, value in decoded(h.log):
        live[key] = value
    assert all(v is None for k, v in live.items() if isinstance(k, R.CONSUMER_GROUP_KEY_CLASSES))


def test_a_classic_group_taking_over_deletes_the_consumer_groups_records():
    h = Harness()
    a = beat(h)
    beat(h, a["member_id"], -1)
    assert h.join(G)[0]["error_code"] == 0
    fresh = h.replayed()
    assert G not in fresh.consumer_groups


def test_offsets_replayed_before_the_group_leave_no_classic_placeholder():
    h = Harness()
    a = beat(h)
    out = []
    h.coordinator.commit_offsets(
        G, a["member_id"], None, 1, {("t", 0): (3, -1, "")}, -1, out.append
    )
    offsets = [r for r in h.log if R.decode_key(r[0]).__class__ is R.OffsetCommitKey]
    rest = [r for r in h.log if r not in offsets]
    fresh = Harness()
    for key, value in offsets + rest:
        fresh.coordinator.replay(key, value)
    assert G not in fresh.coordinator.groups and G in fresh.coordinator.consumer_groups
    assert fresh.coordinator.snapshot() == h.coordinator.snapshot()


def test_a_static_member_that_left_for_a_while_is_still_there_after_a_restart():
    h = Harness()
    a = beat(h, instance="i1")
    beat(h, a["member_id"], -2, instance="i1")
    fresh = assert_replay_matches(h)
    member = fresh.consumer_groups[G].members[a["member_id"]]
    assert member.member_epoch == -2 and member.previous_member_epoch == 1


def test_a_restarted_static_member_replaces_its_records():
    h = Harness()
    a = beat(h, instance="i1")
    beat(h, a["member_id"], -2, instance="i1")
    again = beat(h, instance="i1")
    assert again["member_id"] != a["member_id"] and again["member_epoch"] == 1
    fresh = assert_replay_matches(h)
    assert list(fresh.consumer_groups[G].members) == [again["member_id"]]
    gone = {k for k, v in decoded(h.log) if v is None}
    assert R.ConsumerGroupCurrentMemberAssignmentKey(G, a["member_id"]) in gone


def test_a_consumer_group_taking_over_an_empty_classic_group_deletes_its_record():
    h = Harness()
    [joined] = h.join(G)
    h.sync(G, joined["generation_id"], joined["member_id"])
    h.coordinator.leave_group(G, [(joined["member_id"], None)])
    assert h.coordinator.groups[G].is_("Empty")
    r = beat(h)
    assert r["error_code"] == 0
    assert (R.GroupMetadataKey(G), None) in decoded(h.log)
    fresh = assert_replay_matches(h)
    assert G not in fresh.groups and G in fresh.consumer_groups


def test_a_regex_member_resolves_the_same_topics_after_replay():
    h = Harness()
    r = beat(h, regex="t|u", topics=None)
    assert r["error_code"] == 0 and owned_of(r) == {T: {0, 1, 2, 3}, U: {0, 1}}
    fresh = assert_replay_matches(h)
    assert fresh.consumer_groups[G].members[r["member_id"]].subscribed_topic_names == ["t", "u"]
