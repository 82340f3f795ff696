"""The messages the Raft core exchanges, one class per Kafka RPC body.

Each body carries the fields of the Kafka RPC that the protocol reads,
named as Kafka names them (kfast.protocol.messages has the wire grammar;
the network driver maps between the two). A message travels inside a
RaftRequest or RaftResponse that says who sent it, to whom, and which
request a response answers (the correlation id).

Epochs: every body carries the sender's view of the quorum, an epoch and,
where known, its leader (-1 = unknown). A receiver that learns of a newer
epoch moves to it before anything else.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple, Union

from kfast.protocol.constants import (
    NO_LEADER,  # noqa: F401 (re-exported)
    ZERO_UUID,
)
from kfast.raft.log import Batch, OffsetAndEpoch
from kfast.raft.voter_set import Endpoint


@dataclass(frozen=True)
class VoteRequest:
    """Vote v2: ``pre_vote`` asks whether the voter *would* vote (KIP-996);
    it changes nothing on the voter. ``replica_epoch`` is the sender's
    epoch: a candidate's new epoch, a prospective candidate's current one."""

    replica_epoch: int
    replica_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    # Replica keys (Vote v1+, KIP-853): the sender's directory, and the
    # directory the sender believes the receiving voter has.
    replica_directory_id: uuid.UUID = ZERO_UUID
    voter_directory_id: uuid.UUID = ZERO_UUID


@dataclass(frozen=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    """The new leader tells the voters it won ``leader_epoch``."""

    leader_id: int
    leader_epoch: int
    voter_directory_id: uuid.UUID = ZERO_UUID  # the receiver, as the leader knows it


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    """The leader resigns ``leader_epoch``; ``preferred_successors`` are the
    voters it would like to follow it, most caught up first."""

    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchRequest:
    """Fetch on ``__cluster_metadata-0``: the replica's log end offset
    (``fetch_offset``) and the epoch of its last batch let the leader check
    that the two logs agree before it sends more."""

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    # The replica's high watermark (Fetch v18); the leader answers at once
    # when it has a newer one instead of holding the fetch.
    high_watermark: int = 2**63 - 1
    replica_directory_id: uuid.UUID = ZERO_UUID  # Fetch v17+


@dataclass(frozen=True)
class FetchResponse:
    """One of: ``batches`` from fetch_offset on; ``diverging_epoch`` (the
    replica's log differs from the leader's after that offset and epoch:
    truncate, then fetch again); ``snapshot_id`` (the records are gone
    behind a snapshot: fetch it)."""

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None
    batches: tuple[Batch, ...] = field(default=())


@dataclass(frozen=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    replica_directory_id: uuid.UUID = ZERO_UUID  # FetchSnapshot v1+


@dataclass(frozen=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    unaligned_records: bytes = b""


# -- KIP-853: changing the voter set. An administrator (kafka-metadata-quorum.sh)
# sends these to the leader; the answer comes once the change is committed
# (AddRaftVoter, RemoveRaftVoter) or appended (UpdateRaftVoter).
@dataclass(frozen=True)
class AddRaftVoterRequest:
    voter_id: int
    voter_directory_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    timeout_ms: int


@dataclass(frozen=True)
class RemoveRaftVoterRequest:
    voter_id: int
    voter_directory_id: uuid.UUID


@dataclass(frozen=True)
class UpdateRaftVoterRequest:
    """A voter tells the leader its current endpoints and kraft.version range."""

    current_leader_epoch: int
    voter_id: int
    voter_directory_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True)
class VoterChangeResponse:
    """The answer to AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter;
    ``leader_id``/``leader_epoch`` as the answering replica knows them."""

    error_code: int
    error_message: str | None = None
    leader_id: int = -1
    leader_epoch: int = -1


RequestBody = Union[
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
]
ResponseBody = Union[
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    VoterChangeResponse,
]


class RaftRequest(NamedTuple):
    correlation_id: int
    source: int
    destination: int
    body: RequestBody


class RaftResponse(NamedTuple):
    correlation_id: int
    source: int
    destination: int
    body: ResponseBody


RaftMessage = Union[RaftRequest, RaftResponse]
