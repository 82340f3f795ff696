"""OffsetMetadataManager: committed offsets of the coordinator's groups
(Kafka's OffsetMetadataManager). The GroupCoordinator holds one beside its
group managers; what it needs of the groups (their membership, to validate a
commit; their records, to delete a group) it reads through ``GroupMetadata``.

OffsetCommit, TxnOffsetCommit and OffsetDelete return a CoordinatorResult
(response, records) and change nothing themselves: the coordinator appends
the records and only then replays them (replay_offset_commit), so an
acknowledged commit is on the log and a failed append leaves nothing behind;
loading the log applies the same records; DeleteGroups too, a result per
group. Expiring offsets runs a result too, applied by its callback as the
group is once the tombstones are committed.

Transactional offsets (TxnOffsetCommit, a producer's
sendOffsetsToTransaction): written in a transactional batch of the
producer, they stay pending -- invisible to OffsetFetch, which answers
UNSTABLE_OFFSET_COMMIT for them when asked for stable offsets -- until the
transaction's marker reaches this __consumer_offsets partition: COMMIT
makes them the committed offsets, ABORT drops them. Where a group mixes
transactional and plain commits, the one written last wins, as Kafka
orders them by record offset (kfast by the order they were applied, which
is log order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from kfast.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from kfast.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from kfast.coordinator.group.records import (
    NO_EXPIRE_TIMESTAMP,
    GroupMetadataKey,
    GroupRecord,
    GroupRecordKey,
    GroupRecordValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kfast.coordinator.partition_writer import ConfigLookup
from kfast.coordinator.result import CoordinatorResult, ResultRunner, code_response
from kfast.protocol import errors as E

NONE = 0
TopicPartition = tuple[str, int]
# fetch_offsets' value for a partition whose offset a transaction may still change.
UNSTABLE = E.UnstableOffsetCommitException.code
# (key bytes, value bytes or None for a tombstone): one __consumer_offsets record.
Record = tuple[bytes, bytes | None]
# {(topic, partition): (offset, leader epoch, metadata)}: what a commit asks for.
CommitRequest = dict[TopicPartition, tuple[int, int, str | None]]
# (topic, partition, its committed value, None without one, or UNSTABLE).
FetchedOffset = tuple[str, int, OffsetCommitValue | None | int]
# OffsetCommit / TxnOffsetCommit: {(topic, partition): error code} and the offsets' records.
OffsetCommitResult = CoordinatorResult[dict[TopicPartition, int], GroupRecord]
# OffsetDelete: (top-level error, {(topic, partition): error code}) and the tombstones.
DeleteResult = CoordinatorResult[tuple[int, dict[TopicPartition, int]], GroupRecord]


def _answer(response: dict[TopicPartition, int]) -> OffsetCommitResult:
    """A result without records: ``response`` whatever happens."""
    return CoordinatorResult([], response, lambda code: response)


def _refused(code: int) -> DeleteResult:
    """An OffsetDelete refused for the whole group: nothing written."""
    response: tuple[int, dict[TopicPartition, int]] = (code, {})
    return CoordinatorResult([], response, lambda _: response)


class GroupMetadata(Protocol):
    """What the offsets need of the group side of the coordinator (Kafka's
    OffsetMetadataManager reads its GroupMetadataManager)."""

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """Classic groups by id (a group that only commits offsets is one)."""

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        """KIP-848 groups by id."""

    def validate_consumer_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int
    ) -> int:
        """0 if an OffsetCommit for this KIP-848 group may proceed."""

    def consumer_heartbeat_received(
        self, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> None:
        """A KIP-848 member showed it is alive (its session restarts)."""

    def complete_and_schedule_next_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember
    ) -> None:
        """A classic member showed it is alive (its session restarts)."""

    def consumer_group_tombstones(self, group: ConsumerGroup) -> list[GroupRecord]:
        """The tombstones deleting every record of ``group``."""

    def replay_record(
        self, key: GroupRecordKey, value: GroupRecordValue | None, producer_id: int = -1
    ) -> None:
        """Apply one __consumer_offsets record object of any type."""


class OffsetMetadataManager:
    def __init__(
        self,
        config: ConfigLookup,
        group_metadata: GroupMetadata,
        run: ResultRunner[GroupRecord],
        time_ms: Callable[[], int],
    ) -> None:
        self.group_metadata = group_metadata
        # The coordinator's: appends a result, replays it, answers.
        self.run = run
        self.time_ms = time_ms
        self.max_metadata_size: int = config["offset.metadata.max.bytes"]
        self.offsets_retention_ms: int = config["offsets.retention.minutes"] * 60_000
        # group_id -> {(topic, partition): OffsetCommitValue}
        self.offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        # Transactional offsets until their transaction ends:
        # producer id -> {group id: {(topic, partition): (order, OffsetCommitValue)}}
        self.pending_transactional_offsets: dict[
            int, dict[str, dict[TopicPartition, tuple[int, OffsetCommitValue]]]
        ] = {}
        # group id -> {(topic, partition): order} of the committed offsets,
        # the order they were applied in (log order).
        self.offset_order: dict[str, dict[TopicPartition, int]] = {}
        self._next_order = 0

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.group_metadata.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.group_metadata.consumer_groups

    # -- OffsetCommit ------------------------------------------------------------------
    def commit_offset(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: CommitRequest,
        expire_timestamp: int,
    ) -> OffsetCommitResult:
        """Kafka's commitOffset: ``offsets``: {(topic, partition): (offset,
        leader_epoch, metadata)}; the response is {(topic, partition):
        error_code}, the records the offsets to replay once appended."""
        code = self._validate_offset_commit(group_id, member_id, group_instance_id, generation_id)
        if code:
            return _answer({tp: code for tp in offsets})
        return self._offset_records(group_id, offsets, expire_timestamp)

    def _validate_offset_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's validateOffsetCommit: NONE if the commit may proceed (a
        member's commit shows it is alive). A group that does not exist is
        created as a simple group for generation -1 (a consumer committing
        without a group: assign(), kcat -o)."""
        if not group_id:
            return E.InvalidGroupIdException.code
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            code = self.group_metadata.validate_consumer_commit(
                consumer_group, member_id, generation_id
            )
            if code:
                return code
            consumer_member = consumer_group.members.get(member_id)
            if consumer_member is not None:
                self.group_metadata.consumer_heartbeat_received(consumer_group, consumer_member)
            return NONE
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return E.IllegalGenerationException.code
            group = self.groups[group_id] = ClassicGroup(group_id, self.time_ms())
        if group.is_(ClassicGroupState.DEAD):
            return E.CoordinatorNotAvailableException.code
        if generation_id < 0 and group.is_(ClassicGroupState.EMPTY):
            return NONE
        if group.is_(ClassicGroupState.COMPLETING_REBALANCE):
            return E.RebalanceInProgressException.code
        if group.is_static_member_fenced(member_id, group_instance_id):
            return E.FencedInstanceIdException.code
        member = group.members.get(member_id)
        if member is None:
            return E.UnknownMemberIdException.code
        if generation_id != group.generation_id:
            return E.IllegalGenerationException.code
        self.group_metadata.complete_and_schedule_next_heartbeat(group, member)
        return NONE

    def _offset_records(
        self, group_id: str, offsets: CommitRequest, expire_timestamp: int
    ) -> OffsetCommitResult:
        """The result of a commit that may proceed: a partition whose
        metadata is too long gets OFFSET_METADATA_TOO_LARGE and no record,
        the others NONE, or the append's error when it fails."""
        now = self.time_ms()
        results: dict[TopicPartition, int] = {}
        written: list[TopicPartition] = []
        records: list[GroupRecord] = []
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.max_metadata_size:
                results[tp] = E.OffsetMetadataTooLarge.code
                continue
            value = OffsetCommitValue(offset, leader_epoch, metadata, now, expire_timestamp)
            written.append(tp)
            records.append((OffsetCommitKey(group_id, tp[0], tp[1]), value))

        def answer(code: int) -> dict[TopicPartition, int]:
            return {**results, **dict.fromkeys(written, code)}

        return CoordinatorResult(records, answer(NONE), answer)

    def _set_committed(
        self, group_id: str, tp: TopicPartition, value: OffsetCommitValue, order: int | None = None
    ) -> None:
        self.offsets.setdefault(group_id, {})[tp] = value
        if order is None:
            order = self._next_order
            self._next_order += 1
        self.offset_order.setdefault(group_id, {})[tp] = order

    # -- TxnOffsetCommit ---------------------------------------------------------------
    def commit_transactional_offset(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: CommitRequest,
    ) -> OffsetCommitResult:
        """Kafka's commitTransactionalOffset: as commit_offset; the caller
        appends the records in a transactional batch of the producer, and
        replayed as that producer's they stay pending until its transaction
        ends."""
        code = self._validate_transactional_commit(
            group_id, member_id, group_instance_id, generation_id
        )
        if code:
            return _answer({tp: code for tp in offsets})
        return self._offset_records(group_id, offsets, NO_EXPIRE_TIMESTAMP)

    def _validate_transactional_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's validateTransactionalOffsetCommit: a group that does not
        exist is created as a simple group for generation -1 (a producer
        whose consumer uses no group management); a member must be the
        group's at its generation, but a rebalance in progress is no error
        (the transaction, not the rebalance, decides)."""
        if not group_id:
            return E.InvalidGroupIdException.code
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            code = self.group_metadata.validate_consumer_commit(
                consumer_group, member_id, generation_id
            )
            return (
                E.IllegalGenerationException.code
                if code == E.StaleMemberEpochException.code
                else code
            )
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return E.IllegalGenerationException.code
            self.groups[group_id] = ClassicGroup(group_id, self.time_ms())
            return NONE
        if group.is_(ClassicGroupState.DEAD):
            return E.CoordinatorNotAvailableException.code
        if generation_id < 0 and group.is_(ClassicGroupState.EMPTY):
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group.is_static_member_fenced(member_id, group_instance_id):
                return E.FencedInstanceIdException.code
            if member_id not in group.members:
                return E.UnknownMemberIdException.code
            if generation_id != group.generation_id:
                return E.IllegalGenerationException.code
        return NONE

    def _add_pending(
        self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetCommitValue
    ) -> None:
        order = self._next_order
        self._next_order += 1
        self.pending_transactional_offsets.setdefault(producer_id, {}).setdefault(group_id, {})[
            tp
        ] = (order, value)
        if group_id not in self.groups and group_id not in self.consumer_groups:
            self.groups[group_id] = ClassicGroup(group_id, self.time_ms())

    def complete_transaction(
        self, producer_id: int, committed: bool, owns_group: Callable[[str], bool]
    ) -> None:
        """The producer's transaction ended on a partition of
        __consumer_offsets (its marker is there): its pending offsets of the
        groups ``owns_group`` accepts (that partition's) become the
        committed offsets (COMMIT) or go (ABORT)."""
        pending = self.pending_transactional_offsets.get(producer_id)
        if not pending:
            return
        for group_id in [g for g in pending if owns_group(g)]:
            for tp, (order, value) in pending.pop(group_id).items():
                current = self.offset_order.get(group_id, {}).get(tp)
                if committed and (current is None or order > current):
                    self._set_committed(group_id, tp, value, order)
        if not pending:
            del self.pending_transactional_offsets[producer_id]

    def has_pending_offset(self, group_id: str, tp: TopicPartition) -> bool:
        return any(
            tp in by_group.get(group_id, ())
            for by_group in self.pending_transactional_offsets.values()
        )

    def _drop_pending(self, group_ids: Iterable[str]) -> None:
        """Unloading groups: their pending offsets go with them (the next
        coordinator replays them from the log)."""
        for producer_id in list(self.pending_transactional_offsets):
            by_group = self.pending_transactional_offsets[producer_id]
            for group_id in group_ids:
                by_group.pop(group_id, None)
            if not by_group:
                del self.pending_transactional_offsets[producer_id]

    # -- replay / unload -----------------------------------------------------------------
    def replay_offset_commit(
        self, key: OffsetCommitKey, value: OffsetCommitValue | None, producer_id: int = -1
    ) -> None:
        """Apply an OffsetCommit record (a tombstone deletes the offset). A
        group that only commits offsets exists as an empty classic group."""
        tp = (key.topic, key.partition)
        if value is not None and producer_id >= 0:
            return self._add_pending(producer_id, key.group, tp, value)
        if value is None:
            offsets = self.offsets.get(key.group, {})
            offsets.pop(tp, None)
            self.offset_order.get(key.group, {}).pop(tp, None)
            if not offsets:
                self.offsets.pop(key.group, None)
                self.offset_order.pop(key.group, None)
            return None
        self._set_committed(key.group, tp, value)
        if key.group not in self.groups and key.group not in self.consumer_groups:
            self.groups[key.group] = ClassicGroup(key.group, self.time_ms())
        return None

    def unload(self, group_ids: list[str]) -> None:
        """The groups' partition is no longer ours: their offsets go."""
        self._drop_pending(group_ids)
        for group_id in group_ids:
            self.offsets.pop(group_id, None)
            self.offset_order.pop(group_id, None)

    def snapshot(self) -> dict[str, object]:
        """The committed and the pending transactional offsets, comparable by value."""
        return {
            "offsets": {g: dict(o) for g, o in self.offsets.items() if o},
            "pending_transactional_offsets": {
                producer_id: {
                    g: {tp: value for tp, (_, value) in o.items()} for g, o in by_group.items()
                }
                for producer_id, by_group in self.pending_transactional_offsets.items()
            },
        }

    # -- OffsetFetch -------------------------------------------------------------------
    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> list[FetchedOffset]:
        """(topic, partition, value or None) per requested partition; every
        committed partition when ``partitions`` is None. With
        ``require_stable`` (OffsetFetch v7+) a partition with a pending
        transactional offset has the error UNSTABLE_OFFSET_COMMIT instead
        of a value."""
        committed = self.offsets.get(group_id, {})
        rows: list[FetchedOffset]
        if partitions is None:
            rows = [(t, p, v) for (t, p), v in sorted(committed.items())]
        else:
            rows = [(t, p, committed.get((t, p))) for t, p in partitions]
        if require_stable and self.pending_transactional_offsets:
            rows = [
                (t, p, UNSTABLE if self.has_pending_offset(group_id, (t, p)) else v)
                for t, p, v in rows
            ]
        return rows

    # -- OffsetDelete / DeleteGroups ---------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> DeleteResult:
        """Kafka's deleteOffsets (OffsetDelete): the response is (top-level
        error, {(topic, partition): error}), the records the tombstones of
        the committed offsets to replay once appended."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        subscribed: set[str] = set()
        if consumer_group is not None:
            subscribed = consumer_group.subscribed_topics()
        elif group is None or group.is_(ClassicGroupState.DEAD):
            return _refused(E.GroupIdNotFoundException.code)
        elif not group.is_(ClassicGroupState.EMPTY):
            found = group.subscribed_topics()
            if found is None:
                return _refused(E.GroupNotEmptyException.code)
            subscribed = found
        results: dict[TopicPartition, int] = {}
        records: list[GroupRecord] = []
        committed = self.offsets.get(group_id, {})
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = E.GroupSubscribedToTopicException.code
                continue
            results[tp] = NONE
            if tp in committed:
                records.append((OffsetCommitKey(group_id, tp[0], tp[1]), None))
        return CoordinatorResult(records, (NONE, results), lambda code: (code, {}))

    def delete_groups(
        self, group_ids: list[str], callback: Callable[[dict[str, int]], None]
    ) -> None:
        """DeleteGroups: callback({group_id: error}). Each group's tombstones
        (its offsets' and its own records') are one result, replayed once
        appended."""
        results: dict[str, int] = {}
        waiting = []
        for group_id in group_ids:
            code = self._deletable(group_id)
            if code:
                results[group_id] = code
            else:
                waiting.append(group_id)
        if not waiting:
            return callback(results)
        remaining = [len(waiting)]
        for group_id in waiting:

            def done(code: int, group_id: str = group_id) -> None:
                if not code:
                    self._drop_group(group_id)
                results[group_id] = code
                remaining[0] -= 1
                if not remaining[0]:
                    callback(results)

            result = CoordinatorResult(self._group_tombstones(group_id), NONE, code_response)
            self.run(group_id, result, done)

    def _deletable(self, group_id: str) -> int:
        """NONE if DeleteGroups may delete the group, else its error."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return E.GroupNotEmptyException.code if consumer_group.members else NONE
        if group is None or group.is_(ClassicGroupState.DEAD):
            return E.GroupIdNotFoundException.code
        if not group.is_(ClassicGroupState.EMPTY):
            return E.GroupNotEmptyException.code
        return NONE

    def _group_tombstones(self, group_id: str) -> list[GroupRecord]:
        records: list[GroupRecord] = [
            (OffsetCommitKey(group_id, t, p), None) for t, p in self.offsets.get(group_id, {})
        ]
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            records += self.group_metadata.consumer_group_tombstones(consumer_group)
        else:
            records.append((GroupMetadataKey(group_id), None))
        return records

    def _drop_group(self, group_id: str) -> None:
        """After its tombstones are replayed: the group is gone even where
        they did not say so (a KIP-848 group whose epoch record was never
        written)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.state = ClassicGroupState.DEAD
        consumer_group = self.consumer_groups.pop(group_id, None)
        if consumer_group is not None:
            consumer_group.dead = True

    def _expired_tombstones(
        self, group_id: str, expired: list[TopicPartition] | None
    ) -> list[GroupRecord]:
        """Expiration's records: the tombstones of the ``expired`` offsets, or
        with None of the whole group."""
        if expired is None:
            return self._group_tombstones(group_id)
        return [(OffsetCommitKey(group_id, t, p), None) for t, p in expired]

    # -- retention ---------------------------------------------------------------------
    def cleanup_expired_offsets(self, now: int | None = None) -> int:
        """Expire offsets of groups without members (offsets.retention.minutes
        after a classic group became empty, or after the commit for groups
        that never had members and for KIP-848 groups; an explicit expire
        timestamp wins); a classic group left with neither members nor
        offsets is deleted. Returns how many offsets were expired."""
        now = self.time_ms() if now is None else now
        expired_total = 0
        for group_id in list(dict.fromkeys([*self.groups, *self.offsets])):
            group = self.groups.get(group_id)
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                if consumer_group.members:
                    continue
                empty_since = None
            elif group is not None:
                if not group.is_(ClassicGroupState.EMPTY):
                    continue
                empty_since = group.state_timestamp if group.protocol_type else None
            else:
                empty_since = None
            committed = self.offsets.get(group_id, {})
            expired = []
            for tp, value in committed.items():
                if self.pending_transactional_offsets and self.has_pending_offset(group_id, tp):
                    continue  # a transaction may still commit it (as Kafka)
                if value.expire_timestamp != NO_EXPIRE_TIMESTAMP:
                    due = value.expire_timestamp <= now
                else:
                    base = value.commit_timestamp if empty_since is None else empty_since
                    due = base + self.offsets_retention_ms <= now
                if due:
                    expired.append(tp)
            if not expired and committed:
                continue
            whole = len(expired) == len(committed) and consumer_group is None
            records = self._expired_tombstones(group_id, expired if not whole else None)
            expired_total += len(expired)

            def done(
                code: int,
                group_id: str = group_id,
                records: list[GroupRecord] = records,
                whole: bool = whole,
            ) -> None:
                if code:
                    return
                group = self.groups.get(group_id)
                drop = whole and group is not None and group.is_(ClassicGroupState.EMPTY)
                for key, value in records:
                    if drop or not isinstance(key, GroupMetadataKey):  # else keep the group
                        self.group_metadata.replay_record(key, value)
                if drop:
                    self._drop_group(group_id)

            # Applied in done as the group is once they are committed (it may
            # have members again by then), so not replayed as they stand.
            result = CoordinatorResult(records, NONE, code_response, replay=False)
            self.run(group_id, result, done)
        return expired_total
