"""ControllerResult: what a control manager's operation returns.

Operations never change state themselves: they read the current state,
decide, and return the response together with the metadata records that
carry the change. The QuorumController appends the records to the metadata
log and only then replays them into the managers, so the log is the one
source of truth and a restart (replaying the log) rebuilds the same state.

One operation's records are one batch of the metadata log, bounded as in
Kafka's QuorumController: an operation that would write more than
MAX_RECORDS_PER_USER_OP records raises BoundedListTooLongException, which the
controller answers with POLICY_VIOLATION.
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

from kfast.controller.metadata.records import MetadataRecord

T = TypeVar("T")


class ControllerResult(NamedTuple, Generic[T]):
    response: T
    records: list[MetadataRecord]


# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP (= MAX_RECORDS_PER_BATCH);
# ReplicationControlManager.MAX_PARTITIONS_PER_BATCH has the same value.
MAX_RECORDS_PER_USER_OP = 10_000


class BoundedListTooLongException(Exception):
    """Kafka's BoundedListTooLongException: an operation would produce more
    than MAX_RECORDS_PER_USER_OP records (not a KafkaError: the controller
    turns it into PolicyViolationException for the whole request)."""


def check_records_bound(count: int) -> None:
    """Raise BoundedListTooLongException if ``count`` records are too many
    for one operation."""
    if count > MAX_RECORDS_PER_USER_OP:
        raise BoundedListTooLongException(
            f"Cannot add {count} records to one batch: the maximum is {MAX_RECORDS_PER_USER_OP}"
        )
