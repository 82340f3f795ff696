"""OffsetMetadataManager: committed offsets of the coordinator's groups
(Kafka's OffsetMetadataManager), mixed into GroupCoordinator, which owns
``groups``, ``offsets``, ``writer`` and ``time_ms``.

Offsets change only once their records are appended (the ``done``
callback), so an acknowledged commit is on the log and a failed append
leaves nothing behind; replay applies the same records.
"""
from __future__ import annotations

from typing import Callable

from kfast.coordinator.group.classic_group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    ClassicGroup,
)
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


class OffsetMetadataManager:
    groups: dict
    offsets: dict
    writer: Callable
    time_ms: Callable

    # -- OffsetCommit ------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: dict, expire_timestamp: int,
                       callback: Callable[[dict], None]) -> None:
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
        elif group.is_(DEAD):
            return fail(E.CoordinatorNotAvailableException.code)
        elif not (generation_id < 0 and group.is_(EMPTY)):
            if group.is_(COMPLETING_REBALANCE):
                return fail(E.RebalanceInProgressException.code)
            if group.is_static_member_fenced(member_id, group_instance_id):
                return fail(E.FencedInstanceIdException.code)
            member = group.members.get(member_id)
            if member is None:
                return fail(E.UnknownMemberIdException.code)
            if generation_id != group.generation_id:
                return fail(E.IllegalGenerationException.code)
            self.complete_and_schedule_next_heartbeat(group, member)
        now = self.time_ms()
        results, values, records = {}, {}, []
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.max_metadata_size:
                results[tp] = E.OffsetMetadataTooLarge.code
                continue
            value = OffsetCommitValue(offset, leader_epoch, metadata, now, expire_timestamp)
            values[tp] = value
            records.append((encode_key(OffsetCommitKey(group_id, tp[0], tp[1])),
                            encode_value(value)))
        if not records:
            return callback(results)

        def done(code: int) -> None:
            if not code:
                self.offsets.setdefault(group_id, {}).update(values)
            for tp in values:
                results[tp] = code
            callback(results)

        self.writer(group_id, records, done)

    # -- OffsetFetch -------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> list[tuple[str, int, OffsetCommitValue | None]]:
        """(topic, partition, value or None) per requested partition; every
        committed partition when ``partitions`` is None."""
        committed = self.offsets.get(group_id, {})
        if partitions is None:
            return [(t, p, v) for (t, p), v in sorted(committed.items())]
        return [(t, p, committed.get((t, p))) for t, p in partitions]

    # -- OffsetDelete / DeleteGroups ---------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       callback: Callable[[int, dict], None]) -> None:
        """callback(top-level error, {(topic, partition): error})."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        subscribed: set[str] = set()
        if consumer_group is not None:
            subscribed = consumer_group.subscribed_topics()
        elif group is None or group.is_(DEAD):
            return callback(E.GroupIdNotFoundException.code, {})
        elif not group.is_(EMPTY):
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
            elif group is None or group.is_(DEAD):
                results[group_id] = E.GroupIdNotFoundException.code
            elif not group.is_(EMPTY):
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
        records = [(encode_key(OffsetCommitKey(group_id, t, p)), None)
                   for t, p in self.offsets.get(group_id, {})]
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
            group.state = DEAD
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
                if not group.is_(EMPTY):
                    continue
                empty_since = group.state_timestamp if group.protocol_type else None
            else:
                empty_since = None
            committed = self.offsets.get(group_id, {})
            expired = []
            for tp, value in committed.items():
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
                records = [(encode_key(OffsetCommitKey(group_id, t, p)), None)
                           for t, p in expired]
            expired_total += len(expired)

            def done(code: int, group_id=group_id, records=records, whole=whole) -> None:
                if code:
                    return
                group = self.groups.get(group_id)
                if whole and group is not None and group.is_(EMPTY):
                    self._apply_tombstones(group_id, records)
                else:
                    for key_bytes, value in records:
                        if not key_bytes.startswith(b"\x00\x02"):   # keep the group
                            self.replay(key_bytes, value)

            self.writer(group_id, records, done)
        return expired_total
