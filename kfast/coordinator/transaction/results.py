"""What the transaction coordinator hands its runtime.

Kafka's coordinator chains callbacks through the replica manager and its
marker channel; kfast's returns every effect as data instead, so the state
machine stays free of I/O and the runtime is one loop::

    def run(result, reply):
        for markers in result.markers:      # WriteTxnMarkers to partition leaders
            channel.send(markers)           # -> coordinator.complete_markers(...)
        for append in result.appends:       # __transaction_state, acks=-1
            write(append.partition, append.records, append.timeout_ms,
                  lambda error: run(coordinator.complete_append(append, error, now_ms()), reply))
        if result.response is not None:
            reply(result.response)

A handler whose answer depends on a write returns ``response=None`` and one
append; the answer comes from that append's completion. Appends and markers
with no one waiting (completing a transaction, expiring ids, aborting a
timed-out transaction) produce results whose response is None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kfast.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata

__all__ = [
    "TxnLogAppend",
    "TxnMarkers",
    "PendingCompleteTxn",
    "CoordinatorResult",
    "InitProducerIdResult",
    "EndTxnResult",
]


class TxnLogAppend:
    """Records to append to partition ``partition`` of __transaction_state as
    its leader with acks=-1, within ``timeout_ms``; the runtime then calls
    ``TransactionCoordinator.complete_append(this, error_code, now_ms)``
    with 0 once the high watermark covers them, else the produce error
    (the coordinator maps it to the error the client sees)."""

    __slots__ = ("partition", "records", "timeout_ms", "_on_complete")

    def __init__(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        timeout_ms: int,
        on_complete: Callable[[int, int], CoordinatorResult],
    ) -> None:
        self.partition = partition
        self.records = records
        self.timeout_ms = timeout_ms
        self._on_complete = on_complete

    def __repr__(self) -> str:
        return f"TxnLogAppend(partition={self.partition}, records={len(self.records)})"


class PendingCompleteTxn:
    """A decided transaction whose markers are being written, and the
    completion to append after the last one (Kafka's PendingCompleteTxn)."""

    __slots__ = ("transactional_id", "coordinator_epoch", "metadata", "transit")

    def __init__(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        transit: TxnTransitMetadata,
    ) -> None:
        self.transactional_id = transactional_id
        self.coordinator_epoch = coordinator_epoch
        self.metadata = metadata
        self.transit = transit


class TxnMarkers:
    """One entry of a WriteTxnMarkers request: the COMMIT or ABORT marker
    of ``producer_id``/``producer_epoch`` for each of ``partitions`` (sent to
    their leaders, grouped by leader as the runtime likes), written with
    ``coordinator_epoch`` (the __transaction_state leader epoch, which fences
    markers of a deposed coordinator) and, for WriteTxnMarkers v2+,
    ``transaction_version``.

    The marker channel reports back per partition through
    ``TransactionCoordinator.complete_markers(this, partitions, now_ms)``:
    partitions written (error NONE), and partitions to give up on
    (UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION, or no leader
    because the topic is gone) count as done. Retriable errors
    (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS*,
    REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a disconnect) are retried by the
    channel with the partition's current leader. INVALID_PRODUCER_EPOCH or
    TRANSACTION_COORDINATOR_FENCED end the attempt:
    ``TransactionCoordinator.cancel_markers(this)`` (the next coordinator
    finishes the transaction when it loads the partition)."""

    __slots__ = (
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "committed",
        "coordinator_epoch",
        "partitions",
        "transaction_version",
        "_pending",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: frozenset[tuple[str, int]],
        transaction_version: int,
        pending: PendingCompleteTxn,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.committed = committed
        self.coordinator_epoch = coordinator_epoch
        self.partitions = partitions
        self.transaction_version = transaction_version
        # The decision these markers carry, compared by identity (a resent
        # decision is a new one).
        self._pending = pending

    def __repr__(self) -> str:
        return (
            f"TxnMarkers({self.transactional_id!r}, producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, {'COMMIT' if self.committed else 'ABORT'}, "
            f"coordinator_epoch={self.coordinator_epoch}, partitions={sorted(self.partitions)})"
        )


class CoordinatorResult(NamedTuple):
    """``response``: the answer to send now (None: none yet, or no client
    waits); ``appends``: writes to make, each completed through
    ``complete_append``; ``markers``: WriteTxnMarkers entries to send."""

    response: Any = None
    appends: tuple[TxnLogAppend, ...] = ()
    markers: tuple[TxnMarkers, ...] = ()

    # A result adds as a result (responses and writes combined), not as the
    # tuple it is built on.
    def __add__(self, other: CoordinatorResult) -> CoordinatorResult:  # type: ignore[override]
        if self.response is not None and other.response is not None:
            raise ValueError("two responses for one request")
        return CoordinatorResult(
            self.response if self.response is not None else other.response,
            self.appends + other.appends,
            self.markers + other.markers,
        )


class InitProducerIdResult(NamedTuple):
    """InitProducerIdResponse's fields (the API layer turns PRODUCER_FENCED
    into INVALID_PRODUCER_EPOCH below v4, as Kafka's KafkaApis does)."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class EndTxnResult(NamedTuple):
    """EndTxnResponse's fields: producer id and epoch are what a transaction
    version 2 client continues with (v5+); -1 otherwise. PRODUCER_FENCED
    becomes INVALID_PRODUCER_EPOCH below v2 (the API layer's job)."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
