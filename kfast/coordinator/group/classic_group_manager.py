"""ClassicGroupManager: the classic groups of the __consumer_offsets
partitions this broker leads -- JoinGroup, SyncGroup, Heartbeat and
LeaveGroup (Kafka's classicGroupJoin / classicGroupSync /
classicGroupHeartbeat / classicGroupLeave), their rebalance (DelayedJoin in
the Rebalance purgatory, which it owns) and sessions (DelayedHeartbeat in
the Heartbeat purgatory it shares with the KIP-848 groups), and the replay
of their GroupMetadata record: the classic-group half of Kafka's
GroupMetadataManager (the consumer-group half is the ConsumerGroupManager).

The GroupCoordinator holds one beside its ConsumerGroupManager and
OffsetMetadataManager and hands the classic requests to it. Every handler
returns a CoordinatorResult (kfast/coordinator/result.py) that ``run`` --
the coordinator's runtime write -- appends and answers:

* a member that waits for the others gets a DeferredResponse, completed
  when the join phase ends (DelayedJoin, whose end ``_complete_join`` is a
  result of its own, storing a group left empty) or when the leader's
  SyncGroup result -- the GroupMetadata record with the assignment -- is
  appended (its ``on_append``, Kafka's appendFuture, makes the generation
  Stable or resets it);
* the group changed as the handler decided, so its records carry replay
  False (a replay would build a new ClassicGroup, without the members'
  waiting responses); ``replay_group_metadata`` rebuilds the same groups
  when a partition loads.

Classic and KIP-848 groups share one id space: a JoinGroup on an empty
KIP-848 group takes it over (its tombstones, from the consumer side, are
replayed at once); the ConsumerGroupManager does the reverse with an empty
classic group, through this manager's hooks (``is_active``, ``group``,
``restore``, ``remove_if_empty``: its ClassicGroups).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from kfast.config import KafkaConfig
from kfast.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    JoinResult,
    SyncResponse,
)
from kfast.coordinator.group.consumer_group import ConsumerGroup
from kfast.coordinator.group.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    InitialDelayedJoin,
    complete_and_schedule_next_heartbeat,
    heartbeat_key,
)
from kfast.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    GroupRecordKey,
    GroupRecordValue,
)
from kfast.coordinator.result import (
    CoordinatorResult,
    DeferredResponse,
    ResultRunner,
    code_response,
)
from kfast.protocol import errors as E
from kfast.server_common.purgatory import DelayedOperationPurgatory, Timer

NONE = 0
UNKNOWN_MEMBER_ID = ""
# A handler's response type (CoordinatorResult).
T = TypeVar("T")
# The records of an empty KIP-848 group that a classic group takes over.
Tombstones = Callable[[ConsumerGroup], list[GroupRecord]]
# The coordinator's replay of one record object.
Replay = Callable[[GroupRecordKey, GroupRecordValue | None], None]


class JoinMember(NamedTuple):
    """What a JoinGroup says of its member."""

    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


class SyncMember(NamedTuple):
    """What a SyncGroup says of its member."""

    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None


def join_error(member_id: str, code: int) -> JoinResult:
    return JoinResult(
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None,
        leader="",
        skip_assignment=False,
        member_id=member_id,
        members=[],
    )


# The classic group's handlers' results (Kafka's classicGroupJoin /
# classicGroupSync / classicGroupHeartbeat / classicGroupLeave).
JoinGroupResult = CoordinatorResult[JoinResult, GroupRecord]
SyncGroupResult = CoordinatorResult[SyncResponse, GroupRecord]


def _join_answer(
    member_id: str,
    response: JoinResult | DeferredResponse[JoinResult],
    records: list[GroupRecord] | None = None,
    on_append: Callable[[int], None] | None = None,
) -> JoinGroupResult:
    """A JoinGroup's result; an append error answers with its code. Its
    records are not replayed: the group changed as the handler decided."""
    return CoordinatorResult(
        records or [],
        response,
        lambda code: join_error(member_id, code),
        replay=False,
        on_append=on_append,
    )


def _join_rejected(member_id: str, code: int) -> JoinGroupResult:
    return _join_answer(member_id, join_error(member_id, code))


def _sync_error(code: int) -> SyncResponse:
    return (code, None, None, b"")


def _sync_answer(
    response: SyncResponse | DeferredResponse[SyncResponse],
    records: list[GroupRecord] | None = None,
    on_append: Callable[[int], None] | None = None,
) -> SyncGroupResult:
    return CoordinatorResult(
        records or [], response, _sync_error, replay=False, on_append=on_append
    )


def _sync_rejected(code: int) -> SyncGroupResult:
    return _sync_answer(_sync_error(code))


def _code_result(code: int) -> CoordinatorResult[int, GroupRecord]:
    return CoordinatorResult([], code, code_response)


def _leave_answer(
    code: int, member_codes: list[int]
) -> CoordinatorResult[tuple[int, list[int]], GroupRecord]:
    response = (code, member_codes)
    return CoordinatorResult([], response, lambda error: (error, []))


class ClassicGroupManager:
    """``groups``: the classic groups, which the ConsumerGroupManager sees
    only through the hooks below (ClassicGroups); ``consumer_groups`` and
    ``consumer_group_tombstones``: the KIP-848 groups a JoinGroup must not
    join, or takes over when empty; ``replay``: the coordinator's replay of
    one record object (those tombstones); ``run``: the coordinator's
    runtime write; ``heartbeat_purgatory``: the members' sessions, shared
    with the KIP-848 groups."""

    def __init__(
        self,
        config: KafkaConfig,
        timer: Timer,
        run: ResultRunner[GroupRecord],
        heartbeat_purgatory: DelayedOperationPurgatory,
        consumer_groups: dict[str, ConsumerGroup],
        consumer_group_tombstones: Tombstones,
        replay: Replay,
        time_ms: Callable[[], int],
    ) -> None:
        self.run = run
        self.groups: dict[str, ClassicGroup] = {}
        self.heartbeat_purgatory = heartbeat_purgatory
        self.join_purgatory = DelayedOperationPurgatory("Rebalance", timer)
        self.consumer_groups = consumer_groups
        self.consumer_group_tombstones = consumer_group_tombstones
        self.replay = replay
        self.time_ms = time_ms
        self.min_session_timeout_ms: int = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms: int = config["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms: int = config["group.initial.rebalance.delay.ms"]
        self.max_group_size: int = config["group.max.size"]

    def _run_now(self, group_id: str, result: CoordinatorResult[T, GroupRecord]) -> T:
        """Run a result that writes nothing and answers at once (Heartbeat,
        LeaveGroup), returning its response."""
        answers: list[T] = []
        self.run(group_id, result, answers.append)
        [answer] = answers
        return answer

    # -- JoinGroup ---------------------------------------------------------------------
    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        callback: Callable[[JoinResult], None],
    ) -> None:
        """JoinGroup: callback(JoinGroupResponse fields) once the join phase
        ends (or at once, on an error)."""
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0
        args = JoinMember(
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )
        result = self.classic_group_join(
            group_id, member_id, group_instance_id, args, require_known_member_id
        )
        self.run(group_id, result, callback)

    def classic_group_join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        args: JoinMember,
        require_known_member_id: bool,
    ) -> JoinGroupResult:
        """Kafka's classicGroupJoin: the result whose response (deferred) the
        end of the join phase completes, with the records of the change."""
        if not group_id:
            return _join_rejected(member_id, E.InvalidGroupIdException.code)
        if (
            not self.min_session_timeout_ms
            <= args.session_timeout_ms
            <= self.max_session_timeout_ms
        ):
            return _join_rejected(member_id, E.InvalidSessionTimeoutException.code)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            # A KIP-848 group in use: classic members cannot join it.
            return _join_rejected(member_id, E.InconsistentGroupProtocolException.code)
        group = self.groups.get(group_id)
        records: list[GroupRecord] = []
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return _join_rejected(member_id, E.UnknownMemberIdException.code)
            if consumer_group is not None:
                # An empty KIP-848 group is taken over: its records are
                # deleted first (same partition, so before the new group's).
                records = self._take_over_consumer_group(consumer_group)
            group = self.groups[group_id] = ClassicGroup(group_id, self.time_ms())
        result = self._join_classic_group(
            group, member_id, group_instance_id, args, require_known_member_id
        )
        return result._replace(records=records + result.records) if records else result

    def _take_over_consumer_group(self, group: ConsumerGroup) -> list[GroupRecord]:
        """The tombstones of an empty KIP-848 group, replayed at once (the
        classic group replacing it is created now)."""
        tombstones = self.consumer_group_tombstones(group)
        for key, value in tombstones:
            self.replay(key, value)
        # A group whose records never reached the log has no epoch tombstone.
        if self.consumer_groups.pop(group.group_id, None) is not None:
            group.dead = True
        return tombstones

    def _join_classic_group(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        args: JoinMember,
        require_known_member_id: bool,
    ) -> JoinGroupResult:
        if group.is_(ClassicGroupState.DEAD):
            return _join_rejected(member_id, E.CoordinatorNotAvailableException.code)
        is_new = member_id == UNKNOWN_MEMBER_ID and group.static_member_id(instance_id) is None
        if is_new and len(group.members) + len(group.pending_members) >= self.max_group_size:
            return _join_rejected(member_id, E.GroupMaxSizeReachedException.code)
        if not group.is_protocol_consistent(args.protocol_type, args.protocols):
            return _join_rejected(member_id, E.InconsistentGroupProtocolException.code)
        if member_id == UNKNOWN_MEMBER_ID:
            return self._join_unknown_member(group, instance_id, require_known_member_id, args)
        return self._join_known_member(group, member_id, instance_id, args)

    def _join_unknown_member(
        self,
        group: ClassicGroup,
        instance_id: str | None,
        require_known_member_id: bool,
        args: JoinMember,
    ) -> JoinGroupResult:
        new_member_id = f"{instance_id or args.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                return self._update_static_member(
                    group, instance_id, old_member_id, new_member_id, args
                )
        elif require_known_member_id:
            # KIP-394: hand out the id first, so a client that gives up does
            # not leave a member behind.
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, args.session_timeout_ms)
            return _join_rejected(new_member_id, E.MemberIdRequiredException.code)
        return self._add_member_and_rebalance(group, new_member_id, instance_id, args)

    def _join_known_member(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        args: JoinMember,
    ) -> JoinGroupResult:
        if member_id in group.pending_members:
            if instance_id is not None:
                return _join_rejected(member_id, E.FencedInstanceIdException.code)
            return self._add_member_and_rebalance(group, member_id, None, args)
        if group.is_static_member_fenced(member_id, instance_id):
            return _join_rejected(member_id, E.FencedInstanceIdException.code)
        member = group.members.get(member_id)
        if member is None:
            return _join_rejected(member_id, E.UnknownMemberIdException.code)
        if group.is_(ClassicGroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, args)
        if group.is_(ClassicGroupState.COMPLETING_REBALANCE):
            if member.matches(args.protocols):
                # A retried JoinGroup: answer with the generation it missed.
                return _join_answer(member_id, self._join_result(group, member))
            return self._update_member_and_rebalance(group, member, args)
        if group.is_(ClassicGroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(args.protocols):
                return self._update_member_and_rebalance(group, member, args)
            return _join_answer(member_id, self._join_result(group, member))
        return _join_rejected(member_id, E.UnknownMemberIdException.code)

    def _join_result(
        self, group: ClassicGroup, member: ClassicGroupMember, skip_assignment: bool = False
    ) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if group.is_leader(member.member_id):
            protocol = group.protocol_name
            # A generation with members has chosen its protocol.
            assert protocol is not None
            members = [
                (m.member_id, m.group_instance_id, m.metadata(protocol))
                for m in group.members.values()
            ]
        return JoinResult(
            error_code=NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=members,
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, args: JoinMember
    ) -> JoinGroupResult:
        client_id, client_host, session_timeout, rebalance_timeout, protocol_type, protocols = args
        member = ClassicGroupMember(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout,
            session_timeout,
            protocol_type,
            [(n, bytes(m)) for n, m in protocols],
        )
        response = member.join_future = DeferredResponse()
        group.add(member)
        group.new_member_added = True
        self.complete_and_schedule_next_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)
        return _join_answer(member_id, response)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: ClassicGroupMember, args: JoinMember
    ) -> JoinGroupResult:
        member.rebalance_timeout_ms = args.rebalance_timeout_ms
        member.session_timeout_ms = args.session_timeout_ms
        group.update_protocols(member, [(n, bytes(m)) for n, m in args.protocols])
        response = member.join_future = DeferredResponse()
        self._maybe_prepare_rebalance(group)
        return _join_answer(member.member_id, response)

    def _update_static_member(
        self,
        group: ClassicGroup,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        args: JoinMember,
    ) -> JoinGroupResult:
        """KIP-345: a static member restarted. It takes over its old identity
        and assignment; in a Stable group with unchanged protocols there is no
        rebalance, only the group's record with its new member id."""
        self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, old_member_id))
        old_member = group.members[old_member_id]
        unchanged = old_member.matches(args.protocols)
        old_join, old_member.join_future = old_member.join_future, None
        old_sync, old_member.sync_future = old_member.sync_future, None
        if old_sync is not None:
            old_sync.complete(_sync_error(E.FencedInstanceIdException.code))
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        if old_join is not None:
            old_join.complete(join_error(old_member_id, E.FencedInstanceIdException.code))
        member.client_id, member.client_host = args.client_id, args.client_host
        member.session_timeout_ms = args.session_timeout_ms
        member.rebalance_timeout_ms = args.rebalance_timeout_ms
        self.complete_and_schedule_next_heartbeat(group, member)
        if not (group.is_(ClassicGroupState.STABLE) and unchanged):
            return self._update_member_and_rebalance(group, member, args)
        response: DeferredResponse[JoinResult] = DeferredResponse()

        def appended(code: int) -> None:
            # On an error the runner answers error_response(code).
            if not code:
                skip = group.is_leader(new_member_id)
                response.complete(self._join_result(group, member, skip_assignment=skip))

        return _join_answer(new_member_id, response, [self._group_record(group)], appended)

    def _maybe_prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        elif group.is_(ClassicGroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_(ClassicGroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.RebalanceInProgressException.code)
        rebalance_timeout = group.rebalance_timeout_ms()
        operation: DelayedJoin
        if group.is_(ClassicGroupState.EMPTY) and self.initial_rebalance_delay_ms > 0:
            delay = min(self.initial_rebalance_delay_ms, rebalance_timeout)
            operation = InitialDelayedJoin(
                self,
                group,
                delay,
                self.initial_rebalance_delay_ms,
                max(rebalance_timeout - delay, 0),
            )
        else:
            operation = DelayedJoin(self, group, rebalance_timeout)
        group.new_member_added = False
        group.transition_to(ClassicGroupState.PREPARING_REBALANCE, self.time_ms())
        self.join_purgatory.try_complete_else_watch(operation, [group.group_id])

    def on_complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends (the DelayedJoin completes): its result runs
        like a request's (Kafka schedules completeClassicGroupJoin as a
        write operation)."""
        self.run(group.group_id, self._complete_join(group), lambda code: None)

    def _complete_join(self, group: ClassicGroup) -> CoordinatorResult[int, GroupRecord]:
        """Kafka's completeClassicGroupJoin: drop dynamic members that did not
        rejoin, start the next generation and answer every waiting JoinGroup;
        a generation without members is stored (its record the result's)."""
        nothing: CoordinatorResult[int, GroupRecord] = CoordinatorResult([], NONE, code_response)
        if group.is_(ClassicGroupState.DEAD) or not group.is_(
            ClassicGroupState.PREPARING_REBALANCE
        ):
            return nothing
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._remove_member(group, member.member_id)
        group.pending_members.clear()
        if (
            group.leader_id is not None
            and group.leader_id in group.members
            and not group.members[group.leader_id].is_awaiting_join
        ):
            joined = [m.member_id for m in group.members.values() if m.is_awaiting_join]
            if joined:
                group.leader_id = joined[0]
        group.init_next_generation(self.time_ms())
        if group.is_(ClassicGroupState.EMPTY):
            return CoordinatorResult([self._group_record(group)], NONE, code_response, replay=False)
        for member in group.members.values():
            response, member.join_future = member.join_future, None
            if response is not None:
                response.complete(self._join_result(group, member))
            self.complete_and_schedule_next_heartbeat(group, member)
        return nothing

    # -- SyncGroup ---------------------------------------------------------------------
    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: Callable[[SyncResponse], None],
    ) -> None:
        """callback((error_code, protocol_type, protocol_name, assignment))."""
        request = SyncMember(
            generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        self.run(group_id, self.classic_group_sync(group_id, request, assignments), callback)

    def classic_group_sync(
        self, group_id: str, request: SyncMember, assignments: dict[str, bytes]
    ) -> SyncGroupResult:
        """Kafka's classicGroupSync: a follower's response waits (deferred)
        for the leader's; the leader's result carries the group's record
        with the assignment, which on_append makes the generation's."""
        generation_id, member_id, group_instance_id, protocol_type, protocol_name = request
        group = self.groups.get(group_id)
        if group is None:
            return _sync_rejected(E.UnknownMemberIdException.code)
        if group.is_(ClassicGroupState.DEAD):
            return _sync_rejected(E.CoordinatorNotAvailableException.code)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return _sync_rejected(E.FencedInstanceIdException.code)
        member = group.members.get(member_id)
        if member is None:
            return _sync_rejected(E.UnknownMemberIdException.code)
        if generation_id != group.generation_id:
            return _sync_rejected(E.IllegalGenerationException.code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return _sync_rejected(E.InconsistentGroupProtocolException.code)
        if group.is_(ClassicGroupState.EMPTY):
            return _sync_rejected(E.UnknownMemberIdException.code)
        if group.is_(ClassicGroupState.PREPARING_REBALANCE):
            return _sync_rejected(E.RebalanceInProgressException.code)
        self.complete_and_schedule_next_heartbeat(group, member)
        if group.is_(ClassicGroupState.STABLE):
            return _sync_answer((NONE, group.protocol_type, group.protocol_name, member.assignment))
        response = member.sync_future = DeferredResponse()
        if not group.is_leader(member_id):
            return _sync_answer(response)
        full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        generation = group.generation_id
        return _sync_answer(
            response,
            [self._group_record(group, full)],
            lambda code: self._assignment_stored(group, generation, full, code),
        )

    def _assignment_stored(
        self, group: ClassicGroup, generation: int, assignments: dict[str, bytes], code: int
    ) -> None:
        """The leader's assignment reached the log (or failed to): the
        generation becomes Stable and every waiting SyncGroup is answered."""
        if (
            not group.is_(ClassicGroupState.COMPLETING_REBALANCE)
            or group.generation_id != generation
        ):
            return
        if code:
            self._reset_and_propagate_assignment_error(group, code)
            self._maybe_prepare_rebalance(group)
            return
        for mid, assignment in assignments.items():
            if mid in group.members:
                group.members[mid].assignment = assignment
        self._propagate_assignment(group)
        group.transition_to(ClassicGroupState.STABLE, self.time_ms())

    def _propagate_assignment(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            response, member.sync_future = member.sync_future, None
            if response is not None:
                response.complete(
                    (NONE, group.protocol_type, group.protocol_name, member.assignment)
                )
                self.complete_and_schedule_next_heartbeat(group, member)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            response, member.sync_future = member.sync_future, None
            if response is not None:
                response.complete(_sync_error(code))

    # -- Heartbeat / LeaveGroup --------------------------------------------------------
    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """Heartbeat: its error code (it writes nothing, so it answers at once)."""
        return self._run_now(
            group_id,
            self.classic_group_heartbeat(group_id, member_id, group_instance_id, generation_id),
        )

    def classic_group_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> CoordinatorResult[int, GroupRecord]:
        return _code_result(
            self._heartbeat_error(group_id, member_id, group_instance_id, generation_id)
        )

    def _heartbeat_error(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return E.UnknownMemberIdException.code
        if group.is_(ClassicGroupState.DEAD):
            return E.CoordinatorNotAvailableException.code
        if group.is_static_member_fenced(member_id, group_instance_id):
            return E.FencedInstanceIdException.code
        member = group.members.get(member_id)
        if member is None or group.is_(ClassicGroupState.EMPTY):
            return E.UnknownMemberIdException.code
        if generation_id != group.generation_id:
            return E.IllegalGenerationException.code
        self.complete_and_schedule_next_heartbeat(group, member)
        if group.is_(ClassicGroupState.PREPARING_REBALANCE):
            return E.RebalanceInProgressException.code
        return NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(top-level error, error per (member_id, group_instance_id)): it
        writes nothing itself (a group left empty is stored by the end of
        its join phase, a result of its own), so it answers at once."""
        return self._run_now(group_id, self.classic_group_leave(group_id, members))

    def classic_group_leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> CoordinatorResult[tuple[int, list[int]], GroupRecord]:
        group = self.groups.get(group_id)
        if group is None:
            return _leave_answer(NONE, [E.UnknownMemberIdException.code] * len(members))
        if group.is_(ClassicGroupState.DEAD):
            return _leave_answer(E.CoordinatorNotAvailableException.code, [])
        return _leave_answer(NONE, [self._leave_member(group, m, i) for m, i in members])

    def _leave_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        """One member of a LeaveGroup leaves: its error code."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UnknownMemberIdException.code
            if member_id != UNKNOWN_MEMBER_ID and current != member_id:
                return E.FencedInstanceIdException.code
            member_id = current
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, member_id))
            self.join_purgatory.check_and_complete(group.group_id)
            return NONE
        if member_id not in group.members:
            return E.UnknownMemberIdException.code
        group.members[member_id].is_leaving = True
        self._remove_member_and_update_group(group, member_id)
        return NONE

    def on_heartbeat_expired(self, group: ClassicGroup | ConsumerGroup, member_id: str) -> None:
        """A member's DelayedHeartbeat expired (only classic members' come here)."""
        if not isinstance(group, ClassicGroup):
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.join_purgatory.check_and_complete(group.group_id)
            return
        member = group.members.get(member_id)
        if (
            member is None
            or group.is_(ClassicGroupState.DEAD)
            or member.is_awaiting_join
            or member.is_awaiting_sync
        ):
            return
        self._remove_member_and_update_group(group, member_id)

    def _remove_member(
        self, group: ClassicGroup, member_id: str, code: int = E.UnknownMemberIdException.code
    ) -> None:
        member = group.remove(member_id)
        self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, member_id))
        if member is not None:
            join, member.join_future = member.join_future, None
            if join is not None:
                join.complete(join_error(member_id, code))
            sync, member.sync_future = member.sync_future, None
            if sync is not None:
                sync.complete(_sync_error(code))

    def _remove_member_and_update_group(self, group: ClassicGroup, member_id: str) -> None:
        self._remove_member(group, member_id)
        if group.is_(ClassicGroupState.STABLE) or group.is_(ClassicGroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(ClassicGroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    def complete_and_schedule_next_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember
    ) -> None:
        complete_and_schedule_next_heartbeat(
            self.heartbeat_purgatory,
            member,
            DelayedHeartbeat(self, group, member.member_id, member.session_timeout_ms),
        )

    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, timeout_ms),
            [heartbeat_key(group.group_id, member_id)],
        )

    # -- persistence -------------------------------------------------------------------
    def _group_record(
        self, group: ClassicGroup, assignments: dict[str, bytes] | None = None
    ) -> GroupRecord:
        """The group's GroupMetadata record (Kafka's newGroupMetadataRecord),
        with ``assignments`` in place of the members' current ones. Results
        carry it with replay False: the group changed as the handler decided
        (a replay would build a new ClassicGroup, without the members'
        waiting responses)."""
        value = group.to_record_value(self.time_ms())
        if assignments is not None:
            value = value._replace(
                members=tuple(
                    m._replace(assignment=assignments.get(m.member_id, b"")) for m in value.members
                )
            )
        return (GroupMetadataKey(group.group_id), value)

    def replay_group_metadata(self, key: GroupMetadataKey, value: GroupRecordValue | None) -> None:
        """Apply a GroupMetadata record (a tombstone deletes the group)."""
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None:
                group.state = ClassicGroupState.DEAD
            return None
        if not isinstance(value, GroupMetadataValue):
            raise ValueError(f"{key} with a {type(value).__name__} value")
        self.groups[key.group] = ClassicGroup.from_record_value(key.group, value, self.time_ms())
        return None

    def on_loaded(self, group_ids: list[str]) -> None:
        """After replaying a partition: loaded members must heartbeat within
        their session timeout, as after a rebalance."""
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is not None:
                for member in group.members.values():
                    self.complete_and_schedule_next_heartbeat(group, member)

    def unload(self, group_ids: Iterable[str]) -> None:
        """The groups' partition is no longer ours: their waiting members
        are answered NOT_COORDINATOR (they look the coordinator up again)."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            for member_id in list(group.members):
                self._remove_member(group, member_id, E.NotCoordinatorException.code)
            group.state = ClassicGroupState.DEAD
            self.join_purgatory.check_and_complete(group_id)

    def shutdown(self) -> None:
        self.join_purgatory.shutdown()

    # -- introspection -----------------------------------------------------------------
    def snapshot(self) -> dict[str, object]:
        """What replay must reproduce of each classic group: generation,
        protocol, leader and members with their assignments."""
        groups: dict[str, object] = {}
        for group_id, group in self.groups.items():
            if group.is_(ClassicGroupState.DEAD):
                continue
            groups[group_id] = (
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                group.leader_id if group.members else None,
                sorted(
                    (m.member_id, m.group_instance_id, bytes(m.assignment))
                    for m in group.members.values()
                ),
            )
        return groups

    # -- the KIP-848 groups' hooks (ClassicGroups) -------------------------------------
    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not (
            group.is_(ClassicGroupState.EMPTY) or group.is_(ClassicGroupState.DEAD)
        )

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def restore(self, group: ClassicGroup) -> None:
        if group.group_id not in self.groups:
            group.state = ClassicGroupState.EMPTY
            self.groups[group.group_id] = group

    def remove_if_empty(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_(ClassicGroupState.EMPTY):
            del self.groups[group_id]

    def group_or_none(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.is_(ClassicGroupState.DEAD) else group
