"""InitProducerId v6's checks before the transaction coordinator (Kafka's
KafkaApis.handleInitProducerIdRequest): WRITE on the transactional id, and
for enable2Pc also TWO_PHASE_COMMIT; keepPreparedTxn while
transaction.two.phase.commit.enable is false is refused there too."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kfast.protocol import InitProducerIdRequest
from kfast.protocol import errors as E
from kfast.protocol.constants import (
    ACL_OPERATION_TWO_PHASE_COMMIT,
    ACL_OPERATION_WRITE,
    ACL_RESOURCE_TRANSACTIONAL_ID,
)
from kfast.server.transaction_apis import handle_init_producer_id

DENIED = E.TransactionalIdAuthorizationException.code
# A stand-in coordinator that answers NOT_COORDINATOR: reaching it means
# every check before it passed.
PASSED = E.NotCoordinatorException.code


class Context:
    def __init__(self, allowed, version=6, enabled=True):
        self.api_version = version
        self.allowed = set(allowed)
        self.asked = []
        self.broker = SimpleNamespace(
            config={"transaction.two.phase.commit.enable": enabled},
            transaction_coordinator=SimpleNamespace(check_coordinator=lambda _id: PASSED),
        )

    def authorize(self, operation, resource_type, name):
        self.asked.append((operation, resource_type, name))
        return operation in self.allowed


def init(ctx, **fields):
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000, **fields)
    return asyncio.run(handle_init_producer_id(ctx, request)).error_code


@pytest.mark.parametrize(
    "allowed, expected",
    [
        ((), DENIED),
        ((ACL_OPERATION_WRITE,), DENIED),
        ((ACL_OPERATION_TWO_PHASE_COMMIT,), DENIED),
        ((ACL_OPERATION_WRITE, ACL_OPERATION_TWO_PHASE_COMMIT), PASSED),
    ],
)
def test_enable2pc_needs_write_and_two_phase_commit(allowed, expected):
    ctx = Context(allowed)
    assert init(ctx, enable2_pc=True) == expected
    if expected == PASSED:
        assert (ACL_OPERATION_TWO_PHASE_COMMIT, ACL_RESOURCE_TRANSACTIONAL_ID, "tx") in ctx.asked


def test_without_enable2pc_write_is_enough():
    ctx = Context([ACL_OPERATION_WRITE])
    assert init(ctx) == PASSED
    assert all(op != ACL_OPERATION_TWO_PHASE_COMMIT for op, _, _ in ctx.asked)


def test_keep_prepared_txn_refused_while_two_phase_commit_is_disabled():
    everything = [ACL_OPERATION_WRITE, ACL_OPERATION_TWO_PHASE_COMMIT]
    assert init(Context(everything, enabled=False), keep_prepared_txn=True) == DENIED
    assert init(Context(everything, enabled=True), keep_prepared_txn=True) == PASSED


def test_the_fields_mean_nothing_below_v6():
    ctx = Context([ACL_OPERATION_WRITE], version=5, enabled=False)
    assert init(ctx, enable2_pc=True, keep_prepared_txn=True) == PASSED
