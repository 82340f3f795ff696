"""The driver's view of the topics: which partitions a query reads and where
their logs start and end (Spark's KafkaOffsetReader), asked of the broker
through kfast's client.

- partitions: one Metadata request (every topic for ``subscribePattern``,
  the named topics otherwise); a topic that does not exist has no
  partitions, as a Kafka consumer subscribed to it sees none;
- earliest/latest offsets: ListOffsets -2/-1 (latest is the high watermark,
  or the last stable offset with ``kafka.isolation.level=read_committed``); a latest offset below one the query already reached
  is asked again for a while (see ``earliest_and_latest``);
- offsets for timestamps: ListOffsets with the timestamp (-1 in the answer:
  no record that recent).

The driver calls this from synchronous code (Spark's planner), so it owns a
private event loop, as kfast's BlockingFetcher does; one reader serves a
whole query (a streaming query asks for latest offsets every trigger).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from kfast.client import EARLIEST, LATEST, Fetcher
from kfast_spark.options import KafkaConsumerSettings, KafkaSourceOptions, TopicPartition
from kfast_spark.planning import KafkaOffsetRange, OffsetRangeCalculator, resolve_offset_ranges


class KafkaOffsetReader:
    def __init__(self, bootstrap_servers: str, consumer: KafkaConsumerSettings | None = None):
        """``consumer``: the read's ``kafka.*`` client settings (client id,
        timeouts, backoff)."""
        self._loop = asyncio.new_event_loop()
        try:
            self._fetcher = self._loop.run_until_complete(
                self._open(bootstrap_servers, consumer or KafkaConsumerSettings())
            )
        except BaseException:
            self._loop.close()
            raise

    @staticmethod
    async def _open(bootstrap_servers, consumer: KafkaConsumerSettings) -> Fetcher:
        # The client must be built on the loop it runs on.
        return await Fetcher(bootstrap_servers, **consumer.client_arguments()).start()

    def _run(self, coroutine):
        return self._loop.run_until_complete(coroutine)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._run(self._fetcher.close())
            self._loop.close()

    def __enter__(self) -> KafkaOffsetReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- partitions and offsets ----------------------------------------------------

    def assigned_partitions(self, options: KafkaSourceOptions) -> list[TopicPartition]:
        """The partitions the query's consumer strategy names. For ``assign``
        these may include partitions that do not exist (data loss later)."""
        return options.strategy.assigned(self.available_partitions(options))

    def available_partitions(self, options: KafkaSourceOptions) -> dict[str, list[int]]:
        """Topic -> partitions, of the topics the strategy may read."""
        strategy = options.strategy
        topics = getattr(strategy, "topics", None)
        if topics is None and hasattr(strategy, "partitions"):
            topics = sorted({tp.topic for tp in strategy.partitions})
        answered = self._run(
            self._fetcher.cluster.refresh_metadata(None if topics is None else list(topics))
        )
        return {
            name: sorted(metadata.partitions)
            for name, metadata in answered.items()
            if metadata.error_code == 0
        }

    def earliest_and_latest(
        self,
        partitions: Sequence[TopicPartition],
        available: Mapping[str, Sequence[int]],
        reached: Mapping[TopicPartition, int] | None = None,
    ):
        """({partition: log start offset}, {partition: high watermark}) of the
        partitions that exist; the others are left out (deleted).

        ``reached``: offsets the query already read up to. A high watermark
        below one is most likely a leader elected since, which learns the old
        leader's high watermark only when its followers fetch from it; a
        truncated log looks the same, but does not catch up. So the latest
        offsets are asked again, with backoff, until they reach ``reached``
        or the client's default.api.timeout.ms has passed (Spark's
        fetchLatestOffsets retries the same case, KAFKA-7703, a few times)."""
        present = [tp for tp in partitions if tp.partition in available.get(tp.topic, ())]
        earliest = self._list_offsets({tp: EARLIEST for tp in present})
        latest = self._list_offsets({tp: LATEST for tp in present})
        cluster = self._fetcher.cluster
        deadline = time.monotonic() + cluster.metadata_timeout
        attempt = 0
        while reached and time.monotonic() < deadline:
            behind = [tp for tp, offset in latest.items() if offset < reached.get(tp, offset)]
            if not behind:
                break
            self._run(cluster.backoff(attempt))
            attempt += 1
            latest.update(self._list_offsets({tp: LATEST for tp in behind}))
        return earliest, latest

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        found = self._list_offsets(timestamps)
        return {tp: None if offset < 0 else offset for tp, offset in found.items()}

    def _list_offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        listed = self._run(
            self._fetcher.list_offsets(
                {(tp.topic, tp.partition): spec for tp, spec in specs.items()}
            )
        )
        return {
            TopicPartition(topic, partition): offset
            for (topic, partition), offset in listed.items()
        }

    # ---- planning ------------------------------------------------------------------

    def batch_offset_ranges(self, options: KafkaSourceOptions) -> list[KafkaOffsetRange]:
        """The input partitions of a batch read: starting/ending options
        resolved against the broker, split as ``minPartitions`` asks."""
        starting, ending = options.batch_offsets()
        return OffsetRangeCalculator(options.min_partitions).get_ranges(
            self.resolve(options, starting, ending)
        )

    def resolve(self, options: KafkaSourceOptions, starting, ending) -> list[KafkaOffsetRange]:
        available = self.available_partitions(options)
        assigned = options.strategy.assigned(available)
        earliest, latest = self.earliest_and_latest(assigned, available)
        return resolve_offset_ranges(
            assigned,
            starting,
            ending,
            earliest,
            latest,
            fail_on_data_loss=options.fail_on_data_loss,
            offsets_for_times=self.offsets_for_times,
        )
