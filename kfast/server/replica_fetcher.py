"""The follower side of replication (Kafka's ReplicaFetcherManager,
ReplicaFetcherThread and AbstractFetcherThread).

A partition this broker follows is fetched from its leader by one
ReplicaFetcher: one per (leader broker, fetcher id), the fetcher id being
the partition's hash modulo num.replica.fetchers, so each source broker
gets that many connections at most. A fetcher is an asyncio task looping
over Fetch requests (v12+, replica_id / ReplicaState naming this broker,
sessionless full fetches) for all its partitions at their log end offsets,
each with the epoch of its last batch:

- records are appended with ``Log.append_as_follower`` (offsets, epochs and
  producer state as the leader wrote them), then the follower's high
  watermark becomes min(leader's high watermark, own log end offset) and its
  log start offset follows the leader's;
- a diverging epoch in the response (the follower's log left the leader's
  at some epoch: it led once and wrote what was never committed) truncates
  the log to where the two agree (KIP-279), and the next fetch checks again;
- OFFSET_OUT_OF_RANGE asks the leader for its log start and end offsets
  (ListOffsets with this replica id) and truncates to the end, or starts the
  log afresh at the leader's start when it lies beyond this log's end;
- errors that a metadata update resolves (not leader, fenced or unknown
  epoch, unknown partition) and connection failures back off
  replica.fetch.backoff.ms; the metadata publisher moves partitions between
  fetchers as leaderships change (``add_partition`` / ``remove_partition``);
- the follower quota (replication throttle): while it is exceeded, a
  partition it throttles is left out of the fetch unless this replica has
  caught up with the leader's high watermark (Kafka's shouldFollowerThrottle;
  the lag is known from the last fetch that brought records); with nothing
  left to fetch the fetcher waits replica.fetch.backoff.ms. Appended bytes of
  throttled partitions are recorded, in sync or not.

Appends run on the event loop, as the leader's do.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kfast.client.connection import BrokerConnection
from kfast.protocol import FetchRequest, FetchResponse, ListOffsetsRequest, api_keys, errors
from kfast.protocol.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfast.records import complete_batches_size, iter_batches
from kfast.server.replication_quota import ReplicationQuotaManager
from kfast.storage.checkpoint import LeaderEpochFileCache
from kfast.storage.log import Log

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker
    from kfast.server.partition import Partition
    from kfast.server.replica_manager import PartitionKey

logger = logging.getLogger(__name__)

FETCH = api_keys.BY_NAME["Fetch"].key
LIST_OFFSETS = api_keys.BY_NAME["ListOffsets"].key
# Fetch v12 brings last_fetched_epoch and diverging_epoch (KIP-595/KIP-279).
MIN_FOLLOWER_FETCH_VERSION = 12

# Errors a later metadata update (new leader, new epoch) resolves: back off.
_RETRY_LATER = frozenset(
    e.code
    for e in (
        errors.NotLeaderOrFollowerException,
        errors.FencedLeaderEpochException,
        errors.UnknownLeaderEpochException,
        errors.UnknownTopicOrPartitionException,
        errors.UnknownTopicIdException,
        errors.KafkaStorageException,
        errors.ReplicaNotAvailableException,
    )
)
# The leader has not applied the metadata this follower has (a leadership
# just moved: the follower saw it first). Milliseconds away, so retry soon
# instead of after replica.fetch.backoff.ms: until this follower fetches, a
# new leader's high watermark -- and every acks=all produce -- waits.
_LEADER_CATCHING_UP = frozenset(
    e.code for e in (errors.NotLeaderOrFollowerException, errors.UnknownLeaderEpochException)
)
_CATCH_UP_RETRY_S = 0.02
_OUT_OF_RANGE = errors.OffsetOutOfRangeException.code


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Which of a source broker's fetchers serves a partition (stable
    across processes, unlike Python's salted str hash)."""
    return (zlib.crc32(topic.encode()) + partition) % max(1, num_fetchers)


def divergence_truncation_offset(
    epoch_cache: LeaderEpochFileCache,
    log_end_offset: int,
    high_watermark: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> int:
    """Where a follower truncates when the leader answers its fetch with a
    diverging epoch (Kafka's getOffsetTruncationState): at the end of the
    leader's epoch if this log has that epoch too; else at the end of this
    log's largest epoch below it, and the next fetch compares again; at the
    high watermark if the leader could not tell. Never above the log end.
    ``epoch_cache``: the follower's LeaderEpochFileCache."""
    if leader_epoch < 0 or leader_end_offset < 0:
        return min(high_watermark, log_end_offset)
    epoch, follower_end = epoch_cache.end_offset_for(leader_epoch, log_end_offset)
    if epoch < 0:
        return min(leader_end_offset, log_end_offset)
    if epoch != leader_epoch:
        return min(follower_end, log_end_offset)
    return min(follower_end, leader_end_offset, log_end_offset)


class PartitionFetchState:
    """One partition a fetcher serves: the leader and epoch it was added
    with, until when it backs off after an error, and how far behind the
    leader's high watermark its last records left it (None: not known yet)."""

    __slots__ = ("partition", "leader_id", "leader_epoch", "delayed_until", "lag")

    def __init__(self, partition: Partition, leader_id: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.delayed_until = 0.0
        self.lag: int | None = None

    @property
    def is_replica_in_sync(self) -> bool:
        return self.lag is not None and self.lag <= 0


def should_follower_throttle(quota: ReplicationQuotaManager, state: PartitionFetchState) -> bool:
    """Leave a partition out of the fetch: throttled, not caught up, and the
    quota exceeded (Kafka's shouldFollowerThrottle)."""
    partition = state.partition
    return (
        not state.is_replica_in_sync
        and quota.is_throttled(partition.topic, partition.partition)
        and quota.is_quota_exceeded()
    )


class ReplicaFetcherManager:
    def __init__(self, broker: KafkaBroker) -> None:
        replica_manager = broker.replica_manager
        if replica_manager is None:
            raise ValueError("replica fetchers need the started broker's replica manager")
        self.broker = broker
        self.replica_manager = replica_manager
        config = broker.config
        self.num_fetchers = config["num.replica.fetchers"]
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        # partition key -> the fetcher serving it.
        self._assigned: dict[PartitionKey, ReplicaFetcher] = {}
        self._closed = False

    def add_partition(self, partition: Partition) -> None:
        """Fetch ``partition`` from its current leader at its current epoch
        (a no-op when already doing exactly that)."""
        if self._closed:
            return
        key = partition.key
        current = self._assigned.get(key)
        if current is not None:
            state = current.partitions.get(key)
            if (
                state is not None
                and state.leader_id == partition.leader_id
                and state.leader_epoch == partition.leader_epoch
                and state.partition is partition
            ):
                return
            current.remove(key)
        fetcher_key = (
            partition.leader_id,
            fetcher_id(partition.topic, partition.partition, self.num_fetchers),
        )
        fetcher = self.fetchers.get(fetcher_key)
        if fetcher is None:
            fetcher = self.fetchers[fetcher_key] = ReplicaFetcher(self, *fetcher_key)
        fetcher.add(PartitionFetchState(partition, partition.leader_id, partition.leader_epoch))
        self._assigned[key] = fetcher

    def remove_partition(self, key: PartitionKey) -> None:
        fetcher = self._assigned.pop(key, None)
        if fetcher is not None:
            fetcher.remove(key)

    def _idle(self, fetcher: ReplicaFetcher) -> None:
        if not fetcher.partitions and self.fetchers.get(fetcher.key) is fetcher:
            del self.fetchers[fetcher.key]
            fetcher.stop()

    async def shutdown(self) -> None:
        self._closed = True
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._assigned.clear()
        for fetcher in fetchers:
            fetcher.stop()
        await asyncio.gather(*(f.wait_stopped() for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, source_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.broker = manager.broker
        self.source_id = source_id
        self.key = (source_id, fetcher_id)
        self.partitions: dict[PartitionKey, PartitionFetchState] = {}
        config = self.broker.config
        self.max_wait_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.max_bytes = config["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.backoff = config["replica.fetch.backoff.ms"] / 1000
        self.socket_timeout = config["replica.socket.timeout.ms"] / 1000
        self.replica_stats = manager.replica_manager.replica_stats
        self.quota = manager.replica_manager.follower_quota
        self._connection: BrokerConnection | None = None
        self._changed = asyncio.Event()
        self._stopped = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    def __repr__(self) -> str:
        return f"ReplicaFetcher(source={self.source_id}, partitions={len(self.partitions)})"

    def add(self, state: PartitionFetchState) -> None:
        self.partitions[state.partition.key] = state
        self._changed.set()

    def remove(self, key: PartitionKey) -> None:
        if self.partitions.pop(key, None) is not None and not self.partitions:
            self.manager._idle(self)

    def stop(self) -> None:
        self._stopped = True
        self._changed.set()

    async def wait_stopped(self) -> None:
        await asyncio.gather(self._task, return_exceptions=True)

    # -- the loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while not self._stopped:
                now = time.monotonic()
                ready = [s for s in self.partitions.values() if s.delayed_until <= now]
                if not ready:
                    await self._wait_for_change(now)
                    continue
                ready = [s for s in ready if not should_follower_throttle(self.quota, s)]
                if not ready:
                    await self._wait_throttled()
                    continue
                try:
                    await self._fetch(ready)
                except Exception as exc:
                    if self._stopped:
                        break
                    # Any failure ends this round only, as in Kafka's fetcher
                    # threads: a fetcher that stopped would leave its
                    # partitions out of the ISRs for good. The unexpected
                    # ones get their traceback.
                    expected = isinstance(exc, (TimeoutError, errors.KafkaError, OSError))
                    logger.log(
                        logging.INFO if expected else logging.ERROR,
                        "fetch from broker %d failed (%s); retrying in %.0f ms",
                        self.source_id,
                        exc if expected else repr(exc),
                        self.backoff * 1000,
                        exc_info=not expected,
                    )
                    await self._close_connection()
                    self._delay(ready, self.backoff)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("replica fetcher for broker %d stopped unexpectedly", self.source_id)
        finally:
            await self._close_connection()

    async def _wait_for_change(self, now: float) -> None:
        self._changed.clear()
        delays = [s.delayed_until - now for s in self.partitions.values()]
        try:
            await asyncio.wait_for(self._changed.wait(), min(delays) if delays else None)
        except TimeoutError:
            pass

    async def _wait_throttled(self) -> None:
        """Every ready partition is throttled: check again after
        replica.fetch.backoff.ms, or sooner if partitions change."""
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), self.backoff)
        except TimeoutError:
            pass

    def _delay(self, states: Iterable[PartitionFetchState], seconds: float) -> None:
        until = time.monotonic() + seconds
        for state in states:
            state.delayed_until = until

    async def _connect(self) -> BrokerConnection:
        connection = self._connection
        if connection is not None and connection.connected:
            return connection
        endpoint = self.broker.broker_endpoint(self.source_id)
        if endpoint is None:
            raise errors.BrokerNotAvailableException(
                f"broker {self.source_id} has no endpoint in the metadata"
            )
        self._connection = await BrokerConnection.open(
            endpoint.host,
            endpoint.port,
            request_timeout=self.socket_timeout,
            client_id=f"broker-{self.broker.node_id}-fetcher-{self.key[1]}",
            security=getattr(self.broker, "inter_broker_security", None),
        )
        return self._connection

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    # -- one fetch -----------------------------------------------------------------------
    def _fetch_request(self, ready: list[PartitionFetchState], version: int) -> FetchRequest:
        broker = self.broker
        topics: dict[uuid.UUID, FetchRequest.FetchTopic] = {}
        for state in ready:
            partition = state.partition
            log = partition.log
            entry = topics.get(partition.topic_id)
            if entry is None:
                entry = topics[partition.topic_id] = FetchRequest.FetchTopic(
                    topic=partition.topic, topic_id=partition.topic_id, partitions=[]
                )
            last_epoch = log.latest_epoch
            entry.partitions.append(
                FetchRequest.FetchPartition(
                    partition=partition.partition,
                    current_leader_epoch=state.leader_epoch,
                    fetch_offset=log.log_end_offset,
                    last_fetched_epoch=-1 if last_epoch is None else last_epoch,
                    log_start_offset=log.log_start_offset,
                    partition_max_bytes=self.partition_max_bytes,
                )
            )
        request = FetchRequest(
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=list(topics.values()),
            forgotten_topics_data=[],
            rack_id=broker.config.get("broker.rack") or "",
        )
        # The follower names itself by replica_id up to v14, by the
        # ReplicaState tagged field (with its broker epoch, KIP-903) from v15.
        if version >= 15:
            request.replica_state = FetchRequest.ReplicaState(
                replica_id=broker.node_id, replica_epoch=broker.broker_epoch
            )
        else:
            request.replica_id = broker.node_id
        return request

    async def _fetch(self, ready: list[PartitionFetchState]) -> None:
        connection = await self._connect()
        version = connection.version_for(FETCH, min_version=MIN_FOLLOWER_FETCH_VERSION)
        # The offsets this request asks from: a response is applied only if
        # the partition is still where it was (no truncation, no new
        # assignment meanwhile).
        # Keyed as looked up: a topic id this request did not name has no name.
        sent: dict[tuple[str | None, int], tuple[PartitionFetchState, int]] = {
            s.partition.key: (s, s.partition.log.log_end_offset) for s in ready
        }
        response = await connection.send(
            self._fetch_request(ready, version),
            version=version,
            timeout=self.socket_timeout + self.max_wait_ms / 1000,
        )
        if response.error_code:
            raise errors.for_code(response.error_code)(f"fetch from broker {self.source_id} failed")
        by_id = version >= 13
        names = {s.partition.topic_id: s.partition.topic for s in ready}
        for topic in response.responses:
            name = names.get(topic.topic_id) if by_id else topic.topic
            for data in topic.partitions:
                entry = sent.get((name, data.partition_index))
                if entry is None:
                    continue
                state, fetch_offset = entry
                if self.partitions.get(state.partition.key) is not state:
                    continue  # removed or re-added meanwhile
                await self._process_partition(state, fetch_offset, data)

    async def _process_partition(
        self, state: PartitionFetchState, fetch_offset: int, data: FetchResponse.PartitionData
    ) -> None:
        partition = state.partition
        log = partition.log
        error = data.error_code
        if error == 0:
            diverging = data.diverging_epoch
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                self._truncate_on_divergence(partition, diverging.epoch, diverging.end_offset)
                return
            if log.log_end_offset != fetch_offset or partition.is_leader:
                return  # truncated or promoted meanwhile
            records = data.records
            appended = 0
            if records:
                # Decoded from the wire: a memoryview (the FileRegions and
                # lists of ResponseRecords are in responses a broker builds).
                view = memoryview(records)  # type: ignore[arg-type]
                appended = complete_batches_size(view)
                if appended:
                    try:
                        self._append(log, view[:appended])
                    except Exception as exc:
                        logger.error(
                            "follower append to %s-%d failed: %s",
                            partition.topic,
                            partition.partition,
                            exc,
                        )
                        self._delay([state], self.backoff)
                        return
            self._after_append(state, appended, data.high_watermark)
            high_watermark, log_start = log.high_watermark, log.log_start_offset
            log.update_high_watermark(min(data.high_watermark, log.log_end_offset))
            leader_start = data.log_start_offset
            if leader_start > log.log_start_offset:
                try:
                    log.maybe_increment_log_start_offset(min(leader_start, log.high_watermark))
                except errors.KafkaError:
                    pass
            if log.high_watermark != high_watermark or log.log_start_offset != log_start:
                # Consumers fetching from this follower (KIP-392) read up to
                # its high watermark from its log start: what they wait for
                # changed (Kafka's ReplicaFetcherThread completes the delayed
                # fetches of partitions whose high watermark moved).
                self.manager.replica_manager.wake_fetches((partition.topic, partition.partition))
            return
        if error == _OUT_OF_RANGE:
            await self._handle_out_of_range(state)
            return
        if error in _LEADER_CATCHING_UP:
            self._delay([state], min(self.backoff, _CATCH_UP_RETRY_S))
            return
        if error not in _RETRY_LATER:
            logger.warning(
                "fetch of %s-%d from broker %d failed: %s",
                partition.topic,
                partition.partition,
                self.source_id,
                errors.for_code(error).__name__,
            )
        self._delay([state], self.backoff)

    def _after_append(
        self, state: PartitionFetchState, appended: int, leader_high_watermark: int
    ) -> None:
        """The lag behind the leader's high watermark, as of a fetch that
        brought records (or the first one), and the bytes a throttled
        partition used of the follower quota."""
        partition = state.partition
        # BrokerTopicMetrics ReplicationBytesInPerSec (all topics only).
        self.replica_stats.replication_bytes_in += appended
        if appended or state.lag is None:
            state.lag = max(0, leader_high_watermark - partition.log.log_end_offset)
        if appended and self.quota.is_throttled(partition.topic, partition.partition):
            self.quota.record(appended)

    @staticmethod
    def _append(log: Log, records: memoryview) -> None:
        """append_as_follower -- except that an empty log whose start lies
        inside the leader's first batch (it restarted at the leader's log
        start, which DeleteRecords put mid-batch) first restarts at that
        batch's base offset, as Kafka's appendRecordsToFollowerOrFutureReplica
        does; otherwise the batch would be refused as out of order forever."""
        end = log.log_end_offset
        if end == log.log_start_offset and log.size == 0:
            first = next(iter_batches(records))
            if first.base_offset < end <= first.last_offset:
                log.truncate_fully_and_start_at(first.base_offset)
        log.append_as_follower(records)

    def _truncate_on_divergence(
        self, partition: Partition, leader_epoch: int, leader_end: int
    ) -> None:
        log = partition.log
        end = log.log_end_offset
        target = divergence_truncation_offset(
            log.leader_epoch_cache, end, log.high_watermark, leader_epoch, leader_end
        )
        if target < end:
            logger.info(
                "truncating %s-%d from %d to %d: diverged from leader epoch %d",
                partition.topic,
                partition.partition,
                end,
                target,
                leader_epoch,
            )
        # Also at the log end: epochs this log has past the point of
        # divergence go, or the next fetch names the same epoch again.
        log.truncate_to(target)

    async def _handle_out_of_range(self, state: PartitionFetchState) -> None:
        """The leader has no data at this log's end: catch up with its
        offsets (Kafka's fetchOffsetAndTruncate)."""
        partition = state.partition
        log = partition.log
        try:
            leader_end = await self._leader_offset(state, LATEST_TIMESTAMP)
            if leader_end < log.log_end_offset:
                logger.info(
                    "truncating %s-%d to the leader's log end offset %d",
                    partition.topic,
                    partition.partition,
                    leader_end,
                )
                log.truncate_to(leader_end)
                return
            leader_start = await self._leader_offset(state, EARLIEST_TIMESTAMP)
            if leader_start > log.log_end_offset:
                logger.info(
                    "%s-%d restarts at the leader's log start offset %d",
                    partition.topic,
                    partition.partition,
                    leader_start,
                )
                log.truncate_fully_and_start_at(leader_start)
                return
        except (TimeoutError, errors.KafkaError, OSError) as exc:
            logger.info(
                "could not get the offsets of %s-%d from broker %d: %s",
                partition.topic,
                partition.partition,
                self.source_id,
                exc,
            )
        self._delay([state], self.backoff)

    async def _leader_offset(self, state: PartitionFetchState, timestamp: int) -> int:
        partition = state.partition
        connection = await self._connect()
        version = connection.version_for(LIST_OFFSETS, min_version=4)
        response = await connection.send(
            ListOffsetsRequest(
                replica_id=self.broker.node_id,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=partition.topic,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=partition.partition,
                                current_leader_epoch=state.leader_epoch,
                                timestamp=timestamp,
                            )
                        ],
                    )
                ],
            ),
            version=version,
        )
        result = response.topics[0].partitions[0]
        if result.error_code:
            raise errors.for_code(result.error_code)(
                f"ListOffsets for {partition.topic}-{partition.partition} failed"
            )
        offset: int = result.offset
        return offset
