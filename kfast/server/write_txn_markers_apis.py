"""WriteTxnMarkers (API key 27): a transaction coordinator has the partition
leaders write the COMMIT or ABORT marker of a transaction (Kafka's
KafkaApis.handleWriteTxnMarkersRequest).

Each marker is a control batch of the producer (id and epoch) carrying the
coordinator epoch, appended as leader with acks=-1 and origin COORDINATOR.
The partition's producer state checks it: an older producer epoch is
INVALID_PRODUCER_EPOCH, an older coordinator epoch (a deposed coordinator)
TRANSACTION_COORDINATOR_FENCED; with transaction version 2 (KIP-890 part 2)
the coordinator bumped the epoch to end the transaction, so the marker's
epoch must be above the producer's, strictly. Once appended, the
transaction's records become readable to read_committed consumers (the
last stable offset moves); on a __consumer_offsets partition the group
coordinator also commits or drops the producer's pending offsets.

``write_markers`` is the append itself; the coordinator's marker channel
calls it (or its two halves, ``start_markers`` and ``MarkerWrite.finish``)
directly for the partitions this broker leads.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable
from typing import Any

from kfast._ext.log_append import ORIGIN_COORDINATOR
from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME
from kfast.protocol import WriteTxnMarkersRequest, WriteTxnMarkersResponse, api_keys
from kfast.protocol import errors as E
from kfast.protocol.constants import ACL_OPERATION_CLUSTER_ACTION
from kfast.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, build_control_batch
from kfast.server.apis import ApiRegistry, RequestContext
from kfast.server.coordinator_partition_writer import AppendResult

# ``broker`` below is the KafkaBroker, typed as RequestContext.broker is (Any):
# the attributes its start() sets are still declared Optional there.

WRITE_TXN_MARKERS = api_keys.BY_NAME["WriteTxnMarkers"].key
_ALL_IN_SYNC_REPLICAS = -1


def _strict_epoch_error(
    broker: Any, topic: str, index: int, producer_id: int, producer_epoch: int
) -> int:
    """Transaction version 2: INVALID_PRODUCER_EPOCH unless the marker's
    epoch is above the one the partition last saw from the producer."""
    partition = broker.replica_manager.get_partition(topic, index)
    if partition is None or not partition.is_leader:
        return 0  # the append answers (NOT_LEADER_OR_FOLLOWER, ...)
    entry = partition.log.producer_state.last_entry(producer_id)
    if entry is not None and entry.producer_epoch >= 0 and producer_epoch <= entry.producer_epoch:
        return E.InvalidProducerEpochException.code
    return 0


class MarkerWrite:
    """The markers of one transaction appended to partitions this broker
    leads: ``waiting`` is None once they are replicated (or failed), else
    what to await first; ``finish()`` then gives each partition's error
    code. Split so that the marker channel can append at once, in the
    coordinator's own step, and finish without a task when nothing waits."""

    __slots__ = (
        "broker",
        "producer_id",
        "producer_epoch",
        "committed",
        "results",
        "entries",
        "waiting",
    )

    def __init__(self, broker: Any, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.broker = broker
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.committed = committed
        self.results: dict[tuple[str, int], int] = {}
        # (topic, index, marker batch, result) of each append under way
        self.entries: list[tuple[str, int, bytearray, AppendResult]] = []
        self.waiting: Awaitable[object] | None = None

    def finish(self) -> dict[tuple[str, int], int]:
        """Each partition's error code, once ``waiting`` is done; a written
        __consumer_offsets marker commits or drops the producer's pending
        offsets of that partition's groups."""
        for topic, index, _, result in self.entries:
            self.results[(topic, index)] = result.error_code
            if result.error_code == 0 and topic == GROUP_METADATA_TOPIC_NAME:
                self.broker.group_coordinator.complete_transaction(
                    index, self.producer_id, self.producer_epoch, self.committed
                )
        self.entries = []
        return self.results


def start_markers(
    broker: Any,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    transaction_version: int,
    partitions: Iterable[tuple[str, int]],
) -> MarkerWrite:
    """Append the marker to each of ``partitions`` ((topic, index) this
    broker should lead), acks=-1; see MarkerWrite."""
    write = MarkerWrite(broker, producer_id, producer_epoch, committed)
    control_type = CONTROL_TYPE_COMMIT if committed else CONTROL_TYPE_ABORT
    now_ms = int(time.time() * 1000)
    for topic, index in partitions:
        if transaction_version >= 2:
            code = _strict_epoch_error(broker, topic, index, producer_id, producer_epoch)
            if code:
                write.results[(topic, index)] = code
                continue
        batch = bytearray(
            build_control_batch(
                control_type, producer_id, producer_epoch, coordinator_epoch, now_ms
            )
        )
        write.entries.append((topic, index, batch, AppendResult()))
    if write.entries:
        write.waiting = broker.replica_manager.append_records(
            broker.config["request.timeout.ms"],
            _ALL_IN_SYNC_REPLICAS,
            write.entries,
            ORIGIN_COORDINATOR,
        )
    return write


async def write_markers(
    broker: Any,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    transaction_version: int,
    partitions: Iterable[tuple[str, int]],
) -> dict[tuple[str, int], int]:
    """Append the marker to each of ``partitions`` ((topic, index) this
    broker should lead); the error code of each once replicated (or not)."""
    write = start_markers(
        broker,
        producer_id,
        producer_epoch,
        committed,
        coordinator_epoch,
        transaction_version,
        partitions,
    )
    if write.waiting is not None:
        await write.waiting
    return write.finish()


async def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    version = ctx.api_version
    # Only brokers (CLUSTER_ACTION) write markers: the whole request fails.
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    answers: list[WriteTxnMarkersResponse.WritableTxnMarkerResult] = []
    for marker in request.markers:
        partitions = [
            (topic.name, index) for topic in marker.topics for index in topic.partition_indexes
        ]
        results = await write_markers(
            ctx.broker,
            marker.producer_id,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
            marker.transaction_version if version >= 2 else 0,
            partitions,
        )
        answers.append(_marker_result(marker.producer_id, marker.topics, results))
    return WriteTxnMarkersResponse(markers=answers)


def _marker_result(
    producer_id: int,
    topics: list[WriteTxnMarkersRequest.WritableTxnMarkerTopic],
    results: dict[tuple[str, int], int],
) -> WriteTxnMarkersResponse.WritableTxnMarkerResult:
    R = WriteTxnMarkersResponse
    return R.WritableTxnMarkerResult(
        producer_id=producer_id,
        topics=[
            R.WritableTxnMarkerTopicResult(
                name=topic.name,
                partitions=[
                    R.WritableTxnMarkerPartitionResult(
                        partition_index=index, error_code=results[(topic.name, index)]
                    )
                    for index in topic.partition_indexes
                ],
            )
            for topic in topics
        ],
    )


def _error_response(
    ctx: RequestContext, request: WriteTxnMarkersRequest, error: E.KafkaError
) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[
            _marker_result(
                marker.producer_id,
                marker.topics,
                {
                    (topic.name, index): error.code
                    for topic in marker.topics
                    for index in topic.partition_indexes
                },
            )
            for marker in request.markers
        ]
    )


def register(apis: ApiRegistry) -> None:
    apis.register(WRITE_TXN_MARKERS, handle_write_txn_markers, error_response=_error_response)
