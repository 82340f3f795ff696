"""kfast reassign-partitions without a cluster: Kafka's JSON formats and
checks, the move map and the throttle lists it gives (the facts of Kafka's
ReassignPartitionsUnitTest), the report texts, and the actions' output and
config changes against an in-memory cluster."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from kfast.cli import build_parser
from kfast.client.admin import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from kfast.tools import reassign_partitions as rp
from kfast.tools.reassign_partitions import (
    CommandFailed,
    OngoingReassignment,
    PartitionMove,
    PartitionReassignmentState,
    TerseError,
)


# -- JSON ---------------------------------------------------------------------------------------
def test_reassignment_json_is_kafkas_compact_sorted_form():
    assert rp.format_reassignment_json({("foo", 1): [4, 5, 6], ("bar", 0): [7, 8]}) == (
        '{"version":1,"partitions":'
        '[{"topic":"bar","partition":0,"replicas":[7,8],"log_dirs":["any","any"]},'
        '{"topic":"foo","partition":1,"replicas":[4,5,6],"log_dirs":["any","any","any"]}]}'
    )


def test_the_printed_json_parses_back():
    assignment = {("foo", 0): [1, 2, 3], ("foo", 1): [3, 4, 5]}
    assert dict(rp.parse_reassignment(rp.format_reassignment_json(assignment))) == assignment


def test_execute_checks_kafkas_rules():
    def check(text):
        return rp.validate_execute(rp.parse_reassignment(text))

    with pytest.raises(CommandFailed, match="^Partition reassignment list cannot be empty"):
        check('{"version":1,"partitions":[]}')
    with pytest.raises(CommandFailed, match="^Partition replica list cannot be empty"):
        check('{"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}')
    with pytest.raises(
        CommandFailed, match="^Partition reassignment contains duplicate topic partitions: foo-0"
    ):
        check(
            '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,1]},'
            '{"topic":"foo","partition":0,"replicas":[2,3,4]}]}'
        )
    with pytest.raises(
        CommandFailed,
        match="^Partition replica lists may not contain duplicate "
        "entries: foo-0 contains multiple entries for 0",
    ):
        check(
            '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,0]},'
            '{"topic":"foo","partition":1,"replicas":[2,3]}]}'
        )
    assert check(
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3],'
        '"log_dirs":["any","any","any"]},{"topic":"foo","partition":1,'
        '"replicas":[3,4,5]}]}'
    ) == {("foo", 0): [1, 2, 3], ("foo", 1): [3, 4, 5]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("{nope", "The input string is not a valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        (
            '{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            r"Size of replicas list \[1, 2\] is different from size of log dirs list \[any\] "
            "for partition foo-0",
        ),
        (
            '{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["/data/a"]}]}',
            "kfast does not move replicas between log directories",
        ),
        ('{"partitions":[{"topic":"foo","partition":"0","replicas":[1]}]}', "Expected an integer"),
    ],
)
def test_bad_reassignment_json_is_refused(text, message):
    with pytest.raises(CommandFailed, match=message):
        rp.parse_reassignment(text)


def test_generate_arguments():
    assert rp.parse_broker_list("5,2,3,4") == [5, 2, 3, 4]
    assert rp.parse_topics_to_move('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}') == [
        "foo",
        "bar",
    ]
    with pytest.raises(CommandFailed, match=r"Broker list contains duplicate entries: \[1\]"):
        rp.parse_broker_list("1,2,1")
    with pytest.raises(
        CommandFailed, match=r"List of topics to reassign contains duplicate entries: \[foo\]"
    ):
        rp.parse_topics_to_move('{"topics":[{"topic":"foo"},{"topic":"foo"}]}')


def test_a_proposal_keeps_each_topics_partitions_and_replication_factor():
    current = {("foo", 0): [1, 2], ("foo", 1): [2, 3], ("foo", 2): [3, 1], ("bar", 0): [1]}
    proposed = rp.calculate_assignment(current, [4, 5, 6])
    assert set(proposed) == set(current)
    for part, replicas in proposed.items():
        assert len(replicas) == len(current[part]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= {4, 5, 6}
    leaders = [proposed["foo", p][0] for p in range(3)]
    assert sorted(leaders) == [4, 5, 6]  # one leadership per broker
    with pytest.raises(CommandFailed):
        rp.calculate_assignment({("foo", 0): [1, 2, 3]}, [4, 5])


def test_a_rack_aware_proposal_spreads_replicas_over_racks():
    proposed = rp.calculate_assignment(
        {("foo", p): [1, 2] for p in range(4)}, [1, 2, 3, 4], {1: "a", 2: "a", 3: "b", 4: "b"}
    )
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in proposed.values())


# -- move map and throttles ----------------------------------------------------------------------
def test_move_map_and_throttles_as_kafka_computes_them():
    ongoing = {
        ("foo", 0): OngoingReassignment([1, 2, 3, 4], [4], [3]),
        ("foo", 1): OngoingReassignment([4, 5, 6, 7, 8], [7, 8], [4, 5]),
        ("foo", 2): OngoingReassignment([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 3): OngoingReassignment([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 4): OngoingReassignment([1, 2, 3, 4], [3, 4], [1, 2]),
        ("foo", 5): OngoingReassignment([1, 2, 3, 4], [3, 4], [1, 2]),
    }
    proposed = {
        ("foo", 0): [1, 2, 5],
        ("foo", 2): [3, 4],
        ("foo", 3): [5, 6],
        ("foo", 4): [3],
        ("foo", 5): [3, 4, 5, 6],
        ("bar", 0): [1, 2, 3],
    }
    current = {("foo", p): [1, 2, 3, 4] for p in (0, 2, 3, 4, 5)}
    current.update({("foo", 1): [4, 5, 6, 7, 8], ("bar", 0): [2, 3, 4], ("baz", 0): [1, 2, 3]})
    moves = rp.proposed_move_map(ongoing, proposed, current)

    def move(sources, destinations):
        return PartitionMove(frozenset(sources), frozenset(destinations))

    assert moves["foo"] == {
        0: move({1, 2, 3}, {5}),
        1: move({4, 5, 6}, {7, 8}),
        2: move({1, 2}, {3, 4}),
        3: move({1, 2}, {5, 6}),
        4: move({1, 2}, {3}),
        5: move({1, 2}, {3, 4, 5, 6}),
    }
    assert moves["bar"] == {0: move({2, 3, 4}, {1})}
    assert rp.leader_throttles(moves) == {
        "foo": "0:1,0:2,0:3,1:4,1:5,1:6,2:1,2:2,3:1,3:2,4:1,4:2,5:1,5:2",
        "bar": "0:2,0:3,0:4",
    }
    assert rp.follower_throttles(moves) == {
        "foo": "0:5,1:7,1:8,2:3,2:4,3:5,3:6,4:3,5:3,5:4,5:5,5:6",
        "bar": "0:1",
    }
    assert rp.reassigning_brokers(moves) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_partition_unknown_to_the_cluster_cannot_be_moved():
    with pytest.raises(CommandFailed, match="Trying to reassign a topic partition foo-9"):
        rp.proposed_move_map({}, {("foo", 9): [1]}, {})


# -- texts -----------------------------------------------------------------------------------------
def test_status_text():
    assert rp.reassignment_states_text(
        {
            ("foo", 0): PartitionReassignmentState([1, 2, 3], [1, 2, 3], True),
            ("foo", 1): PartitionReassignmentState([1, 2, 3], [1, 2, 4], False),
            ("bar", 0): PartitionReassignmentState([1, 2, 3], [1, 2, 4], False),
            ("baz", 0): PartitionReassignmentState([1, 2], [2, 3], True),
        }
    ) == "\n".join(
        [
            "Status of partition reassignment:",
            "Reassignment of partition bar-0 is still in progress.",
            "There is no active reassignment of partition baz-0, but replica set is 1,2 rather "
            "than 2,3.",
            "Reassignment of partition foo-0 is completed.",
            "Reassignment of partition foo-1 is still in progress.",
        ]
    )


def test_list_text():
    assert rp.ongoing_reassignments_text({}) == "No partition reassignments found."
    assert rp.ongoing_reassignments_text(
        {
            ("foo", 1): OngoingReassignment([1, 2, 3], [4, 5], [1, 2]),
            ("foo", 0): OngoingReassignment([0, 1, 2], [4], []),
            ("bar", 0): OngoingReassignment([2, 3, 0], [], [0]),
        }
    ) == "\n".join(
        [
            "Current partition reassignments:",
            "bar-0: replicas: 2,3,0. removing: 0.",
            "foo-0: replicas: 0,1,2. adding: 4.",
            "foo-1: replicas: 1,2,3. adding: 4,5. removing: 1,2.",
        ]
    )


def test_current_assignment_text_names_only_the_moving_partitions():
    assert rp.current_assignment_text(
        {("foo", 1): [1, 2, 3], ("bar", 0): [7, 8, 9]},
        {
            ("foo", 0): [1, 2, 3],
            ("foo", 1): [4, 5, 6],
            ("bar", 0): [7, 8],
            ("baz", 0): [10, 11, 12],
        },
    ) == "\n".join(
        [
            "Current partition replica assignment",
            "",
            '{"version":1,"partitions":'
            '[{"topic":"bar","partition":0,"replicas":[7,8],"log_dirs":["any","any"]},'
            '{"topic":"foo","partition":1,"replicas":[4,5,6],"log_dirs":["any","any","any"]}]}',
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
        ]
    )


# -- options ------------------------------------------------------------------------------------
def parse(*argv):
    return build_parser("reassign-partitions").parse_args(
        ["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", *argv]
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            (),
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, --list",
        ),
        (("--list", "--verify"), "Command must include exactly one action"),
        (("--execute",), 'Missing required argument "[reassignment-json-file]"'),
        (
            ("--generate", "--broker-list", "1"),
            'Missing required argument "[topics-to-move-json-file]"',
        ),
        (
            ("--verify", "--reassignment-json-file", "f", "--throttle", "5"),
            'Option "[throttle]" can\'t be used with action "[verify]"',
        ),
        (("--list", "--additional"), 'Option "[additional]" can\'t be used with action "[list]"'),
    ],
)
def test_usage_errors_exit_1_naming_the_problem(argv, message, capsys):
    assert rp.run(parse(*argv)) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and "--reassignment-json-file" in err


# -- actions against an in-memory cluster --------------------------------------------------------
class FakeCluster(rp.ReassignmentAdmin):
    """Brokers 1-4; topic "t" with partition 0 on [1, 2] and 1 on [2, 3]. A
    reassignment stays in progress until ``finish()``."""

    def __init__(self):
        super().__init__(admin=None)
        self.assignment = {("t", 0): [1, 2], ("t", 1): [2, 3]}
        self.ongoing: dict = {}
        self.configs: dict = {}

    async def list_reassignments(self, parts=None):
        return {p: o for p, o in self.ongoing.items() if parts is None or p in parts}

    async def alter_reassignments(self, targets):
        failed = {}
        for part, replicas in targets.items():
            if part not in self.assignment:
                failed[part] = "Unable to find partition"
            elif replicas is None:
                ongoing = self.ongoing.pop(part)
                self.assignment[part] = [
                    r for r in ongoing.replicas if r not in ongoing.adding_replicas
                ]
            else:
                current = self.assignment[part]
                removing = [r for r in current if r not in replicas]
                self.ongoing[part] = OngoingReassignment(
                    replicas + removing, [r for r in replicas if r not in current], removing
                )
                self.assignment[part] = replicas + removing
        return failed

    def finish(self):
        for part, ongoing in self.ongoing.items():
            self.assignment[part] = [
                r for r in ongoing.replicas if r not in ongoing.removing_replicas
            ]
        self.ongoing.clear()

    async def brokers(self):
        return {1: None, 2: None, 3: None, 4: None}

    async def replica_assignment(self, topics):
        found = {p: r for p, r in self.assignment.items() if p[0] in topics}
        if not found:
            raise CommandFailed(f"Topic {sorted(topics)[0]} not found.")
        return found

    async def alter_configs(self, resource_type, name, operations):
        configs = self.configs.setdefault((resource_type, name), {})
        for key, (op, value) in operations.items():
            if op == OP_SET:
                configs[key] = value
            else:
                assert op == OP_DELETE
                configs.pop(key, None)
        if not configs:
            del self.configs[resource_type, name]


PLAN = json.dumps(
    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 4]}]}
)


def act(coroutine_function, *args):
    out = io.StringIO()
    asyncio.run(coroutine_function(*args, out))
    return out.getvalue()


def test_execute_with_a_throttle_then_verify_clears_it():
    cluster = FakeCluster()
    printed = act(rp.execute, cluster, PLAN, False, 1000)
    assert printed == "\n".join(
        [
            "Current partition replica assignment",
            "",
            '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
            '"log_dirs":["any","any"]}]}',
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
            "Warning: You must run --verify periodically, until the reassignment completes, to "
            "ensure the throttle is removed.",
            "The inter-broker throttle limit was set to 1000 B/s",
            "Successfully started partition reassignment for t-0",
            "",
        ]
    )
    assert cluster.configs == {
        (RESOURCE_TOPIC, "t"): {rp.LEADER_REPLICAS: "0:1,0:2", rp.FOLLOWER_REPLICAS: "0:4"},
        **{
            (RESOURCE_BROKER, str(b)): {rp.LEADER_RATE: "1000", rp.FOLLOWER_RATE: "1000"}
            for b in (1, 2, 4)
        },
    }
    assert act(rp.verify, cluster, PLAN, False) == (
        "Status of partition reassignment:\nReassignment of partition t-0 is still in progress.\n\n"
    )
    assert len(cluster.configs) == 4  # throttles stay while it moves
    cluster.finish()
    assert act(rp.verify, cluster, PLAN, False) == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is completed.\n\n"
        "Clearing broker-level throttles on brokers 1,2,3,4\n"
        "Clearing topic-level throttles on topic t\n"
    )
    assert cluster.configs == {}


def test_a_second_execute_needs_additional():
    cluster = FakeCluster()
    act(rp.execute, cluster, PLAN, False, -1)
    with pytest.raises(
        TerseError, match="Cannot execute because there is an existing partition assignment"
    ):
        act(rp.execute, cluster, PLAN, False, -1)
    assert cluster.configs == {}  # no --throttle, no throttle
    other = json.dumps({"partitions": [{"topic": "t", "partition": 1, "replicas": [3, 4]}]})
    assert "Successfully started partition reassignment for t-1" in act(
        rp.execute, cluster, other, True, 500
    )
    # The throttle covers the ongoing move too.
    assert cluster.configs[RESOURCE_TOPIC, "t"] == {
        rp.LEADER_REPLICAS: "0:1,0:2,1:2,1:3",
        rp.FOLLOWER_REPLICAS: "0:4,1:4",
    }


def test_execute_refuses_unknown_brokers_and_partitions():
    cluster = FakeCluster()
    with pytest.raises(CommandFailed, match="^Unknown broker id 9$"):
        act(rp.execute, cluster, PLAN.replace("4]", "9]"), False, -1)
    with pytest.raises(CommandFailed, match="^Unable to find partition: t-7$"):
        act(rp.execute, cluster, PLAN.replace('"partition": 0', '"partition": 7'), False, -1)
    assert cluster.ongoing == {}


def test_cancel_restores_the_replicas_and_clears_the_throttles():
    cluster = FakeCluster()
    act(rp.execute, cluster, PLAN, False, 1000)
    assert act(rp.cancel, cluster, PLAN, False) == (
        "Successfully cancelled partition reassignment for: t-0\n"
        "None of the specified partition moves are active.\n"
        "Clearing broker-level throttles on brokers 1,2,3,4\n"
        "Clearing topic-level throttles on topic t\n"
    )
    # Kafka's revert: the replicas less the added ones, in the reassignment's order.
    assert cluster.assignment["t", 0] == [2, 1] and cluster.configs == {}
    assert act(rp.cancel, cluster, PLAN, True).startswith(
        "None of the specified partition reassignments are active.\n"
    )


def test_generate_prints_current_and_proposed_assignments():
    cluster = FakeCluster()
    printed = act(rp.generate, cluster, '{"topics":[{"topic":"t"}],"version":1}', "3,4", True)
    head, current, blank, title, proposed, end = printed.split("\n")
    assert (head, blank, title, end) == (
        "Current partition replica assignment",
        "",
        "Proposed partition reassignment configuration",
        "",
    )
    assert dict(rp.parse_reassignment(current)) == cluster.assignment
    assert {part: sorted(r) for part, r in rp.parse_reassignment(proposed)} == {
        ("t", 0): [3, 4],
        ("t", 1): [3, 4],
    }
    with pytest.raises(CommandFailed, match="Topic nope not found"):
        act(rp.generate, cluster, '{"topics":[{"topic":"nope"}]}', "3,4", True)
