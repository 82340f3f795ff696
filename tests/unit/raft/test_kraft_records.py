"""KIP-853's control records (KRaftVersionRecord, VotersRecord) byte for byte,
the VoterSet rules, kafka-storage.sh's dynamic voter strings, and snapshots
carrying the voter set in their header batch."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.protocol.errors import CorruptRecordException
from kfast.raft.control_records import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    control_type_of,
    decode_kraft_version,
    decode_voters,
    encode_kraft_version,
    encode_voters,
)
from kfast.raft.log import Batch, LeaderChangeMessage
from kfast.raft.record_batches import RecordBatchCodec, RecordSerde
from kfast.raft.snapshots import (
    snapshot_bytes,
    snapshot_kraft_records,
    snapshot_records,
    with_kraft_records,
)
from kfast.raft.voter_set import (
    Endpoint,
    KRaftVersionRecord,
    VoterNode,
    VoterSet,
    VotersRecord,
    parse_dynamic_voter,
    parse_dynamic_voters,
)
from kfast.records import iter_batches
from kfast.storage.meta_properties import parse_uuid_base64, uuid_base64

DIR_1 = uuid.UUID("32f0f1cd-599c-46c6-93cf-7ddb52e454e8")
DIR_2 = uuid.UUID("00000000-0000-0000-0000-0000000000ff")


def node(voter_id, directory=DIR_1, port=9093):
    return VoterNode(voter_id, directory, (Endpoint("CONTROLLER", "localhost", port),), 0, 1)


def test_kraft_version_record_bytes():
    # Version int16 0 | KRaftVersion int16 1 | no tagged fields
    assert encode_kraft_version(KRaftVersionRecord(1)) == b"\x00\x00\x00\x01\x00"
    assert decode_kraft_version(b"\x00\x00\x00\x01\x00") == KRaftVersionRecord(1)


def test_voters_record_bytes_follow_the_message_grammar():
    expected = (
        b"\x00\x00"  # Version 0
        + b"\x02"  # compact array: 1 voter
        + struct.pack(">i", 7)
        + DIR_1.bytes
        + b"\x02"  # 1 endpoint
        + b"\x0bCONTROLLER"
        + b"\x0alocalhost"
        + struct.pack(">H", 9093)
        + b"\x00"
        + struct.pack(">hh", 0, 1)
        + b"\x00"  # KRaftVersionFeature + its tags
        + b"\x00"  # the voter's tags
        + b"\x00"
    )  # the record's tags
    record = VotersRecord(VoterSet.of([node(7)]))
    assert encode_voters(record) == expected
    assert decode_voters(expected) == record


def test_truncated_voters_record_is_corrupt():
    data = encode_voters(VotersRecord(VoterSet.of([node(1), node(2, DIR_2)])))
    for cut in (3, 10, len(data) - 5):
        with pytest.raises(CorruptRecordException):
            decode_voters(data[:cut])


endpoints = st.lists(
    st.builds(Endpoint, st.text(max_size=8), st.text(max_size=12), st.integers(0, 65535)),
    max_size=3,
).map(tuple)
voter_nodes = st.builds(
    VoterNode,
    st.integers(0, 2**31 - 1),
    st.uuids(),
    endpoints,
    st.integers(0, 1),
    st.integers(0, 1),
)


@given(st.lists(voter_nodes, max_size=5))
def test_voters_record_round_trips(nodes):
    record = VotersRecord(VoterSet.of(nodes))
    assert decode_voters(encode_voters(record)) == record


def test_control_batches_carry_kraft_records_through_the_codec():
    codec = RecordBatchCodec(RecordSerde(lambda r: r.encode(), lambda v: v.decode()))
    voters = VoterSet.of([node(1)])
    batch = Batch(
        5, 2, (LeaderChangeMessage(1, (1,)), KRaftVersionRecord(1), VotersRecord(voters)), True
    )
    data = codec.encode([batch])
    [decoded] = codec.decode(data)
    assert decoded == batch
    types = [control_type_of(r.key) for r in next(iter_batches(data))]
    assert types == [2, KRAFT_VERSION, KRAFT_VOTERS]


def test_voter_set_changes():
    voters = VoterSet.of([node(1), node(2, DIR_2)])
    assert voters.add_voter(node(2)) is None  # id taken: DUPLICATE_VOTER
    grown = voters.add_voter(node(3))
    assert grown.ids == (1, 2, 3) and voters.ids == (1, 2)
    assert voters.remove_voter(2, DIR_1) is None  # wrong directory
    assert voters.remove_voter(2, DIR_2).ids == (1,)
    assert VoterSet.of([node(1)]).remove_voter(1, DIR_1) is None  # never the last
    assert voters.update_voter(node(1, port=1)).get(1).endpoints[0].port == 1
    assert voters.update_voter(node(1, DIR_2)) is None
    assert voters.has_overlapping_majority(grown)
    assert not voters.has_overlapping_majority(grown.add_voter(node(4)))
    # A static voter (no directory id) is any directory of its node.
    static = VoterSet.static((1, 2, 3))
    assert static.is_voter(2, DIR_2) and not voters.is_voter(2, DIR_1)


def test_dynamic_voter_strings_as_kafka_storage_reads_them():
    text = uuid_base64(DIR_1)
    assert parse_dynamic_voter(f"3@h1:9093:{text}", "CONTROLLER") == VoterNode(
        3, DIR_1, (Endpoint("CONTROLLER", "h1", 9093),), 0, 1
    )
    assert parse_dynamic_voter(f"4@[::1]:9094:{text}", "C").endpoints[0].host == "::1"
    voters = parse_dynamic_voters(f"1@a:1:{text},2@b:2:{uuid_base64(DIR_2)}", "CONTROLLER")
    assert voters.ids == (1, 2)
    for bad, message in [
        (f"a:1:{text}", "No @"),
        (f"@a:1:{text}", "beginning"),
        (f"x@a:1:{text}", "node id"),
        (f"1@a1:{text}", "port"),
        (f"1@a:99999:{text}", "Invalid port"),
        ("1@a:1:nope", "directory"),
        (f"1@a:1:{text},1@b:2:{text}", "more than once"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_dynamic_voters(bad, "CONTROLLER")
    assert parse_uuid_base64(text) == DIR_1


def test_snapshots_carry_the_voter_set_in_their_header_batch():
    kraft = (KRaftVersionRecord(1), VotersRecord(VoterSet.of([node(1), node(2, DIR_2)])))
    plain = snapshot_bytes(["a", "b", "c"], 4, lambda r: r.encode())
    spliced = with_kraft_records(plain, kraft)
    written = snapshot_bytes(["a", "b", "c"], 4, lambda r: r.encode(), kraft_records=kraft)
    for data in (spliced, written):
        batches = list(iter_batches(data))
        assert [(b.base_offset, b.records_count) for b in batches] == [(0, 3), (3, 3), (6, 1)]
        assert all(b.is_valid() for b in batches)
        assert snapshot_kraft_records(data) == kraft
        assert snapshot_records(data, bytes) == [b"a", b"b", b"c"]
    assert snapshot_kraft_records(plain) == ()


# -- the voter set history (KRaftControlRecordStateMachine) --------------------------------
def test_voter_set_history_follows_appends_truncations_and_snapshots(make_log):
    from kfast.raft.kraft_control import KRaftControlRecordStateMachine
    from kfast.raft.log import OffsetAndEpoch

    static = VoterSet.static((1, 2, 3))
    one = VoterSet.of([node(1)])
    two = one.add_voter(node(2, DIR_2))
    log = make_log()
    state = KRaftControlRecordStateMachine(static, log)
    state.update_state()
    assert state.last_voter_set() == static and state.last_kraft_version() == 0
    assert state.last_voter_set_offset() is None
    for batch in (
        log.append_as_leader(["a"], 1),
        log.append_as_leader([KRaftVersionRecord(1), VotersRecord(one)], 1, is_control=True),
        log.append_as_leader(["b"], 1),
    ):
        state.observe(batch)
    assert state.last_voter_set() == one and state.last_voter_set_offset() == 2
    state.observe(log.append_as_leader([VotersRecord(two)], 2, is_control=True))
    assert state.last_voter_set() == two
    assert state.voter_set_at(3) == one and state.voter_set_at(4) == two
    # Truncating the change away brings the previous voter set back.
    log.truncate_to(4)
    state.truncate_new_entries(4)
    assert state.last_voter_set() == one
    # A change that is not one voter at a time is refused.
    far = two.add_voter(node(3)).add_voter(node(4))
    with pytest.raises(ValueError, match="overlapping majority"):
        state.observe(log.append_as_leader([VotersRecord(far)], 2, is_control=True))
    # A replica starting from the log's snapshot finds the voter set in it.
    fresh = make_log()
    data = (
        b'{"applied": []}'
        if not hasattr(fresh, "dir")
        else snapshot_bytes([], 1, lambda r: r.encode())
    )
    fresh.create_snapshot(OffsetAndEpoch(0, 0), data, state.kraft_records_at(3))
    restarted = KRaftControlRecordStateMachine(static, fresh)
    restarted.update_state()
    assert restarted.last_voter_set() == one and restarted.last_kraft_version() == 1
    assert restarted.last_voter_set_offset() == -1  # the bootstrap checkpoint's


def test_log_history_keeps_the_value_below_the_log_start():
    from kfast.raft.kraft_control import LogHistory

    history = LogHistory()
    for offset, value in ((-1, "bootstrap"), (5, "a"), (9, "b"), (12, "c")):
        history.add_at(offset, value)
    history.truncate_old_entries(12)  # a snapshot ending at 12: "b" holds at 11
    assert history.offsets() == [9, 12]
    history.truncate_new_entries(12)  # a divergence truncates the log to its start
    assert history.last_entry() == (9, "b") and history.value_at_or_before(11) == "b"
    assert history.value_at_or_before(8) is None
