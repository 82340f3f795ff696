"""Classic groups in the result form (Kafka's classicGroupJoin /
classicGroupSync): each handler returns a CoordinatorResult whose records
the coordinator appends and whose response -- deferred while the member
waits for the others -- it answers once the group completes it; and the
log the live path writes rebuilds the same groups on load."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.classic_group_manager import JoinMember, SyncMember
from kfast.coordinator.group.consumer_protocol import encode_subscription
from kfast.coordinator.group.records import GroupMetadataKey, encode_key, encode_value
from kfast.coordinator.result import DeferredResponse
from kfast.protocol import errors as E

from ..hypothesis_budget import examples
from .harness import Harness, capture_results

G = "g"
PROTOCOLS = [("range", encode_subscription(["t"]))]
ARGS = JoinMember("c", "/h", 1000, 2000, "consumer", PROTOCOLS)


def test_deferred_response_completes_once_and_answers_late_registrations():
    deferred: DeferredResponse[int] = DeferredResponse()
    seen: list = []
    deferred.when_complete(seen.append)
    assert not deferred.done and seen == []
    assert deferred.complete(1) is True
    assert deferred.complete(2) is False  # the first completion wins
    deferred.when_complete(seen.append)
    assert seen == [1, 1] and deferred.done


def test_join_result_defers_the_response_until_the_join_phase_ends():
    h = Harness()
    [first] = h.join(G)
    a = first["member_id"]
    h.sync(G, 1, a, {a: b"x"})
    # A second member: the group rebalances and its response waits for a.
    result = h.coordinator.classic_group_join(G, "", None, ARGS, False)
    assert result.records == [] and isinstance(result.response, DeferredResponse)
    assert not result.response.done
    assert h.coordinator.groups[G].is_(ClassicGroupState.PREPARING_REBALANCE)
    answers: list = []
    h.coordinator._run(G, result, answers.append)
    assert answers == []
    h.join(G, member_id=a)  # a rejoins: the join phase ends
    [answer] = answers
    assert answer["generation_id"] == 2 and answer["leader"] == a


def test_leader_sync_result_carries_the_assignment_applied_on_append():
    h = Harness()
    [first] = h.join(G)
    a = first["member_id"]
    group = h.coordinator.groups[G]
    result = h.coordinator.classic_group_sync(G, SyncMember(1, a, None, None, None), {a: b"plan"})
    [(key, value)] = result.records
    assert key == GroupMetadataKey(G)
    assert [(m.member_id, m.assignment) for m in value.members] == [(a, b"plan")]
    assert isinstance(result.response, DeferredResponse) and not result.response.done
    # Nothing applied before the append: Kafka's appendFuture does it.
    assert group.is_(ClassicGroupState.COMPLETING_REBALANCE)
    assert group.members[a].assignment == b""
    answers: list = []
    h.coordinator._run(G, result, answers.append)
    assert answers == [(0, "consumer", "range", b"plan")]
    assert group.is_(ClassicGroupState.STABLE) and group.members[a].assignment == b"plan"
    assert h.log == [(encode_key(key), encode_value(value))]


def test_last_leave_stores_the_empty_group_through_a_result():
    h = Harness()
    [first] = h.join(G)
    a = first["member_id"]
    h.sync(G, 1, a, {a: b"x"})
    results = capture_results(h.coordinator.classic_group_manager)
    assert h.coordinator.leave_group(G, [(a, None)]) == (0, [0])
    # The join phase ends inside the LeaveGroup: its result runs first.
    complete_join, leave = results
    assert leave.records == []
    [(key, value)] = complete_join.records
    assert key == GroupMetadataKey(G)
    assert (value.generation, value.members) == (2, ())
    assert h.log[-1] == (encode_key(key), encode_value(value))
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_static_rejoin_result_stores_the_new_member_id_before_answering():
    h = Harness()
    [first] = h.join(G, instance_id="i")
    a = first["member_id"]
    h.sync(G, 1, a, {a: b"x"})
    args = ARGS._replace(protocols=[("range", encode_subscription(["t"]))])
    result = h.coordinator.classic_group_join(G, "", "i", args, False)
    [(key, value)] = result.records
    [member] = value.members
    assert member.member_id != a and member.assignment == b"x"
    assert isinstance(result.response, DeferredResponse) and not result.response.done
    answers: list = []
    h.coordinator._run(G, result, answers.append)
    assert answers[0]["member_id"] == member.member_id and answers[0]["skip_assignment"]
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_heartbeat_and_leave_results_write_nothing():
    h = Harness()
    [first] = h.join(G)
    a = first["member_id"]
    result = h.coordinator.classic_group_heartbeat(G, a, None, 1)
    assert (result.records, result.response) == ([], 0)
    result = h.coordinator.classic_group_leave(G, [("nobody", None)])
    assert (result.records, result.response) == ([], (0, [E.UnknownMemberIdException.code]))


# -- live path vs load ---------------------------------------------------------------------
# m0 is a static member (its instance id is its name), m1 a dynamic one.
MEMBERS = ["m0", "m1"]
_action = st.tuples(
    st.sampled_from(
        ["join", "restart", "sync", "settle", "settle", "leave", "heartbeat", "expire", "fail"]
    ),
    st.sampled_from(MEMBERS),
    st.booleans(),  # the sync carries an assignment
)


class _Clients:
    """The clients of one classic group, each remembering its member id
    and the generation it last joined."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.ids: dict[str, str] = {}
        self.generation: dict[str, int] = {}

    def join(self, name: str) -> list:
        """JoinGroup; its answer is noted when it comes (the list fills)."""
        answer: list = []

        def answered(response: dict) -> None:
            answer.append(response)
            if response["error_code"] == 0:
                self.ids[name] = response["member_id"]
                self.generation[name] = response["generation_id"]
            else:
                self.ids.pop(name, None)

        self.h.coordinator.join_group(
            G,
            self.ids.get(name, ""),
            name if name == "m0" else None,
            "c",
            "/h",
            1000,
            2000,
            "consumer",
            PROTOCOLS,
            False,
            answered,
        )
        return answer

    def settle(self) -> None:
        """Every member rejoins, then syncs (the leader with an assignment):
        the group ends Stable unless an append fails."""
        for name in list(self.ids):
            self.join(name)
        group = self.h.coordinator.groups.get(G)
        for name, member_id in sorted(self.ids.items(), key=lambda i: i[1] == group.leader_id):
            plan = {m: m.encode() for m in self.ids.values()}
            self.h.sync(G, self.generation[name], member_id, plan)

    def step(self, action: str, name: str, flag: bool) -> None:
        coordinator, member_id = self.h.coordinator, self.ids.get(name, "")
        generation = self.generation.get(name, -1)
        if action == "join":
            self.join(name)
        elif action == "restart":  # the member comes back without its id
            self.ids.pop(name, None)
            self.join(name)
        elif action == "settle":
            self.settle()
        elif action == "sync":
            assignment = {m: m.encode() for m in self.ids.values()} if flag else {}
            self.h.sync(G, generation, member_id, assignment)
        elif action == "leave":
            coordinator.leave_group(G, [(member_id, None)])
        elif action == "heartbeat":
            coordinator.heartbeat(G, member_id, None, generation)
        elif action == "expire":
            self.h.timer.advance(700)  # two in a row: past the session timeout
        else:
            self.h.fail_next = E.NotEnoughReplicasException.code


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_action, max_size=25))
def test_a_group_loaded_from_its_log_is_the_live_group(actions):
    """Whenever the live group is settled (Stable, or Empty after a
    generation), loading the records it wrote rebuilds it exactly."""
    h = Harness()
    writers: list = []
    write = h.coordinator.writer
    last_failed = [False]

    def writer(*args):
        writers.append(sys._getframe(1).f_code.co_name)
        # An empty group's record that failed to append is only logged, as
        # in Kafka: the log is behind until the group's next record.
        last_failed[0] = bool(h.fail_next)
        write(*args)

    h.coordinator.writer = writer
    clients = _Clients(h)
    for action in actions:
        clients.step(*action)
        group = h.coordinator.groups.get(G)
        settled = group is not None and (
            group.is_(ClassicGroupState.STABLE)
            or (group.is_(ClassicGroupState.EMPTY) and group.generation_id > 0)
        )
        if settled and not last_failed[0]:
            assert h.replayed().snapshot()["groups"] == h.coordinator.snapshot()["groups"]
    # Every write went through the runner.
    assert set(writers) <= {"_run"}
