"""KIP-848 groups change through replay (Kafka's GroupMetadataManager): a
heartbeat decides on a copy of its group and returns records; replaying them
-- at once, as Kafka's runtime does before the append -- is what changes the
group, and the response is read from the replayed group. A failed append
reverts the group to its snapshot. So the live group is always the group
its log loads into."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.coordinator.group import records as R
from kfast.coordinator.group.consumer_group import MemberState
from kfast.protocol import errors as E

from ..hypothesis_budget import examples
from .harness import Harness

G = "cg"
T, U = uuid.UUID(int=7), uuid.UUID(int=8)


def beat(
    h, member_id="", epoch=0, owned=None, instance=None, cluster=None, callback=None, regex=None
):
    topics = ([] if regex else ["t", "u"]) if epoch == 0 else None
    return h.coordinator.consumer_group_heartbeat(
        G,
        member_id,
        epoch,
        instance,
        None,
        3000,
        topics,
        None,
        owned,
        "c",
        "/h",
        cluster or {"t": (T, 4), "u": (U, 2)},
        regex,
        callback,
    )


def test_the_heartbeat_changes_nothing_but_through_replay():
    h = Harness()
    manager = h.coordinator.consumer_group_manager
    first = beat(h)
    before = h.coordinator.snapshot()
    replayed: list = []
    manager.replay = lambda key, value: replayed.append((key, value))
    # A second member joins: the group epoch, target and members change --
    # but only in the records handed to replay, never in the group itself.
    try:
        beat(h)
    except KeyError:
        pass  # the response is read from a group the records never reached
    assert h.coordinator.snapshot() == before
    kinds = {type(k) for k, _ in replayed}
    assert R.ConsumerGroupMetadataKey in kinds and R.ConsumerGroupMemberMetadataKey in kinds
    assert first["error_code"] == 0


def test_the_response_is_read_from_the_replayed_group():
    h = Harness()
    manager = h.coordinator.consumer_group_manager
    replay = manager.replay

    def replay_with_a_later_epoch(key, value):
        # A replay that applies epoch 7: the response must say 7.
        if isinstance(value, R.ConsumerGroupCurrentMemberAssignmentValue):
            value.member_epoch = 7
        replay(key, value)

    manager.replay = replay_with_a_later_epoch
    assert beat(h)["member_epoch"] == 7


def test_a_failed_append_under_a_later_change_keeps_the_state_and_rewrites_it():
    """Appends in flight: the second change is replayed on top of the
    first; the first's append fails, the second's lands. The group keeps
    its state (the second change built on it) and the next change writes
    what the failed append lost, so the log loads into the live group."""
    h = Harness()
    a = beat(h)
    pending: list = []
    h.coordinator.writer = lambda group_id, records, done: pending.append((records, done))
    answers: list = []
    beat(h, callback=answers.append)  # b joins
    beat(h, a["member_id"], a["member_epoch"], owned={}, callback=answers.append)
    (first_records, first_done), (second_records, second_done) = pending
    first_done(E.NotEnoughReplicasException.code)
    h.log.extend(second_records)
    second_done(0)
    assert answers[0]["error_code"] == E.NotEnoughReplicasException.code
    assert answers[1]["error_code"] == 0
    assert len(h.coordinator.consumer_groups[G].members) == 2
    h.coordinator.writer = h._write
    beat(h, a["member_id"], answers[1]["member_epoch"], owned={})
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_a_failed_take_over_of_an_empty_classic_group_brings_it_back():
    h = Harness()
    [joined] = h.join(G)
    h.coordinator.leave_group(G, [(joined["member_id"], None)])
    classic = h.coordinator.groups[G]
    before = h.coordinator.snapshot()
    h.fail_next = E.NotEnoughReplicasException.code
    assert beat(h)["error_code"] == E.NotEnoughReplicasException.code
    assert h.coordinator.groups[G] is classic and G not in h.coordinator.consumer_groups
    assert h.coordinator.snapshot() == before
    assert beat(h)["error_code"] == 0  # and the next join takes it over
    assert G not in h.coordinator.groups
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_a_failed_static_rejoin_keeps_the_member_that_left_for_a_while():
    h = Harness()
    c = beat(h, instance="i")
    beat(h, c["member_id"], -2, instance="i")
    before = h.coordinator.snapshot()
    h.fail_next = E.NotEnoughReplicasException.code
    assert beat(h, instance="i")["error_code"] == E.NotEnoughReplicasException.code
    assert h.coordinator.snapshot() == before
    again = beat(h, instance="i")
    assert again["error_code"] == 0 and again["member_id"] != c["member_id"]
    assert again["member_epoch"] == c["member_epoch"]  # the member it was, epoch included


# -- live path vs load ---------------------------------------------------------------------
NAMES = ["a", "b", "c"]
_action = st.tuples(
    st.sampled_from(
        [
            "join",
            "beat",
            "beat",
            "beat",
            "leave",
            "static-leave",
            "expire",
            "fail",
            "grow",
            "create",
        ]
    ),
    st.sampled_from(NAMES),
)


class _Members:
    """Consumers of one KIP-848 group: each remembers its member id, epoch
    and the partitions it was told to own."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.state: dict[str, tuple[str, int, dict]] = {}
        self.cluster = {"t": (T, 4), "u": (U, 2)}
        self.left: set[str] = set()  # member ids whose leave was answered

    def heartbeat(self, name: str, epoch: int | None = None) -> None:
        member_id, member_epoch, owned = self.state.get(name, ("", 0, {}))
        if epoch is None:
            epoch = member_epoch if name in self.state else 0
        response = beat(
            self.h,
            member_id,
            epoch,
            owned=owned if epoch > 0 else None,
            instance=name if name == "c" else None,
            cluster=self.cluster,
            regex="u.*" if name == "b" and epoch == 0 else None,
        )
        if epoch == -1 and response["error_code"] == 0:
            self.left.add(member_id)
        if response["error_code"] or epoch < 0:
            if response["error_code"] != E.NotEnoughReplicasException.code or epoch <= 0:
                self.state.pop(name, None)
            return
        assignment = response["assignment"]
        if assignment is not None:
            owned = {tp["topic_id"]: set(tp["partitions"]) for tp in assignment["topic_partitions"]}
        self.state[name] = (response["member_id"], response["member_epoch"], owned)

    def step(self, action: str, name: str) -> None:
        if action in ("join", "beat"):
            self.heartbeat(name)
        elif action == "leave" and name in self.state:
            self.heartbeat(name, -1)
        elif action == "static-leave" and name in self.state:
            self.heartbeat(name, -2)
        elif action == "expire":
            self.h.timer.advance(3100)  # past the session and revocation timeouts
        elif action == "fail":
            self.h.fail_next = E.NotEnoughReplicasException.code
        elif action == "grow":
            topic_id, count = self.cluster["t"]
            self.cluster = {**self.cluster, "t": (topic_id, count + 1)}
        elif action == "create":  # a topic b's regex matches
            self.cluster = {**self.cluster, "u2": (uuid.UUID(int=9), 3)}


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_action, max_size=30))
def test_the_live_group_is_always_the_group_its_log_loads_into(actions):
    h = Harness(**{"group.consumer.session.timeout.ms": 3000})
    members = _Members(h)
    for action in actions:
        members.step(*action)
        assert h.replayed().snapshot() == h.coordinator.snapshot(), action
        group = h.coordinator.consumer_groups.get(G)
        if group is None:
            continue
        # What the members were told happened to the group.
        assert not members.left & set(group.members)
        owned = [(t, p) for m in group.members.values() for t, ps in m.assigned.items() for p in ps]
        assert len(owned) == len(set(owned)), "a partition owned twice"
        assert all(isinstance(m.state, MemberState) for m in group.members.values())


def test_a_regex_resolution_limited_by_describe_is_kept_across_replays():
    """What a regex resolves to depends on the topics the member may
    DESCRIBE, which no record says: the decision's resolution is kept, so
    replaying the group's metadata (which lists another member's topic the
    regex would match) does not make every heartbeat a new group epoch."""
    h = Harness()
    cluster = {"t": (T, 4), "u": (U, 2)}

    def regex_beat(member_id="", epoch=0):
        return h.coordinator.consumer_group_heartbeat(
            G,
            member_id,
            epoch,
            None,
            None,
            3000,
            [] if epoch == 0 else None,
            None,
            None,
            "c",
            "/h",
            cluster,
            "t|u" if epoch == 0 else None,
            None,
            lambda topic: topic != "u",
        )

    a = regex_beat()
    beat(h)  # b subscribes to t and u by name: u is in the group's metadata
    a = regex_beat(a["member_id"], a["member_epoch"])
    epoch = h.coordinator.consumer_groups[G].group_epoch
    for _ in range(3):
        a = regex_beat(a["member_id"], a["member_epoch"])
    assert h.coordinator.consumer_groups[G].group_epoch == epoch
    assert h.coordinator.consumer_groups[G].members[a["member_id"]].subscribed_topic_names == ["t"]
