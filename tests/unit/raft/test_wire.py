"""The Raft core's messages through Kafka's RPC encodings and back, at every
version the quorum APIs define (the bytes a Kafka controller would send)."""

from __future__ import annotations

import pytest

from kfast.protocol import (
    api_keys,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kfast.raft import wire
from kfast.raft.log import Batch, OffsetAndEpoch
from kfast.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)


class ReprCodec:
    """Batches as their repr: enough to check that records cross intact."""

    def encode(self, batches):
        return repr([(b.base_offset, b.epoch, b.records, b.is_control) for b in batches]).encode()

    def decode(self, data):
        import ast

        return tuple(Batch(*row) for row in ast.literal_eval(data.decode()))


def through_request(api_name: str, body, version: int):
    key = api_keys.BY_NAME[api_name].key
    frame = encode_request(key, version, 7, "test", body)[4:]
    header = decode_request_header(frame)
    return decode_request_body(header, frame)


def through_response(api_name: str, body, version: int):
    key = api_keys.BY_NAME[api_name].key
    frame = encode_response(key, version, 7, body)[4:]
    correlation_id, decoded = decode_response(key, version, frame)
    assert correlation_id == 7
    return decoded


@pytest.mark.parametrize("version", [2])
def test_vote_with_pre_vote(version):
    request = VoteRequest(5, 2, 4, 120, pre_vote=True)
    decoded = through_request("Vote", wire.vote_request(request, "cid", 3), version)
    assert decoded.cluster_id == "cid"
    assert wire.from_vote_request(decoded) == request
    response = VoteResponse(0, 1, 5, True)
    assert (
        wire.from_vote_response(through_response("Vote", wire.vote_response(response), version))
        == response
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_vote_without_pre_vote_at_every_version(version):
    request = VoteRequest(5, 2, 4, 120, pre_vote=False)
    assert (
        wire.from_vote_request(
            through_request("Vote", wire.vote_request(request, "cid", 3), version)
        )
        == request
    )


@pytest.mark.parametrize("version", [0, 1])
def test_begin_and_end_quorum_epoch(version):
    begin = BeginQuorumEpochRequest(1, 9)
    assert (
        wire.from_begin_quorum_epoch_request(
            through_request(
                "BeginQuorumEpoch", wire.begin_quorum_epoch_request(begin, "c", 2), version
            )
        )
        == begin
    )
    end = EndQuorumEpochRequest(1, 9, (3, 2))
    assert (
        wire.from_end_quorum_epoch_request(
            through_request("EndQuorumEpoch", wire.end_quorum_epoch_request(end, "c"), version)
        )
        == end
    )
    for name, body, to_wire, from_wire in (
        (
            "BeginQuorumEpoch",
            BeginQuorumEpochResponse(74, 2, 10),
            wire.begin_quorum_epoch_response,
            wire.from_begin_quorum_epoch_response,
        ),
        (
            "EndQuorumEpoch",
            EndQuorumEpochResponse(0, 2, 10),
            wire.end_quorum_epoch_response,
            wire.from_end_quorum_epoch_response,
        ),
    ):
        assert from_wire(through_response(name, to_wire(body), version)) == body


@pytest.mark.parametrize("version", [13, 15, 16, 17, 18])
def test_fetch_of_the_metadata_partition(version):
    request = FetchRequest(2, 6, 40, 5, 500, high_watermark=38)
    decoded = through_request("Fetch", wire.fetch_request(request, "cid", version), version)
    assert wire.is_quorum_fetch(decoded)
    expected = request if version >= 18 else FetchRequest(2, 6, 40, 5, 500, -1)
    assert wire.from_fetch_request(decoded) == expected
    codec = ReprCodec()
    for response in (
        FetchResponse(0, 1, 6, 38, 0, batches=(Batch(40, 6, ("a", "b")), Batch(42, 6, ("c",)))),
        FetchResponse(0, 1, 6, 38, 0, diverging_epoch=OffsetAndEpoch(30, 4)),
        FetchResponse(0, 1, 6, 38, 10, snapshot_id=OffsetAndEpoch(10, 3)),
        FetchResponse(6, 1, 6, 38, 0),
    ):
        decoded = through_response("Fetch", wire.fetch_response(response, codec), version)
        assert wire.from_fetch_response(decoded, codec) == response


@pytest.mark.parametrize("version", [0, 1])
def test_fetch_snapshot(version):
    request = FetchSnapshotRequest(3, 6, OffsetAndEpoch(100, 5), 4096, 1 << 20)
    assert (
        wire.from_fetch_snapshot_request(
            through_request("FetchSnapshot", wire.fetch_snapshot_request(request, "cid"), version)
        )
        == request
    )
    response = FetchSnapshotResponse(0, 1, 6, OffsetAndEpoch(100, 5), 9000, 4096, b"x" * 100)
    assert (
        wire.from_fetch_snapshot_response(
            through_response("FetchSnapshot", wire.fetch_snapshot_response(response), version)
        )
        == response
    )


def test_a_fetch_for_another_partition_is_not_the_quorums():
    request = through_request("Fetch", wire.fetch_request(FetchRequest(2, 6, 0, 0, 0), "c", 16), 16)
    request.topics[0].topic_id = __import__("uuid").uuid4()
    request.topics[0].topic = "orders"
    assert not wire.is_quorum_fetch(request)
    request = through_request("Vote", wire.vote_request(VoteRequest(1, 2, 0, 0, False), "c", 1), 2)
    request.topics[0].partitions[0].partition_index = 1
    with pytest.raises(wire.WireError):
        wire.from_vote_request(request)
