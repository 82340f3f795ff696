"""Group coordinator APIs on the wire, version by version (kfast's own
protocol client, so every version can be asked for)."""

from __future__ import annotations

import time
import uuid

import pytest

from kfast.client.connection import BlockingConnection
from kfast.coordinator.group.consumer_protocol import encode_assignment, encode_subscription
from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e

KEY = {
    name: api_keys.BY_NAME[name].key
    for name in (
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "OffsetDelete",
        "ListGroups",
        "DescribeGroups",
        "DeleteGroups",
        "Metadata",
        "CreateTopics",
    )
}


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    broker = KfastBroker(
        {"group.initial.rebalance.delay.ms": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-groups-protocol")),
    )
    broker.start()
    connection = BlockingConnection(broker.host, broker.port)
    response = connection.send(
        {
            "topics": [{"name": "proto-t", "num_partitions": 2, "replication_factor": 1}],
            "timeout_ms": 10000,
        },
        api_key=KEY["CreateTopics"],
        version=4,
    )
    assert response.topics[0].error_code == 0
    _await_group_coordinator(connection)
    yield connection
    connection.close()
    broker.close()


def _await_group_coordinator(connection, timeout_s: float = 30.0) -> None:
    """Until FindCoordinator answers: the first one creates
    __consumer_offsets, whose partitions the broker then leads and loads; a
    JoinGroup before that is COORDINATOR_NOT_AVAILABLE, which clients retry
    and these raw-protocol tests would not (run alone, say with -k)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = connection.send(
            {"key": "probe", "key_type": 0}, api_key=KEY["FindCoordinator"], version=2
        )
        if response.error_code == 0:
            probe = connection.send(
                {
                    "group_id": "probe",
                    "group_instance_id": None,
                    "member_id": "u",
                    "generation_id": -1,
                },
                api_key=KEY["Heartbeat"],
                version=3,
            )
            # Loaded: the coordinator itself answers (an unknown member).
            if probe.error_code == E.UnknownMemberIdException.code:
                return
        assert time.monotonic() < deadline, f"no group coordinator within {timeout_s} s"
        time.sleep(0.05)


def send(conn, api, version, **body):
    return conn.send(body, api_key=KEY[api], version=version)


def gid() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


SUB = encode_subscription(["proto-t"])


def join(
    conn,
    version,
    group,
    member_id="",
    session=10000,
    protocols=None,
    protocol_type="consumer",
    instance=None,
):
    return send(
        conn,
        "JoinGroup",
        version,
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=protocols or [{"name": "range", "metadata": SUB}],
    )


def joined(conn, version, group, **kwargs):
    response = join(conn, version, group, **kwargs)
    if response.error_code == E.MemberIdRequiredException.code:
        response = join(conn, version, group, member_id=response.member_id, **kwargs)
    assert response.error_code == 0
    return response


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator(conn, version):
    if version < 4:
        response = send(conn, "FindCoordinator", version, key="grp", key_type=0)
        assert response.error_code == 0 and response.node_id == 1 and response.port > 0
        if version >= 1:
            # The transaction coordinator (test_transactions_protocol.py).
            response = send(conn, "FindCoordinator", version, key="txn", key_type=1)
            assert response.error_code == 0 and response.node_id == 1
    else:
        response = send(conn, "FindCoordinator", version, key_type=0, coordinator_keys=["a", "b"])
        assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
            ("a", 0, 1),
            ("b", 0, 1),
        ]
        response = send(conn, "FindCoordinator", version, key_type=7, coordinator_keys=["a"])
        assert response.coordinators[0].error_code == E.InvalidRequestException.code


@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_every_version(conn, version):
    group = gid()
    first = join(conn, version, group)
    if version >= 4:
        # KIP-394: the id comes first, the join second.
        assert first.error_code == E.MemberIdRequiredException.code and first.member_id
        first = join(conn, version, group, member_id=first.member_id)
    assert first.error_code == 0 and first.generation_id == 1
    assert first.leader == first.member_id and len(first.members) == 1
    assert first.protocol_name == "range"
    member = first.member_id
    sync_version = min(version, 5)
    assignment = encode_assignment({"proto-t": [0, 1]})
    sync = send(
        conn,
        "SyncGroup",
        sync_version,
        group_id=group,
        generation_id=1,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": member, "assignment": assignment}],
    )
    assert sync.error_code == 0 and bytes(sync.assignment) == assignment
    hb_version = min(version, 4)
    heartbeat = send(
        conn,
        "Heartbeat",
        hb_version,
        group_id=group,
        generation_id=1,
        member_id=member,
        group_instance_id=None,
    )
    assert heartbeat.error_code == 0
    assert (
        send(
            conn,
            "Heartbeat",
            hb_version,
            group_id=group,
            generation_id=2,
            member_id=member,
            group_instance_id=None,
        ).error_code
        == E.IllegalGenerationException.code
    )
    assert (
        send(
            conn,
            "Heartbeat",
            hb_version,
            group_id=group,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
        ).error_code
        == E.UnknownMemberIdException.code
    )
    leave_version = min(version, 5)
    if leave_version >= 3:
        leave = send(
            conn,
            "LeaveGroup",
            leave_version,
            group_id=group,
            members=[
                {"member_id": member, "group_instance_id": None},
                {"member_id": "ghost", "group_instance_id": None},
            ],
        )
        assert leave.error_code == 0
        assert [m.error_code for m in leave.members] == [0, E.UnknownMemberIdException.code]
    else:
        assert (
            send(conn, "LeaveGroup", leave_version, group_id=group, member_id=member).error_code
            == 0
        )
    described = send(
        conn, "DescribeGroups", min(version, 5), groups=[group], include_authorized_operations=False
    ).groups[0]
    assert described.group_state == "Empty" and described.members == []


def test_join_errors(conn):
    group = gid()
    assert join(conn, 5, group, session=100).error_code == E.InvalidSessionTimeoutException.code
    joined(conn, 5, group)
    other = join(conn, 5, group, protocols=[{"name": "sticky", "metadata": SUB}])
    assert other.error_code == E.InconsistentGroupProtocolException.code
    assert join(conn, 5, group, member_id="made-up").error_code == E.UnknownMemberIdException.code
    assert join(conn, 5, "").error_code == E.InvalidGroupIdException.code


def test_sync_checks_protocol_type_and_name(conn):
    group = gid()
    member = joined(conn, 5, group).member_id
    response = send(
        conn,
        "SyncGroup",
        5,
        group_id=group,
        generation_id=1,
        member_id=member,
        group_instance_id=None,
        protocol_type="connect",
        protocol_name="range",
        assignments=[],
    )
    assert response.error_code == E.InconsistentGroupProtocolException.code


def test_static_member_fenced(conn):
    group = gid()
    first = joined(conn, 5, group, instance="inst-1")
    send(
        conn,
        "SyncGroup",
        3,
        group_id=group,
        generation_id=1,
        member_id=first.member_id,
        group_instance_id="inst-1",
        assignments=[],
    )
    again = joined(conn, 5, group, instance="inst-1")
    assert again.member_id != first.member_id and again.generation_id == 1
    response = send(
        conn,
        "Heartbeat",
        3,
        group_id=group,
        generation_id=1,
        member_id=first.member_id,
        group_instance_id="inst-1",
    )
    assert response.error_code == E.FencedInstanceIdException.code


def commit(conn, version, group, offset, metadata="m", topic_id=None):
    topic = {
        "name": "proto-t",
        "topic_id": topic_id,
        "partitions": [
            {
                "partition_index": 0,
                "committed_offset": offset,
                "committed_leader_epoch": 3,
                "commit_timestamp": -1,
                "committed_metadata": metadata,
            }
        ],
    }
    return send(
        conn,
        "OffsetCommit",
        version,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[topic],
    )


def topic_id(conn):
    return (
        send(conn, "Metadata", 12, topics=[{"name": "proto-t"}], allow_auto_topic_creation=False)
        .topics[0]
        .topic_id
    )


@pytest.mark.parametrize("version", range(0, 11))
def test_offset_commit_and_fetch_every_version(conn, version):
    group = gid()
    tid = topic_id(conn) if version >= 10 else None
    response = commit(conn, version, group, 40 + version, f"meta-{version}", tid)
    assert response.topics[0].partitions[0].error_code == 0
    if version >= 8:
        topics = [{"name": "proto-t", "topic_id": tid, "partition_indexes": [0, 1]}]
        response = send(
            conn,
            "OffsetFetch",
            version,
            groups=[
                {"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics},
                {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None},
            ],
            require_stable=True,
        )
        explicit, everything = response.groups
        assert explicit.error_code == 0
        parts = explicit.topics[0].partitions
    else:
        response = send(
            conn,
            "OffsetFetch",
            version,
            group_id=group,
            topics=[{"name": "proto-t", "partition_indexes": [0, 1]}],
            require_stable=False,
        )
        parts = response.topics[0].partitions
    assert (parts[0].committed_offset, parts[0].metadata) == (40 + version, f"meta-{version}")
    assert parts[1].committed_offset == -1
    if version >= 6:
        assert parts[0].committed_leader_epoch == 3
    if version >= 8:
        assert [p.partition_index for t in everything.topics for p in t.partitions] == [0]


def test_offset_commit_errors(conn):
    group = gid()
    too_big = commit(conn, 8, group, 1, "x" * 5000)
    assert too_big.topics[0].partitions[0].error_code == E.OffsetMetadataTooLarge.code
    unknown = send(
        conn,
        "OffsetCommit",
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": "no-such-topic",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
        ],
    )
    assert unknown.topics[0].partitions[0].error_code == E.UnknownTopicOrPartitionException.code


def test_list_describe_delete_and_offset_delete(conn):
    stable, empty = gid(), gid()
    member = joined(conn, 5, stable).member_id
    send(
        conn,
        "SyncGroup",
        3,
        group_id=stable,
        generation_id=1,
        member_id=member,
        group_instance_id=None,
        assignments=[{"member_id": member, "assignment": b""}],
    )
    commit(conn, 8, empty, 5)
    listed = send(conn, "ListGroups", 5, states_filter=["Stable"], types_filter=[])
    states = {g.group_id: g.group_state for g in listed.groups}
    assert states.get(stable) == "Stable" and empty not in states
    consumer_only = send(conn, "ListGroups", 5, states_filter=[], types_filter=["consumer"])
    assert stable not in {g.group_id for g in consumer_only.groups}
    classic = send(conn, "ListGroups", 5, states_filter=[], types_filter=["classic"])
    assert {stable, empty} <= {g.group_id for g in classic.groups}
    assert {stable, empty} <= {g.group_id for g in send(conn, "ListGroups", 0).groups}
    missing = send(
        conn, "DescribeGroups", 6, groups=["nope-" + gid()], include_authorized_operations=False
    ).groups[0]
    assert missing.error_code == E.GroupIdNotFoundException.code
    old = send(conn, "DescribeGroups", 0, groups=["nope-" + gid()]).groups[0]
    assert old.error_code == 0 and old.group_state == "Dead"
    described = send(
        conn, "DescribeGroups", 5, groups=[stable], include_authorized_operations=False
    ).groups[0]
    assert described.group_state == "Stable" and described.protocol_data == "range"
    assert described.members[0].client_host.startswith("/")
    # OffsetDelete: refused for a topic the live group subscribes to.
    commit_for_member = send(
        conn,
        "OffsetCommit",
        8,
        group_id=stable,
        generation_id_or_member_epoch=1,
        member_id=member,
        group_instance_id=None,
        topics=[
            {
                "name": "proto-t",
                "partitions": [
                    {"partition_index": 1, "committed_offset": 2, "committed_metadata": ""}
                ],
            }
        ],
    )
    assert commit_for_member.topics[0].partitions[0].error_code == 0
    deleted = send(
        conn,
        "OffsetDelete",
        0,
        group_id=stable,
        topics=[{"name": "proto-t", "partitions": [{"partition_index": 1}]}],
    )
    assert deleted.topics[0].partitions[0].error_code == E.GroupSubscribedToTopicException.code
    deleted = send(
        conn,
        "OffsetDelete",
        0,
        group_id=empty,
        topics=[{"name": "proto-t", "partitions": [{"partition_index": 0}]}],
    )
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    results = send(conn, "DeleteGroups", 2, groups_names=[stable, empty, "nope-" + gid()])
    codes = [r.error_code for r in results.results]
    assert codes == [E.GroupNotEmptyException.code, 0, E.GroupIdNotFoundException.code]
