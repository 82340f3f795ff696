"""ConsumerGroup: a KIP-848 group, driven by ConsumerGroupHeartbeat (Kafka's
ConsumerGroup, ConsumerGroupMember and CurrentAssignmentBuilder).

The coordinator owns the assignment. Any change a member or the cluster
brings (a join, a leave, a new subscription, a partition count) bumps the
group epoch; the target assignment is then recomputed by the server-side
assignor and stamped with that epoch. Each member converges to its target
through its heartbeats, one step per heartbeat:

1. partitions it owns but is no longer targeted are revoked first: the
   response drops them and the member keeps its epoch
   (UNREVOKED_PARTITIONS) until a heartbeat shows it released them;
2. then it moves to the target epoch and gets the targeted partitions no
   other member still holds; those still held wait
   (UNRELEASED_PARTITIONS) until their previous owner releases them.

So no partition is ever owned by two members at once.

States: Empty (no members), Assigning (target behind the group epoch),
Reconciling (some member not at the target epoch), Stable.
"""

from __future__ import annotations

import re
import uuid
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kfast.server_common.purgatory import TimerHandle


class ConsumerGroupState(StrEnum):
    """Kafka's ConsumerGroup.ConsumerGroupState; the value is the name
    clients see (ConsumerGroupDescribe, ListGroups)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(StrEnum):
    """Kafka's MemberState of a KIP-848 member (its name; the record's
    int8 code is records.MEMBER_STATE_CODES)."""

    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"


Partitions = dict[uuid.UUID, set[int]]  # {topic_id: set(partitions)}


def _copy(assignment: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in assignment.items() if ps}


def _minus(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _intersect(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


class ConsumerGroupMember:
    __slots__ = (
        "member_id",
        "instance_id",
        "rack_id",
        "client_id",
        "client_host",
        "member_epoch",
        "previous_member_epoch",
        "state",
        "rebalance_timeout_ms",
        "subscribed_topic_names",
        "server_assignor",
        "assigned",
        "pending_revocation",
        "sent_assignment",
        "heartbeat_satisfied",
        "is_leaving",
        "explicit_topic_names",
        "subscribed_topic_regex",
        "revocation_timeout",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.member_epoch = 0
        self.previous_member_epoch = -1
        self.state = MemberState.STABLE
        self.rebalance_timeout_ms = -1
        # Explicit names plus the topics the regex matched at the last heartbeat.
        self.subscribed_topic_names: list[str] = []
        self.explicit_topic_names: set[str] = set()
        self.subscribed_topic_regex: re.Pattern[str] | None = None
        self.revocation_timeout: TimerHandle | None = None
        self.server_assignor: str | None = None
        self.assigned: Partitions = {}
        self.pending_revocation: Partitions = {}
        # The assignment last returned, so unchanged ones are not resent.
        self.sent_assignment: Partitions | None = None
        self.heartbeat_satisfied = False
        self.is_leaving = False

    def copy(self) -> ConsumerGroupMember:
        """An independent copy of the member's state (its assignments' sets
        too), without its revocation timer."""
        copy = ConsumerGroupMember(self.member_id)
        copy.assign_from(self)
        copy.revocation_timeout = None
        return copy

    def assign_from(self, other: ConsumerGroupMember) -> None:
        """Take ``other``'s state (a copy's: restoring a snapshot), keeping
        this member's revocation timer."""
        timer = self.revocation_timeout
        for name in self.__slots__:
            setattr(self, name, getattr(other, name))
        self.revocation_timeout = timer
        self.assigned = _copy(other.assigned)
        self.pending_revocation = _copy(other.pending_revocation)
        self.explicit_topic_names = set(other.explicit_topic_names)
        self.subscribed_topic_names = list(other.subscribed_topic_names)


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Partitions] = {}
        # {topic name: (topic_id, partition count)}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.assignor_name: str | None = None
        self.dead = False
        # Only classic groups hand out pending member ids (DelayedHeartbeat reads this).
        self.pending_members: frozenset[str] = frozenset()
        # What the log holds for this group: {record key: value} as last
        # written or replayed (consumer_group_manager's persistence).
        # Keyed by (record key type, member id or None); the value is the
        # record's content tuple, or a marker that compares unequal to any.
        self.persisted: dict[tuple[int, str | None], object] = {}
        # A write failed after a later change was applied on top of it:
        # the next one compares every record, not just the heartbeating
        # member's.
        self.unwritten = False
        # Changes applied (replayed) to this group, so that reverting a
        # failed one can tell whether another was applied on top of it.
        self.applied = 0
        # A scratch copy's members as they were when it was taken (see scratch).
        self._originals: dict[str, ConsumerGroupMember] = {}

    def scratch(self) -> ConsumerGroup:
        """A copy for a handler to decide on, leaving this group as it is
        until the decision's records are replayed: epochs, target and
        subscriptions copied; members shared until ``own`` copies one."""
        copy = ConsumerGroup(self.group_id)
        copy.group_epoch, copy.assignment_epoch = self.group_epoch, self.assignment_epoch
        copy.members = dict(self.members)
        copy.target = dict(self.target)
        copy.subscription_metadata = self.subscription_metadata  # replaced, never changed
        copy.assignor_name = self.assignor_name
        copy.persisted = self.persisted  # read by the handler, written by replay
        copy.unwritten = self.unwritten
        copy._originals = dict(self.members)
        return copy

    def own(self, member_id: str) -> ConsumerGroupMember:
        """The scratch copy's member ``member_id``, copied before it changes."""
        member = self.members[member_id]
        if self._originals.get(member_id) is member:
            member = self.members[member_id] = member.copy()
        return member

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
            for m in self.members.values()
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_(self, state: ConsumerGroupState) -> bool:
        return self.state == state

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def owner_elsewhere(self, member_id: str) -> set[tuple[uuid.UUID, int]]:
        """(topic_id, partition) owned or being revoked by other members."""
        held: set[tuple[uuid.UUID, int]] = set()
        for other in self.members.values():
            if other.member_id == member_id:
                continue
            for source in (other.assigned, other.pending_revocation):
                for topic_id, partitions in source.items():
                    held.update((topic_id, p) for p in partitions)
        return held

    def reconcile(self, member: ConsumerGroupMember, owned: Partitions | None) -> None:
        """One step of the member toward its target (see the module doc).
        ``owned``: the partitions the heartbeat says the member holds (None
        when the request did not say)."""
        target = self.target.get(member.member_id, {})
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            still_owned = (
                _intersect(member.pending_revocation, owned)
                if owned is not None
                else member.pending_revocation
            )
            if still_owned:
                return
            member.pending_revocation = {}
            member.state = MemberState.STABLE
        if member.member_epoch == self.assignment_epoch and member.state == MemberState.STABLE:
            return
        if member.member_epoch != self.assignment_epoch:
            to_revoke = _minus(member.assigned, target)
            if to_revoke:
                member.assigned = _intersect(member.assigned, target)
                member.pending_revocation = to_revoke
                member.state = MemberState.UNREVOKED_PARTITIONS
                return
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        held = self.owner_elsewhere(member.member_id)
        wanted = _minus(target, member.assigned)
        unreleased = False
        for topic_id, partitions in wanted.items():
            free = {p for p in partitions if (topic_id, p) not in held}
            if free:
                member.assigned.setdefault(topic_id, set()).update(free)
            if free != partitions:
                unreleased = True
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE


def new_member_id() -> str:
    return str(uuid.uuid4())


class ConsumerGroupSnapshot:
    """A group as it was before a change's records were replayed into it,
    restored if their append fails (Kafka's runtime reverts to its
    snapshot): the group's fields, its members as they were (the same
    objects: timers hold them) and copies of the state of those the
    records touch (replay changes them in place)."""

    def __init__(self, group: ConsumerGroup, member_ids: set[str]) -> None:
        self.group = group
        self.epochs = (group.group_epoch, group.assignment_epoch)
        self.members = dict(group.members)
        self.target = dict(group.target)
        self.subscription_metadata = group.subscription_metadata
        self.assignor_name = group.assignor_name
        self.persisted = dict(group.persisted)
        self.unwritten = group.unwritten
        self.copies = {m: group.members[m].copy() for m in member_ids if m in group.members}

    def restore(self) -> None:
        group = self.group
        group.group_epoch, group.assignment_epoch = self.epochs
        group.members.clear()
        group.members.update(self.members)
        group.target.clear()
        group.target.update(self.target)
        group.subscription_metadata = self.subscription_metadata
        group.assignor_name = self.assignor_name
        group.persisted.clear()
        group.persisted.update(self.persisted)
        group.unwritten = self.unwritten
        group.dead = False
        for member_id, copy in self.copies.items():
            self.members[member_id].assign_from(copy)
