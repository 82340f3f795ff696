"""ClassicGroup: the membership of one group using the classic
JoinGroup/SyncGroup protocol (Kafka's ClassicGroup, formerly GroupMetadata).

States and the transitions Kafka allows::

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
      ^                 ^    │                                     │ leader's SyncGroup
      │                 │    └──(everyone left)──> Empty            v
      └──last leaves────┴──────── member change ───────────────── Stable
    any state ──> Dead (group deleted, or its partition unloaded)

The group holds no timers; the coordinator drives it and keeps the
DelayedJoin/DelayedHeartbeat operations.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Any

from kfast.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from kfast.coordinator.group.records import GroupMetadataValue, MemberMetadata
from kfast.coordinator.result import DeferredResponse


class ClassicGroupState(StrEnum):
    """Kafka's ClassicGroupState. The value is the name clients see
    (DescribeGroups, ListGroups), so a state is also the string it was."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = ClassicGroupState
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset(_S),
}


class JoinResult(dict[str, Any]):
    """Fields of a JoinGroupResponse, handed to the member's waiting JoinGroup."""


# (error code, protocol type, protocol name, assignment): a SyncGroupResponse.
SyncResponse = tuple[int, str | None, str | None, bytes]


class ClassicGroupMember:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_future",
        "sync_future",
        "heartbeat_satisfied",
        "is_leaving",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        # Set while the member's JoinGroup / SyncGroup waits for the group:
        # the response its result deferred, completed when the group is.
        self.join_future: DeferredResponse[JoinResult] | None = None
        self.sync_future: DeferredResponse[SyncResponse] | None = None
        self.heartbeat_satisfied = False
        self.is_leaving = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        return next(name for name in self.protocol_names() if name in candidates)


class ClassicGroup:
    def __init__(
        self, group_id: str, now_ms: int, state: ClassicGroupState = ClassicGroupState.EMPTY
    ):
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        # Member ids handed out with MEMBER_ID_REQUIRED, not yet joined (KIP-394).
        self.pending_members: set[str] = set()
        # New members joined during the initial rebalance delay (InitialDelayedJoin).
        self.new_member_added = False
        # protocol name -> how many members support it
        self._supported: Counter[str] = Counter()

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
            f"members={len(self.members)})"
        )

    # -- state ---------------------------------------------------------------------------
    def is_(self, state: ClassicGroupState) -> bool:
        return self.state == state

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id} cannot go from {self.state} to {state}")
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[ClassicGroupState.PREPARING_REBALANCE]

    # -- members -------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._supported.update(member.protocol_names())
        if member.group_instance_id is not None:  # a static member
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._supported.subtract(member.protocol_names())
        self._supported = +self._supported
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(
        self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]]
    ) -> None:
        self._supported.subtract(member.protocol_names())
        member.protocols = protocols
        self._supported.update(member.protocol_names())
        self._supported = +self._supported

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """A static member rejoined with a new member id (KIP-345): it keeps its
        place and assignment; the old id is fenced."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """The instance is known under another member id."""
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return (
            len(self.members) == sum(m.is_awaiting_join for m in self.members.values())
            and not self.pending_members
        )

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self._supported.items() if count == n}

    def is_protocol_consistent(
        self, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the protocols all
        support; the most votes wins (ties: the first member's preference)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"no protocol supported by all members of {self.group_id}")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        ranked = first.protocol_names()
        return max(votes, key=lambda name: (votes[name], -ranked.index(name)))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY, now_ms)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to; None when the group does
        not use the consumer protocol (unknown subscriptions)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= subscribed_topics(member.metadata(self.protocol_name))
            except KeyError:
                pass
        return topics

    # -- persistence ---------------------------------------------------------------------
    def to_record_value(self, now_ms: int) -> GroupMetadataValue:
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name) if self.protocol_name else b"",
                m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp,
            members,
        )

    @classmethod
    def from_record_value(
        cls, group_id: str, value: GroupMetadataValue, now_ms: int
    ) -> ClassicGroup:
        group = cls(
            group_id,
            value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms,
            ClassicGroupState.EMPTY if not value.members else ClassicGroupState.STABLE,
        )
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for meta in value.members:
            member = ClassicGroupMember(
                meta.member_id,
                meta.group_instance_id,
                meta.client_id,
                meta.client_host,
                meta.rebalance_timeout_ms,
                meta.session_timeout_ms,
                value.protocol_type,
                [(value.protocol or "", meta.subscription)],
            )
            member.assignment = meta.assignment
            group.add(member)
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader
        return group
