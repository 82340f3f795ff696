"""Fetch records from explicit (topic, partition, offset) positions (no groups).

    async with Fetcher("127.0.0.1:9092") as fetcher:
        part = await fetcher.fetch_raw("t", 0, offset=0, max_bytes=1 << 20)
        columns = decode_columnar(part.records)     # part.records: whole v2 batches
        offset = part.next_offset
        records = await fetcher.fetch_records("t", 0, offset)   # [ConsumerRecord]

``fetch_raw`` returns the record bytes the broker sent, cut after the last
complete batch (a fetch response may end in a partial batch, which is
dropped: ``next_offset`` is where that batch starts, so the next fetch gets
it whole). The first batch may begin before the requested offset (a
compressed batch is returned whole); decoded reads skip those records, raw
readers must too. ``fetch_many`` does the same for many partitions, one Fetch
request per leader.

Errors: OFFSET_OUT_OF_RANGE raises ``errors.OffsetOutOfRangeException``
(the caller decides where to reset; ``Fetcher.list_offsets`` helps); a leader
change, a leader that cannot be reached or a topic not yet known refreshes
metadata and retries with backoff until the cluster's ``metadata_timeout``
(Kafka's default.api.timeout.ms); other errors raise their
``kfast.protocol.errors`` exception. ``retries`` bounds ``iter_raw``'s
empty answers below the high watermark. ``isolation_level=READ_COMMITTED``
reads up to the last stable offset, and the decoded reads drop records of
aborted transactions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from kfast.client.admin import EARLIEST, LATEST, KafkaAdmin
from kfast.client.cluster import STALE_METADATA_CODES, Cluster, ClusterClient
from kfast.protocol import FetchRequest, api_keys, errors
from kfast.records import (
    CONTROL_TYPE_ABORT,
    TIMESTAMP_LOG_APPEND_TIME,
    RecordBatch,
    complete_batches_size,
    iter_batches,
)

__all__ = [
    "Fetcher",
    "FetchedPartition",
    "ConsumerRecord",
    "decode_records",
    "delivered_batches",
    "committed_records",
    "READ_UNCOMMITTED",
    "READ_COMMITTED",
    "EARLIEST",
    "LATEST",
]

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_FETCH = api_keys.FETCH
_CONSUMER_REPLICA_ID = -1
_EMPTY = memoryview(b"")


@dataclass
class FetchedPartition:
    topic: str
    partition: int
    fetch_offset: int
    records: memoryview  # complete record batches only
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    next_offset: int  # where the next fetch of this partition starts
    aborted_transactions: list[tuple[int, int]] = field(
        default_factory=list
    )  # (producer id, first offset)


@dataclass
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int


def _next_offset(records, fetch_offset: int) -> int:
    next_offset = fetch_offset
    for batch in iter_batches(records):
        next_offset = max(next_offset, batch.last_offset + 1)
    return next_offset


def delivered_batches(
    part: FetchedPartition, isolation_level: int = READ_UNCOMMITTED
) -> Iterator[RecordBatch]:
    """The data batches of a fetched partition that a consumer delivers, in
    order: never control batches (transaction markers); with READ_COMMITTED,
    not the batches of aborted transactions either. Kafka's consumer rule:
    the broker lists each aborted transaction's producer and first offset; a
    producer's transactional batches are aborted from that offset until its
    ABORT marker."""
    aborted_starts = sorted(part.aborted_transactions, key=lambda entry: entry[1])
    aborting: set[int] = set()
    for batch in iter_batches(part.records):
        if isolation_level == READ_COMMITTED:
            while aborted_starts and aborted_starts[0][1] <= batch.last_offset:
                aborting.add(aborted_starts.pop(0)[0])
            if batch.is_control:
                if batch.producer_id in aborting:
                    first = next(iter(batch), None)
                    if (
                        first is not None
                        and first.key is not None
                        and int.from_bytes(bytes(first.key)[2:4], "big") == CONTROL_TYPE_ABORT
                    ):
                        aborting.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborting:
                continue
        if not batch.is_control:
            yield batch


def committed_records(part: FetchedPartition) -> memoryview | bytes:
    """A READ_COMMITTED fetch's record bytes without the batches of aborted
    transactions, for readers that decode whole buffers (the Spark source's
    columnar decoder): the fetched bytes themselves when the broker listed
    no aborted transaction, else the delivered batches joined (a copy, only
    then)."""
    if not part.aborted_transactions:
        return part.records
    return b"".join(batch.memoryview() for batch in delivered_batches(part, READ_COMMITTED))


def decode_records(
    part: FetchedPartition, isolation_level: int = READ_UNCOMMITTED
) -> list[ConsumerRecord]:
    """The data records of a fetched partition at or after its fetch offset
    (control batches skipped; with READ_COMMITTED, aborted ones too)."""
    out = []
    for batch in delivered_batches(part, isolation_level):
        log_append = batch.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        for record in batch:
            if record.offset < part.fetch_offset:
                continue
            out.append(
                ConsumerRecord(
                    part.topic,
                    part.partition,
                    record.offset,
                    batch.max_timestamp if log_append else record.timestamp,
                    batch.timestamp_type,
                    None if record.key is None else bytes(record.key),
                    None if record.value is None else bytes(record.value),
                    [(k, None if v is None else bytes(v)) for k, v in record.headers],
                    batch.partition_leader_epoch,
                )
            )
    return out


class Fetcher(ClusterClient):
    def __init__(
        self,
        bootstrap_servers=None,
        *,
        cluster: Cluster | None = None,
        isolation_level: int = READ_UNCOMMITTED,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        retries: int = 10,
        **cluster_options,
    ):
        super().__init__(bootstrap_servers, cluster, **cluster_options)
        self.isolation_level = isolation_level
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.retries = retries
        self.admin = KafkaAdmin(cluster=self.cluster)

    # ---- offsets ---------------------------------------------------------------------

    async def list_offsets(
        self, specs: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """(topic, partition) -> EARLIEST/LATEST/timestamp  =>  offsets."""
        listed = await self.admin.list_offsets(specs, self.isolation_level)
        return {key: value.offset for key, value in listed.items()}

    # ---- fetching --------------------------------------------------------------------

    async def fetch_raw(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> FetchedPartition:
        fetched = await self.fetch_many({(topic, partition): offset}, max_bytes, max_wait_ms)
        return fetched[topic, partition]

    async def fetch_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> list[ConsumerRecord]:
        return decode_records(
            await self.fetch_raw(topic, partition, offset, max_bytes, max_wait_ms),
            self.isolation_level,
        )

    async def iter_raw(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
    ):
        """Fetch [start_offset, end_offset) of one partition, chunk by chunk
        (an async iterator of FetchedPartition). Chunks hold whole batches,
        so the first may begin before ``start_offset`` and the last may run
        past ``end_offset``: readers keep the offsets inside the range. Stops
        early at the end of what can be read (high watermark, or the last
        stable offset with READ_COMMITTED), so an end beyond it does not wait."""
        position = start_offset
        empty_answers = 0
        while position < end_offset:
            part = await self.fetch_raw(topic, partition, position, max_bytes, max_wait_ms)
            if part.next_offset > position:
                empty_answers = 0
                yield part
                position = part.next_offset
                continue
            readable = (
                part.last_stable_offset
                if self.isolation_level == READ_COMMITTED and part.last_stable_offset >= 0
                else part.high_watermark
            )
            if position >= readable:
                return
            # Nothing below the readable end came back (a throttled answer is
            # empty): back off and ask again, a bounded number of times.
            if empty_answers >= self.retries:
                raise errors.UnknownServerException(
                    f"{topic}-{partition}: no records at offset {position} below {readable}"
                )
            await self.cluster.backoff(empty_answers)
            empty_answers += 1

    async def fetch_many(
        self,
        positions: Mapping[tuple[str, int], int],
        partition_max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> dict[tuple[str, int], FetchedPartition]:
        """Fetch every (topic, partition) from its offset; one request per leader, concurrently."""
        out: dict[tuple[str, int], FetchedPartition] = {}
        pending = dict(positions)
        deadline = time.monotonic() + self.cluster.metadata_timeout
        attempt = 0
        while pending:
            by_leader: dict[int, dict[tuple[str, int], int]] = {}
            for (topic, partition), offset in pending.items():
                leader = await self.cluster.leader_for(topic, partition)
                by_leader.setdefault(leader, {})[topic, partition] = offset
            results = await asyncio.gather(
                *(
                    self._fetch_from(node, group, partition_max_bytes, max_wait_ms)
                    for node, group in by_leader.items()
                ),
                return_exceptions=True,
            )
            retry: dict[tuple[str, int], int] = {}
            for (_node, group), result in zip(by_leader.items(), results):
                if isinstance(result, errors.KafkaError) and result.retriable:
                    retry.update(group)
                    for topic, _ in group:
                        self.cluster.invalidate(topic)
                    last_error = result
                    continue
                if isinstance(result, BaseException):
                    raise result
                fetched, stale, error = result
                out.update(fetched)
                if stale:
                    retry.update({key: group[key] for key in stale})
                    last_error = error
            if retry:
                # Bounded in time, not by a count: a leader killed with -9
                # stays in Metadata until its session times out (Kafka's
                # default 9 s), longer than a few quick retries last.
                if time.monotonic() >= deadline:
                    raise last_error
                await self.cluster.backoff(attempt)
                attempt += 1
            pending = retry
        return out

    async def _fetch_from(
        self,
        node: int,
        positions: dict[tuple[str, int], int],
        partition_max_bytes: int,
        max_wait_ms: int | None,
    ):
        version = await self.cluster.version_for(node, _FETCH)
        topics: dict[str, list] = {}
        for (topic, partition), offset in positions.items():
            topics.setdefault(topic, []).append(
                FetchRequest.FetchPartition(
                    partition=partition,
                    fetch_offset=offset,
                    partition_max_bytes=partition_max_bytes,
                )
            )
        request = FetchRequest(
            replica_id=_CONSUMER_REPLICA_ID,
            max_wait_ms=self.max_wait_ms if max_wait_ms is None else max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
        )
        for name, partitions in topics.items():
            entry = FetchRequest.FetchTopic(partitions=partitions)
            if version >= 13:
                entry.topic_id = (await self.cluster.topic(name)).topic_id
            else:
                entry.topic = name
            request.topics.append(entry)
        # The broker may hold the request up to max_wait_ms before answering.
        timeout = self.cluster.request_timeout + request.max_wait_ms / 1000.0
        response = await self.cluster.send(node, request, version=version, timeout=timeout)
        if response.error_code:
            raise errors.for_code(response.error_code)(f"Fetch from broker {node}")
        fetched: dict[tuple[str, int], FetchedPartition] = {}
        stale: list[tuple[str, int]] = []
        error = None
        for topic in response.responses:
            found = topic.topic if version < 13 else self.cluster.topic_name(topic.topic_id)
            if found is None:  # an unknown topic id: none of the partitions asked for
                continue
            name = found
            for p in topic.partitions:
                key = (name, p.partition_index)
                if key not in positions:
                    continue
                if p.error_code in STALE_METADATA_CODES:
                    self.cluster.invalidate(name)
                    stale.append(key)
                    error = errors.for_code(p.error_code)(f"{name}-{p.partition_index}")
                    continue
                if p.error_code:
                    exc = errors.for_code(p.error_code)(
                        f"{name}-{p.partition_index} at offset {positions[key]} "
                        f"(log start {p.log_start_offset}, high watermark {p.high_watermark})"
                    )
                    exc.topic_partition, exc.log_start_offset, exc.high_watermark = (
                        key,
                        p.log_start_offset,
                        p.high_watermark,
                    )
                    raise exc
                records = _EMPTY if p.records is None else memoryview(p.records)
                complete = complete_batches_size(records)
                if complete == 0 and len(records) > 0 and p.high_watermark > positions[key]:
                    # Only part of one batch: a broker without KIP-74 (which
                    # sends the first batch whole) and a batch larger than
                    # partition_max_bytes. Asking again would loop forever.
                    raise errors.RecordTooLargeException(
                        f"{name}-{p.partition_index} at offset {positions[key]}: a record batch "
                        f"larger than the fetch size {partition_max_bytes}"
                    )
                records = records[:complete]
                fetched[key] = FetchedPartition(
                    name,
                    p.partition_index,
                    positions[key],
                    records,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                    _next_offset(records, positions[key]),
                    [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or ())],
                )
        missing = [key for key in positions if key not in fetched and key not in stale]
        if missing:
            # Not answered at all (a broker must answer every partition): ask again.
            stale.extend(missing)
            error = errors.UnknownServerException(f"Fetch from broker {node} left out {missing}")
        return fetched, stale, error
