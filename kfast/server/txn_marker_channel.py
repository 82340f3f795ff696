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
"""
from __future__ import annotations

import asyncio
import logging

from kfast.protocol.constants import NO_LEADER
from kfast.protocol import WriteTxnMarkersRequest
from kfast.protocol import errors as E
from kfast.server.broker_links import BrokerLinks, NoEndpoint
from kfast.server.write_txn_markers_apis import write_markers

logger = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 100
MAX_RETRY_BACKOFF_MS = 1000

_DONE = frozenset({0, E.UnsupportedForMessageFormatException.code,
                   E.UnsupportedVersionException.code})
_FENCED = frozenset({E.InvalidProducerEpochException.code,
                     E.TransactionCoordinatorFencedException.code})
_RETRIABLE = frozenset({
    E.UnknownTopicOrPartitionException.code, E.NotLeaderOrFollowerException.code,
    E.NotEnoughReplicasException.code, E.NotEnoughReplicasAfterAppendException.code,
    E.TimeoutException.code, E.KafkaStorageException.code, E.NetworkException.code,
})


class TransactionMarkerChannelManager:
    """``broker``: the KafkaBroker (its metadata image, endpoints and
    ``transaction_coordinator`` runtime are read at each use)."""

    def __init__(self, broker):
        self.broker = broker
        self._links = BrokerLinks(broker, "txn-marker-sender")
        self._deliveries: set[asyncio.Task] = set()
        self._stopped = False

    def send(self, markers) -> None:
        """Deliver ``markers`` (a TxnMarkers) in the background."""
        if self._stopped:
            return
        task = asyncio.ensure_future(self._deliver(markers))
        self._deliveries.add(task)
        task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task) -> None:
        self._deliveries.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("delivering transaction markers failed", exc_info=task.exception())

    async def _deliver(self, markers) -> None:
        runtime = self.broker.transaction_coordinator
        remaining = set(markers.partitions)
        backoff_ms = RETRY_BACKOFF_MS
        while remaining and not self._stopped and runtime.markers_wanted(markers):
            done, by_leader = self._route(remaining)
            rounds = [self._write(markers, leader, partitions)
                      for leader, partitions in by_leader.items()]
            fenced = False
            for results in await asyncio.gather(*rounds):
                for topic_partition, code in results.items():
                    if code in _DONE:
                        done.add(topic_partition)
                    elif code in _FENCED:
                        fenced = True
                    elif code not in _RETRIABLE:
                        logger.error("unexpected error %s writing the marker of %s to %s-%d; "
                                     "retrying", E.for_code(code).__name__,
                                     markers.transactional_id, *topic_partition)
            if self._stopped or not runtime.markers_wanted(markers):
                return
            if fenced:
                logger.info("markers of %s fenced; the next coordinator or producer epoch "
                            "completes the transaction", markers.transactional_id)
                runtime.cancel_markers(markers)
                return
            remaining -= done
            if done:
                runtime.complete_markers(markers, done)
                backoff_ms = RETRY_BACKOFF_MS
            if remaining:
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, MAX_RETRY_BACKOFF_MS)

    def _route(self, partitions) -> tuple[set, dict[int, list]]:
        """(partitions done without a write, the rest by leader). A
        partition whose topic is gone counts as done; one without a live
        leader waits for the next round."""
        image = self.broker.metadata_image
        done, by_leader = set(), {}
        for topic_partition in partitions:
            registration = image.partition(*topic_partition)
            if registration is None:
                logger.info("%s-%d is gone; its transaction marker is skipped", *topic_partition)
                done.add(topic_partition)
            elif registration.leader != NO_LEADER:
                by_leader.setdefault(registration.leader, []).append(topic_partition)
        return done, by_leader

    async def _write(self, markers, leader: int, partitions: list) -> dict:
        """Per-partition error codes of one leader's write."""
        if leader == self.broker.node_id:
            try:
                return await write_markers(
                    self.broker, markers.producer_id, markers.producer_epoch, markers.committed,
                    markers.coordinator_epoch, markers.transaction_version, partitions)
            except Exception:
                # As a failed request to another broker: tried again.
                logger.exception("writing the markers of %s failed", markers.transactional_id)
                return dict.fromkeys(partitions, E.KafkaStorageException.code)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
            transaction_result=markers.committed, coordinator_epoch=markers.coordinator_epoch,
            transaction_version=markers.transaction_version,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
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
