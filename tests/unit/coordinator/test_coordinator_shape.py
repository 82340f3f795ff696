"""The coordinators' shape (issue 15): small functions, and states that are
enums rather than strings compared by value."""

import ast
import enum
import pathlib

import kfast.coordinator
from kfast.coordinator.group.classic_group import ClassicGroup, ClassicGroupState
from kfast.coordinator.group.classic_group_manager import ClassicGroupManager
from kfast.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
)
from kfast.coordinator.transaction.metadata import TransactionState

from .harness import Harness

MAX_FUNCTION_LINES = 60
COORDINATOR = pathlib.Path(kfast.coordinator.__file__).parent
KFAST = COORDINATOR.parent


def _functions(path: pathlib.Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_no_coordinator_function_exceeds_60_lines():
    too_long = [
        f"{path.relative_to(KFAST.parent)}:{node.lineno} {node.name} "
        f"({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted(COORDINATOR.rglob("*.py"))
        for node in _functions(path)
        if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not too_long, "\n".join(too_long)


def test_the_line_count_sees_a_long_function(tmp_path):
    # The check above would pass vacuously if it found no functions.
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"def f():\n{body}\n")
    [node] = _functions(path)
    assert node.end_lineno - node.lineno + 1 == MAX_FUNCTION_LINES + 1


def test_group_states_are_enums_with_kafkas_names():
    # The names are what DescribeGroups / ListGroups / ConsumerGroupDescribe
    # send, so each enum value is Kafka's string.
    assert [s.value for s in ClassicGroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]
    assert [s.value for s in ConsumerGroupState] == [
        "Empty",
        "Assigning",
        "Reconciling",
        "Stable",
        "Dead",
    ]
    assert [s.value for s in MemberState] == [
        "STABLE",
        "UNREVOKED_PARTITIONS",
        "UNRELEASED_PARTITIONS",
    ]
    assert issubclass(TransactionState, enum.Enum)
    assert isinstance(ClassicGroup("g", 0).state, ClassicGroupState)
    assert ConsumerGroup("g").state is ConsumerGroupState.EMPTY
    assert isinstance(ConsumerGroupMember("m").state, MemberState)


def test_no_state_is_compared_with_a_string():
    """``group.is_("Stable")`` or ``group.state == "Empty"`` anywhere in kfast
    bypasses the enums."""
    names = {s.value for s in (*ClassicGroupState, *ConsumerGroupState, *MemberState)}
    found = []
    for path in sorted(KFAST.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "is_"
                and any(isinstance(a, ast.Constant) and a.value in names for a in node.args)
            ) or (
                isinstance(node, ast.Compare)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr == "state"
                and any(isinstance(c, ast.Constant) and c.value in names for c in node.comparators)
            ):
                found.append(f"{path.relative_to(KFAST.parent)}:{node.lineno}")
    assert not found, found


# What the classic groups' logic needs: none of it may be imported by the
# router again (issue 15 item 3: one job per manager).
CLASSIC_INTERNALS = {
    "ClassicGroupState",
    "ClassicGroupMember",
    "DelayedJoin",
    "InitialDelayedJoin",
    "DelayedHeartbeat",
    "heartbeat_key",
    "DelayedOperation",
}
ROUTER_MAX_LINES = 400


def test_group_coordinator_stays_a_router():
    """coordinator.py builds the managers, runs results, routes records and
    requests; the classic groups' state machine lives in their manager."""
    path = COORDINATOR / "group" / "coordinator.py"
    source = path.read_text()
    imported = _imported_names(path)
    assert not imported & CLASSIC_INTERNALS, sorted(imported & CLASSIC_INTERNALS)
    assert "uuid" not in source  # member ids are the manager's to mint
    lines = len(source.splitlines())
    assert lines <= ROUTER_MAX_LINES, f"coordinator.py has {lines} lines"


def _imported_names(path: pathlib.Path) -> set[str]:
    return {
        alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_only_the_classic_manager_changes_classic_group_state():
    """The KIP-848 manager takes over or restores an empty classic group
    through the ClassicGroups hooks, never by setting its state."""
    path = COORDINATOR / "group" / "consumer_group_manager.py"
    assert "ClassicGroupState" not in _imported_names(path)
    assert "ClassicGroupState" not in path.read_text()


def test_classic_requests_are_handed_to_the_classic_group_manager():
    h = Harness()
    manager = h.coordinator.classic_group_manager
    assert isinstance(manager, ClassicGroupManager)
    for name in (
        "join_group",
        "sync_group",
        "heartbeat",
        "leave_group",
        "classic_group_join",
        "classic_group_sync",
        "classic_group_heartbeat",
        "classic_group_leave",
        "group_or_none",
    ):
        assert getattr(h.coordinator, name).__self__ is manager, name
    # One KIP-848 groups map and one heartbeat purgatory, shared by the two
    # group managers; the KIP-848 side sees the classic groups only through
    # the classic manager's hooks (either takes over the other's empty group).
    consumers = h.coordinator.consumer_group_manager
    assert manager.groups is h.coordinator.groups
    assert consumers.classic_groups is manager and not hasattr(consumers, "groups")
    assert manager.heartbeat_purgatory is consumers.heartbeat_purgatory
    assert manager.consumer_groups is consumers.consumer_groups is h.coordinator.consumer_groups
    # The delayed operations call back into the manager, not the router.
    h.join("g")
    watched = [op for ops in manager.heartbeat_purgatory._watchers.values() for op in ops]
    assert watched and all(op.coordinator is manager for op in watched)
