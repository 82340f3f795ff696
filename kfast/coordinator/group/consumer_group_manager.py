"""ConsumerGroupManager: ConsumerGroupHeartbeat and ConsumerGroupDescribe of
KIP-848 groups, mixed into GroupCoordinator (which owns
``consumer_groups``, the heartbeat purgatory and ``time_ms``).

The handler passes the cluster's topics in ({name: (topic_id, partition
count)}), so the state machine stays free of metadata lookups.

Not persisted: a KIP-848 group lives in memory only (Kafka writes
ConsumerGroupMetadata/TargetAssignment/CurrentMemberAssignment records).
After a coordinator restart its members get UNKNOWN_MEMBER_ID and rejoin
with epoch 0; their committed offsets are on __consumer_offsets as for
classic groups and survive.
"""
from __future__ import annotations

import re

from kfast.coordinator.group.assignors import ASSIGNORS
from kfast.coordinator.group.consumer_group import (
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroupMember,
    new_member_id,
)
from kfast.coordinator.group.delayed import heartbeat_key
from kfast.protocol import errors as E

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupManager:
    consumer_groups: dict

    def _consumer_config(self) -> None:
        config = self.config
        self.consumer_heartbeat_interval_ms = config["group.consumer.heartbeat.interval.ms"]
        self.consumer_session_timeout_ms = config["group.consumer.session.timeout.ms"]
        self.consumer_assignors = list(config["group.consumer.assignors"]) or ["uniform"]
        self.consumer_max_size = config["group.consumer.max.size"]

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                 instance_id, rack_id, rebalance_timeout_ms: int,
                                 subscribed_topic_names, server_assignor, owned,
                                 client_id: str, client_host: str, topics: dict,
                                 subscribed_topic_regex: str | None = None) -> dict:
        """The ConsumerGroupHeartbeatResponse fields. ``owned``: {topic_id:
        set(partitions)} the member reports holding, or None."""
        def error(code: int, message: str | None = None) -> dict:
            return {"error_code": code, "error_message": message, "member_id": member_id or None,
                    "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}

        if not group_id:
            return error(E.InvalidRequestException.code, "GroupId can't be empty.")
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            return error(E.UnsupportedAssignorException.code,
                         f"Assignor {server_assignor} is not supported.")
        classic = self.groups.get(group_id)
        if classic is not None and not classic.is_("Empty") and not classic.is_("Dead"):
            return error(E.GroupIdNotFoundException.code,
                         f"Group {group_id} is not a consumer group.")
        group = self.consumer_groups.get(group_id)
        # Whatever changes in one heartbeat bumps the group epoch once.
        bump = False
        if member_epoch == JOIN_EPOCH:
            if rebalance_timeout_ms < 0 or (subscribed_topic_names is None
                                            and not subscribed_topic_regex):
                return error(E.InvalidRequestException.code,
                             "RebalanceTimeoutMs and SubscribedTopicNames or "
                             "SubscribedTopicRegex must be set when joining.")
            if group is None:
                if classic is not None:
                    self.groups.pop(group_id)   # an empty classic group is taken over
                group = self.consumer_groups[group_id] = ConsumerGroup(group_id)
            member_id = member_id or new_member_id()
            member = group.members.get(member_id)
            if member is not None:
                self._remove_consumer_member(group, member_id)
            static = self._static_member(group, instance_id)
            if static is not None and static.member_id != member_id:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    return error(E.UnreleasedInstanceIdException.code,
                                 f"Static member {instance_id} is still in the group.")
                # KIP-345 in KIP-848: the restarted instance takes over the
                # member it was, assignment and epoch included; no rebalance.
                member = self._replace_static_member(group, static, member_id)
            else:
                if len(group.members) >= self.consumer_max_size:
                    return error(E.GroupMaxSizeReachedException.code)
                member = group.members[member_id] = ConsumerGroupMember(member_id)
                bump = True
        else:
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                return error(E.UnknownMemberIdException.code)
            if member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
                # A static member leaving for a while keeps its partitions
                # until its session expires or its instance rejoins.
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = STATIC_LEAVE_EPOCH
                return {"error_code": 0, "error_message": None, "member_id": member_id,
                        "member_epoch": STATIC_LEAVE_EPOCH, "heartbeat_interval_ms": 0,
                        "assignment": None}
            if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                self._remove_consumer_member(group, member_id)
                group.group_epoch += 1
                self._compute_target(group, topics)
                return {"error_code": 0, "error_message": None, "member_id": member_id,
                        "member_epoch": member_epoch, "heartbeat_interval_ms": 0,
                        "assignment": None}
            if member_epoch > member.member_epoch:
                return error(E.FencedMemberEpochException.code)
            if member_epoch < member.member_epoch and not (
                    member_epoch == member.previous_member_epoch and owned is not None
                    and all(ps <= member.assigned.get(t, set()) for t, ps in owned.items())):
                return error(E.FencedMemberEpochException.code)
        member.client_id, member.client_host = client_id, client_host
        member.instance_id, member.rack_id = instance_id, rack_id or member.rack_id
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        if subscribed_topic_names is not None:
            member.explicit_topic_names = set(subscribed_topic_names)
        if subscribed_topic_regex is not None:
            try:
                member.subscribed_topic_regex = (re.compile(subscribed_topic_regex)
                                                 if subscribed_topic_regex else None)
            except re.error as exc:
                return error(E.InvalidRegularExpression.code, str(exc))
        # A regex is resolved against the topics of each heartbeat; internal
        # topics never match (as in Kafka).
        resolved = set(member.explicit_topic_names)
        if member.subscribed_topic_regex is not None:
            resolved |= {t for t in topics if not t.startswith("__")
                         and member.subscribed_topic_regex.fullmatch(t)}
        if sorted(resolved) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(resolved)
            bump = True
        metadata = {name: topics[name] for name in group.subscribed_topics() if name in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, topics)
        was_revoking = member.state == UNREVOKED_PARTITIONS
        group.reconcile(member, owned)
        self._consumer_heartbeat_received(group, member)
        if member.state == UNREVOKED_PARTITIONS and not was_revoking:
            self._schedule_revocation_timeout(group, member)
        assignment = None
        if member_epoch == JOIN_EPOCH or owned is not None or \
                member.sent_assignment != member.assigned:
            member.sent_assignment = {t: set(ps) for t, ps in member.assigned.items()}
            assignment = {"topic_partitions": [
                {"topic_id": t, "partitions": sorted(ps)}
                for t, ps in sorted(member.assigned.items(), key=lambda i: str(i[0]))]}
        return {"error_code": 0, "error_message": None, "member_id": member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval_ms": self.consumer_heartbeat_interval_ms,
                "assignment": assignment}

    def _compute_target(self, group: ConsumerGroup, topics: dict) -> None:
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = max(set(names), key=names.count) if names else self.consumer_assignors[0]
        group.assignor_name = name
        members = {m.member_id: {topics[t][0] for t in m.subscribed_topic_names if t in topics}
                   for m in group.members.values()}
        counts = {topics_id: count for topics_id, count in
                  (topics[t] for t in group.subscribed_topics() if t in topics)}
        group.target = ASSIGNORS[name](members, counts, group.target)
        group.assignment_epoch = group.group_epoch

    @staticmethod
    def _static_member(group: ConsumerGroup, instance_id):
        if instance_id is None:
            return None
        return next((m for m in group.members.values() if m.instance_id == instance_id), None)

    def _replace_static_member(self, group: ConsumerGroup, old: ConsumerGroupMember,
                               member_id: str) -> ConsumerGroupMember:
        self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, old.member_id))
        del group.members[old.member_id]
        if old.member_id in group.target:
            group.target[member_id] = group.target.pop(old.member_id)
        old.member_id = member_id
        old.member_epoch = old.previous_member_epoch
        old.sent_assignment = None
        group.members[member_id] = old
        return old

    def _remove_consumer_member(self, group: ConsumerGroup, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, member_id))
        if member is not None and member.revocation_timeout is not None:
            member.revocation_timeout.cancel()

    def _schedule_revocation_timeout(self, group: ConsumerGroup,
                                     member: ConsumerGroupMember) -> None:
        """A member must release revoked partitions within its rebalance
        timeout, or it is fenced (removed) so others can have them."""
        if member.revocation_timeout is not None:
            member.revocation_timeout.cancel()
        epoch = member.member_epoch

        def expired() -> None:
            member.revocation_timeout = None
            if group.members.get(member.member_id) is member and \
                    member.state == UNREVOKED_PARTITIONS and member.member_epoch == epoch:
                self.on_consumer_session_expired(group, member.member_id)

        member.revocation_timeout = self.timer.schedule(max(member.rebalance_timeout_ms, 0),
                                                        expired)

    def _consumer_heartbeat_received(self, group: ConsumerGroup,
                                     member: ConsumerGroupMember) -> None:
        from kfast.coordinator.group.delayed import DelayedHeartbeat

        key = heartbeat_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, self.consumer_session_timeout_ms),
            [key])

    def on_consumer_session_expired(self, group: ConsumerGroup, member_id: str) -> None:
        if member_id in group.members:
            self._remove_consumer_member(group, member_id)
            group.group_epoch += 1
            # The target is recomputed on the next heartbeat of any member,
            # with the topics that heartbeat brings.

    def consumer_group_describe(self, group_id: str, topic_names: dict) -> dict:
        """DescribedGroup fields; ``topic_names``: {topic_id: name}."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return {"error_code": E.GroupIdNotFoundException.code,
                    "error_message": f"Group {group_id} not found.", "group_id": group_id,
                    "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                    "assignor_name": "", "members": []}

        def assignment(partitions):
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": topic_names.get(t, ""), "partitions": sorted(ps)}
                for t, ps in sorted(partitions.items(), key=lambda i: str(i[0]))]}

        return {"error_code": 0, "error_message": None, "group_id": group_id,
                "group_state": group.state, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.assignor_name or self.consumer_assignors[0],
                "members": [{
                    "member_id": m.member_id, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex.pattern
                    if m.subscribed_topic_regex is not None else None,
                    "assignment": assignment(m.assigned),
                    "target_assignment": assignment(group.target.get(m.member_id, {})),
                    "member_type": 1}
                    for m in group.members.values()]}

    def validate_consumer_commit(self, group: ConsumerGroup, member_id: str,
                                 member_epoch: int) -> int:
        """0 if an OffsetCommit for this KIP-848 group may proceed."""
        if member_epoch < 0 and not member_id and not group.members:
            return 0
        member = group.members.get(member_id)
        if member is None:
            return E.UnknownMemberIdException.code
        if member_epoch > member.member_epoch:
            return E.FencedMemberEpochException.code
        if member_epoch < member.member_epoch:
            return E.StaleMemberEpochException.code
        return 0
