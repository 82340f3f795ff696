"""KafkaApis handlers of the transaction coordinator: InitProducerId (with a
transactional id), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions.

They translate between the wire (every version) and the
TransactionCoordinator the broker runs as ``broker.transaction_coordinator``
(kfast.coordinator.transaction.runtime); the coordinator's answers are
version-independent and the version rules live here, as in Kafka's
KafkaApis:

* PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn /
  AddOffsetsToTxn / EndTxn v2; older versions get INVALID_PRODUCER_EPOCH.
* AddPartitionsToTxn v0-3 come from producers: a partition missing from the
  metadata fails the request with UNKNOWN_TOPIC_OR_PARTITION for it and
  OPERATION_NOT_ATTEMPTED for the others; the coordinator's one error goes
  to every partition. v4+ come from brokers, batched by transaction, and
  ``verify_only`` asks whether the partitions are in the transaction
  (KIP-890 part 1).
* EndTxn v5+ is a transaction version 2 client (KIP-890 part 2): it
  continues with the producer id and epoch of the answer.
* InitProducerId v6's two-phase commit (KIP-939): enable2Pc needs
  TWO_PHASE_COMMIT on the transactional id besides WRITE, and
  transaction.two.phase.commit.enable on the broker (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the coordinator's answer); while
  that setting is false, keepPreparedTxn is refused the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kfast.coordinator.transaction.metadata import TV_0, TV_2
from kfast.protocol import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    api_keys,
)
from kfast.protocol import errors as E
from kfast.protocol.constants import (
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_READ,
    ACL_OPERATION_TWO_PHASE_COMMIT,
    ACL_OPERATION_WRITE,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
)
from kfast.server import producer_id_apis
from kfast.server.apis import ApiRegistry, RequestContext

if TYPE_CHECKING:
    from kfast.coordinator.transaction.results import CoordinatorResult
    from kfast.coordinator.transaction.runtime import TransactionCoordinatorRuntime

_FENCED = E.ProducerFencedException.code
_INVALID_EPOCH = E.InvalidProducerEpochException.code


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fenced_below(version: int, first: int, code: int) -> int:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for versions below ``first``."""
    return _INVALID_EPOCH if code == _FENCED and version < first else code


def _run(runtime: TransactionCoordinatorRuntime, result: CoordinatorResult) -> asyncio.Future[Any]:
    """The answer of a CoordinatorResult (after its appends, if it waits
    for them): its ``response``, of the type the coordinator's handler
    gives (CoordinatorResult.response is Any)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def reply(response: Any) -> None:
        if not future.done():
            future.set_result(response)

    runtime.run(result, reply)
    return future


# -- InitProducerId ------------------------------------------------------------------------
async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    transactional_id = request.transactional_id
    if transactional_id is None:
        return await producer_id_apis.handle_init_producer_id(ctx, request)
    version = ctx.api_version
    enable_two_phase_commit = version >= 6 and request.enable2_pc
    keep_prepared_txn = version >= 6 and request.keep_prepared_txn
    if keep_prepared_txn and not ctx.broker.config["transaction.two.phase.commit.enable"]:
        return _init_error(E.TransactionalIdAuthorizationException.code)
    if not _may_write(ctx, transactional_id):
        return _init_error(E.TransactionalIdAuthorizationException.code)
    if enable_two_phase_commit and not ctx.authorize(
        ACL_OPERATION_TWO_PHASE_COMMIT, ACL_RESOURCE_TRANSACTIONAL_ID, transactional_id
    ):
        return _init_error(E.TransactionalIdAuthorizationException.code)
    runtime = ctx.broker.transaction_coordinator
    code = runtime.check_coordinator(transactional_id) if transactional_id else 0
    if code:
        return _init_error(code)
    producer_id = request.producer_id if version >= 3 else -1
    producer_epoch = request.producer_epoch if version >= 3 else -1
    answer = await _run(
        runtime,
        runtime.coordinator.handle_init_producer_id(
            transactional_id,
            request.transaction_timeout_ms,
            _now_ms(),
            producer_id,
            producer_epoch,
            enable_two_phase_commit,
            keep_prepared_txn,
        ),
    )
    return InitProducerIdResponse(
        error_code=_fenced_below(version, 4, answer.error_code),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )


def _may_write(ctx: RequestContext, transactional_id: str) -> bool:
    """WRITE on the transactional id: what every transactional request of a
    producer needs (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    return ctx.authorize(ACL_OPERATION_WRITE, ACL_RESOURCE_TRANSACTIONAL_ID, transactional_id or "")


def _init_error(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


# -- AddPartitionsToTxn --------------------------------------------------------------------
R = AddPartitionsToTxnResponse


def _topic_results(
    errors_by_partition: dict[tuple[str, int], int],
) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in errors_by_partition.items():
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=code)
        )
    return [
        R.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=results)
        for topic, results in by_topic.items()
    ]


def _missing_partitions(
    ctx: RequestContext, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], int] | None:
    """Kafka fails the whole request when a partition is not in the
    metadata: UNKNOWN_TOPIC_OR_PARTITION for those, OPERATION_NOT_ATTEMPTED
    for the others. None when every partition exists."""
    image = ctx.broker.metadata_image
    missing = {tp for tp in partitions if image.partition(*tp) is None}
    if not missing:
        return None
    return {
        tp: E.UnknownTopicOrPartitionException.code
        if tp in missing
        else E.OperationNotAttemptedException.code
        for tp in partitions
    }


async def _add_partitions(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[tuple[str, int]],
    verify_only: bool,
    client_transaction_version: int,
) -> dict[tuple[str, int], int]:
    """The error of each partition of one transaction."""
    if not _may_write(ctx, transactional_id):
        return dict.fromkeys(partitions, E.TransactionalIdAuthorizationException.code)
    denied = {
        tp for tp in partitions if not ctx.authorize(ACL_OPERATION_WRITE, ACL_RESOURCE_TOPIC, tp[0])
    }
    if denied:
        return {
            tp: E.TopicAuthorizationException.code
            if tp in denied
            else E.OperationNotAttemptedException.code
            for tp in partitions
        }
    failed = _missing_partitions(ctx, partitions)
    if failed is not None:
        return failed
    runtime = ctx.broker.transaction_coordinator
    code = runtime.check_coordinator(transactional_id) if transactional_id else 0
    if code:
        return dict.fromkeys(partitions, code)
    coordinator = runtime.coordinator
    if verify_only:
        verified: dict[tuple[str, int], int] = coordinator.handle_verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
        return verified
    code = await _run(
        runtime,
        coordinator.handle_add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            _now_ms(),
            client_transaction_version,
        ),
    )
    return dict.fromkeys(partitions, code)


def _partitions_of(
    topics: Iterable[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic],
) -> list[tuple[str, int]]:
    # dict.fromkeys: a partition named twice is one partition, in order.
    return list(
        dict.fromkeys((topic.name, index) for topic in topics for index in topic.partitions)
    )


async def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    version = ctx.api_version
    if version < 4:
        results = await _add_partitions(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            _partitions_of(request.v3_and_below_topics),
            False,
            TV_0,
        )
        results = {tp: _fenced_below(version, 2, code) for tp, code in results.items()}
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(results))
    # From partition leaders (KIP-890): the transactions of many producers.
    # A leader adds partitions itself only for transaction version 2 clients.
    ctx.authorize_cluster(ACL_OPERATION_CLUSTER_ACTION)
    level = ctx.broker.transaction_coordinator.coordinator.state.transaction_version_level
    answers = await asyncio.gather(
        *(
            _add_partitions(
                ctx,
                transaction.transactional_id,
                transaction.producer_id,
                transaction.producer_epoch,
                _partitions_of(transaction.topics),
                transaction.verify_only,
                TV_2 if level >= TV_2 else TV_0,
            )
            for transaction in request.transactions
        )
    )
    return R(
        throttle_time_ms=0,
        error_code=0,
        results_by_transaction=[
            R.AddPartitionsToTxnResult(
                transactional_id=transaction.transactional_id, topic_results=_topic_results(results)
            )
            for transaction, results in zip(request.transactions, answers)
        ],
    )


def _add_partitions_error(
    ctx: RequestContext, request: AddPartitionsToTxnRequest, error: E.KafkaError
) -> AddPartitionsToTxnResponse:
    if ctx.api_version < 4:
        return R(
            throttle_time_ms=0,
            results_by_topic_v3_and_below=_topic_results(
                dict.fromkeys(_partitions_of(request.v3_and_below_topics), error.code)
            ),
        )
    return R(throttle_time_ms=0, error_code=error.code, results_by_transaction=[])


# -- AddOffsetsToTxn -----------------------------------------------------------------------
async def handle_add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    runtime = ctx.broker.transaction_coordinator
    transactional_id = request.transactional_id
    if not _may_write(ctx, transactional_id):
        code = E.TransactionalIdAuthorizationException.code
    elif not ctx.authorize(ACL_OPERATION_READ, ACL_RESOURCE_GROUP, request.group_id):
        code = E.GroupAuthorizationException.code
    else:
        code = runtime.check_coordinator(transactional_id) if transactional_id else 0
    if not code:
        code = await _run(
            runtime,
            runtime.coordinator.handle_add_offsets(
                transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
                _now_ms(),
            ),
        )
    return AddOffsetsToTxnResponse(
        throttle_time_ms=0, error_code=_fenced_below(ctx.api_version, 2, code)
    )


# -- EndTxn --------------------------------------------------------------------------------
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    version = ctx.api_version
    runtime = ctx.broker.transaction_coordinator
    transactional_id = request.transactional_id
    code = (
        E.TransactionalIdAuthorizationException.code
        if not _may_write(ctx, transactional_id)
        else runtime.check_coordinator(transactional_id)
        if transactional_id
        else 0
    )
    if code:
        return EndTxnResponse(throttle_time_ms=0, error_code=_fenced_below(version, 2, code))
    answer = await _run(
        runtime,
        runtime.coordinator.handle_end_transaction(
            transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            TV_2 if version >= 5 else TV_0,
            _now_ms(),
        ),
    )
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=_fenced_below(version, 2, answer.error_code),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )


# -- DescribeTransactions / ListTransactions ----------------------------------------------
def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    runtime = ctx.broker.transaction_coordinator
    states: list[DescribeTransactionsResponse.TransactionState] = []
    for transactional_id in request.transactional_ids:
        code = runtime.check_coordinator(transactional_id) if transactional_id else 0
        if not ctx.authorize(
            ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TRANSACTIONAL_ID, transactional_id
        ):
            code = E.TransactionalIdAuthorizationException.code
        if code:
            states.append(
                DescribeTransactionsResponse.TransactionState(
                    transactional_id=transactional_id, error_code=code
                )
            )
            continue
        state: DescribeTransactionsResponse.TransactionState
        state = runtime.coordinator.handle_describe_transactions(transactional_id)
        # Only the partitions of topics the principal may describe (Kafka's
        # handleDescribeTransactionsRequest).
        state.topics = [
            t
            for t in state.topics or ()
            if ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, t.topic)
        ]
        states.append(state)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def handle_list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    runtime = ctx.broker.transaction_coordinator
    # Every partition this broker leads, loaded before it is listed.
    runtime.load_all()
    version = ctx.api_version
    response: ListTransactionsResponse = runtime.coordinator.handle_list_transactions(
        request.state_filters,
        request.producer_id_filters,
        request.duration_filter if version >= 1 else -1,
        request.transactional_id_pattern if version >= 2 else None,
        _now_ms(),
    )
    response.throttle_time_ms = 0
    # Only the transactions the principal may describe are listed.
    response.transaction_states = [
        t
        for t in response.transaction_states
        if ctx.authorize(ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TRANSACTIONAL_ID, t.transactional_id)
    ]
    return response


def register(apis: ApiRegistry) -> None:
    key = api_keys.BY_NAME
    # Over producer_id_apis' handler, which keeps the idempotent producers.
    apis.register(
        key["InitProducerId"].key,
        handle_init_producer_id,
        error_response=lambda ctx, request, error: _init_error(error.code),
    )
    apis.register(
        key["AddPartitionsToTxn"].key,
        handle_add_partitions_to_txn,
        error_response=_add_partitions_error,
    )
    apis.register(
        key["AddOffsetsToTxn"].key,
        handle_add_offsets_to_txn,
        error_response=lambda ctx, request, error: AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=error.code
        ),
    )
    apis.register(
        key["EndTxn"].key,
        handle_end_txn,
        error_response=lambda ctx, request, error: EndTxnResponse(
            throttle_time_ms=0, error_code=error.code
        ),
    )
    apis.register(
        key["DescribeTransactions"].key,
        handle_describe_transactions,
        error_response=lambda ctx, request, error: DescribeTransactionsResponse(
            throttle_time_ms=0,
            transaction_states=[
                DescribeTransactionsResponse.TransactionState(
                    transactional_id=t, error_code=error.code
                )
                for t in request.transactional_ids
            ],
        ),
    )
    apis.register(
        key["ListTransactions"].key,
        handle_list_transactions,
        error_response=lambda ctx, request, error: ListTransactionsResponse(
            throttle_time_ms=0, error_code=error.code
        ),
    )
