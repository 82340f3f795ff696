"""GroupCoordinator: the groups and committed offsets of the
__consumer_offsets partitions this broker leads, composed of three managers
with one job each -- Kafka's GroupCoordinatorShard over its
GroupMetadataManager (split in kfast: classic groups, KIP-848 groups) and
OffsetMetadataManager:

* ClassicGroupManager (classic_group_manager.py): JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup and their rebalance;
* ConsumerGroupManager (consumer_group_manager.py): ConsumerGroupHeartbeat
  and ConsumerGroupDescribe of KIP-848 groups;
* OffsetMetadataManager (offsets.py): committed and transactional offsets.

The coordinator itself only routes: it builds the managers (sharing the
classic groups map and the heartbeat purgatory between the two group
managers), hands each request to the manager that serves it (callers see
one object), routes each record to the manager that owns it (``replay``),
and loads and unloads partitions. A deterministic state machine: no
sockets, no clock of its own (``time_ms`` is injected), timeouts through
purgatories on the timer it is given.

Every handler returns a CoordinatorResult (kfast/coordinator/result.py:
records, response, error response) that ``_run`` -- Kafka's runtime write,
the one caller of ``writer`` -- serializes and appends as one batch, then
answers:

* offsets (commit, transactional commit, delete, DeleteGroups): the record
  objects are replayed (``replay_record``) once committed, before the
  response; offset expiration's callback applies its own the same way;
* classic groups: a waiting member's response is deferred, and the group
  changed as the handler decided, so its record is not replayed again (see
  classic_group_manager);
* KIP-848 groups: a heartbeat decides on a copy of its group and its
  records are replayed into the group at once, before the append (reverted
  if it fails), as Kafka's runtime does; so they are not replayed again
  (see consumer_group_manager).

``replay(key, value)`` rebuilds the same state from those records, so
loading a partition's log = restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kfast.config import KafkaConfig
from kfast.coordinator.group.classic_group_manager import ClassicGroupManager
from kfast.coordinator.group.consumer_group import ConsumerGroup
from kfast.coordinator.group.consumer_group_manager import ConsumerGroupManager
from kfast.coordinator.group.offsets import (
    CommitRequest,
    OffsetMetadataManager,
    TopicPartition,
)
from kfast.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    GroupRecordKey,
    GroupRecordValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kfast.coordinator.result import CoordinatorResult, DeferredResponse
from kfast.server_common.purgatory import DelayedOperationPurgatory, Timer

NONE = 0
# writer(group_id, [(key, value)], done(error_code)[, (producer id, epoch)]):
# one batch to the group's partition; the tuple makes it transactional.
Writer = Callable[..., None]
# A handler's response type (CoordinatorResult).
T = TypeVar("T")


def _answer(response: T | DeferredResponse[T], callback: Callable[[T], None]) -> None:
    if isinstance(response, DeferredResponse):
        response.when_complete(callback)
    else:
        callback(response)


class GroupCoordinator:
    def __init__(
        self, config: KafkaConfig, timer: Timer, writer: Writer, time_ms: Callable[[], int]
    ) -> None:
        self.config = config
        self.timer = timer
        self.writer = writer
        self.time_ms = time_ms
        # Shared by the two group managers: a group id names a classic or a
        # KIP-848 group, and either takes over the other when it is empty.
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat", timer)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
        classic = self.classic_group_manager = ClassicGroupManager(
            config,
            timer,
            self._run,
            self.heartbeat_purgatory,
            self.consumer_groups,
            ConsumerGroupManager.consumer_group_tombstones,
            self.replay_record,
            time_ms,
        )
        self.groups = classic.groups
        # KIP-848 groups (ConsumerGroupHeartbeat), seeing the classic groups
        # through the classic manager's hooks.
        self.consumer_group_manager = ConsumerGroupManager(
            config,
            timer,
            self._run,
            self.consumer_groups,
            classic,
            self.heartbeat_purgatory,
            self.replay_record,
        )
        self.join_purgatory = classic.join_purgatory
        # Committed and transactional offsets (Kafka's OffsetMetadataManager).
        self.offset_manager = OffsetMetadataManager(config, self, self._run, time_ms)
        self._hand_off_requests()

    def _hand_off_requests(self) -> None:
        """Each request goes to the manager that serves it: its handlers
        become the coordinator's (callers see one object)."""
        # The classic groups' requests, served by their manager.
        classic = self.classic_group_manager
        self.join_group = classic.join_group
        self.sync_group = classic.sync_group
        self.heartbeat = classic.heartbeat
        self.leave_group = classic.leave_group
        self.classic_group_join = classic.classic_group_join
        self.classic_group_sync = classic.classic_group_sync
        self.classic_group_heartbeat = classic.classic_group_heartbeat
        self.classic_group_leave = classic.classic_group_leave
        self.complete_and_schedule_next_heartbeat = classic.complete_and_schedule_next_heartbeat
        self.group_or_none = classic.group_or_none
        # The KIP-848 groups' requests and state, served by their manager.
        consumers = self.consumer_group_manager
        self.consumer_group_heartbeat = consumers.consumer_group_heartbeat
        self.consumer_group_describe = consumers.consumer_group_describe
        self.group_config = consumers.group_config
        self.consumer_assignors = consumers.consumer_assignors
        self.validate_consumer_commit = consumers.validate_consumer_commit
        self.consumer_heartbeat_received = consumers.consumer_heartbeat_received
        self.consumer_group_tombstones = consumers.consumer_group_tombstones
        # The offsets' requests and state, served by the offset manager.
        manager = self.offset_manager
        self.complete_transaction = manager.complete_transaction
        self.has_pending_offset = manager.has_pending_offset
        self.fetch_offsets = manager.fetch_offsets
        self.delete_groups = manager.delete_groups
        self.cleanup_expired_offsets = manager.cleanup_expired_offsets
        self.offsets = manager.offsets
        self.pending_transactional_offsets = manager.pending_transactional_offsets

    def _run(
        self,
        group_id: str,
        result: CoordinatorResult[T, GroupRecord],
        callback: Callable[[T], None],
        transaction: tuple[int, int] | None = None,
    ) -> None:
        """Kafka's CoordinatorRuntime write: append ``result``'s records as one
        batch to the group's partition (``transaction``: the (producer id,
        epoch) whose transactional batch it is), call ``result.on_append``,
        then replay the same record objects and answer ``result.response``
        (a DeferredResponse: once it is completed); on an append error
        nothing is replayed and the answer is ``result.error_response(code)``."""
        records = result.records
        if not records:
            if result.on_append is not None:
                result.on_append(NONE)
            return _answer(result.response, callback)
        producer_id = -1 if transaction is None else transaction[0]

        def done(code: int) -> None:
            if result.on_append is not None:
                result.on_append(code)
            response = result.response
            if code:
                if isinstance(response, DeferredResponse):
                    # Unless the group answered first (a rebalance's error).
                    response.complete(result.error_response(code))
                    return response.when_complete(callback)
                return callback(result.error_response(code))
            if result.replay:
                for key, value in records:
                    self.replay_record(key, value, producer_id)
            return _answer(response, callback)

        encoded = [(encode_key(key), encode_value(value)) for key, value in records]
        if transaction is None:
            self.writer(group_id, encoded, done)
        else:
            self.writer(group_id, encoded, done, transaction)
        return None

    # -- offsets -----------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: CommitRequest,
        expire_timestamp: int,
        callback: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        """OffsetCommit: ``offsets``: {(topic, partition): (offset,
        leader_epoch, metadata)}; callback({(topic, partition): error_code})
        once the offsets are on the log (or their append failed)."""
        result = self.offset_manager.commit_offset(
            group_id, member_id, group_instance_id, generation_id, offsets, expire_timestamp
        )
        self._run(group_id, result, callback)

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition],
        callback: Callable[[int, dict[TopicPartition, int]], None],
    ) -> None:
        """OffsetDelete: callback(top-level error, {(topic, partition): error})
        once the offsets' tombstones are on the log (or their append failed)."""
        result = self.offset_manager.delete_offsets(group_id, partitions)
        self._run(group_id, result, lambda response: callback(*response))

    def commit_transactional_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        producer_id: int,
        producer_epoch: int,
        offsets: CommitRequest,
        callback: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        """TxnOffsetCommit: as commit_offsets, in a transactional batch of the
        producer; the offsets stay pending until its transaction ends."""
        result = self.offset_manager.commit_transactional_offset(
            group_id, member_id, group_instance_id, generation_id, offsets
        )
        self._run(group_id, result, callback, (producer_id, producer_epoch))

    @property
    def group_config_overrides(self) -> Callable[[str], Mapping[str, str]]:
        """The lookup of a group's own configs (the broker sets it)."""
        return self.consumer_group_manager.group_config_overrides

    @group_config_overrides.setter
    def group_config_overrides(self, lookup: Callable[[str], Mapping[str, str]]) -> None:
        self.consumer_group_manager.group_config_overrides = lookup

    # -- replay ------------------------------------------------------------------------
    def replay(
        self,
        key_bytes: bytes | bytearray | memoryview,
        value_bytes: bytes | bytearray | memoryview | None,
        producer_id: int = -1,
    ) -> None:
        """Apply one __consumer_offsets record (latest per key wins;
        tombstones delete). ``producer_id``: the producer of the
        transactional batch it came in (a TxnOffsetCommit), whose offsets
        stay pending until its transaction's marker (complete_transaction)."""
        key = decode_key(key_bytes)
        self.replay_record(key, decode_value(key, value_bytes), producer_id)

    def replay_record(
        self, key: GroupRecordKey, value: GroupRecordValue | None, producer_id: int = -1
    ) -> None:
        """Apply one record object: what replay decodes from the log, and what
        a handler's CoordinatorResult carries once its append is committed."""
        if isinstance(key, OffsetCommitKey):
            if value is not None and not isinstance(value, OffsetCommitValue):
                raise ValueError(f"{key} with a {type(value).__name__} value")
            return self.offset_manager.replay_offset_commit(key, value, producer_id)
        if isinstance(key, GroupMetadataKey):
            return self.classic_group_manager.replay_group_metadata(key, value)
        if isinstance(value, (OffsetCommitValue, GroupMetadataValue)):
            raise ValueError(f"{key} with a {type(value).__name__} value")
        return self.consumer_group_manager.replay_consumer_group(key, value)

    # -- loading and unloading ---------------------------------------------------------
    def on_loaded(self, group_ids: Iterable[str]) -> None:
        """After replaying a partition: loaded members (classic and KIP-848)
        must heartbeat within their session timeout, as after a rebalance."""
        group_ids = list(group_ids)
        self.classic_group_manager.on_loaded(group_ids)
        self.consumer_group_manager.on_consumer_groups_loaded(group_ids)

    def unload(self, group_ids: Iterable[str]) -> None:
        group_ids = list(group_ids)
        self.offset_manager.unload(group_ids)
        self.consumer_group_manager.unload(group_ids)
        self.classic_group_manager.unload(group_ids)

    def shutdown(self) -> None:
        self.classic_group_manager.shutdown()
        self.heartbeat_purgatory.shutdown()

    # -- introspection -----------------------------------------------------------------
    def snapshot(self) -> dict[str, object]:
        """What replay must reproduce: offsets, each classic group's
        generation, protocol, leader and members with their assignments, and
        each KIP-848 group's epochs, target and members."""
        return {
            "groups": self.classic_group_manager.snapshot(),
            "consumer_groups": self.consumer_group_manager.consumer_groups_snapshot(),
            **self.offset_manager.snapshot(),
        }
