"""KIP-853 on the wire: replica keys (directory ids) in the quorum RPCs where
Kafka's newer versions carry them, dropped by the older ones, and the voter
changes (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) through their
encodings and back."""

from __future__ import annotations

import uuid

import pytest

from kfast.protocol import FetchResponse as WireFetchResponse
from kfast.protocol.constants import ZERO_UUID
from kfast.raft import wire
from kfast.raft.log import OffsetAndEpoch
from kfast.raft.messages import (
    AddRaftVoterRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
)
from kfast.raft.voter_set import Endpoint

from .test_wire import through_request, through_response

MINE = uuid.UUID("32f0f1cd-599c-46c6-93cf-7ddb52e454e8")
THEIRS = uuid.UUID("00000000-0000-0000-0000-0000000000ff")
ENDPOINTS = (Endpoint("CONTROLLER", "h1", 9093), Endpoint("ALT", "::1", 9094))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_vote_carries_both_replica_keys_from_v1(version):
    request = VoteRequest(5, 2, 4, 120, False, MINE, THEIRS)
    decoded = wire.from_vote_request(
        through_request("Vote", wire.vote_request(request, "cid", 3), version)
    )
    expected = request if version >= 1 else VoteRequest(5, 2, 4, 120, False)
    assert decoded == expected


@pytest.mark.parametrize("version", [0, 1])
def test_begin_and_end_quorum_epoch_carry_directory_ids_from_v1(version):
    begin = BeginQuorumEpochRequest(1, 9, THEIRS)
    decoded = wire.from_begin_quorum_epoch_request(
        through_request("BeginQuorumEpoch", wire.begin_quorum_epoch_request(begin, "c", 2), version)
    )
    assert decoded == (begin if version else BeginQuorumEpochRequest(1, 9))
    end = EndQuorumEpochRequest(1, 9, (3, 2))
    request = through_request(
        "EndQuorumEpoch", wire.end_quorum_epoch_request(end, "c", {3: MINE, 2: THEIRS}.get), version
    )
    assert wire.from_end_quorum_epoch_request(request) == end
    if version:
        assert [
            c.candidate_directory_id for c in request.topics[0].partitions[0].preferred_candidates
        ] == [MINE, THEIRS]


@pytest.mark.parametrize("version", [16, 17, 18])
def test_fetch_carries_the_fetchers_directory_from_v17(version):
    request = FetchRequest(2, 6, 40, 5, 500, 38, MINE)
    decoded = wire.from_fetch_request(
        through_request("Fetch", wire.fetch_request(request, "cid", version), version)
    )
    assert decoded.replica_directory_id == (MINE if version >= 17 else ZERO_UUID)


@pytest.mark.parametrize("version", [0, 1])
def test_fetch_snapshot_carries_the_fetchers_directory_from_v1(version):
    request = FetchSnapshotRequest(3, 6, OffsetAndEpoch(100, 5), 0, 1 << 20, MINE)
    decoded = wire.from_fetch_snapshot_request(
        through_request("FetchSnapshot", wire.fetch_snapshot_request(request, "cid"), version)
    )
    assert decoded.replica_directory_id == (MINE if version else ZERO_UUID)


def test_answers_name_where_the_leader_is():
    response = WireFetchResponse(
        error_code=0,
        responses=[],
        node_endpoints=[WireFetchResponse.NodeEndpoint(node_id=1, host="h1", port=9093)],
    )
    decoded = through_response("Fetch", response, 17)
    assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == [(1, "h1", 9093)]


@pytest.mark.parametrize("version", [0, 1])
def test_add_raft_voter(version):
    request = AddRaftVoterRequest(4, MINE, ENDPOINTS, 30_000)
    decoded = through_request("AddRaftVoter", wire.add_raft_voter_request(request, "cid"), version)
    assert decoded.cluster_id == "cid"
    assert wire.from_add_raft_voter_request(decoded) == request
    answer = VoterChangeResponse(126, "already a voter")
    back = wire.from_voter_change_response(
        through_response("AddRaftVoter", wire.add_raft_voter_response(answer), version)
    )
    assert (back.error_code, back.error_message) == (126, "already a voter")


def test_remove_and_update_raft_voter():
    remove = RemoveRaftVoterRequest(2, THEIRS)
    assert (
        wire.from_remove_raft_voter_request(
            through_request("RemoveRaftVoter", wire.remove_raft_voter_request(remove, None), 0)
        )
        == remove
    )
    update = UpdateRaftVoterRequest(7, 3, MINE, ENDPOINTS, 0, 1)
    assert (
        wire.from_update_raft_voter_request(
            through_request("UpdateRaftVoter", wire.update_raft_voter_request(update, "cid"), 0)
        )
        == update
    )
    answer = VoterChangeResponse(0, None, 1, 7)
    decoded = through_response(
        "UpdateRaftVoter",
        wire.update_raft_voter_response(answer, 0, Endpoint("CONTROLLER", "h1", 9093)),
        0,
    )
    assert (decoded.current_leader.host, decoded.current_leader.port) == ("h1", 9093)
    assert wire.from_voter_change_response(decoded) == answer


def test_a_negative_voter_id_is_an_invalid_request():
    request = through_request(
        "AddRaftVoter",
        wire.add_raft_voter_request(AddRaftVoterRequest(4, MINE, ENDPOINTS, 1000), "cid"),
        0,
    )
    request.voter_id = -1
    with pytest.raises(wire.WireError):
        wire.from_add_raft_voter_request(request)
