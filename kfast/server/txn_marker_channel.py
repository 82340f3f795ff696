"""TransactionMarkerChannelManager: delivers the transaction coordinator's
COMMIT/ABORT markers to the leaders of the transaction's partitions and
reports back until every partition has its marker (Kafka's
TransactionMarkerChannelManager with its request completion handler).

For each TxnMarkers (one transaction) the channel groups the partitions
still to write by their leader in the broker's current metadata image and
sends each leader a WriteTxnMarkers request over the inter-broker listener,
or, for the partitions this broker leads, appends them in-process (the same
``write_markers`` the handler runs). Per partition, as Kafka's
TransactionMarkerRequestCompletionHandler:

* NONE: written. UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION: given
  up on, which also counts as done. A partition whose topic is gone from the
  metadata is skipped as done (it was deleted).
* INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: a newer producer
  or coordinator moved on; the markers are cancelled.
* Anything else (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost
  connection, a leader not known yet): retried with the then current
  leader after a backoff, for as long as the coordinator still wants the
  markers (it stops wanting them when it loses the partition).

Each round's written partitions go to the coordinator at once
(``complete_markers``), which appends the transaction's completion after
the last one.

The first write to the partitions this broker leads is made in ``send``
itself, within the coordinator's step that decided the transaction (before
its EndTxn answer leaves), and when nothing waits for replicas (one
broker, or followers already in step) the completion follows in that same
step. Started from a task instead, it waited a loop iteration or more
behind the client's next requests, and a producer's AddPartitionsToTxn for
its next transaction, answered CONCURRENT_TRANSACTIONS while the previous
one is not complete, cost the client a retry backoff (librdkafka: tens of
milliseconds) -- the slow tail of flush + commit in bench/transactions.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kfast.coordinator.transaction.results import TxnMarkers
from kfast.protocol import WriteTxnMarkersRequest
from kfast.protocol import errors as E
from kfast.protocol.constants import NO_LEADER
from kfast.server.broker_links import BrokerLinks, NoEndpoint
from kfast.server.write_txn_markers_apis import MarkerWrite, start_markers, write_markers

if TYPE_CHECKING:
    from kfast.coordinator.transaction.runtime import TransactionCoordinatorRuntime
    from kfast.server.broker import KafkaBroker
    from kfast.server.replica_manager import PartitionKey

logger = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 100
MAX_RETRY_BACKOFF_MS = 1000

_DONE = frozenset(
    {0, E.UnsupportedForMessageFormatException.code, E.UnsupportedVersionException.code}
)
_FENCED = frozenset(
    {E.InvalidProducerEpochException.code, E.TransactionCoordinatorFencedException.code}
)
_RETRIABLE = frozenset(
    {
        E.UnknownTopicOrPartitionException.code,
        E.NotLeaderOrFollowerException.code,
        E.NotEnoughReplicasException.code,
        E.NotEnoughReplicasAfterAppendException.code,
        E.TimeoutException.code,
        E.KafkaStorageException.code,
        E.NetworkException.code,
    }
)


class TransactionMarkerChannelManager:
    """``broker``: the KafkaBroker (its metadata image, endpoints and
    ``transaction_coordinator`` runtime are read at each use)."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self._links = BrokerLinks(broker, "txn-marker-sender")
        self._deliveries: set[asyncio.Task[None]] = set()
        self._stopped = False

    def _runtime(self) -> TransactionCoordinatorRuntime:
        # Created after this channel (it is given our send), before any marker.
        runtime = self.broker.transaction_coordinator
        if runtime is None:
            raise RuntimeError("transaction markers before the transaction coordinator")
        return runtime

    def send(self, markers: TxnMarkers) -> None:
        """Deliver ``markers`` (a TxnMarkers): this broker's partitions at
        once, the rest (and any retry) in the background."""
        if self._stopped:
            return
        remaining = set(markers.partitions)
        local = self._route(remaining)[1].get(self.broker.node_id)
        first = None
        if local:
            try:
                first = start_markers(
                    self.broker,
                    markers.producer_id,
                    markers.producer_epoch,
                    markers.committed,
                    markers.coordinator_epoch,
                    markers.transaction_version,
                    local,
                )
            except Exception:
                logger.exception("writing the markers of %s failed", markers.transactional_id)
            if first is not None and first.waiting is None:
                # Replicated already: the round is over here.
                if not self._round_done(markers, remaining, [first.finish()]):
                    return
                first = None
        if not remaining:
            return
        task = asyncio.ensure_future(self._deliver(markers, remaining, first))
        self._deliveries.add(task)
        task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task[None]) -> None:
        self._deliveries.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("delivering transaction markers failed", exc_info=task.exception())

    async def _deliver(
        self, markers: TxnMarkers, remaining: set[PartitionKey], first: MarkerWrite | None = None
    ) -> None:
        """Write ``remaining`` until each is done; ``first``: a MarkerWrite
        to this broker's partitions already appended, still waiting."""
        runtime = self._runtime()
        backoff_ms = RETRY_BACKOFF_MS
        while remaining and not self._stopped and runtime.markers_wanted(markers):
            done, by_leader = self._route(remaining)
            rounds = [
                self._write(markers, leader, partitions)
                for leader, partitions in by_leader.items()
                if first is None or leader != self.broker.node_id
            ]
            if first is not None:
                rounds.append(self._finish(first))
                first = None
            if done:
                remaining -= done
                runtime.complete_markers(markers, done)
            before = len(remaining)
            if not self._round_done(markers, remaining, await asyncio.gather(*rounds)):
                return
            if not remaining:
                return
            # Progress resets the backoff, as a round that wrote something.
            backoff_ms = RETRY_BACKOFF_MS if len(remaining) < before else backoff_ms
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, MAX_RETRY_BACKOFF_MS)

    def _round_done(
        self,
        markers: TxnMarkers,
        remaining: set[PartitionKey],
        answers: Iterable[Mapping[PartitionKey, int]],
    ) -> bool:
        """Take one round's per-partition answers: the written (or given
        up) partitions leave ``remaining`` and go to the coordinator.
        False when the delivery is over (fenced, stopped, unwanted)."""
        runtime = self._runtime()
        done: set[PartitionKey] = set()
        fenced = False
        for results in answers:
            for topic_partition, code in results.items():
                if code in _DONE:
                    done.add(topic_partition)
                elif code in _FENCED:
                    fenced = True
                elif code not in _RETRIABLE:
                    logger.error(
                        "unexpected error %s writing the marker of %s to %s-%d; retrying",
                        E.for_code(code).__name__,
                        markers.transactional_id,
                        *topic_partition,
                    )
        if self._stopped or not runtime.markers_wanted(markers):
            return False
        if fenced:
            logger.info(
                "markers of %s fenced; the next coordinator or producer epoch "
                "completes the transaction",
                markers.transactional_id,
            )
            runtime.cancel_markers(markers)
            return False
        remaining -= done
        if done:
            runtime.complete_markers(markers, done)
        return True

    @staticmethod
    async def _finish(write: MarkerWrite) -> dict[PartitionKey, int]:
        waiting = write.waiting
        if waiting is not None:  # a write that waits is the only kind finished here
            await waiting
        return write.finish()

    def _route(
        self, partitions: Iterable[PartitionKey]
    ) -> tuple[set[PartitionKey], dict[int, list[PartitionKey]]]:
        """(partitions done without a write, the rest by leader). A
        partition whose topic is gone counts as done; one without a live
        leader waits for the next round."""
        image = self.broker.metadata_image
        if image is None:
            raise RuntimeError("transaction markers before the first metadata image")
        done: set[PartitionKey] = set()
        by_leader: dict[int, list[PartitionKey]] = {}
        for topic_partition in partitions:
            registration = image.partition(*topic_partition)
            if registration is None:
                logger.info("%s-%d is gone; its transaction marker is skipped", *topic_partition)
                done.add(topic_partition)
            elif registration.leader != NO_LEADER:
                by_leader.setdefault(registration.leader, []).append(topic_partition)
        return done, by_leader

    async def _write(
        self, markers: TxnMarkers, leader: int, partitions: list[PartitionKey]
    ) -> dict[PartitionKey, int]:
        """Per-partition error codes of one leader's write."""
        if leader == self.broker.node_id:
            try:
                return await write_markers(
                    self.broker,
                    markers.producer_id,
                    markers.producer_epoch,
                    markers.committed,
                    markers.coordinator_epoch,
                    markers.transaction_version,
                    partitions,
                )
            except Exception:
                # As a failed request to another broker: tried again.
                logger.exception("writing the markers of %s failed", markers.transactional_id)
                return dict.fromkeys(partitions, E.KafkaStorageException.code)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=markers.producer_id,
                    producer_epoch=markers.producer_epoch,
                    transaction_result=markers.committed,
                    coordinator_epoch=markers.coordinator_epoch,
                    transaction_version=markers.transaction_version,
                    topics=[
                        WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        try:
            response = await self._links.send(leader, request)
        except NoEndpoint:
            return dict.fromkeys(partitions, E.NotLeaderOrFollowerException.code)
        except (OSError, E.KafkaError) as exc:
            logger.debug("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return dict.fromkeys(partitions, E.NetworkException.code)
        results = dict.fromkeys(partitions, E.UnknownServerException.code)
        for answer in response.markers:
            for topic in answer.topics:
                for partition in topic.partitions:
                    if (topic.name, partition.partition_index) in results:
                        results[(topic.name, partition.partition_index)] = partition.error_code
        return results

    async def shutdown(self) -> None:
        self._stopped = True
        for task in list(self._deliveries):
            task.cancel()
        await asyncio.gather(*self._deliveries, return_exceptions=True)
        await self._links.close()
