"""The Raft core's messages as Kafka's RPCs, and back.

Each body in kfast.raft.messages is carried by the Kafka RPC of the same
name, addressed to partition 0 of ``__cluster_metadata`` (Fetch by topic id
from v13, as KRaft's fetchers do), so the bytes on the controller listener
are what Kafka's own quorum exchanges:

    VoteRequest             <-> Vote (52)             v2: pre_vote
    BeginQuorumEpochRequest <-> BeginQuorumEpoch (53)
    EndQuorumEpochRequest   <-> EndQuorumEpoch (54)   v0 preferred_successors,
                                                      v1 preferred_candidates
    FetchRequest            <-> Fetch (1)             replica_id / ReplicaState,
                                                      last_fetched_epoch, v18
                                                      high_watermark
    FetchSnapshotRequest    <-> FetchSnapshot (59)
    AddRaftVoterRequest     <-> AddRaftVoter (80)     KIP-853: the administrator's
    RemoveRaftVoterRequest  <-> RemoveRaftVoter (81)  voter changes, answered
    UpdateRaftVoterRequest  <-> UpdateRaftVoter (82)  with VoterChangeResponse

Replica keys (KIP-853) ride where Kafka's newer versions carry them: the
sender's and the addressed voter's directory ids in Vote v1+, the voter's
in BeginQuorumEpoch v1+, the candidates' in EndQuorumEpoch v1+, the
fetcher's in Fetch v17+ and FetchSnapshot v1+. Older versions drop them
(the zero uuid: any directory).

The request's cluster id is checked by the receiver (INCONSISTENT_CLUSTER_ID
for another cluster's node). Record batches cross as bytes: ``codec``
(``encode(batches) -> bytes``, ``decode(bytes) -> tuple[Batch]``) turns the
core's Batch objects into v2 record batches and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kfast.protocol import (
    AddRaftVoterRequest as WireAddRaftVoterRequest,
)
from kfast.protocol import (
    AddRaftVoterResponse as WireAddRaftVoterResponse,
)
from kfast.protocol import (
    BeginQuorumEpochRequest as WireBeginQuorumEpochRequest,
)
from kfast.protocol import (
    BeginQuorumEpochResponse as WireBeginQuorumEpochResponse,
)
from kfast.protocol import (
    EndQuorumEpochRequest as WireEndQuorumEpochRequest,
)
from kfast.protocol import (
    EndQuorumEpochResponse as WireEndQuorumEpochResponse,
)
from kfast.protocol import (
    FetchRequest as WireFetchRequest,
)
from kfast.protocol import (
    FetchResponse as WireFetchResponse,
)
from kfast.protocol import (
    FetchSnapshotRequest as WireFetchSnapshotRequest,
)
from kfast.protocol import (
    FetchSnapshotResponse as WireFetchSnapshotResponse,
)
from kfast.protocol import (
    RemoveRaftVoterRequest as WireRemoveRaftVoterRequest,
)
from kfast.protocol import (
    RemoveRaftVoterResponse as WireRemoveRaftVoterResponse,
)
from kfast.protocol import (
    UpdateRaftVoterRequest as WireUpdateRaftVoterRequest,
)
from kfast.protocol import (
    UpdateRaftVoterResponse as WireUpdateRaftVoterResponse,
)
from kfast.protocol import (
    VoteRequest as WireVoteRequest,
)
from kfast.protocol import (
    VoteResponse as WireVoteResponse,
)
from kfast.protocol.constants import ZERO_UUID
from kfast.raft.log import Batch, OffsetAndEpoch
from kfast.raft.messages import (
    AddRaftVoterRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from kfast.raft.voter_set import Endpoint
from kfast.storage.manager import CLUSTER_METADATA_TOPIC_NAME, METADATA_TOPIC_ID

METADATA_PARTITION = 0
# Kafka's fetcher asks for at most this much per quorum Fetch (KafkaRaftClient
# MAX_FETCH_SIZE_BYTES) and per FetchSnapshot chunk.
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024
_NO_DIRECTORY = ZERO_UUID  # Kafka's ReplicaKey.NO_DIRECTORY_ID
_LONG_MAX = 2**63 - 1


class BatchCodec(Protocol):
    def encode(self, batches: Sequence[Batch]) -> bytes: ...

    def decode(self, data: bytes) -> tuple[Batch, ...]: ...


class WireError(Exception):
    """A request or response that does not address ``__cluster_metadata-0``
    the way a quorum member would (INVALID_REQUEST for a request)."""


def _one_partition(
    topics, name_field: str = "topic_name", partition_field: str = "partition_index"
):
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError("a quorum RPC names exactly one partition")
    topic = topics[0]
    name = getattr(topic, name_field, None)
    if (
        name not in (None, "", CLUSTER_METADATA_TOPIC_NAME)
        and getattr(topic, "topic_id", None) != METADATA_TOPIC_ID
    ):
        raise WireError(f"a quorum RPC for topic {name!r}")
    partition = topic.partitions[0]
    if getattr(partition, partition_field) != METADATA_PARTITION:
        raise WireError("a quorum RPC for a partition other than 0")
    return partition


# -- Vote --------------------------------------------------------------------------------------
def vote_request(body: VoteRequest, cluster_id: str, voter_id: int) -> WireVoteRequest:
    Topic, Partition = WireVoteRequest.TopicData, WireVoteRequest.PartitionData
    return WireVoteRequest(
        cluster_id=cluster_id,
        voter_id=voter_id,
        topics=[
            Topic(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        partition_index=METADATA_PARTITION,
                        replica_epoch=body.replica_epoch,
                        replica_id=body.replica_id,
                        replica_directory_id=body.replica_directory_id,
                        voter_directory_id=body.voter_directory_id,
                        last_offset_epoch=body.last_offset_epoch,
                        last_offset=body.last_offset,
                        pre_vote=body.pre_vote,
                    )
                ],
            )
        ],
    )


def from_vote_request(wire: WireVoteRequest) -> VoteRequest:
    p = _one_partition(wire.topics)
    return VoteRequest(
        p.replica_epoch,
        p.replica_id,
        p.last_offset_epoch,
        p.last_offset,
        p.pre_vote,
        p.replica_directory_id or ZERO_UUID,
        p.voter_directory_id or ZERO_UUID,
    )


def vote_response(body: VoteResponse, error_code: int = 0) -> WireVoteResponse:
    Topic, Partition = WireVoteResponse.TopicData, WireVoteResponse.PartitionData
    return WireVoteResponse(
        error_code=error_code,
        topics=[
            Topic(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        partition_index=METADATA_PARTITION,
                        error_code=body.error_code,
                        leader_id=body.leader_id,
                        leader_epoch=body.leader_epoch,
                        vote_granted=body.vote_granted,
                    )
                ],
            )
        ],
    )


def from_vote_response(wire: WireVoteResponse) -> VoteResponse:
    p = _one_partition(wire.topics)
    return VoteResponse(
        p.error_code or wire.error_code, p.leader_id, p.leader_epoch, p.vote_granted
    )


# -- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------------------------
def begin_quorum_epoch_request(
    body: BeginQuorumEpochRequest, cluster_id: str, voter_id: int
) -> WireBeginQuorumEpochRequest:
    Topic = WireBeginQuorumEpochRequest.TopicData
    Partition = WireBeginQuorumEpochRequest.PartitionData
    return WireBeginQuorumEpochRequest(
        cluster_id=cluster_id,
        voter_id=voter_id,
        topics=[
            Topic(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        partition_index=METADATA_PARTITION,
                        leader_id=body.leader_id,
                        leader_epoch=body.leader_epoch,
                        voter_directory_id=body.voter_directory_id,
                    )
                ],
            )
        ],
    )


def from_begin_quorum_epoch_request(wire) -> BeginQuorumEpochRequest:
    p = _one_partition(wire.topics)
    return BeginQuorumEpochRequest(p.leader_id, p.leader_epoch, p.voter_directory_id or ZERO_UUID)


def end_quorum_epoch_request(
    body: EndQuorumEpochRequest, cluster_id: str, directory_of=lambda voter_id: _NO_DIRECTORY
) -> WireEndQuorumEpochRequest:
    Topic = WireEndQuorumEpochRequest.TopicData
    Partition = WireEndQuorumEpochRequest.PartitionData
    return WireEndQuorumEpochRequest(
        cluster_id=cluster_id,
        topics=[
            Topic(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        partition_index=METADATA_PARTITION,
                        leader_id=body.leader_id,
                        leader_epoch=body.leader_epoch,
                        preferred_successors=list(body.preferred_successors),
                        preferred_candidates=[
                            WireEndQuorumEpochRequest.ReplicaInfo(
                                candidate_id=c, candidate_directory_id=directory_of(c)
                            )
                            for c in body.preferred_successors
                        ],
                    )
                ],
            )
        ],
    )


def from_end_quorum_epoch_request(wire) -> EndQuorumEpochRequest:
    p = _one_partition(wire.topics)
    successors = [c.candidate_id for c in p.preferred_candidates] or list(p.preferred_successors)
    return EndQuorumEpochRequest(p.leader_id, p.leader_epoch, tuple(successors))


def _epoch_response(cls, body, error_code: int = 0):
    return cls(
        error_code=error_code,
        topics=[
            cls.TopicData(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    cls.PartitionData(
                        partition_index=METADATA_PARTITION,
                        error_code=body.error_code,
                        leader_id=body.leader_id,
                        leader_epoch=body.leader_epoch,
                    )
                ],
            )
        ],
    )


def begin_quorum_epoch_response(body: BeginQuorumEpochResponse, error_code: int = 0):
    return _epoch_response(WireBeginQuorumEpochResponse, body, error_code)


def end_quorum_epoch_response(body: EndQuorumEpochResponse, error_code: int = 0):
    return _epoch_response(WireEndQuorumEpochResponse, body, error_code)


def from_begin_quorum_epoch_response(wire) -> BeginQuorumEpochResponse:
    p = _one_partition(wire.topics)
    return BeginQuorumEpochResponse(p.error_code or wire.error_code, p.leader_id, p.leader_epoch)


def from_end_quorum_epoch_response(wire) -> EndQuorumEpochResponse:
    p = _one_partition(wire.topics)
    return EndQuorumEpochResponse(p.error_code or wire.error_code, p.leader_id, p.leader_epoch)


# -- Fetch ----------------------------------------------------------------------------------
def fetch_request(body: FetchRequest, cluster_id: str, version: int) -> WireFetchRequest:
    """Fetch at ``version`` (13+: KRaft fetches by topic id): the replica is
    named by replica_id up to v14, by ReplicaState from v15."""
    Topic, Partition = WireFetchRequest.FetchTopic, WireFetchRequest.FetchPartition
    legacy = version <= 14
    return WireFetchRequest(
        cluster_id=cluster_id,
        replica_id=body.replica_id if legacy else -1,
        replica_state=WireFetchRequest.ReplicaState(
            replica_id=-1 if legacy else body.replica_id, replica_epoch=-1
        ),
        max_wait_ms=body.max_wait_ms,
        min_bytes=0,
        max_bytes=MAX_FETCH_SIZE_BYTES,
        topics=[
            Topic(
                topic=CLUSTER_METADATA_TOPIC_NAME,
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    Partition(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=body.current_leader_epoch,
                        fetch_offset=body.fetch_offset,
                        last_fetched_epoch=body.last_fetched_epoch,
                        replica_directory_id=body.replica_directory_id,
                        partition_max_bytes=MAX_FETCH_SIZE_BYTES,
                        high_watermark=(
                            _LONG_MAX if body.high_watermark < 0 else body.high_watermark
                        ),
                    )
                ],
            )
        ],
    )


def is_quorum_fetch(wire: WireFetchRequest) -> bool:
    """Does this Fetch read ``__cluster_metadata-0`` (a quorum member's
    fetch, for the Raft layer) rather than a data partition?"""
    return len(wire.topics) == 1 and (
        wire.topics[0].topic_id == METADATA_TOPIC_ID
        or wire.topics[0].topic == CLUSTER_METADATA_TOPIC_NAME
    )


def from_fetch_request(wire: WireFetchRequest) -> FetchRequest:
    topic = wire.topics[0] if wire.topics else None
    if (
        topic is None
        or len(topic.partitions) != 1
        or topic.partitions[0].partition != METADATA_PARTITION
    ):
        raise WireError("a quorum Fetch names partition 0 of __cluster_metadata only")
    p = topic.partitions[0]
    replica_id = wire.replica_state.replica_id if wire.replica_id < 0 else wire.replica_id
    high_watermark = -1 if p.high_watermark == _LONG_MAX else p.high_watermark
    return FetchRequest(
        replica_id,
        p.current_leader_epoch,
        p.fetch_offset,
        p.last_fetched_epoch,
        wire.max_wait_ms,
        high_watermark,
        p.replica_directory_id or ZERO_UUID,
    )


def fetch_response(
    body: FetchResponse, codec: BatchCodec, error_code: int = 0
) -> WireFetchResponse:
    Topic = WireFetchResponse.FetchableTopicResponse
    Partition = WireFetchResponse.PartitionData
    partition = Partition(
        partition_index=METADATA_PARTITION,
        error_code=body.error_code,
        high_watermark=body.high_watermark,
        log_start_offset=body.log_start_offset,
        current_leader=WireFetchResponse.LeaderIdAndEpoch(
            leader_id=body.leader_id, leader_epoch=body.leader_epoch
        ),
        records=codec.encode(body.batches) if body.batches else None,
    )
    if body.diverging_epoch is not None:
        partition.diverging_epoch = WireFetchResponse.EpochEndOffset(
            epoch=body.diverging_epoch.epoch, end_offset=body.diverging_epoch.offset
        )
    if body.snapshot_id is not None:
        partition.snapshot_id = WireFetchResponse.SnapshotId(
            end_offset=body.snapshot_id.offset, epoch=body.snapshot_id.epoch
        )
    return WireFetchResponse(
        error_code=error_code,
        responses=[
            Topic(
                topic=CLUSTER_METADATA_TOPIC_NAME,
                topic_id=METADATA_TOPIC_ID,
                partitions=[partition],
            )
        ],
    )


def from_fetch_response(wire: WireFetchResponse, codec: BatchCodec) -> FetchResponse:
    if wire.error_code or not wire.responses:
        return FetchResponse(wire.error_code or 0, -1, -1)
    p = _one_partition(wire.responses, "topic", "partition_index")
    diverging = snapshot = None
    if p.diverging_epoch.epoch >= 0:
        diverging = OffsetAndEpoch(p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
    if p.snapshot_id.end_offset >= 0:
        snapshot = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    records = p.records
    batches = codec.decode(bytes(records)) if records else ()
    return FetchResponse(
        p.error_code,
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        p.high_watermark,
        p.log_start_offset,
        diverging,
        snapshot,
        batches,
    )


# -- FetchSnapshot ------------------------------------------------------------------------------
def fetch_snapshot_request(body: FetchSnapshotRequest, cluster_id: str) -> WireFetchSnapshotRequest:
    Topic = WireFetchSnapshotRequest.TopicSnapshot
    Partition = WireFetchSnapshotRequest.PartitionSnapshot
    return WireFetchSnapshotRequest(
        cluster_id=cluster_id,
        replica_id=body.replica_id,
        max_bytes=min(body.max_bytes, MAX_FETCH_SIZE_BYTES),
        topics=[
            Topic(
                name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=body.current_leader_epoch,
                        snapshot_id=WireFetchSnapshotRequest.SnapshotId(
                            end_offset=body.snapshot_id.offset, epoch=body.snapshot_id.epoch
                        ),
                        position=body.position,
                        replica_directory_id=body.replica_directory_id,
                    )
                ],
            )
        ],
    )


def from_fetch_snapshot_request(wire: WireFetchSnapshotRequest) -> FetchSnapshotRequest:
    p = _one_partition(wire.topics, "name", "partition")
    return FetchSnapshotRequest(
        wire.replica_id,
        p.current_leader_epoch,
        OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        p.position,
        wire.max_bytes,
        p.replica_directory_id or ZERO_UUID,
    )


def fetch_snapshot_response(
    body: FetchSnapshotResponse, error_code: int = 0
) -> WireFetchSnapshotResponse:
    Topic = WireFetchSnapshotResponse.TopicSnapshot
    Partition = WireFetchSnapshotResponse.PartitionSnapshot
    snapshot_id = body.snapshot_id or OffsetAndEpoch(-1, -1)
    return WireFetchSnapshotResponse(
        error_code=error_code,
        topics=[
            Topic(
                name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[
                    Partition(
                        index=METADATA_PARTITION,
                        error_code=body.error_code,
                        snapshot_id=WireFetchSnapshotResponse.SnapshotId(
                            end_offset=snapshot_id.offset, epoch=snapshot_id.epoch
                        ),
                        current_leader=WireFetchSnapshotResponse.LeaderIdAndEpoch(
                            leader_id=body.leader_id, leader_epoch=body.leader_epoch
                        ),
                        size=body.size,
                        position=body.position,
                        unaligned_records=body.unaligned_records,
                    )
                ],
            )
        ],
    )


def from_fetch_snapshot_response(wire: WireFetchSnapshotResponse) -> FetchSnapshotResponse:
    if wire.error_code or not wire.topics:
        return FetchSnapshotResponse(wire.error_code or 0, -1, -1)
    p = _one_partition(wire.topics, "name", "index")
    snapshot_id = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    return FetchSnapshotResponse(
        p.error_code,
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        None if snapshot_id.offset < 0 else snapshot_id,
        p.size,
        p.position,
        bytes(p.unaligned_records or b""),
    )


# -- AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (KIP-853) -------------------------------
def _endpoints(listeners) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(l.name, l.host, l.port) for l in listeners or ())


def add_raft_voter_request(
    body: AddRaftVoterRequest, cluster_id: str | None
) -> WireAddRaftVoterRequest:
    Listener = WireAddRaftVoterRequest.Listener
    return WireAddRaftVoterRequest(
        cluster_id=cluster_id,
        timeout_ms=body.timeout_ms,
        voter_id=body.voter_id,
        voter_directory_id=body.voter_directory_id,
        listeners=[Listener(name=e.name, host=e.host, port=e.port) for e in body.endpoints],
    )


def from_add_raft_voter_request(wire: WireAddRaftVoterRequest) -> AddRaftVoterRequest:
    if wire.voter_id < 0:
        raise WireError(f"voter id {wire.voter_id} is not a node id")
    return AddRaftVoterRequest(
        wire.voter_id,
        wire.voter_directory_id or ZERO_UUID,
        _endpoints(wire.listeners),
        wire.timeout_ms,
    )


def remove_raft_voter_request(
    body: RemoveRaftVoterRequest, cluster_id: str | None
) -> WireRemoveRaftVoterRequest:
    return WireRemoveRaftVoterRequest(
        cluster_id=cluster_id, voter_id=body.voter_id, voter_directory_id=body.voter_directory_id
    )


def from_remove_raft_voter_request(wire: WireRemoveRaftVoterRequest) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(wire.voter_id, wire.voter_directory_id or ZERO_UUID)


def update_raft_voter_request(
    body: UpdateRaftVoterRequest, cluster_id: str | None
) -> WireUpdateRaftVoterRequest:
    Listener = WireUpdateRaftVoterRequest.Listener
    return WireUpdateRaftVoterRequest(
        cluster_id=cluster_id,
        current_leader_epoch=body.current_leader_epoch,
        voter_id=body.voter_id,
        voter_directory_id=body.voter_directory_id,
        listeners=[Listener(name=e.name, host=e.host, port=e.port) for e in body.endpoints],
        k_raft_version_feature=WireUpdateRaftVoterRequest.KRaftVersionFeature(
            min_supported_version=body.min_kraft_version,
            max_supported_version=body.max_kraft_version,
        ),
    )


def from_update_raft_voter_request(wire: WireUpdateRaftVoterRequest) -> UpdateRaftVoterRequest:
    feature = wire.k_raft_version_feature
    return UpdateRaftVoterRequest(
        wire.current_leader_epoch,
        wire.voter_id,
        wire.voter_directory_id or ZERO_UUID,
        _endpoints(wire.listeners),
        feature.min_supported_version,
        feature.max_supported_version,
    )


def add_raft_voter_response(body: VoterChangeResponse, error_code: int = 0):
    return WireAddRaftVoterResponse(
        error_code=error_code or body.error_code, error_message=body.error_message
    )


def remove_raft_voter_response(body: VoterChangeResponse, error_code: int = 0):
    return WireRemoveRaftVoterResponse(
        error_code=error_code or body.error_code, error_message=body.error_message
    )


def update_raft_voter_response(
    body: VoterChangeResponse, error_code: int = 0, leader_endpoint: Endpoint | None = None
):
    """The answer names the leader as the replica knows it (and, where it
    knows it, where to reach it on the listener the request came in on)."""
    leader = WireUpdateRaftVoterResponse.CurrentLeader(
        leader_id=body.leader_id,
        leader_epoch=body.leader_epoch,
        host=leader_endpoint.host if leader_endpoint else "",
        port=leader_endpoint.port if leader_endpoint else -1,
    )
    return WireUpdateRaftVoterResponse(
        error_code=error_code or body.error_code, current_leader=leader
    )


def from_voter_change_response(wire) -> VoterChangeResponse:
    leader = getattr(wire, "current_leader", None)
    return VoterChangeResponse(
        wire.error_code,
        getattr(wire, "error_message", None),
        leader.leader_id if leader else -1,
        leader.leader_epoch if leader else -1,
    )
