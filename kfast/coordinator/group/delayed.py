"""The group coordinator's delayed operations (Kafka's DelayedJoin,
InitialDelayedJoin and DelayedHeartbeat), kept in purgatories on the
broker's timing wheel.

* DelayedJoin, key ``group_id``: completes when every member has rejoined
  (JoinGroup) or when the rebalance timeout elapses; either way the
  coordinator then completes the join phase, dropping members that did not
  rejoin.
* InitialDelayedJoin: the first rebalance of an empty group waits
  group.initial.rebalance.delay.ms, and again for each delay in which new
  members arrived, up to the rebalance timeout, so a group that starts
  all at once forms in one generation.
* DelayedHeartbeat, key ``group_id-member_id``: a member's session timeout.
  Each heartbeat (or JoinGroup, SyncGroup, OffsetCommit) marks the member
  satisfied and completes it, then a fresh one is scheduled; if it expires
  the member is removed (unless it is waiting in JoinGroup/SyncGroup, in
  which case the rebalance decides its fate).
"""

from __future__ import annotations

from typing import Protocol

from kfast.coordinator.group.classic_group import ClassicGroup, ClassicGroupMember
from kfast.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from kfast.server_common.purgatory import DelayedOperation, DelayedOperationPurgatory


class JoinCoordinator(Protocol):
    """What a DelayedJoin needs of the group coordinator."""

    @property
    def join_purgatory(self) -> DelayedOperationPurgatory:
        """Where a follow-up InitialDelayedJoin waits."""

    def on_complete_join(self, group: ClassicGroup) -> None:
        """The join phase of ``group`` ends."""


class HeartbeatCoordinator(Protocol):
    """What a DelayedHeartbeat needs of the group coordinator."""

    def on_heartbeat_expired(self, group: ClassicGroup | ConsumerGroup, member_id: str) -> None:
        """The member's session timed out."""


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"{group_id}-{member_id}"


class DelayedJoin(DelayedOperation):
    def __init__(
        self, coordinator: JoinCoordinator, group: ClassicGroup, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        if self.group.has_all_members_joined():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass


class InitialDelayedJoin(DelayedJoin):
    def __init__(
        self,
        coordinator: JoinCoordinator,
        group: ClassicGroup,
        delay_ms: int,
        initial_delay_ms: int,
        remaining_ms: int,
    ) -> None:
        DelayedOperation.__init__(self, delay_ms)
        self.coordinator = coordinator
        self.group = group
        self.initial_delay_ms = initial_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        # Only the delay ends it: members arriving during it extend it.
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.initial_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.initial_delay_ms, 0)
            self.coordinator.join_purgatory.try_complete_else_watch(
                InitialDelayedJoin(
                    self.coordinator, group, delay, self.initial_delay_ms, remaining
                ),
                [group.group_id],
            )
        else:
            self.coordinator.on_complete_join(group)


class DelayedHeartbeat(DelayedOperation):
    def __init__(
        self,
        coordinator: HeartbeatCoordinator,
        group: ClassicGroup | ConsumerGroup,
        member_id: str,
        session_timeout_ms: int,
    ) -> None:
        super().__init__(session_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id

    def try_complete(self) -> bool:
        member = self.group.members.get(self.member_id)
        if member is None:
            if self.member_id in self.group.pending_members:
                return False
            return self.force_complete()
        if member.heartbeat_satisfied or member.is_leaving:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_heartbeat_expired(self.group, self.member_id)


def complete_and_schedule_next_heartbeat(
    purgatory: DelayedOperationPurgatory,
    member: ClassicGroupMember | ConsumerGroupMember,
    next_heartbeat: DelayedHeartbeat,
) -> None:
    """Kafka's completeAndScheduleNextHeartbeatExpiration, for classic and
    KIP-848 members alike: the coordinator heard from ``member``, so its
    pending session timeout completes, and ``next_heartbeat`` (the same
    member's) starts the next one."""
    key = heartbeat_key(next_heartbeat.group.group_id, next_heartbeat.member_id)
    member.heartbeat_satisfied = True
    purgatory.check_and_complete(key)
    member.heartbeat_satisfied = False
    purgatory.try_complete_else_watch(next_heartbeat, [key])
