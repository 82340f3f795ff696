"""OffsetMetadataManager: committed offsets of the coordinator's groups
(Kafka's OffsetMetadataManager), mixed into GroupCoordinator, which owns
``groups``, ``offsets``, ``writer`` and ``time_ms``.

Offsets change only once their records are appended (the ``done``
callback), so an acknowledged commit is on the log and a failed append
leaves nothing behind; replay applies the same records.

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

from collections.abc import Callable

from kfast.coordinator.group.classic_group import ClassicGroup, ClassicGroupState
from kfast.coordinator.group.records import (
    NO_EXPIRE_TIMESTAMP,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from kfast.protocol import errors as E

NONE = 0
TopicPartition = tuple  # (topic, partition)
# fetch_offsets' value for a partition whose offset a transaction may still change.
UNSTABLE = E.UnstableOffsetCommitException.code


class OffsetMetadataManager:
    groups: dict
    offsets: dict
    writer: Callable
    time_ms: Callable
    # producer id -> {group id: {(topic, partition): (order, OffsetCommitValue)}}
    pending_transactional_offsets: dict
    # group id -> {(topic, partition): order} of the committed offsets
    offset_order: dict
    _next_order: int

    # -- OffsetCommit ------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict,
        expire_timestamp: int,
        callback: Callable[[dict], None],
    ) -> None:
        """``offsets``: {(topic, partition): (offset, leader_epoch, metadata)};
        callback({(topic, partition): error_code})."""

        def fail(code: int):
            callback({tp: code for tp in offsets})

        if not group_id:
            return fail(E.InvalidGroupIdException.code)
        consumer_group = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        if consumer_group is not None:
            code = self.validate_consumer_commit(consumer_group, member_id, generation_id)
            if code:
                return fail(code)
            member = consumer_group.members.get(member_id)
            if member is not None:
                self._consumer_heartbeat_received(consumer_group, member)
        elif group is None:
            if generation_id >= 0:
                return fail(E.IllegalGenerationException.code)
            # A consumer committing without a group (assign(), kcat -o).
            group = self.groups[group_id] = ClassicGroup(group_id, self.time_ms())
        if consumer_group is not None:
            pass
        elif group.is_(ClassicGroupState.DEAD):
            return fail(E.CoordinatorNotAvailableException.code)
        elif not (generation_id < 0 and group.is_(ClassicGroupState.EMPTY)):
            if group.is_(ClassicGroupState.COMPLETING_REBALANCE):
                return fail(E.RebalanceInProgressException.code)
            if group.is_static_member_fenced(member_id, group_instance_id):
                return fail(E.FencedInstanceIdException.code)
            member = group.members.get(member_id)
            if member is None:
                return fail(E.UnknownMemberIdException.code)
            if generation_id != group.generation_id:
                return fail(E.IllegalGenerationException.code)
            self.complete_and_schedule_next_heartbeat(group, member)
        results, values, records = self._offset_records(group_id, offsets, expire_timestamp)
        if not records:
            return callback(results)

        def done(code: int) -> None:
            if not code:
                for tp, value in values.items():
                    self._set_committed(group_id, tp, value)
            for tp in values:
                results[tp] = code
            callback(results)

        self.writer(group_id, records, done)

    def _offset_records(self, group_id: str, offsets: dict, expire_timestamp: int):
        """(results so far, {tp: value}, [(key, value)]) of a commit: a
        partition whose metadata is too long gets OFFSET_METADATA_TOO_LARGE
        and no record."""
        now = self.time_ms()
        results, values, records = {}, {}, []
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.max_metadata_size:
                results[tp] = E.OffsetMetadataTooLarge.code
                continue
            value = OffsetCommitValue(offset, leader_epoch, metadata, now, expire_timestamp)
            values[tp] = value
            records.append(
                (encode_key(OffsetCommitKey(group_id, tp[0], tp[1])), encode_value(value))
            )
        return results, values, records

    def _set_committed(
        self, group_id: str, tp: TopicPartition, value: OffsetCommitValue, order: int | None = None
    ) -> None:
        self.offsets.setdefault(group_id, {})[tp] = value
        if order is None:
            order = self._next_order
            self._next_order += 1
        self.offset_order.setdefault(group_id, {})[tp] = order

    # -- TxnOffsetCommit ---------------------------------------------------------------
    def commit_transactional_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        producer_id: int,
        producer_epoch: int,
        offsets: dict,
        callback: Callable[[dict], None],
    ) -> None:
        """TxnOffsetCommit: ``offsets`` as for commit_offsets; the records go
        in a transactional batch of the producer and stay pending until its
        transaction ends. callback({(topic, partition): error_code})."""

        def fail(code: int):
            callback({tp: code for tp in offsets})

        code = self._validate_transactional_commit(
            group_id, member_id, group_instance_id, generation_id
        )
        if code:
            return fail(code)
        results, values, records = self._offset_records(group_id, offsets, NO_EXPIRE_TIMESTAMP)
        if not records:
            return callback(results)

        def done(code: int) -> None:
            if not code:
                for tp, value in values.items():
                    self._add_pending(producer_id, group_id, tp, value)
            for tp in values:
                results[tp] = code
            callback(results)

        self.writer(group_id, records, done, (producer_id, producer_epoch))

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
            code = self.validate_consumer_commit(consumer_group, member_id, generation_id)
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

    def _drop_pending(self, group_ids) -> None:
        """Unloading groups: their pending offsets go with them (the next
        coordinator replays them from the log)."""
        for producer_id in list(self.pending_transactional_offsets):
            by_group = self.pending_transactional_offsets[producer_id]
            for group_id in group_ids:
                by_group.pop(group_id, None)
            if not by_group:
                del self.pending_transactional_offsets[producer_id]

    # -- OffsetFetch -------------------------------------------------------------------
    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> list[tuple[str, int, OffsetCommitValue | None | int]]:
        """(topic, partition, value or None) per requested partition; every
        committed partition when ``partitions`` is None. With
        ``require_stable`` (OffsetFetch v7+) a partition with a pending
        transactional offset has the error UNSTABLE_OFFSET_COMMIT instead
        of a value."""
        committed = self.offsets.get(group_id, {})
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
    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition], callback: Callable[[int, dict], None]
    ) -> None:
        """callback(top-level error, {(topic, partition): error})."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        subscribed: set[str] = set()
        if consumer_group is not None:
            subscribed = consumer_group.subscribed_topics()
        elif group is None or group.is_(ClassicGroupState.DEAD):
            return callback(E.GroupIdNotFoundException.code, {})
        elif not group.is_(ClassicGroupState.EMPTY):
            found = group.subscribed_topics()
            if found is None:
                return callback(E.GroupNotEmptyException.code, {})
            subscribed = found
        results, records = {}, []
        committed = self.offsets.get(group_id, {})
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = E.GroupSubscribedToTopicException.code
                continue
            results[tp] = NONE
            if tp in committed:
                records.append((encode_key(OffsetCommitKey(group_id, tp[0], tp[1])), None))
        if not records:
            return callback(NONE, results)

        def done(code: int) -> None:
            if code:
                return callback(code, {})
            for key_bytes, _ in records:
                self.replay(key_bytes, None)
            callback(NONE, results)

        self.writer(group_id, records, done)

    def delete_groups(self, group_ids: list[str], callback: Callable[[dict], None]) -> None:
        """callback({group_id: error})."""
        results: dict[str, int] = {}
        waiting = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                if consumer_group.members:
                    results[group_id] = E.GroupNotEmptyException.code
                else:
                    waiting.append(group_id)
            elif group is None or group.is_(ClassicGroupState.DEAD):
                results[group_id] = E.GroupIdNotFoundException.code
            elif not group.is_(ClassicGroupState.EMPTY):
                results[group_id] = E.GroupNotEmptyException.code
            else:
                waiting.append(group_id)
        if not waiting:
            return callback(results)
        remaining = [len(waiting)]
        for group_id in waiting:
            records = self._group_tombstones(group_id)

            def done(code: int, group_id=group_id, records=records) -> None:
                if not code:
                    self._apply_tombstones(group_id, records)
                results[group_id] = code
                remaining[0] -= 1
                if not remaining[0]:
                    callback(results)

            self.writer(group_id, records, done)

    def _group_tombstones(self, group_id: str) -> list:
        records = [
            (encode_key(OffsetCommitKey(group_id, t, p)), None)
            for t, p in self.offsets.get(group_id, {})
        ]
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            records += self.consumer_group_tombstones(consumer_group)
        else:
            records.append((encode_key(GroupMetadataKey(group_id)), None))
        return records

    def _apply_tombstones(self, group_id: str, records: list) -> None:
        for key_bytes, _ in records:
            self.replay(key_bytes, None)
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.state = ClassicGroupState.DEAD
        consumer_group = self.consumer_groups.pop(group_id, None)
        if consumer_group is not None:
            consumer_group.dead = True

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
            if whole:
                records = self._group_tombstones(group_id)
            else:
                records = [(encode_key(OffsetCommitKey(group_id, t, p)), None) for t, p in expired]
            expired_total += len(expired)

            def done(code: int, group_id=group_id, records=records, whole=whole) -> None:
                if code:
                    return
                group = self.groups.get(group_id)
                if whole and group is not None and group.is_(ClassicGroupState.EMPTY):
                    self._apply_tombstones(group_id, records)
                else:
                    for key_bytes, value in records:
                        if not key_bytes.startswith(b"\x00\x02"):  # keep the group
                            self.replay(key_bytes, value)

            self.writer(group_id, records, done)
        return expired_total
