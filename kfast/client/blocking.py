"""Synchronous facades over the async client, for callers without an event
loop of their own (Spark's driver and partition readers, scripts).

    with BlockingFetcher("127.0.0.1:9092") as fetcher:
        partitions = fetcher.partitions_for("t")
        ends = fetcher.list_offsets({("t", p): LATEST for p in partitions})
        part = fetcher.fetch_raw("t", 0, 0, max_bytes=1 << 20)

Each facade owns a private event loop (uvloop when installed) and runs one
call at a time on it; do not use one from inside a running event loop, and
do not share one between threads. Results are the async client's own
(``FetchedPartition.records`` is a memoryview of the response bytes and
stays valid after the call returns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kfast.client.fetcher import ConsumerRecord, FetchedPartition, Fetcher

__all__ = ["BlockingFetcher"]


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class BlockingFetcher:
    def __init__(self, bootstrap_servers, **options):
        self._loop = _new_loop()
        try:
            self._fetcher = self._loop.run_until_complete(self._open(bootstrap_servers, options))
        except BaseException:
            self._loop.close()
            raise

    @staticmethod
    async def _open(bootstrap_servers, options) -> Fetcher:
        # The Fetcher must be built on the loop it will run on.
        return await Fetcher(bootstrap_servers, **options).start()

    def _run(self, coroutine):
        return self._loop.run_until_complete(coroutine)

    @property
    def metadata_timeout(self) -> float:
        """Seconds a call waits for a leader (retrying, on fresh metadata)."""
        return self._fetcher.cluster.metadata_timeout

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._fetcher.cluster.partitions_for(topic))

    def list_offsets(self, specs: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return self._run(self._fetcher.list_offsets(specs))

    def fetch_raw(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> FetchedPartition:
        return self._run(self._fetcher.fetch_raw(topic, partition, offset, max_bytes, max_wait_ms))

    def iter_raw(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
    ):
        """Fetcher.iter_raw as a plain iterator."""
        chunks = self._fetcher.iter_raw(
            topic, partition, start_offset, end_offset, max_bytes, max_wait_ms
        )
        try:
            while True:
                try:
                    yield self._run(chunks.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._run(chunks.aclose())

    def fetch_many(
        self,
        positions: Mapping[tuple[str, int], int],
        partition_max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> dict[tuple[str, int], FetchedPartition]:
        return self._run(self._fetcher.fetch_many(positions, partition_max_bytes, max_wait_ms))

    def fetch_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int | None = None,
    ) -> list[ConsumerRecord]:
        return self._run(
            self._fetcher.fetch_records(topic, partition, offset, max_bytes, max_wait_ms)
        )

    def close(self) -> None:
        if not self._loop.is_closed():
            self._run(self._fetcher.close())
            self._loop.close()

    def __enter__(self) -> BlockingFetcher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
