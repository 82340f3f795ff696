"""Producer: records -> per-partition record batches -> Produce requests.

    async with KafkaProducer("127.0.0.1:9092", linger_ms=5, compression=COMPRESSION_LZ4) as producer:
        future = await producer.send("t", b"value", key=b"k", headers=[("h", b"v")])
        metadata = await future                 # RecordMetadata(topic, partition, offset, timestamp)
        await producer.send_and_wait("t", b"v2")
        await producer.flush()

Records collect in one open batch per partition (a RecordBatchBuilder).
A batch closes when the next record would take it past ``batch_size``
bytes, when it has been open ``linger_ms``, or on ``flush``/``close``;
closed batches of every partition on the same leader go out in one Produce
request. At most one request per partition is in flight, so records of a
partition are written in the order they were sent, retries included.
Retriable errors (leader moved, timeouts, lost connections) refresh
metadata and resend the same batch, up to ``retries`` times and, with
``delivery_timeout_ms``, until the batch is that old (Kafka's
delivery.timeout.ms; Kafka's producer retries without a count, bounded by
that time alone).

``acks``: 0 (no answer; offsets unknown, reported as -1), 1 (leader wrote
it) or -1 (all in-sync replicas). ``enable_idempotence`` asks the broker
for a producer id (InitProducerId) and numbers every batch, so a batch
resent after a lost answer is written once (needs acks=-1).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from kfast.client.cluster import STALE_METADATA_CODES, Cluster, ClusterClient
from kfast.client.partitioner import StickyPartitioner, partition_for_key
from kfast.protocol import InitProducerIdRequest, ProduceRequest, api_keys, errors
from kfast.protocol.constants import INT32_MAX
from kfast.records import COMPRESSION_NONE, RecordBatchBuilder

__all__ = ["KafkaProducer", "RecordMetadata"]

_PRODUCE = api_keys.PRODUCE


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int  # the record's timestamp, or the broker's for LogAppendTime


class _Batch:
    """One open or in-flight batch of one partition, and its callers' futures."""

    __slots__ = (
        "topic",
        "partition",
        "builder",
        "futures",
        "timestamps",
        "created",
        "data",
        "attempts",
        "finished",
    )

    def __init__(self, topic: str, partition: int, builder: RecordBatchBuilder):
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.futures: list[asyncio.Future] = []
        self.timestamps: list[int] = []
        self.created = time.monotonic()
        self.data = b""  # the built batch, once closed
        self.attempts = 0
        self.finished = False

    def fail(self, error: BaseException) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(error)


class KafkaProducer(ClusterClient):
    def __init__(
        self,
        bootstrap_servers=None,
        *,
        cluster: Cluster | None = None,
        acks: int = -1,
        linger_ms: float = 5,
        batch_size: int = 16384,
        compression: int = COMPRESSION_NONE,
        retries: int = 5,
        request_timeout_ms: int = 30000,
        enable_idempotence: bool = False,
        buffer_memory: int = 32 * 1024 * 1024,
        delivery_timeout_ms: int | None = None,
        **cluster_options,
    ):
        if acks not in (0, 1, -1):
            raise ValueError(f"acks must be 0, 1 or -1, not {acks}")
        if enable_idempotence and acks != -1:
            raise ValueError("enable_idempotence needs acks=-1 (as Kafka's producer)")
        super().__init__(bootstrap_servers, cluster, **cluster_options)
        self.acks = acks
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.compression = compression
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.enable_idempotence = enable_idempotence
        self.buffer_memory = buffer_memory
        self.delivery_timeout = (
            None if delivery_timeout_ms is None else delivery_timeout_ms / 1000.0
        )
        # Bytes of closed batches not yet answered; ``send`` waits while it is
        # above buffer_memory (Kafka's buffer.memory), so a fast source cannot
        # queue without bound in front of a slower broker.
        self._buffered = 0
        self._space = asyncio.Event()
        self._space.set()
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._sticky = StickyPartitioner()
        self._open: dict[tuple[str, int], _Batch] = {}
        self._ready: list[_Batch] = []
        self._in_flight: set[tuple[str, int]] = set()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sender: asyncio.Task | None = None
        self._closing = False

    async def start(self) -> KafkaProducer:
        await super().start()
        if self.enable_idempotence:
            response = await self.cluster.send(
                None, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
            )
            if response.error_code:
                raise errors.for_code(response.error_code)("InitProducerId")
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._sender = asyncio.get_running_loop().create_task(self._run_sender())
        return self

    async def close(self) -> None:
        if self._sender is not None:
            await self.flush()
            self._closing = True
            self._wakeup.set()
            await self._sender
            self._sender = None
        await super().close()

    # ---- records in ------------------------------------------------------------------

    async def partition_for(self, topic: str, key, partition: int | None) -> int:
        if partition is not None:
            return partition
        count = len((await self.cluster.topic(topic)).partitions)
        if key is not None:
            return partition_for_key(key, count)
        return self._sticky.partition(topic, count)

    async def send(
        self,
        topic: str,
        value,
        key=None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers=None,
    ) -> asyncio.Future:
        """Queue one record; returns a future of its RecordMetadata."""
        if self._sender is None:
            raise RuntimeError("producer not started")
        while self._buffered >= self.buffer_memory:
            self._space.clear()
            await self._space.wait()
        partition = await self.partition_for(topic, key, partition)
        timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        future = asyncio.get_running_loop().create_future()
        batch = self._open.get((topic, partition))
        if batch is not None and not batch.builder.append(timestamp, key, value, headers):
            self._close_batch(batch)
            batch = None
        if batch is None:
            # The previous batch of this partition is closed, so its records
            # are already counted in the partition's next sequence.
            base_sequence = (
                self._sequences.get((topic, partition), 0) if self.enable_idempotence else -1
            )
            batch = _Batch(
                topic,
                partition,
                RecordBatchBuilder(
                    self.compression,
                    max_batch_bytes=self.batch_size,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=base_sequence,
                ),
            )
            self._open[topic, partition] = batch
            batch.builder.append(timestamp, key, value, headers)
            self._wakeup.set()  # the sender arms the linger timer for it
        batch.futures.append(future)
        batch.timestamps.append(timestamp)
        if batch.builder.size_in_bytes >= self.batch_size:
            self._close_batch(batch)
        self._idle.clear()
        return future

    async def send_and_wait(self, topic: str, value, key=None, **kwargs) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    async def flush(self) -> None:
        """Send every queued record now and wait until all are answered."""
        for batch in list(self._open.values()):
            self._close_batch(batch)
        if self._ready or self._in_flight:
            self._wakeup.set()
            await self._idle.wait()

    def _close_batch(self, batch: _Batch) -> None:
        if self._open.get((batch.topic, batch.partition)) is batch:
            del self._open[batch.topic, batch.partition]
        if self.enable_idempotence:
            key = (batch.topic, batch.partition)
            # Sequences wrap at int32 max (DefaultRecordBatch.incrementSequence).
            self._sequences[key] = (
                batch.builder.base_sequence + batch.builder.records_count
            ) & INT32_MAX
        batch.data = batch.builder.build()
        self._buffered += len(batch.data)
        self._ready.append(batch)
        count = self.cluster.topics.get(batch.topic)
        if count is not None:
            self._sticky.next_batch(batch.topic, len(count.partitions), batch.partition)
        self._wakeup.set()

    # ---- sending ---------------------------------------------------------------------

    async def _run_sender(self) -> None:
        requests: set[asyncio.Task] = set()
        while True:
            now = time.monotonic()
            for batch in list(self._open.values()):
                if now - batch.created >= self.linger:
                    self._close_batch(batch)
            # The oldest ready batch of each partition with nothing in flight:
            # one batch per partition per request keeps a partition's order.
            sendable = []
            for batch in self._ready:
                key = (batch.topic, batch.partition)
                if key not in self._in_flight:
                    self._in_flight.add(key)
                    sendable.append(batch)
            if sendable:
                for batch in sendable:
                    self._ready.remove(batch)
                task = asyncio.get_running_loop().create_task(self._send_batches(sendable))
                requests.add(task)
                task.add_done_callback(requests.discard)
            if not self._open and not self._ready and not self._in_flight:
                self._idle.set()
                if self._closing:
                    break
            self._wakeup.clear()
            timeout = None
            if self._open:
                oldest = min(b.created for b in self._open.values())
                timeout = max(0.0, oldest + self.linger - time.monotonic())
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass
        if requests:
            await asyncio.gather(*requests, return_exceptions=True)

    async def _send_batches(self, batches: list[_Batch]) -> None:
        """Send batches (grouped by leader); retry the retriable failures."""
        try:
            await self._send_with_retries(batches)
        except BaseException as exc:
            # Whatever went wrong, no caller (nor flush) may wait forever.
            for batch in batches:
                self._finish(
                    batch,
                    error=exc
                    if isinstance(exc, Exception)
                    else errors.NetworkException("producer stopped"),
                )
            if not isinstance(exc, Exception):
                raise
        self._wakeup.set()

    async def _send_with_retries(self, batches: list[_Batch]) -> None:
        while batches:
            by_leader: dict[int, list[_Batch]] = {}
            retry: list[_Batch] = []
            for batch in batches:
                try:
                    leader = await self.cluster.leader_for(batch.topic, batch.partition)
                except errors.KafkaError as exc:
                    self._finish(batch, error=exc)
                    continue
                by_leader.setdefault(leader, []).append(batch)
            results = await asyncio.gather(
                *(self._produce(node, group) for node, group in by_leader.items())
            )
            for failed in results:
                retry.extend(failed)
            if retry:
                await self.cluster.backoff(max(b.attempts for b in retry) - 1)
            batches = retry

    async def _produce(self, node: int, batches: list[_Batch]) -> list[_Batch]:
        """One Produce request; returns the batches to retry."""
        for batch in batches:
            batch.attempts += 1
        try:
            version = await self.cluster.version_for(node, _PRODUCE)
            topics: dict[str, list[_Batch]] = {}
            for batch in batches:
                topics.setdefault(batch.topic, []).append(batch)
            request = ProduceRequest(acks=self.acks, timeout_ms=self.request_timeout_ms)
            for name, group in topics.items():
                entry = ProduceRequest.TopicProduceData(
                    partition_data=[
                        ProduceRequest.PartitionProduceData(index=b.partition, records=b.data)
                        for b in group
                    ]
                )
                if version >= 13:
                    entry.topic_id = (await self.cluster.topic(name)).topic_id
                else:
                    entry.name = name
                request.topic_data.append(entry)
            response = await self.cluster.send(
                node, request, version=version, expect_response=self.acks != 0
            )
        except errors.KafkaError as exc:
            return self._retry_or_fail(batches, exc)
        if self.acks == 0:
            for batch in batches:
                self._finish(batch, base_offset=-1)
            return []
        by_partition = {}
        for topic in response.responses:
            found = topic.name if version < 13 else self.cluster.topic_name(topic.topic_id)
            if found is None:  # an unknown topic id: none of our batches
                continue
            name = found
            for p in topic.partition_responses:
                by_partition[name, p.index] = p
        retry = []
        for batch in batches:
            answer = by_partition.get((batch.topic, batch.partition))
            if answer is None:
                self._finish(
                    batch,
                    error=errors.UnknownServerException(
                        f"no answer for {batch.topic}-{batch.partition}"
                    ),
                )
            elif (
                answer.error_code == 0
                or answer.error_code == errors.DuplicateSequenceException.code
            ):
                self._finish(
                    batch, base_offset=answer.base_offset, log_append_time=answer.log_append_time_ms
                )
            else:
                error_class = errors.for_code(answer.error_code)
                error = error_class(
                    f"{batch.topic}-{batch.partition}: "
                    f"{answer.error_message or error_class.default_message}"
                )
                if answer.error_code in STALE_METADATA_CODES:
                    self.cluster.invalidate(batch.topic)
                retry.extend(self._retry_or_fail([batch], error))
        return retry

    def _retry_or_fail(self, batches: list[_Batch], error: errors.KafkaError) -> list[_Batch]:
        retry = []
        for batch in batches:
            if error.retriable and batch.attempts <= self.retries and not self._expired(batch):
                self.cluster.invalidate(batch.topic)
                retry.append(batch)
            else:
                self._finish(batch, error=error)
        return retry

    def _expired(self, batch: _Batch) -> bool:
        return (
            self.delivery_timeout is not None
            and time.monotonic() - batch.created >= self.delivery_timeout
        )

    def _finish(
        self,
        batch: _Batch,
        base_offset: int = -1,
        log_append_time: int = -1,
        error: BaseException | None = None,
    ) -> None:
        if batch.finished:
            return
        batch.finished = True
        self._in_flight.discard((batch.topic, batch.partition))
        self._wakeup.set()
        self._buffered -= len(batch.data)
        if self._buffered < self.buffer_memory:
            self._space.set()
        if error is not None:
            batch.fail(error)
            return
        for i, future in enumerate(batch.futures):
            if future.done():
                continue
            offset = base_offset + i if base_offset >= 0 else -1
            timestamp = log_append_time if log_append_time >= 0 else batch.timestamps[i]
            future.set_result(RecordMetadata(batch.topic, batch.partition, offset, timestamp))
