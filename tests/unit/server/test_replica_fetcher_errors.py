"""A replica fetcher outlives a fetch round that fails in a way nobody
foresaw: the round is logged with its traceback and retried after
replica.fetch.backoff.ms, as Kafka's fetcher threads do. (A fetcher that
stopped left its partitions unfetched, so out of their ISRs, for good.)

The fetcher runs its real loop; only the network round (``_fetch``) is
replaced, and the broker around it is the few attributes the loop reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import SimpleNamespace

from kfast.server.replica_fetcher import PartitionFetchState, ReplicaFetcher

BACKOFF_MS = 20


class _NoQuota:
    def is_throttled(self, topic: str, partition: int) -> bool:
        return False

    def is_quota_exceeded(self) -> bool:
        return False


def _manager() -> SimpleNamespace:
    config = {
        "replica.fetch.wait.max.ms": 500,
        "replica.fetch.min.bytes": 1,
        "replica.fetch.response.max.bytes": 10 << 20,
        "replica.fetch.max.bytes": 1 << 20,
        "replica.fetch.backoff.ms": BACKOFF_MS,
        "replica.socket.timeout.ms": 30_000,
    }
    return SimpleNamespace(
        broker=SimpleNamespace(config=config),
        replica_manager=SimpleNamespace(replica_stats=None, follower_quota=_NoQuota()),
        _idle=lambda fetcher: None,
    )


def test_an_unexpected_error_in_a_round_is_logged_and_the_fetcher_goes_on(caplog):
    rounds: list[float] = []

    async def scenario() -> None:
        second = asyncio.Event()

        class Flaky(ReplicaFetcher):
            async def _fetch(self, ready):
                rounds.append(time.monotonic())
                if len(rounds) == 1:
                    raise RuntimeError("the handler is closed")
                second.set()
                await asyncio.sleep(0.01)  # a round takes a while, as a real one does

        fetcher = Flaky(_manager(), source_id=2, fetcher_id=0)
        partition = SimpleNamespace(key=("orders", 0), topic="orders", partition=0)
        fetcher.add(PartitionFetchState(partition, leader_id=2, leader_epoch=0))
        try:
            await asyncio.wait_for(second.wait(), 10)
        finally:
            fetcher.stop()
            await fetcher.wait_stopped()

    with caplog.at_level(logging.INFO, logger="kfast.server.replica_fetcher"):
        asyncio.run(scenario())
    assert rounds[1] - rounds[0] >= BACKOFF_MS / 1000
    failed = [r for r in caplog.records if "fetch from broker 2 failed" in r.getMessage()]
    assert len(failed) == 1
    assert failed[0].levelno == logging.ERROR and failed[0].exc_info is not None
    assert not [r for r in caplog.records if "stopped unexpectedly" in r.getMessage()]
