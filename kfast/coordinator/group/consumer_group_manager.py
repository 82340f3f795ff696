"""ConsumerGroupManager: ConsumerGroupHeartbeat and ConsumerGroupDescribe of
KIP-848 groups (the consumer-group half of Kafka's GroupMetadataManager). The
GroupCoordinator holds one beside its ClassicGroupManager and its
OffsetMetadataManager, and shares with the ClassicGroupManager the heartbeat
purgatory and the KIP-848 groups map; it sees the classic groups only
through the ClassicGroups hooks (a KIP-848 group takes over an empty classic
group of its id).

The handler passes the cluster's topics in ({name: (topic_id, partition
count)}), so the state machine stays free of metadata lookups.

Persistence (Kafka's GroupMetadataManager for consumer groups): a group is
the set of __consumer_offsets records ``_consumer_group_records`` maps it
to (group epoch, subscribed topics' metadata, target assignment epoch,
and per member its metadata, target and current assignment; records.py
has the layouts). State changes only through those records, as in Kafka:

1. a handler (the heartbeat, a session expiring) decides on a scratch copy
   of its group (``ConsumerGroup.scratch``; a member is copied before it
   changes), leaving the group itself untouched;
2. ``_changed_records`` turns the decision into the records whose value
   differs from what the log holds (``group.persisted``, key -> value), and
   tombstones for keys that no longer exist;
3. ``_apply`` replays them into the live group at once (Kafka's runtime
   replays a write's records before the append), through
   ``replay_consumer_group`` -- one replay per record type, the same that
   loads a partition -- keeping a ``ConsumerGroupSnapshot`` first;
4. the heartbeat's response is read from the replayed group, and answered
   once the records are appended (a CoordinatorResult with replay False:
   applied already);
5. a failed append restores the snapshot (Kafka's runtime reverts to its
   last snapshot) -- unless another change was replayed on top meanwhile:
   then the state stays and the lost records' keys are marked unknown, so
   the next change writes them again.

Loading a partition rebuilds the same groups (``replay_consumer_group``
fills ``group.persisted`` too, so the next change writes only what
changed); a member that comes back after a restart continues with its
member epoch. What is not written -- a regex's resolution against the
topics a member may describe, the assignor's name, the assignment last
sent, timers -- is carried over from the decision or kept by the group.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

from kfast.config import KafkaConfig
from kfast.controller.group_config import group_config_value
from kfast.coordinator.group import records as R
from kfast.coordinator.group.assignors import ASSIGNORS
from kfast.coordinator.group.classic_group import ClassicGroup
from kfast.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupSnapshot,
    ConsumerGroupState,
    MemberState,
    Partitions,
    new_member_id,
)
from kfast.coordinator.group.delayed import (
    DelayedHeartbeat,
    complete_and_schedule_next_heartbeat,
    heartbeat_key,
)
from kfast.coordinator.result import (
    CoordinatorResult,
    DeferredResponse,
    ResultRunner,
)
from kfast.protocol import errors as E
from kfast.protocol.schema import Message
from kfast.server_common.purgatory import DelayedOperationPurgatory, Timer

# The order Kafka writes a change in (a member's metadata before the group
# epoch it bumps, the target before its epoch, the current assignment
# last); tombstones go in the reverse order.
#
# Within a group, ``group.persisted`` keys a record by (key type, member id
# or None): plain tuples hash fast on every heartbeat; the record key is
# built only to write.
GROUP_EPOCH, SUBSCRIPTION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
# (record key type, member id or None): a record of a group, as ``group.persisted`` keys it.
PersistedKey = tuple[int, str | None]
# A record's content as a plain tuple; its layout depends on the record's kind
# (see _state_of), so its items are typed by that kind, not here.
Content = tuple[Any, ...]
# An assignment as a sorted tuple: ((topic_id, (partitions...)), ...).
FlatAssignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


class _TopicPartitions(Protocol):
    """A record's (topic id, partitions) entry (TopicPartition(s) of the values)."""

    topic_id: uuid.UUID
    partitions: list[int]


_TP = TypeVar("_TP", bound=Message)

_KEY_CLASS: dict[int, Callable[..., R.ConsumerGroupKey]] = {
    3: R.ConsumerGroupMetadataKey,
    4: R.ConsumerGroupPartitionMetadataKey,
    5: R.ConsumerGroupMemberMetadataKey,
    6: R.ConsumerGroupTargetAssignmentMetadataKey,
    7: R.ConsumerGroupTargetAssignmentMemberKey,
    8: R.ConsumerGroupCurrentMemberAssignmentKey,
}
_KEY_TYPE: dict[Callable[..., R.ConsumerGroupKey], int] = {cls: t for t, cls in _KEY_CLASS.items()}
_WRITE_ORDER = {
    MEMBER_METADATA: 0,
    SUBSCRIPTION_METADATA: 1,
    GROUP_EPOCH: 2,
    TARGET_MEMBER: 3,
    TARGET_METADATA: 4,
    CURRENT_ASSIGNMENT: 5,
}
_MEMBER_KEY_TYPES = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_MEMBER_KEY_CLASSES = (
    R.ConsumerGroupMemberMetadataKey,
    R.ConsumerGroupTargetAssignmentMemberKey,
    R.ConsumerGroupCurrentMemberAssignmentKey,
)


def _record_key(group_id: str, key: PersistedKey) -> R.ConsumerGroupKey:
    key_type, member_id = key
    cls = _KEY_CLASS[key_type]
    return cls(group_id) if member_id is None else cls(group_id, member_id)


_STATE_BY_CODE = {code: MemberState(name) for name, code in R.MEMBER_STATE_CODES.items()}


class _Unknown:
    """What ``group.persisted`` holds for a key whose write failed: equal to
    no value, so the key is written again."""

    def __eq__(self, other: object) -> bool:
        return False

    # Unhashable, as a value equal to nothing must be.
    __hash__ = None  # type: ignore[assignment]


_UNKNOWN = _Unknown()


def _flat(assignment: Mapping[uuid.UUID, Iterable[int]] | None) -> FlatAssignment:
    """An assignment as a sorted tuple: ((topic_id, (partitions...)), ...)."""
    if not assignment:
        return ()
    return tuple(sorted((t, tuple(sorted(ps))) for t, ps in assignment.items() if ps))


def _flat_of(topic_partitions: Iterable[_TopicPartitions]) -> FlatAssignment:
    return _flat(_assignment(topic_partitions))


def _assignment(topic_partitions: Iterable[_TopicPartitions]) -> Partitions:
    out: Partitions = {}
    for tp in topic_partitions:
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def _topic_partitions(cls: type[_TP], flat: FlatAssignment) -> list[_TP]:
    return [cls(topic_id=t, partitions=list(ps)) for t, ps in flat]


# A record's content as a plain tuple, the form ``group.persisted`` keeps
# (cheap to build and compare on every heartbeat): from a decoded value
# (replay), and back to the value (write).
def _state_of(value: Message) -> Content:
    """The content tuple of a decoded value (its class says its kind)."""
    if isinstance(value, R.ConsumerGroupMetadataValue):
        return (value.epoch,)
    if isinstance(value, R.ConsumerGroupPartitionMetadataValue):
        return tuple(sorted((t.topic_name, t.topic_id, t.num_partitions) for t in value.topics))
    if isinstance(value, R.ConsumerGroupTargetAssignmentMetadataValue):
        return (value.assignment_epoch,)
    if isinstance(value, R.ConsumerGroupTargetAssignmentMemberValue):
        return _flat_of(value.topic_partitions)
    if isinstance(value, R.ConsumerGroupMemberMetadataValue):
        return (
            value.instance_id,
            value.rack_id,
            value.client_id,
            value.client_host,
            tuple(sorted(value.subscribed_topic_names)),
            value.subscribed_topic_regex or None,
            value.rebalance_timeout_ms,
            value.server_assignor,
        )
    assert isinstance(value, R.ConsumerGroupCurrentMemberAssignmentValue)
    return (
        value.member_epoch,
        value.previous_member_epoch,
        value.state,
        _flat_of(value.assigned_partitions),
        _flat_of(value.partitions_pending_revocation),
    )


def _persisted_key(key: R.ConsumerGroupKey) -> PersistedKey:
    return (_KEY_TYPE[type(key)], getattr(key, "member_id", None))


def _value_of(kind: int, state: Content) -> Message:
    if kind == GROUP_EPOCH:
        return R.ConsumerGroupMetadataValue(epoch=state[0])
    if kind == SUBSCRIPTION_METADATA:
        metadata = R.ConsumerGroupPartitionMetadataValue
        return metadata(
            topics=[
                metadata.TopicMetadata(topic_id=topic_id, topic_name=name, num_partitions=count)
                for name, topic_id, count in state
            ]
        )
    if kind == TARGET_METADATA:
        return R.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=state[0])
    if kind == TARGET_MEMBER:
        target = R.ConsumerGroupTargetAssignmentMemberValue
        return target(topic_partitions=_topic_partitions(target.TopicPartition, state))
    if kind == MEMBER_METADATA:
        instance_id, rack_id, client_id, client_host, names, regex, timeout, assignor = state
        return R.ConsumerGroupMemberMetadataValue(
            instance_id=instance_id,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=list(names),
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=timeout,
            server_assignor=assignor,
        )
    current = R.ConsumerGroupCurrentMemberAssignmentValue
    epoch, previous, state_code, assigned, pending = state
    return current(
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state_code,
        assigned_partitions=_topic_partitions(current.TopicPartitions, assigned),
        partitions_pending_revocation=_topic_partitions(current.TopicPartitions, pending),
    )


JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# {topic name: (topic id, partition count)}: the cluster's topics as the
# handler passes them in.
TopicsView = Mapping[str, tuple[uuid.UUID, int]]
# A ConsumerGroupHeartbeatResponse's fields.
HeartbeatResponse = dict[str, Any]
HeartbeatCallback = Callable[[HeartbeatResponse], None]
HeartbeatResult = CoordinatorResult[HeartbeatResponse, R.GroupRecord]
_T = TypeVar("_T")


# (key bytes, value bytes or None for a tombstone): one __consumer_offsets record.
Record = tuple[bytes, bytes | None]


class ConsumerHeartbeat(NamedTuple):
    """The fields of one ConsumerGroupHeartbeat the coordinator reads."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str
    topics: TopicsView
    subscribed_topic_regex: str | None
    may_describe: Callable[[str], bool] | None


class _HeartbeatRejected(Exception):
    """A heartbeat answered with an error (Kafka's GroupMetadataManager
    throws the ApiException); ``member_id`` is the id the answer carries."""

    def __init__(self, member_id: str, code: int, message: str | None = None):
        super().__init__(code, message)
        self.member_id, self.code, self.message = member_id, code, message


def _heartbeat_error(member_id: str, code: int, message: str | None = None) -> HeartbeatResponse:
    return {
        "error_code": code,
        "error_message": message,
        "member_id": member_id or None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def _epochs_and_members(group: ConsumerGroup | None) -> tuple[int, int, tuple[str, ...]] | None:
    """What, unchanged by a heartbeat, limits its writes to the member's records."""
    if group is None:
        return None
    return group.group_epoch, group.assignment_epoch, tuple(group.members)


def _check_member_epoch(member: ConsumerGroupMember, request: ConsumerHeartbeat) -> None:
    """A member ahead of its epoch is fenced; one behind is too, unless it
    is at its previous epoch and owns nothing beyond its assignment (a
    response it missed)."""
    epoch, owned = request.member_epoch, request.owned
    if epoch > member.member_epoch:
        raise _HeartbeatRejected(member.member_id, E.FencedMemberEpochException.code)
    if epoch < member.member_epoch and not (
        epoch == member.previous_member_epoch
        and owned is not None
        and all(ps <= member.assigned.get(t, set()) for t, ps in owned.items())
    ):
        raise _HeartbeatRejected(member.member_id, E.FencedMemberEpochException.code)


def _assignment_to_send(
    member: ConsumerGroupMember, request: ConsumerHeartbeat
) -> dict[str, Any] | None:
    """The response's assignment: sent on a join, when the member reported
    what it owns, or when it changed since last sent; else null."""
    if not (
        request.member_epoch == JOIN_EPOCH
        or request.owned is not None
        or member.sent_assignment != member.assigned
    ):
        return None
    member.sent_assignment = {t: set(ps) for t, ps in member.assigned.items()}
    return {
        "topic_partitions": [
            {"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(member.assigned.items(), key=lambda i: str(i[0]))
        ]
    }


def _nothing() -> None:
    return None


def _ignore(code: int) -> None:
    return None


def _heartbeat_result(
    records: list[R.GroupRecord], response: HeartbeatResponse, revert: Callable[[], None]
) -> HeartbeatResult:
    """A heartbeat's result: its records are replayed already (not again
    after the append); a failed append reverts them and answers its error."""

    def failed(code: int) -> HeartbeatResponse:
        revert()
        return {
            "error_code": code,
            "error_message": None,
            "member_id": response["member_id"],
            "member_epoch": -1,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    return CoordinatorResult(records, response, failed, replay=False)


class ClassicGroups(Protocol):
    """What a KIP-848 group needs of the classic groups of its id space (the
    ClassicGroupManager): an empty one is taken over, an active one refuses
    the heartbeat."""

    def is_active(self, group_id: str) -> bool:
        """A classic group of that id is in use (neither Empty nor Dead)."""

    def group(self, group_id: str) -> ClassicGroup | None:
        """The classic group of that id, if any."""

    def restore(self, group: ClassicGroup) -> None:
        """A take-over failed: the empty classic group comes back."""

    def remove_if_empty(self, group_id: str) -> None:
        """A KIP-848 group of that id was replayed: an empty classic group
        (the offsets' placeholder, or one it replaced) goes."""


class ConsumerGroupManager:
    """``consumer_groups``: the KIP-848 groups (shared with the
    ClassicGroupManager, which takes over an empty one); ``classic_groups``:
    the classic side's hooks; ``run``: the GroupCoordinator's, which appends
    a handler's result and answers; ``replay``: the GroupCoordinator's
    replay of one record object (a KIP-848 group's records come back here,
    a classic group's tombstone goes to the classic groups)."""

    def __init__(
        self,
        config: KafkaConfig,
        timer: Timer,
        run: ResultRunner[R.GroupRecord],
        consumer_groups: dict[str, ConsumerGroup],
        classic_groups: ClassicGroups,
        heartbeat_purgatory: DelayedOperationPurgatory,
        replay: Callable[[R.GroupRecordKey, R.GroupRecordValue | None], None],
    ) -> None:
        self.config = config
        self.timer = timer
        self.run = run
        self.replay = replay
        self.classic_groups = classic_groups
        self.heartbeat_purgatory = heartbeat_purgatory
        self.consumer_groups = consumer_groups
        # A group's own overrides ({name: value}, the GROUP config resource,
        # kept in the metadata image); the broker sets the lookup.
        self.group_config_overrides: Callable[[str], Mapping[str, str]] = lambda group_id: {}
        self.consumer_assignors: list[str] = list(config["group.consumer.assignors"]) or ["uniform"]
        self.consumer_max_size: int = config["group.consumer.max.size"]

    def on_heartbeat_expired(self, group: ClassicGroup | ConsumerGroup, member_id: str) -> None:
        """A member's DelayedHeartbeat expired (only KIP-848 members' come here)."""
        if isinstance(group, ConsumerGroup):
            self.on_consumer_session_expired(group, member_id)

    def unload(self, group_ids: list[str]) -> None:
        """The groups' partition is no longer ours: their members go."""
        for group_id in group_ids:
            consumer_group = self.consumer_groups.pop(group_id, None)
            if consumer_group is not None:
                for member_id in list(consumer_group.members):
                    self._remove_consumer_member(consumer_group, member_id)
                consumer_group.dead = True

    def group_config(self, group_id: str, name: str) -> Any:
        """The group's value of group config ``name`` (consumer.session.timeout.ms,
        consumer.heartbeat.interval.ms): its override, else the broker's
        group.consumer.* property (Kafka's GroupConfigManager)."""
        return group_config_value(self.config, self.group_config_overrides(group_id), name)

    def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        server_assignor: str | None,
        owned: Partitions | None,
        client_id: str,
        client_host: str,
        topics: TopicsView,
        subscribed_topic_regex: str | None = None,
        callback: HeartbeatCallback | None = None,
        may_describe: Callable[[str], bool] | None = None,
    ) -> HeartbeatResponse | None:
        """The ConsumerGroupHeartbeatResponse fields. ``owned``: {topic_id:
        set(partitions)} the member reports holding, or None.
        ``may_describe(topic)``: whether the member may DESCRIBE the topic
        (the caller's authorizer; None: every topic); a regex matches only
        those, as Kafka's GroupMetadataManager filters its regex results.

        The response is final once the change's records are appended: with
        ``callback`` it is passed there then; without, it is returned (the
        append's error if the write completed at once and failed)."""
        request = ConsumerHeartbeat(
            group_id,
            member_id,
            member_epoch,
            instance_id,
            rack_id,
            rebalance_timeout_ms,
            subscribed_topic_names,
            server_assignor,
            owned,
            client_id,
            client_host,
            topics,
            subscribed_topic_regex,
            may_describe,
        )
        try:
            result = self._consumer_group_heartbeat(request)
        except _HeartbeatRejected as rejected:
            response = _heartbeat_error(rejected.member_id, rejected.code, rejected.message)
            result = CoordinatorResult([], response, lambda code: response)
        if callback is not None:
            self.run(group_id, result, callback)
            return None
        answers: list[HeartbeatResponse] = []
        self.run(group_id, result, answers.append)
        # A write still in flight when we return: its outcome reaches
        # nobody (a failure still reverts the group, see _revert).
        if answers:
            return answers[0]
        answer = result.response
        assert not isinstance(answer, DeferredResponse)  # a heartbeat answers at once
        return answer

    def _consumer_group_heartbeat(self, request: ConsumerHeartbeat) -> HeartbeatResult:
        """Kafka's consumerGroupHeartbeat: decide on a scratch copy of the
        group, turn the decision into records, replay them into the group
        (as Kafka's runtime does at once) and read the response from it; a
        refusal raises _HeartbeatRejected."""
        self._check_heartbeat(request)
        live = self.consumer_groups.get(request.group_id)
        group = live.scratch() if live is not None else None
        before = _epochs_and_members(group)
        extra: list[R.GroupRecord] = []  # records of a classic group this one replaces
        if request.member_epoch == JOIN_EPOCH:
            group, member, bump = self._join_consumer_group(request, group, extra)
        else:
            if group is None or request.member_id not in group.members:
                raise _HeartbeatRejected(request.member_id, E.UnknownMemberIdException.code)
            member = group.own(request.member_id)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave_consumer_group(group, member, request)
            _check_member_epoch(member, request)
            bump = False
        self._update_consumer_member(member, request)
        # Whatever changes in one heartbeat bumps the group epoch once.
        if self._update_subscriptions(group, member, request) or bump:
            group.group_epoch += 1
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, request.topics)
        was_revoking = member.state == MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, request.owned)
        # Only this member's records can have changed unless an epoch moved
        # or the membership did.
        scope = [member.member_id] if _epochs_and_members(group) == before else None
        records = extra + self._changed_records(group, scope)
        revert = self._apply(group, records)
        return self._heartbeat_result(
            request, group, member.member_id, was_revoking, records, revert
        )

    def _heartbeat_result(
        self,
        request: ConsumerHeartbeat,
        decided: ConsumerGroup,
        member_id: str,
        was_revoking: bool,
        records: list[R.GroupRecord],
        revert: Callable[[], None],
    ) -> HeartbeatResult:
        """The heartbeat's response, read from the group its records were
        replayed into; its session and revocation timers set."""
        group = self.consumer_groups[request.group_id]
        member = group.members[member_id]
        if request.member_epoch == JOIN_EPOCH and member.revocation_timeout is not None:
            # A member that rejoined under its id starts afresh.
            member.revocation_timeout.cancel()
            member.revocation_timeout = None
        self.consumer_heartbeat_received(group, member)
        if member.state == MemberState.UNREVOKED_PARTITIONS and not was_revoking:
            self._schedule_revocation_timeout(group, member)
        response: HeartbeatResponse = {
            "error_code": 0,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": self.group_config(
                request.group_id, "consumer.heartbeat.interval.ms"
            ),
            "assignment": _assignment_to_send(member, request),
        }
        return _heartbeat_result(records, response, revert)

    def _check_heartbeat(self, request: ConsumerHeartbeat) -> None:
        """What makes a heartbeat invalid whoever sends it."""
        if not request.group_id:
            raise _HeartbeatRejected(
                request.member_id, E.InvalidRequestException.code, "GroupId can't be empty."
            )
        assignor = request.server_assignor
        if assignor is not None and assignor not in ASSIGNORS:
            raise _HeartbeatRejected(
                request.member_id,
                E.UnsupportedAssignorException.code,
                f"Assignor {assignor} is not supported.",
            )
        if self.classic_groups.is_active(request.group_id):
            raise _HeartbeatRejected(
                request.member_id,
                E.GroupIdNotFoundException.code,
                f"Group {request.group_id} is not a consumer group.",
            )

    def _join_consumer_group(
        self, request: ConsumerHeartbeat, group: ConsumerGroup | None, extra: list[R.GroupRecord]
    ) -> tuple[ConsumerGroup, ConsumerGroupMember, bool]:
        """A member joins (epoch 0): (the scratch group, the member, whether
        the group epoch must move). An empty classic group of that id is
        taken over: its tombstone goes into ``extra``."""
        if request.rebalance_timeout_ms < 0 or (
            request.subscribed_topic_names is None and not request.subscribed_topic_regex
        ):
            raise _HeartbeatRejected(
                request.member_id,
                E.InvalidRequestException.code,
                "RebalanceTimeoutMs and SubscribedTopicNames or "
                "SubscribedTopicRegex must be set when joining.",
            )
        group_id = request.group_id
        if group is None:
            if self.classic_groups.group(group_id) is not None:
                # An empty classic group is taken over (its record deleted).
                extra.append((R.GroupMetadataKey(group_id), None))
            group = ConsumerGroup(group_id)
        member_id = request.member_id or new_member_id()
        if member_id in group.members:
            # Rejoining under its id: a new member (the old one's timers go
            # when its records are replayed over).
            del group.members[member_id]
            group.target.pop(member_id, None)
        static = self._static_member(group, request.instance_id)
        if static is not None and static.member_id != member_id:
            if static.member_epoch != STATIC_LEAVE_EPOCH:
                raise _HeartbeatRejected(
                    member_id,
                    E.UnreleasedInstanceIdException.code,
                    f"Static member {request.instance_id} is still in the group.",
                )
            # KIP-345 in KIP-848: the restarted instance takes over the
            # member it was, assignment and epoch included; no rebalance.
            return group, self._replace_static_member(group, static.member_id, member_id), False
        if len(group.members) >= self.consumer_max_size:
            raise _HeartbeatRejected(member_id, E.GroupMaxSizeReachedException.code)
        member = group.members[member_id] = ConsumerGroupMember(member_id)
        return group, member, True

    def _leave_consumer_group(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        request: ConsumerHeartbeat,
    ) -> HeartbeatResult:
        """Epoch -1 (leave) or -2 (a static member leaving for a while)."""
        member_id, member_epoch = member.member_id, request.member_epoch
        if member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # A static member leaving for a while keeps its partitions
            # until its session expires or its instance rejoins.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            scope: list[str] | None = [member_id]
        else:
            del group.members[member_id]
            group.target.pop(member_id, None)
            group.group_epoch += 1
            self._compute_target(group, request.topics)
            scope = None
        records = self._changed_records(group, scope)
        revert = self._apply(group, records)
        response: HeartbeatResponse = {
            "error_code": 0,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }
        return _heartbeat_result(records, response, revert)

    @staticmethod
    def _update_consumer_member(member: ConsumerGroupMember, request: ConsumerHeartbeat) -> None:
        """The member's fields the heartbeat sets (a field left out keeps
        its value)."""
        member.client_id, member.client_host = request.client_id, request.client_host
        # Heartbeats after the join may leave the instance id out (null:
        # unchanged, as Kafka's maybeUpdateInstanceId); clearing it would
        # make a static member dynamic and its restart a rebalance.
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        member.rack_id = request.rack_id or member.rack_id
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            member.explicit_topic_names = set(request.subscribed_topic_names)
        regex = request.subscribed_topic_regex
        if regex is not None:
            try:
                member.subscribed_topic_regex = re.compile(regex) if regex else None
            except re.error as exc:
                raise _HeartbeatRejected(
                    member.member_id, E.InvalidRegularExpression.code, str(exc)
                ) from exc

    @staticmethod
    def _update_subscriptions(
        group: ConsumerGroup, member: ConsumerGroupMember, request: ConsumerHeartbeat
    ) -> bool:
        """Resolve the member's subscription and the group's subscribed
        topics' metadata against this heartbeat's topics: whether either
        changed (a new group epoch)."""
        changed = False
        topics = request.topics
        # A regex is resolved against the topics of each heartbeat; internal
        # topics never match (as in Kafka).
        resolved = set(member.explicit_topic_names)
        regex, may_describe = member.subscribed_topic_regex, request.may_describe
        if regex is not None:
            resolved |= {
                t
                for t in topics
                if not t.startswith("__")
                and regex.fullmatch(t)
                and (may_describe is None or may_describe(t))
            }
        if sorted(resolved) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(resolved)
            changed = True
        metadata = {name: topics[name] for name in group.subscribed_topics() if name in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            changed = True
        return changed

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for, else the first configured."""
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        return max(sorted(set(names)), key=names.count) if names else self.consumer_assignors[0]

    def _compute_target(self, group: ConsumerGroup, topics: TopicsView) -> None:
        name = group.assignor_name = self._preferred_assignor(group)
        members = {
            m.member_id: {topics[t][0] for t in m.subscribed_topic_names if t in topics}
            for m in group.members.values()
        }
        counts = {
            topics_id: count
            for topics_id, count in (topics[t] for t in group.subscribed_topics() if t in topics)
        }
        group.target = ASSIGNORS[name](members, counts, group.target)
        group.assignment_epoch = group.group_epoch

    @staticmethod
    def _static_member(group: ConsumerGroup, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        return next((m for m in group.members.values() if m.instance_id == instance_id), None)

    @staticmethod
    def _replace_static_member(
        group: ConsumerGroup, old_member_id: str, member_id: str
    ) -> ConsumerGroupMember:
        """The restarted instance takes over its member (in the scratch
        group; the old id's records are deleted, its timers with them)."""
        old = group.own(old_member_id)
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

    def _schedule_revocation_timeout(
        self, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> None:
        """A member must release revoked partitions within its rebalance
        timeout, or it is fenced (removed) so others can have them."""
        if member.revocation_timeout is not None:
            member.revocation_timeout.cancel()
        epoch = member.member_epoch

        def expired() -> None:
            member.revocation_timeout = None
            if (
                group.members.get(member.member_id) is member
                and member.state == MemberState.UNREVOKED_PARTITIONS
                and member.member_epoch == epoch
            ):
                self.on_consumer_session_expired(group, member.member_id)

        member.revocation_timeout = self.timer.schedule(
            max(member.rebalance_timeout_ms, 0), expired
        )

    def consumer_heartbeat_received(
        self, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> None:
        session_timeout_ms = self.group_config(group.group_id, "consumer.session.timeout.ms")
        complete_and_schedule_next_heartbeat(
            self.heartbeat_purgatory,
            member,
            DelayedHeartbeat(self, group, member.member_id, session_timeout_ms),
        )

    def on_consumer_session_expired(self, group: ConsumerGroup, member_id: str) -> None:
        """The member is fenced: its records deleted, the group epoch bumped
        (the target is recomputed on the next heartbeat of any member, with
        the topics that heartbeat brings)."""
        if self.consumer_groups.get(group.group_id) is not group or member_id not in group.members:
            return
        scratch = group.scratch()
        del scratch.members[member_id]
        scratch.target.pop(member_id, None)
        scratch.group_epoch += 1
        records = self._changed_records(scratch, None)
        revert = self._apply(scratch, records)

        def failed(code: int) -> int:
            revert()
            return code

        self.run(group.group_id, CoordinatorResult(records, 0, failed, replay=False), _ignore)

    def consumer_group_describe(
        self, group_id: str, topic_names: Mapping[uuid.UUID, str]
    ) -> dict[str, Any]:
        """DescribedGroup fields; ``topic_names``: {topic_id: name}."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return {
                "error_code": E.GroupIdNotFoundException.code,
                "error_message": f"Group {group_id} not found.",
                "group_id": group_id,
                "group_state": ConsumerGroupState.DEAD,
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
            }

        def assignment(partitions: Partitions) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": t, "topic_name": topic_names.get(t, ""), "partitions": sorted(ps)}
                    for t, ps in sorted(partitions.items(), key=lambda i: str(i[0]))
                ]
            }

        return {
            "error_code": 0,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": self._preferred_assignor(group),
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex.pattern
                    if m.subscribed_topic_regex is not None
                    else None,
                    "assignment": assignment(m.assigned),
                    "target_assignment": assignment(group.target.get(m.member_id, {})),
                    "member_type": 1,
                }
                for m in group.members.values()
            ],
        }

    def validate_consumer_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int
    ) -> int:
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

    # -- persistence -------------------------------------------------------------------
    def _changed_records(
        self, group: ConsumerGroup, member_ids: list[str] | None
    ) -> list[R.GroupRecord]:
        """The records of the (scratch) ``group`` that differ from what the
        log holds (``group.persisted``): all of them, or only the group's
        and ``member_ids``' records; tombstones for keys no longer there."""
        if group.unwritten:
            member_ids = None
        wanted = self._consumer_group_records(group, member_ids)
        persisted = group.persisted
        if member_ids is None:
            stale = [k for k in persisted if k not in wanted]
        else:
            stale = [
                k
                for m in member_ids
                for t in _MEMBER_KEY_TYPES
                for k in ((t, m),)
                if k in persisted and k not in wanted
            ]
        # (key, content; None for a tombstone)
        changes: list[tuple[PersistedKey, Content | None]] = [
            (k, v) for k, v in wanted.items() if persisted.get(k) != v
        ]
        changes.sort(key=lambda kv: _WRITE_ORDER[kv[0][0]])
        stale.sort(key=lambda k: -_WRITE_ORDER[k[0]])
        changes += [(k, None) for k in stale]
        gid = group.group_id
        return [
            (_record_key(gid, k), None if v is None else _value_of(k[0], v)) for k, v in changes
        ]

    def _apply(self, decided: ConsumerGroup, records: list[R.GroupRecord]) -> Callable[[], None]:
        """Kafka's runtime replays a write's records into the state at once,
        before the append, and reverts to its snapshot if the append fails:
        replay ``records`` into the live group (created by its first
        record) and return the revert. Derived state that is not written
        (a regex's resolution, the assignor's name) comes from ``decided``."""
        group_id = decided.group_id
        live = self.consumer_groups.get(group_id)
        if not records:
            if live is not None:
                live.unwritten = False  # what a full comparison found all written
            return _nothing
        classic = self.classic_groups.group(group_id)
        member_ids = {k.member_id for k, _ in records if isinstance(k, _MEMBER_KEY_CLASSES)}
        snapshot = None if live is None else ConsumerGroupSnapshot(live, member_ids)
        for key, value in records:
            self.replay(key, value)
        group = self.consumer_groups[group_id]
        group.applied += 1
        group.unwritten = False
        group.assignor_name = decided.assignor_name
        for member in group.members.values():
            chosen = decided.members.get(member.member_id)
            if chosen is not None:
                member.subscribed_topic_names = chosen.subscribed_topic_names
        applied = group.applied
        return lambda: self._revert(group, applied, records, snapshot, classic)

    def _revert(
        self,
        group: ConsumerGroup,
        applied: int,
        records: list[R.GroupRecord],
        snapshot: ConsumerGroupSnapshot | None,
        classic: ClassicGroup | None,
    ) -> None:
        """The append of ``records`` failed: the group goes back to its
        snapshot. If another change was replayed on top since, the state
        stays and the lost records are written again with the next change."""
        if group.applied != applied or self.consumer_groups.get(group.group_id) is not group:
            for key, _ in records:
                if isinstance(key, R.CONSUMER_GROUP_KEY_CLASSES):
                    group.persisted[_persisted_key(key)] = _UNKNOWN
            group.unwritten = True
            return
        if classic is not None:
            self.classic_groups.restore(classic)
        added = set(group.members)
        if snapshot is None:  # the group's first records
            for member_id in added:
                self._remove_consumer_member(group, member_id)
            del self.consumer_groups[group.group_id]
            group.dead = True
            return
        snapshot.restore()
        for member_id in added - set(group.members):
            self.heartbeat_purgatory.cancel_for_key(heartbeat_key(group.group_id, member_id))
        for member_id in set(group.members) - added:
            # Back from a removal that did not happen: its session restarts.
            member = group.members[member_id]
            self.consumer_heartbeat_received(group, member)
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                self._schedule_revocation_timeout(group, member)

    def _consumer_group_records(
        self, group: ConsumerGroup, member_ids: list[str] | None = None
    ) -> dict[PersistedKey, Content]:
        """{key: content tuple (see _state_of)} that describe ``group`` (only
        the group-level records and those of ``member_ids`` when given)."""
        out: dict[PersistedKey, Content] = {
            (GROUP_EPOCH, None): (group.group_epoch,),
            (SUBSCRIPTION_METADATA, None): tuple(
                sorted(
                    (name, topic_id, count)
                    for name, (topic_id, count) in group.subscription_metadata.items()
                )
            ),
            (TARGET_METADATA, None): (group.assignment_epoch,),
        }
        members = (
            group.members.values()
            if member_ids is None
            else [group.members[m] for m in member_ids if m in group.members]
        )
        for member in members:
            mid = member.member_id
            out[MEMBER_METADATA, mid] = (
                member.instance_id,
                member.rack_id,
                member.client_id,
                member.client_host,
                tuple(sorted(member.explicit_topic_names)),
                member.subscribed_topic_regex.pattern
                if member.subscribed_topic_regex is not None
                else None,
                member.rebalance_timeout_ms,
                member.server_assignor,
            )
            out[CURRENT_ASSIGNMENT, mid] = (
                member.member_epoch,
                member.previous_member_epoch,
                R.MEMBER_STATE_CODES[member.state],
                _flat(member.assigned),
                _flat(member.pending_revocation),
            )
        targets = (
            group.target.items()
            if member_ids is None
            else [(m, group.target[m]) for m in member_ids if m in group.target]
        )
        for mid, partitions in targets:
            out[TARGET_MEMBER, mid] = _flat(partitions)
        return out

    @staticmethod
    def consumer_group_tombstones(group: ConsumerGroup) -> list[R.GroupRecord]:
        """(key, None) for every record ``group`` has on the log,
        members' records first (deleting the group)."""
        keys = sorted(group.persisted, key=lambda k: -_WRITE_ORDER[k[0]])
        return [(_record_key(group.group_id, k), None) for k in keys]

    def replay_consumer_group(self, key: R.ConsumerGroupKey, value: Message | None) -> None:
        """Apply one KIP-848 record (any order; latest per key wins; a
        tombstone of the group's epoch record deletes the group)."""
        if value is None:
            group = self.consumer_groups.get(key.group_id)
            if group is not None:
                group.persisted.pop(_persisted_key(key), None)
                self._replay_consumer_tombstone(group, key)
            return
        group = self._replayed_consumer_group(key.group_id)
        persisted_key = _persisted_key(key)
        group.persisted[persisted_key] = _state_of(value)
        # The value's class is its key's kind (decode_value decodes by key).
        if isinstance(value, R.ConsumerGroupMetadataValue):
            group.group_epoch = value.epoch
        elif isinstance(value, R.ConsumerGroupPartitionMetadataValue):
            group.subscription_metadata = {
                t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics
            }
            for member in group.members.values():
                self._resolve_loaded_subscription(group, member)
        elif isinstance(value, R.ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        else:
            member_id = persisted_key[1]  # the other records are a member's
            assert member_id is not None
            if isinstance(value, R.ConsumerGroupTargetAssignmentMemberValue):
                group.target[member_id] = _assignment(value.topic_partitions)
            else:
                self._replay_member_record(group, member_id, value)

    def _replayed_consumer_group(self, group_id: str) -> ConsumerGroup:
        """The group a replayed record belongs to, created by its first record."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            group = self.consumer_groups[group_id] = ConsumerGroup(group_id)
            self.classic_groups.remove_if_empty(group_id)
        return group

    def _replay_consumer_tombstone(self, group: ConsumerGroup, key: R.ConsumerGroupKey) -> None:
        if isinstance(key, R.ConsumerGroupMetadataKey):
            for member_id in list(group.members):
                self._remove_consumer_member(group, member_id)
            del self.consumer_groups[group.group_id]
            group.dead = True
        elif isinstance(key, R.ConsumerGroupMemberMetadataKey):
            self._remove_consumer_member(group, key.member_id)
        elif isinstance(key, R.ConsumerGroupTargetAssignmentMemberKey):
            group.target.pop(key.member_id, None)
        elif isinstance(key, R.ConsumerGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if member is not None:
                member.member_epoch, member.previous_member_epoch = 0, -1
                member.state, member.assigned, member.pending_revocation = (
                    MemberState.STABLE,
                    {},
                    {},
                )
        elif isinstance(key, R.ConsumerGroupPartitionMetadataKey):
            group.subscription_metadata = {}
        elif isinstance(key, R.ConsumerGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = 0

    def _replay_member_record(self, group: ConsumerGroup, member_id: str, value: Message) -> None:
        """A member's metadata or current assignment record."""
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = ConsumerGroupMember(member_id)
        if isinstance(value, R.ConsumerGroupMemberMetadataValue):
            member.instance_id, member.rack_id = value.instance_id, value.rack_id
            member.client_id, member.client_host = value.client_id, value.client_host
            member.explicit_topic_names = set(value.subscribed_topic_names)
            member.subscribed_topic_regex = (
                re.compile(value.subscribed_topic_regex) if value.subscribed_topic_regex else None
            )
            member.rebalance_timeout_ms = value.rebalance_timeout_ms
            member.server_assignor = value.server_assignor
            self._resolve_loaded_subscription(group, member)
        else:
            assert isinstance(value, R.ConsumerGroupCurrentMemberAssignmentValue)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.state = _STATE_BY_CODE.get(value.state, MemberState.STABLE)
            member.assigned = _assignment(value.assigned_partitions)
            member.pending_revocation = _assignment(value.partitions_pending_revocation)

    @staticmethod
    def _resolve_loaded_subscription(group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """The topics a replayed member subscribes to: its names plus the
        group's subscribed topics its regex matches (the resolution the
        group's metadata was written with)."""
        resolved = set(member.explicit_topic_names)
        if member.subscribed_topic_regex is not None:
            resolved |= {
                t for t in group.subscription_metadata if member.subscribed_topic_regex.fullmatch(t)
            }
        member.subscribed_topic_names = sorted(resolved)

    def on_consumer_groups_loaded(self, group_ids: Iterable[str]) -> None:
        """After replaying a partition: each member must heartbeat within the
        session timeout, and one still revoking must finish within its
        rebalance timeout."""
        for group_id in group_ids:
            group = self.consumer_groups.get(group_id)
            if group is None:
                continue
            for member in list(group.members.values()):
                self.consumer_heartbeat_received(group, member)
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_revocation_timeout(group, member)

    def consumer_groups_snapshot(self) -> dict[str, object]:
        """The persisted state of every KIP-848 group, comparable by value."""

        def flat(assignment: Partitions) -> tuple[tuple[str, tuple[int, ...]], ...]:
            return tuple(sorted((str(t), tuple(sorted(ps))) for t, ps in assignment.items() if ps))

        out: dict[str, object] = {}
        for group_id, group in self.consumer_groups.items():
            members = tuple(
                sorted(
                    (
                        m.member_id,
                        m.instance_id,
                        m.rack_id,
                        m.client_id,
                        m.client_host,
                        m.member_epoch,
                        m.previous_member_epoch,
                        m.state,
                        m.rebalance_timeout_ms,
                        tuple(m.subscribed_topic_names),
                        tuple(sorted(m.explicit_topic_names)),
                        m.subscribed_topic_regex.pattern if m.subscribed_topic_regex else None,
                        m.server_assignor,
                        flat(m.assigned),
                        flat(m.pending_revocation),
                    )
                    for m in group.members.values()
                )
            )
            out[group_id] = (
                group.group_epoch,
                group.assignment_epoch,
                group.state,
                tuple(sorted(group.subscription_metadata.items())),
                tuple(sorted((m, flat(a)) for m, a in group.target.items())),
                self._preferred_assignor(group),
                members,
            )
        return out
