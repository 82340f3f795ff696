"""VoterSet: who votes in a KRaft quorum, and the two control records that say so (KIP-853).

A voter is a replica key -- its node id and the id of the metadata log
directory it votes with -- plus the endpoints other replicas reach it at and
the kraft.version range it supports. The directory id is what makes a voter
whose disk was wiped a different voter from the one it replaces: a node
reformatted with a new directory id is not a voter until it is added again
(Kafka's ReplicaKey, VoterSet.VoterNode). A static quorum
(controller.quorum.voters, kraft.version 0) knows ids only: its voters have
the zero directory id, which matches any directory.

    voters = VoterSet.of(VoterNode(1, dir_1, (Endpoint("CONTROLLER", "h", 9093),)))
    voters.add_voter(node_2)         # None if id 2 is a voter already
    voters.remove_voter(2, dir_2)    # None unless (2, dir_2) is a voter and not the last
    voters.has_overlapping_majority(other)   # differ by at most one voter each way

Two control records carry a voter set through the metadata log and its
snapshots (kfast.raft.control_records has their bytes):
    KRaftVersionRecord  control type 5: the finalized kraft.version
    VotersRecord        control type 6: the whole voter set from that offset on
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import NamedTuple

from kfast.protocol.constants import ZERO_UUID

# kraft.version levels (Kafka's KRaftVersion): 0 static voters, 1 the voter
# set lives in the log and can change.
KRAFT_VERSION_0 = 0
KRAFT_VERSION_1 = 1
# The range a kfast node supports, in its VotersRecord entries and its
# ApiVersions features.
SUPPORTED_KRAFT_VERSIONS = (KRAFT_VERSION_0, KRAFT_VERSION_1)


class Endpoint(NamedTuple):
    """A listener of a voter: the controller listener's name, host and port."""

    name: str
    host: str
    port: int


class VoterNode(NamedTuple):
    voter_id: int
    directory_id: uuid.UUID = ZERO_UUID
    endpoints: tuple[Endpoint, ...] = ()
    min_kraft_version: int = 0
    max_kraft_version: int = 0

    def is_voter(self, node_id: int, directory_id: uuid.UUID) -> bool:
        """Is replica (node_id, directory_id) this voter? A voter without a
        directory id (a static quorum's) matches any directory."""
        return node_id == self.voter_id and (
            self.directory_id == ZERO_UUID or directory_id == self.directory_id
        )

    def endpoint(self, listener_name: str | None = None) -> Endpoint | None:
        for endpoint in self.endpoints:
            if listener_name is None or endpoint.name == listener_name:
                return endpoint
        return None


class VoterSet:
    """An immutable set of voters by node id; changes return a new set."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: dict[int, VoterNode]):
        self._nodes = dict(sorted(nodes.items()))

    @classmethod
    def of(cls, nodes: Iterable[VoterNode]) -> VoterSet:
        return cls({node.voter_id: node for node in nodes})

    @classmethod
    def static(cls, voters) -> VoterSet:
        """controller.quorum.voters: ids, or {id: (host, port) or None (a voter
        no one reaches: the embedded single node)}; no directory ids."""
        if isinstance(voters, dict):
            return cls.of(
                VoterNode(voter_id, endpoints=() if address is None else (Endpoint("", *address),))
                for voter_id, address in voters.items()
            )
        return cls.of(VoterNode(voter_id) for voter_id in voters)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(self._nodes)

    @property
    def nodes(self) -> tuple[VoterNode, ...]:
        return tuple(self._nodes.values())

    def get(self, node_id: int) -> VoterNode | None:
        return self._nodes.get(node_id)

    def __contains__(self, node_id: int) -> bool:
        return node_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __eq__(self, other) -> bool:
        return isinstance(other, VoterSet) and self._nodes == other._nodes

    def __hash__(self) -> int:
        return hash(tuple(self._nodes.values()))

    def __repr__(self) -> str:
        return (
            "VoterSet("
            + ", ".join(
                f"{n.voter_id}:{n.directory_id}" if n.directory_id != ZERO_UUID else str(n.voter_id)
                for n in self._nodes.values()
            )
            + ")"
        )

    def is_voter(self, node_id: int, directory_id: uuid.UUID = ZERO_UUID) -> bool:
        node = self._nodes.get(node_id)
        return node is not None and node.is_voter(node_id, directory_id)

    def replica_keys(self) -> set[tuple[int, uuid.UUID]]:
        return {(n.voter_id, n.directory_id) for n in self._nodes.values()}

    def add_voter(self, node: VoterNode) -> VoterSet | None:
        if node.voter_id in self._nodes:
            return None
        return VoterSet({**self._nodes, node.voter_id: node})

    def remove_voter(self, node_id: int, directory_id: uuid.UUID) -> VoterSet | None:
        """Only the exact replica key goes, and never the last voter."""
        node = self._nodes.get(node_id)
        if node is None or node.directory_id != directory_id or len(self._nodes) == 1:
            return None
        return VoterSet({k: v for k, v in self._nodes.items() if k != node_id})

    def update_voter(self, node: VoterNode) -> VoterSet | None:
        """New endpoints or kraft.version range for an existing voter."""
        old = self._nodes.get(node.voter_id)
        if old is None or not old.is_voter(node.voter_id, node.directory_id):
            return None
        return VoterSet({**self._nodes, node.voter_id: node})

    def has_overlapping_majority(self, other: VoterSet) -> bool:
        """Every majority of one set shares a voter with every majority of
        the other: true when they differ by at most one voter each way, so
        one change at a time can never let two majorities commit apart."""
        mine, theirs = self.replica_keys(), other.replica_keys()
        return len(mine - theirs) <= 1 and len(theirs - mine) <= 1


class KRaftVersionRecord(NamedTuple):
    """Control type 5: the finalized kraft.version from this offset on."""

    kraft_version: int


class VotersRecord(NamedTuple):
    """Control type 6: the voter set from this offset on."""

    voters: VoterSet


def parse_dynamic_voter(text: str, listener_name: str) -> VoterNode:
    """One ``--initial-controllers`` entry, ``id@host:port:directory-id``
    (host may be ``[ipv6]``), as kafka-storage.sh's DynamicVoter.parse reads
    it; the voter supports kraft.version 0 to 1."""
    from kfast.storage.meta_properties import parse_uuid_base64

    text = text.strip()
    node, at, rest = text.partition("@")
    if not at:
        raise ValueError("No @ found in dynamic voter string.")
    if not node:
        raise ValueError("Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = int(node)
    except ValueError:
        raise ValueError("Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise ValueError(f"Invalid negative node id {node_id} in dynamic voter string.")
    if not rest:
        raise ValueError("No hostname found after node id.")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise ValueError("Hostname began with left bracket, but no right bracket was found.")
    else:
        host, colon, tail = rest.partition(":")
        if not colon:
            raise ValueError("No colon following hostname could be found.")
        rest = ":" + tail
    if not rest.startswith(":"):
        raise ValueError("Port section must start with a colon.")
    port_text, colon, directory = rest[1:].partition(":")
    if not colon:
        raise ValueError("No colon following port could be found.")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError("Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"Invalid port {port} in dynamic voter string.")
    try:
        directory_id = parse_uuid_base64(directory)
    except ValueError:
        raise ValueError("Failed to parse directory ID in dynamic voter string.") from None
    return VoterNode(
        node_id, directory_id, (Endpoint(listener_name, host, port),), *SUPPORTED_KRAFT_VERSIONS
    )


def parse_dynamic_voters(text: str, listener_name: str) -> VoterSet:
    """``--initial-controllers``: comma-separated dynamic voters, ids unique."""
    nodes: dict[int, VoterNode] = {}
    for item in text.strip().split(","):
        if not item:
            continue
        node = parse_dynamic_voter(item, listener_name)
        if node.voter_id in nodes:
            raise ValueError(f"Node id {node.voter_id} was specified more than once.")
        nodes[node.voter_id] = node
    if not nodes:
        raise ValueError("No voters given.")
    return VoterSet(nodes)
