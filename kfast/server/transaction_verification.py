"""Transaction verification before a transactional write (KIP-890 part 1):
Kafka's ReplicaManager.handleProduceAppend with its AddPartitionsToTxnManager.

The hanging transaction it prevents: a producer's write to a partition is
delayed in the network, the producer aborts (its marker reaches the
partition), and then the delayed write arrives -- the partition would start
a transaction no coordinator knows, and its last stable offset would never
move again (read_committed consumers stuck). So before a producer's first
transactional batch on a partition (no transaction of that producer ongoing
there), the leader asks the transaction coordinator whether the partition
is in the producer's current transaction: AddPartitionsToTxn v4+ with
verify_only, to the leader of the transactional id's __transaction_state
partition (in-process when that is this broker). Meanwhile the partition
holds a VerificationGuard for the producer; the append goes ahead only if
the guard is still the one verified (a marker written in between clears
it), else INVALID_TXN_STATE "Record was not part of an ongoing transaction".

Answers, per partition, as Kafka maps them: TRANSACTION_ABORTABLE
"Partition was not added to the transaction" (INVALID_TXN_STATE for
Produce v10 and older); PRODUCER_FENCED as INVALID_PRODUCER_EPOCH;
CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION
and the coordinator's COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE
/ NOT_COORDINATOR as NOT_ENOUGH_REPLICAS (retriable: the producer sends
again); anything else (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, ...) as is.
transaction.partition.verification.enable=false turns it off.

Transaction version 2 (KIP-890 part 2): a client sending Produce v12+ never
sends AddPartitionsToTxn itself; the leader's request to the coordinator
adds the partition instead (verify_only false, Kafka's
TransactionSupportedOperation ADD_PARTITION), under the same guard. Its
transactions end with an epoch bump, so "a transaction of this producer is
ongoing here" is asked at the batch's epoch: a batch one epoch ahead starts
the next transaction while the previous one may still wait for its marker,
and must be added (the coordinator answers CONCURRENT_TRANSACTIONS until
that marker is written). A batch below the partition's epoch for the
producer is left to the append, which refuses it as INVALID_PRODUCER_EPOCH
-- a straggler of a transaction the bumped marker already ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kfast.controller.topics import TRANSACTION_STATE_TOPIC_NAME
from kfast.coordinator.runtime import wall_clock_ms
from kfast.coordinator.transaction.metadata import TV_2
from kfast.coordinator.transaction.records import partition_for
from kfast.protocol import AddPartitionsToTxnRequest, api_keys
from kfast.protocol import errors as E
from kfast.protocol.constants import NO_LEADER
from kfast.records import RecordBatch
from kfast.server.broker_links import BrokerLinks, NoEndpoint
from kfast.storage.log import Log
from kfast.storage.producer_state import ProducerStateManager, VerificationGuard

if TYPE_CHECKING:
    from kfast.coordinator.transaction.runtime import TransactionCoordinatorRuntime
    from kfast.server.broker import KafkaBroker
    from kfast.server.delayed_produce import PartitionProduceResult
    from kfast.server.partition import RecordsBuffer
    from kfast.server.replica_manager import PartitionKey

logger = logging.getLogger(__name__)

_ADD_PARTITIONS_TO_TXN = api_keys.BY_NAME["AddPartitionsToTxn"].key
# The first Produce version of transaction version 2 clients: the leader
# adds the partition to the transaction (Kafka's
# produceRequestVersionToTransactionSupportedOperation).
FIRST_ADDING_PRODUCE_VERSION = 12
# Coordinator answers the writer may retry: the request is answered with a
# retriable error of its own API.
RETRIABLE_VERIFICATION_ERRORS = frozenset(
    {
        E.ConcurrentTransactionsException.code,
        E.NetworkException.code,
        E.CoordinatorLoadInProgressException.code,
        E.CoordinatorNotAvailableException.code,
        E.NotCoordinatorException.code,
    }
)
NOT_ADDED = "Partition was not added to the transaction"


class TransactionalWrite:
    """The transactional batches of one request that need verifying:
    ``guards`` {(topic, partition): VerificationGuard}; ``add_partitions``:
    the coordinator adds them to the transaction (transaction version 2)
    instead of only checking they are in it."""

    __slots__ = ("producer_id", "producer_epoch", "guards", "add_partitions")

    def __init__(self, producer_id: int, producer_epoch: int, add_partitions: bool = False):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.guards: dict[PartitionKey, VerificationGuard] = {}
        self.add_partitions = add_partitions


def needs_verification(state: ProducerStateManager, producer_id: int, producer_epoch: int) -> bool:
    """A transactional write of (``producer_id``, ``producer_epoch``) to the
    partition of producer state ``state`` asks the coordinator first: no
    transaction of the producer is ongoing there at that epoch, and the
    epoch is not below the partition's (such a write fails as
    INVALID_PRODUCER_EPOCH at the append; Kafka rejects it before asking)."""
    if state.has_ongoing_transaction(producer_id, producer_epoch):
        return False
    entry = state.last_entry(producer_id)
    return entry is None or producer_epoch >= entry.producer_epoch


def start_verification(
    broker: KafkaBroker,
    entries: Sequence[tuple[str, int, RecordsBuffer, PartitionProduceResult]],
    produce_version: int = 0,
) -> TransactionalWrite | None:
    """For each ``(topic, partition, records, response)`` holding a
    transactional batch whose producer has no transaction ongoing on the
    partition (at the batch's epoch): a guard (the partition's verification
    state). None when nothing needs verifying. A partition that fails here
    (not hosted, not leader) is left for the append to answer."""
    write = None
    replica_manager = broker.started_replica_manager()
    now_ms = replica_manager.time_ms()
    for topic, index, records, _ in entries:
        header = RecordBatch(records)
        if not header.is_transactional or header.is_control:
            continue
        if write is None:
            write = TransactionalWrite(
                header.producer_id,
                header.producer_epoch,
                produce_version >= FIRST_ADDING_PRODUCE_VERSION,
            )
        elif header.producer_id != write.producer_id:
            raise E.InvalidPidMappingException(
                "Transactional records contained more than one producer ID"
            )
        partition = replica_manager.get_partition(topic, index)
        if partition is None or not partition.is_leader:
            continue
        state = partition.log.producer_state
        if not needs_verification(state, header.producer_id, header.producer_epoch):
            continue
        entry = state.maybe_create_verification_state(
            header.producer_id, header.base_sequence, header.producer_epoch, now_ms
        )
        write.guards[(topic, index)] = entry.guard
    return write if write is not None and write.guards else None


def check_verified(log: Log, records: RecordsBuffer, guard: VerificationGuard | None) -> None:
    """At append time, under no await since the guard was handed out: a
    transactional data batch of a producer with no transaction ongoing here
    must carry the partition's current guard; and while a verification is
    in progress only its lowest sequence may be written (later pipelined
    batches come back as OUT_OF_ORDER_SEQUENCE and are sent again)."""
    header = RecordBatch(records)
    if not header.is_transactional or header.is_control:
        return
    state = log.producer_state
    if not needs_verification(state, header.producer_id, header.producer_epoch):
        return
    entry = state.verification_states.get(header.producer_id)
    if entry is None or guard is None or entry.guard is not guard:
        raise E.InvalidTxnStateException("Record was not part of an ongoing transaction")
    if header.producer_epoch == entry.epoch and header.base_sequence > entry.lowest_sequence:
        raise E.OutOfOrderSequenceException(
            f"Out of order sequence number for producer {header.producer_id}: "
            f"{header.base_sequence} (incoming seq. number), {entry.lowest_sequence} "
            f"(earliest seen sequence)"
        )


def clear_after_append(log: Log, records: RecordsBuffer) -> None:
    """A transactional batch or marker was written: the producer's
    verification, if any, is over (Kafka's UnifiedLog.updateProducers)."""
    states = log.producer_state.verification_states
    if states:
        header = RecordBatch(records)
        if header.is_transactional:
            states.pop(header.producer_id, None)


class AddPartitionsToTxnManager:
    """Sends the verifications (or, for transaction version 2, the
    additions) to transaction coordinators (Kafka's AddPartitionsToTxnManager,
    without its batching across requests)."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self._links = BrokerLinks(broker, "txn-verifier")

    async def verify(
        self, transactional_id: str, write: TransactionalWrite
    ) -> dict[PartitionKey, int]:
        """{(topic, partition): error code} for every guarded partition."""
        partitions = list(write.guards)
        broker = self.broker
        image = broker.metadata_image
        if image is None:  # not yet: verify() runs on a started broker
            return dict.fromkeys(partitions, E.CoordinatorNotAvailableException.code)
        index = partition_for(
            transactional_id, broker.config["transaction.state.log.num.partitions"]
        )
        registration = image.partition(TRANSACTION_STATE_TOPIC_NAME, index)
        leader = NO_LEADER if registration is None else registration.leader
        if leader == NO_LEADER:
            return dict.fromkeys(partitions, E.CoordinatorNotAvailableException.code)
        runtime = broker.transaction_coordinator
        if leader == broker.node_id and runtime is not None:  # None: not started yet
            code = runtime.check_coordinator(transactional_id)
            if code:
                return dict.fromkeys(partitions, code)
            if write.add_partitions:
                return dict.fromkeys(
                    partitions, await self._add_here(runtime, transactional_id, write, partitions)
                )
            return runtime.coordinator.handle_verify_partitions(
                transactional_id, write.producer_id, write.producer_epoch, partitions
            )
        return await self._ask(leader, transactional_id, write, partitions)

    @staticmethod
    async def _add_here(
        runtime: TransactionCoordinatorRuntime,
        transactional_id: str,
        write: TransactionalWrite,
        partitions: list[PartitionKey],
    ) -> int:
        """The coordinator on this broker adds ``partitions`` (transaction
        version 2); its one error code once the Ongoing record is written."""
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()

        def reply(code: object) -> None:
            if not future.done():
                future.set_result(code)

        runtime.run(
            runtime.coordinator.handle_add_partitions(
                transactional_id,
                write.producer_id,
                write.producer_epoch,
                partitions,
                wall_clock_ms(),
                TV_2,
            ),
            reply,
        )
        code = await future
        assert isinstance(code, int)  # handle_add_partitions answers an error code
        return code

    async def _ask(
        self,
        leader: int,
        transactional_id: str,
        write: TransactionalWrite,
        partitions: list[PartitionKey],
    ) -> dict[PartitionKey, int]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        R = AddPartitionsToTxnRequest
        request = R(
            transactions=[
                R.AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=write.producer_id,
                    producer_epoch=write.producer_epoch,
                    verify_only=not write.add_partitions,
                    topics=[
                        R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        try:
            response = await self._links.send(leader, request, min_version=4)
        except NoEndpoint:
            return dict.fromkeys(partitions, E.NotCoordinatorException.code)
        except (OSError, E.KafkaError) as exc:
            logger.debug("verifying a transaction with broker %d failed: %s", leader, exc)
            return dict.fromkeys(partitions, E.NetworkException.code)
        if response.error_code:
            return dict.fromkeys(partitions, response.error_code)
        results = dict.fromkeys(partitions, E.UnknownServerException.code)
        for transaction in response.results_by_transaction:
            for topic in transaction.topic_results:
                for partition in topic.results_by_partition:
                    key = (topic.name, partition.partition_index)
                    if key in results:
                        results[key] = partition.partition_error_code
        return results

    async def shutdown(self) -> None:
        await self._links.close()


def answer(code: int, produce_version: int) -> tuple[int, str | None]:
    """The produce error for a verification answer (Kafka's mapping): the
    coordinator's PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for a partition
    leader, and its TRANSACTION_ABORTABLE (the partition is not in the
    transaction) reaches only Produce v11+ clients, older ones get
    INVALID_TXN_STATE."""
    if code == E.ProducerFencedException.code:
        return E.InvalidProducerEpochException.code, None
    if code == E.TransactionAbortableException.code and produce_version <= 10:
        code = E.InvalidTxnStateException.code
    if code in (E.InvalidTxnStateException.code, E.TransactionAbortableException.code):
        return code, NOT_ADDED
    if code in RETRIABLE_VERIFICATION_ERRORS:
        return E.NotEnoughReplicasException.code, (
            f"Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {E.for_code(code).__name__}"
        )
    return code, None
