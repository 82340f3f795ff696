"""ReplicaManager: the partitions this broker hosts and the produce, fetch and
delete-records paths through them (Kafka's kafka.server.ReplicaManager).

It owns the three data-plane purgatories. Every event that can complete a
delayed operation goes through here: an append that moves a high watermark
checks the produce, fetch and delete-records purgatories under that
partition's key; a leadership change or partition removal does too, so
waiting requests learn about it instead of timing out.

Partitions appear and disappear through the metadata publisher
(``apply_partition`` / ``remove_partition``); request handlers find them by
name or topic id. A partition this broker follows is handed to the replica
fetcher manager (``replica_fetchers``), which fetches it from its leader;
a follower's fetch reaching the leader (``fetch_messages`` with a
``replica_id``) records its log end offset, may move the high watermark
and may admit it to the ISR. ISR changes go to the controller through
``alter_partition_manager`` (cluster mode only: on one node every ISR is
this broker).

Replication throttles (``leader_quota``, ``follower_quota``, see
kfast.server.replication_quota): a follower outside the ISR fetching a
partition the leader quota throttles gets no records while that quota is
exceeded (Kafka's shouldLeaderThrottle); the fetchers consult
``follower_quota`` themselves.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kfast._ext.fetch_codec import FetchPartitionData as FetchPartitionData  # re-exported
from kfast._ext.fetch_codec import read_caught_up, read_partitions
from kfast.config import KafkaConfig
from kfast.controller.metadata.image import MetadataImage, PartitionRegistration
from kfast.metrics.broker_stats import BrokerTopicStats, ReplicaStats
from kfast.protocol import ProduceResponse
from kfast.protocol.constants import NO_LEADER
from kfast.protocol.errors import (
    InvalidRequiredAcksException,
    KafkaError,
    KafkaStorageException,
    NotLeaderOrFollowerException,
    OffsetOutOfRangeException,
    UnknownServerException,
    UnknownTopicOrPartitionException,
)
from kfast.server.delayed_fetch import DelayedFetch
from kfast.server.delayed_produce import (
    DelayedDeleteRecords,
    DelayedProduce,
    PartitionProduceResult,
    ProducePartitionStatus,
)
from kfast.server.futures import ChainedFuture
from kfast.server.partition import READ_COMMITTED, Partition, RecordsBuffer
from kfast.server.replication_quota import ReplicationQuotaManager, parse_throttled_replicas
from kfast.server.transaction_verification import check_verified, clear_after_append
from kfast.server_common.purgatory import DelayedOperation, DelayedOperationPurgatory, Timer
from kfast.storage.log import Log, RecordValidationException
from kfast.storage.producer_state import ORIGIN_CLIENT

logger = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
_BatchIndexAndErrorMessage = ProduceResponse.BatchIndexAndErrorMessage


def error_of(exc: BaseException) -> KafkaError:
    """The Kafka error a failed partition operation reports. The traceback is
    dropped: callers keep the error while record buffers from the request are
    still exported, and a traceback -> frame -> error cycle would make the
    garbage collector try to release those buffers."""
    if isinstance(exc, KafkaError):
        exc.__traceback__ = None
        exc.__context__ = None
        return exc
    logger.error("unexpected error in a partition operation", exc_info=exc)
    return UnknownServerException(str(exc) or None)


if TYPE_CHECKING:
    from kfast.protocol import DeleteRecordsResponse
    from kfast.server.alter_partition_manager import AlterPartitionManager
    from kfast.server.delayed_fetch import FetchResults
    from kfast.server.fetch_session import FetchSessionCache
    from kfast.server.replica_fetcher import ReplicaFetcherManager
    from kfast.storage.manager import LogManager
    from kfast.storage.producer_state import VerificationGuard

# What a waiting fetch's ``respond`` makes of its results (fetch_messages).
T = TypeVar("T")

# A partition's key: (topic, partition index).
PartitionKey = tuple[str, int]


class FetchParams(NamedTuple):
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    # Fetch v0-v2 have no response-level max_bytes and never return a batch
    # larger than the partition's max_bytes whole (Kafka's hardMaxBytesLimit).
    hard_max_bytes_limit: bool = False
    # The follower fetching (-1: a consumer). A follower reads up to the log
    # end offset, not the high watermark.
    replica_id: int = -1
    # A consumer's client.rack (Fetch v11+; None before): it may be sent to,
    # and served by, a follower in its rack (KIP-392).
    client_rack: str | None = None


class PartitionFetchRequest(NamedTuple):
    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # Follower fetches: the epoch of the follower's last batch (Fetch v12+,
    # checked for divergence) and its log start offset.
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


def _read_budget(request: PartitionFetchRequest, limit: int) -> int:
    """The bytes a partition's read may return: its max_bytes within what
    is left (``limit``) of the response's."""
    return max(0, min(request.max_bytes, limit))


def should_leader_throttle(
    quota: ReplicationQuotaManager, partition: Partition, replica_id: int
) -> bool:
    """Hold back records from a follower: only one outside the ISR, so a
    throttle never shrinks the ISR (Kafka's ReplicaManager.shouldLeaderThrottle)."""
    return (
        replica_id not in partition.isr
        and quota.is_throttled(partition.topic, partition.partition)
        and quota.is_quota_exceeded()
    )


class ReplicaManager:
    def __init__(
        self, node_id: int, log_manager: LogManager, timer: Timer, config: KafkaConfig
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.config = config
        self._partitions: dict[PartitionKey, Partition] = {}
        # Partitions of this broker whose log could not be created (no
        # descriptors left): offline, as Kafka's markPartitionOffline, until
        # the publisher's retry creates them. key -> why.
        self._uncreated: dict[PartitionKey, str] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self.produce_purgatory = DelayedOperationPurgatory("Produce", timer)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", timer)
        self.delete_records_purgatory = DelayedOperationPurgatory("DeleteRecords", timer)
        # BrokerTopicMetrics and the ISR meters (the broker passes its own).
        self.topic_stats = BrokerTopicStats()
        self.replica_stats = ReplicaStats()
        # Produce and DeleteRecords operations still waiting, so shutdown can
        # answer them (waiting fetches: the fetch purgatory's, one fewer
        # object per long poll).
        self._delayed: weakref.WeakSet[DelayedOperation] = weakref.WeakSet()
        # Cluster mode: the ReplicaFetcherManager and the AlterPartitionManager.
        self.replica_fetchers: ReplicaFetcherManager | None = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        # The broker's fetch sessions, told which partitions changed (their
        # incremental fetches read only those); set by the broker.
        self.fetch_sessions: FetchSessionCache | None = None
        # Brokers that may join an ISR (registered, unfenced, not shutting
        # down); the broker keeps it current from the metadata image.
        self.isr_eligible: Callable[[int], bool] = lambda broker_id: True
        # Brokers registered and unfenced (Kafka's hasAliveBroker); kept
        # by the broker from the metadata image.
        self.broker_alive: Callable[[int], bool] = lambda broker_id: True
        # broker id -> its broker.rack (None unknown); kept by the broker.
        self.rack_of: Callable[[int], str | None] = lambda broker_id: None
        # The broker's current MetadataImage (None before the first); set
        # by the broker, for what the metadata knows beyond the partitions
        # hosted here (partition_or_raise, topic_name).
        self.metadata_image: Callable[[], MetadataImage | None] = lambda: None
        # Replication throttles: bytes sent to followers, bytes fetched from
        # leaders (the rates come with the dynamic broker configs).
        window = (
            config["replication.quota.window.num"],
            config["replication.quota.window.size.seconds"],
        )
        self.leader_quota = ReplicationQuotaManager(*window)
        self.follower_quota = ReplicationQuotaManager(*window)
        # KIP-392: replica.selector.class names Kafka's rack-aware selector.
        selector = config["replica.selector.class"]
        self.rack_aware_selector = bool(selector) and selector.endswith("RackAwareReplicaSelector")

    @staticmethod
    def time_ms() -> int:
        return int(time.time() * 1000)

    # -- partitions -----------------------------------------------------------------
    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def leads_any(self) -> bool:
        """Whether this broker leads a partition (controlled shutdown waits
        until it leads none)."""
        return any(partition.is_leader for partition in self._partitions.values())

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic's name from its id: a hosted topic's, else the
        metadata's (Kafka resolves request topic ids with the metadata
        cache, so a broker hosting none of a topic still knows it)."""
        name = self._topic_names.get(topic_id)
        if name is None:
            image = self.metadata_image()
            topic = None if image is None else image.topics_by_id.get(topic_id)
            name = None if topic is None else topic.name
        return name

    def partition_or_raise(self, topic: str, partition: int) -> Partition:
        """The hosted partition, as Kafka's getPartitionOrException: one the
        metadata has but this broker does not host (not a replica, or its
        log is still being created) is NOT_LEADER_OR_FOLLOWER, so the
        client refreshes its metadata; one the metadata lacks is
        UNKNOWN_TOPIC_OR_PARTITION."""
        found = self._partitions.get((topic, partition))
        if found is not None:
            if found.log.offline:
                raise KafkaStorageException(
                    f"Partition {topic}-{partition} is in an offline log directory"
                )
            return found
        uncreated = self._uncreated.get((topic, partition))
        if uncreated is not None:
            raise KafkaStorageException(uncreated)
        image = self.metadata_image()
        if image is not None and image.partition(topic, partition) is not None:
            raise NotLeaderOrFollowerException(
                f"Broker {self.node_id} hosts no replica of {topic}-{partition}"
            )
        raise UnknownTopicOrPartitionException(
            f"This server does not host this topic-partition: {topic}-{partition}"
        )

    def leader_partition_or_raise(self, topic: str, partition: int) -> Partition:
        found = self.partition_or_raise(topic, partition)
        if not found.is_leader:
            raise NotLeaderOrFollowerException(
                f"Leader not local for partition {topic}-{partition} on broker {self.node_id}"
            )
        return found

    def apply_partition(
        self,
        topic: str,
        topic_id: uuid.UUID,
        index: int,
        registration: PartitionRegistration,
        log: Log,
    ) -> Partition:
        key = (topic, index)
        self._uncreated.pop(key, None)
        partition = self._partitions.get(key)
        if partition is None or partition.log is not log:
            partition = Partition(topic, index, topic_id, log, self.node_id)
            self._partitions[key] = partition
            self._topic_names[topic_id] = topic
        isr_before, proposed = partition.isr, partition.pending_isr
        partition.apply_registration(registration, self.time_ms())
        if (
            proposed is not None
            and partition.pending_isr is None
            and partition.is_leader
            and set(partition.isr) == set(proposed)
        ):
            # This leader's AlterPartition committed, and the metadata log
            # brought it before the response did (which then changes
            # nothing): counted here, once. Kafka counts on the response
            # only, and misses a shrink whenever the metadata wins the race.
            self.replica_stats.count_isr_change(len(isr_before), len(partition.isr))
        fetchers = self.replica_fetchers
        if fetchers is not None:
            if partition.is_leader or partition.leader_id == NO_LEADER or log.offline:
                # A replica in a failed log dir fetches nothing (KIP-858: the
                # controller has taken it out of the ISR).
                fetchers.remove_partition(key)
            else:
                fetchers.add_partition(partition)
        self.complete_delayed_requests(key)
        return partition

    def mark_uncreated(self, topic: str, index: int, reason: str) -> None:
        """The log of a partition this broker should host could not be
        created: it answers KAFKA_STORAGE_ERROR with ``reason``."""
        self._uncreated[(topic, index)] = reason

    def uncreated_partitions(self) -> list[PartitionKey]:
        return list(self._uncreated)

    def remove_partition(self, topic: str, index: int) -> Partition | None:
        key = (topic, index)
        self._uncreated.pop(key, None)
        partition = self._partitions.pop(key, None)
        if partition is not None:
            partition.leader_id = NO_LEADER
            if self.replica_fetchers is not None:
                self.replica_fetchers.remove_partition(key)
            self.complete_delayed_requests(key)
            if not any(t == topic for t, _ in self._partitions):
                self._topic_names.pop(partition.topic_id, None)
        return partition

    def _in_offline_dir(self, topic: str, index: int) -> bool:
        found = self._partitions.get((topic, index))
        return found is not None and found.log.offline

    def handle_log_dir_failure(self, partitions: Iterable[PartitionKey]) -> None:
        """``partitions`` (keys) lost their log dir: they stay hosted but
        answer KAFKA_STORAGE_ERROR (partition_or_raise), stop fetching from
        their leader, and requests waiting on them answer now (Kafka's
        ReplicaManager.handleLogDirFailure, markPartitionOffline)."""
        for key in partitions:
            if self.replica_fetchers is not None:
                self.replica_fetchers.remove_partition(key)
            self.complete_delayed_requests(key)

    def update_replication_throttles(self, topic: str, configs: Mapping[str, str] | None) -> None:
        """A topic's ``*.replication.throttled.replicas`` configs (its
        overrides; none when deleted) say which of its partitions the two
        quotas throttle on this broker (Kafka's TopicConfigHandler)."""
        configs = configs or {}
        for quota, name in (
            (self.leader_quota, "leader.replication.throttled.replicas"),
            (self.follower_quota, "follower.replication.throttled.replicas"),
        ):
            quota.mark_throttled(topic, parse_throttled_replicas(configs.get(name), self.node_id))

    def update_replication_rates(self, leader_rate: int, follower_rate: int) -> None:
        """The dynamic broker configs leader/follower.replication.throttled.rate."""
        self.leader_quota.update_quota(leader_rate)
        self.follower_quota.update_quota(follower_rate)

    def complete_delayed_requests(self, key: PartitionKey) -> None:
        """Something changed for partition ``key`` (high watermark, log start
        offset, leadership): let the requests waiting on it re-check. Whoever
        moves a high watermark outside append_records calls this."""
        self.produce_purgatory.check_and_complete(key)
        self.wake_fetches(key)
        self.delete_records_purgatory.check_and_complete(key)

    def wake_fetches(self, key: PartitionKey) -> None:
        """What a fetch of ``key`` reads changed: re-check the fetches
        waiting on it, those watched under the partition (full fetches) and
        those of the fetch sessions holding it (watched under the session)."""
        purgatory = self.fetch_purgatory
        purgatory.check_and_complete(key)
        sessions = self.fetch_sessions
        if sessions is not None:
            for session in tuple(sessions.mark_ready(key)):
                purgatory.check_and_complete(session)

    # -- produce --------------------------------------------------------------------
    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Sequence[tuple[str, int, RecordsBuffer, PartitionProduceResult]],
        origin: str = ORIGIN_CLIENT,
        verification_guards: dict[PartitionKey, VerificationGuard] | None = None,
    ) -> asyncio.Future[None] | None:
        """Append each ``(topic, partition, records, response)``; ``response``
        (a PartitionProduceResponse) gets error_code, base_offset,
        log_append_time_ms and log_start_offset. Returns None when the
        responses are final, or a future that resolves once acks=-1 is
        satisfied (or the timeout expires). ``verification_guards``: the
        client's transactional writes verified with their coordinator
        ({(topic, partition): guard}, kfast.server.transaction_verification);
        None when transaction verification is off."""
        if required_acks not in VALID_ACKS:
            for _, _, _, response in entries:
                response.error_code = InvalidRequiredAcksException.code
            return None
        statuses = []
        topic_stats = self.topic_stats
        hosted = self._partitions
        for topic, index, records, response in entries:
            stats = None
            try:
                partition = hosted.get((topic, index))
                if partition is None or partition.log.offline:
                    partition = self.partition_or_raise(topic, index)  # raises the error to answer
                # Counted once the partition is known to be here (as Kafka:
                # no meters for names nobody created).
                stats = topic_stats.topic(topic)
                stats.total_produce_requests += 1
                if verification_guards is not None and origin == ORIGIN_CLIENT:
                    check_verified(partition.log, records, verification_guards.get((topic, index)))
                info, hw_moved = partition.append_records_to_leader(records, origin, required_acks)
                clear_after_append(partition.log, records)
            except Exception as exc:
                error = error_of(exc)
                if stats is not None:
                    stats.failed_produce_requests += 1
                if isinstance(error, KafkaStorageException) and not self._in_offline_dir(
                    topic, index
                ):
                    # A per-request failure (no descriptors left); a failed
                    # dir was logged once by the failure channel.
                    logger.error("append to %s-%d failed: %s", topic, index, error)
                response.error_code = error.code
                response.error_message = str(error) or None
                response.base_offset = -1
                if isinstance(error, RecordValidationException):
                    # The records that made the batch invalid (KIP-467, v8+).
                    response.record_errors = [
                        _BatchIndexAndErrorMessage(
                            batch_index=index, batch_index_error_message=message
                        )
                        for index, message in error.record_errors
                    ]
                continue
            if not info.duplicate:
                stats.messages_in += info.records_count
                stats.bytes_in += info.valid_bytes
            response.error_code = 0
            response.base_offset = info.first_offset
            response.log_append_time_ms = info.log_append_time
            response.log_start_offset = info.log_start_offset
            if hw_moved:
                self.complete_delayed_requests(partition.key)
            else:
                # Followers waiting in the fetch purgatory want the new end.
                self.wake_fetches(partition.key)
            # acks=-1 waits only for partitions whose high watermark has not
            # reached the end of this append yet. A partition already there
            # is what DelayedProduce's first try_complete would mark done; on
            # one node (ISR = this leader) that is every partition, so the
            # common request builds no DelayedProduce and no future.
            required_offset = info.last_offset + 1
            if required_acks == -1 and partition.log.high_watermark < required_offset:
                statuses.append(ProducePartitionStatus(partition, required_offset, response))
        if not statuses:
            return None
        future = asyncio.get_running_loop().create_future()
        operation = DelayedProduce(timeout_ms, statuses, future)
        if self.produce_purgatory.try_complete_else_watch(
            operation, [status.partition.key for status in statuses]
        ):
            return None
        self._delayed.add(operation)
        return future

    # -- fetch ----------------------------------------------------------------------
    def read_from_local_log(
        self, params: FetchParams, requests: list[PartitionFetchRequest]
    ) -> tuple[FetchResults, int, bool]:
        """Read each partition in request order within the response byte
        budget: (results, total bytes, has_error). The first partition with
        data may exceed the budget by one batch (KIP-74) unless the hard
        limit applies; later ones stop at it.

        The loop is C (fetch_codec.read_partitions): a consumer's caught-up
        partition -- most of an idle long poll's, at its arrival and at
        each wake-up -- is answered by read_caught_up without a Python
        frame; the others by _read_partition. A follower's fetch and a
        consumer's a rack-aware selector may send elsewhere (KIP-392) take
        _read_partition for every partition."""
        caught_up_here = params.replica_id < 0 and not (
            params.client_rack and self.rack_aware_selector
        )
        return read_partitions(
            self._partitions, requests, params, caught_up_here, self._read_partition
        )

    def _read_partition(
        self,
        params: FetchParams,
        request: PartitionFetchRequest,
        limit: int,
        min_one_message: bool,
    ) -> FetchPartitionData:
        """``limit``: what is left of the response's byte budget; a read of
        records takes at most that and the partition's max_bytes (computed
        only then: a caught-up long poll reads none)."""
        partition = None
        try:
            partition = self._partitions.get(request.key)
            if partition is None or partition.log.offline:
                partition = self.partition_or_raise(*request.key)  # raises the error to answer
            if params.replica_id >= 0:
                return self._read_for_follower(
                    partition,
                    params.replica_id,
                    request,
                    _read_budget(request, limit),
                    min_one_message,
                    self.leader_quota,
                )
            log = partition.log
            high_watermark = log.high_watermark
            last_stable = log.last_stable_offset
            if params.client_rack and self.rack_aware_selector and partition.is_leader:
                preferred = partition.preferred_read_replica(
                    request.fetch_offset,
                    params.client_rack,
                    self.rack_of,
                    self.time_ms(),
                    self.config["replica.lag.time.max.ms"],
                )
                if preferred >= 0:
                    # No records: the consumer goes to ``preferred`` (Kafka
                    # answers with the offsets and the replica only).
                    partition.leader_log_or_raise(request.current_leader_epoch)
                    data = FetchPartitionData(0, high_watermark, last_stable, log.log_start_offset)
                    data.preferred_read_replica = preferred
                    return data
            # Caught up, the common case of a long poll: nothing to read, so
            # no Log.read. Anything else (records, an error to raise, a
            # follower that may serve a rack-aware read) reads in full.
            caught_up = read_caught_up(
                partition,
                request.fetch_offset,
                request.current_leader_epoch,
                params.isolation_level,
            )
            if caught_up is not None:
                return caught_up
            info = partition.read_records(
                request.fetch_offset,
                _read_budget(request, limit),
                params.isolation_level,
                min_one_message,
                request.current_leader_epoch,
                follower_read=params.client_rack is not None,
            )
            aborted = info.aborted_transactions
            if params.isolation_level == READ_COMMITTED and aborted is None:
                aborted = []
            return FetchPartitionData(
                0,
                high_watermark,
                last_stable,
                log.log_start_offset,
                info.records,
                [(txn.producer_id, txn.first_offset) for txn in aborted]
                if aborted is not None
                else None,
            )
        except Exception as exc:
            error = error_of(exc)
            data = FetchPartitionData(error.code)
            if partition is not None and isinstance(error, OffsetOutOfRangeException):
                data.high_watermark = partition.log.high_watermark
                data.last_stable_offset = partition.log.last_stable_offset
                data.log_start_offset = partition.log.log_start_offset
            return data

    @staticmethod
    def _read_for_follower(
        partition: Partition,
        replica_id: int,
        request: PartitionFetchRequest,
        max_bytes: int,
        min_one_message: bool,
        quota: ReplicationQuotaManager,
    ) -> FetchPartitionData:
        """A follower's read (Kafka's Partition.readRecords from a follower):
        first check that its log still matches this leader's at its last
        fetched epoch -- if not, answer only where they diverge, and the
        follower truncates there -- then read up to the log end offset,
        unless the leader quota throttles this follower (no records then:
        it asks again, and the fetch offset still counts as its progress)."""
        log = partition.leader_log_or_raise(request.current_leader_epoch)
        if replica_id not in partition.replica_states:
            raise NotLeaderOrFollowerException(
                f"Replica {replica_id} is not a follower of {partition.topic}-"
                f"{partition.partition} (replicas {list(partition.replicas)})"
            )
        fetch_offset = request.fetch_offset
        last_fetched_epoch = request.last_fetched_epoch
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.leader_epoch_cache.end_offset_for(
                last_fetched_epoch, log.log_end_offset
            )
            if epoch < 0 or end_offset < 0:
                raise OffsetOutOfRangeException(
                    f"Could not determine the end offset of the last fetched epoch "
                    f"{last_fetched_epoch} of {partition.topic}-{partition.partition}"
                )
            if fetch_offset < log.log_start_offset:
                raise OffsetOutOfRangeException(
                    f"Fetch offset {fetch_offset} is below the log start offset "
                    f"{log.log_start_offset} of {partition.topic}-{partition.partition}"
                )
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return FetchPartitionData(
                    0,
                    log.high_watermark,
                    log.last_stable_offset,
                    log.log_start_offset,
                    diverging_epoch=(epoch, end_offset),
                )
        high_watermark = log.high_watermark
        if should_leader_throttle(quota, partition, replica_id):
            return FetchPartitionData(
                0, high_watermark, log.last_stable_offset, log.log_start_offset
            )
        info = log.read(fetch_offset, max_bytes, None, min_one_message)
        return FetchPartitionData(
            0, high_watermark, log.last_stable_offset, log.log_start_offset, info.records
        )

    def _update_followers(self, replica_id: int, results: FetchResults) -> None:
        """After a follower's first read: its fetch offsets are its log end
        offsets. Moves high watermarks (waking produces and fetches waiting
        on them) and admits a caught-up follower to the ISR."""
        now = self.time_ms()
        for request, data in results:
            if data.error_code or data.diverging_epoch is not None:
                continue
            partition = self._partitions.get(request.key)
            if partition is None or not partition.is_leader:
                continue
            try:
                moved = partition.update_follower_fetch_state(
                    replica_id, request.fetch_offset, request.log_start_offset, now
                )
            except KafkaError:
                continue
            if moved:
                self.complete_delayed_requests(partition.key)
            proposed = partition.isr_to_expand(replica_id)
            if proposed is not None and self.isr_eligible(replica_id):
                self.propose_isr(partition, proposed)

    # -- ISR changes ---------------------------------------------------------------------
    def propose_isr(self, partition: Partition, proposed: tuple[int, ...]) -> None:
        """Send an ISR change to the controller (AlterPartition); the
        partition counts the maximal ISR until the answer."""
        manager = self.alter_partition_manager
        if manager is None:
            return
        partition.begin_isr_change(proposed)
        manager.submit(partition, proposed)

    def on_isr_change_failed(self, partition: Partition) -> None:
        if partition.abort_isr_change():
            self.complete_delayed_requests(partition.key)

    def maybe_shrink_isr(self) -> None:
        """Drop followers that fell behind replica.lag.time.max.ms from the
        ISRs this broker leads (Kafka's isr-expiration task)."""
        lag_max_ms = self.config["replica.lag.time.max.ms"]
        now = self.time_ms()
        for partition in list(self._partitions.values()):
            if partition.replica_states:
                proposed = partition.isr_to_shrink(now, lag_max_ms)
                if proposed is not None:
                    logger.info(
                        "shrinking the ISR of %s-%d from %s to %s",
                        partition.topic,
                        partition.partition,
                        list(partition.isr),
                        list(proposed),
                    )
                    self.propose_isr(partition, proposed)

    def fetch_messages(
        self,
        params: FetchParams,
        requests: list[PartitionFetchRequest] | Callable[[], list[PartitionFetchRequest]],
        watch_key: Hashable | None = None,
        respond: Callable[[FetchResults], T] | None = None,
    ) -> FetchResults | asyncio.Future[FetchResults] | asyncio.Future[T]:
        """Read now; if that is not enough (min_bytes) and the client will
        wait, park a DelayedFetch until appends make it enough or max_wait_ms
        passes. Returns [(request, FetchPartitionData)], or a future of it
        when the fetch waits (no task or coroutine on the common path) -- of
        ``respond(results)`` when ``respond`` is given, made as the fetch
        completes.

        ``requests``: the partitions, or a function giving them at each read
        (a session's ready partitions, which change while it waits).
        ``watch_key``: what a waiting fetch is watched under (a session,
        which wake_fetches checks); None: each partition read."""
        to_read = requests() if callable(requests) else requests
        results, total, has_error = self.read_from_local_log(params, to_read)
        if params.replica_id >= 0:
            self._update_followers(params.replica_id, results)
        if (
            params.max_wait_ms <= 0
            or total >= params.min_bytes
            or has_error
            or (not to_read and watch_key is None)
        ):
            return results
        # Chained: the response is written as the woken fetch completes
        # (futures.complete_soon).
        future: ChainedFuture[Any] = ChainedFuture(loop=asyncio.get_running_loop())
        operation = DelayedFetch(
            self,
            params,
            requests,
            future,
            results,
            # What the expiry would read is what this read found unless the
            # answer can change without waking the fetch (DelayedFetch).
            reread_on_expiry=bool(total or params.replica_id >= 0 or params.client_rack),
            respond=respond,
        )
        # Just read, on the loop's thread: nothing can have changed, so the
        # operation is watched without the purgatory's two re-reads. The
        # purgatory holds it until it completes (shutdown answers it from
        # there: complete_delayed_operations).
        self.fetch_purgatory.watch(
            operation, (watch_key,) if watch_key is not None else [r.key for r in to_read]
        )
        return future

    # -- delete records ----------------------------------------------------------------
    def delete_records(
        self,
        timeout_ms: int,
        entries: list[tuple[str, int, int, DeleteRecordsResponse.DeleteRecordsPartitionResult]],
    ) -> asyncio.Future[None] | None:
        """``entries``: (topic, partition, offset, result) with result a
        DeleteRecordsPartitionResult (low_watermark, error_code filled in).
        Offset -1 means the high watermark. Returns None or a future."""
        statuses = []
        for topic, index, offset, result in entries:
            try:
                partition = self.leader_partition_or_raise(topic, index)
                log = partition.log
                target = log.high_watermark if offset == -1 else offset
                if target < 0 or target > log.high_watermark:
                    raise OffsetOutOfRangeException(
                        f"Cannot increment the log start offset to {target} of partition "
                        f"{topic}-{index} since it is larger than the high watermark "
                        f"{log.high_watermark}"
                    )
                log.delete_records_before(target)
            except Exception as exc:
                error = error_of(exc)
                result.error_code = error.code
                result.low_watermark = -1
                continue
            result.error_code = 0
            result.low_watermark = log.log_start_offset
            self.wake_fetches(partition.key)
            statuses.append((partition, target, result))
        if not statuses:
            return None
        future = asyncio.get_running_loop().create_future()
        operation = DelayedDeleteRecords(timeout_ms, statuses, future, self.broker_alive)
        if self.delete_records_purgatory.try_complete_else_watch(
            operation, [p.key for p, _, _ in statuses]
        ):
            return None
        self._delayed.add(operation)
        return future

    # -- life cycle --------------------------------------------------------------------
    def complete_delayed_operations(self) -> None:
        """Answer every waiting request now with what it has (shutdown)."""
        for operation in [*self._delayed, *self.fetch_purgatory.waiting()]:
            operation.force_complete()

    def shutdown(self) -> None:
        self.complete_delayed_operations()
        for purgatory in (
            self.produce_purgatory,
            self.fetch_purgatory,
            self.delete_records_purgatory,
        ):
            purgatory.shutdown()
