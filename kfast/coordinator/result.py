"""CoordinatorResult: what a coordinator's handler returns (Kafka's
CoordinatorResult).

A handler decides and returns the response together with the records that
carry its change, as record objects (key, value; None for a tombstone); it
does not write them itself. The coordinator serializes the records, appends
them as one batch to the group's partition, and only once the append is
committed replays the same objects into its state and completes the
response -- so the log is the one source of truth and loading a partition
(replaying its log) rebuilds what the handler's result applied. The objects,
not their bytes, are replayed: an encoding may drop a field (an offset
commit with an expire timestamp is written in the v1 format, which has no
leader epoch) that the state keeps, as Kafka's runtime replays the objects it
serialized.

``error_response(code)``: called once when the append fails with that
error code, the response then (Kafka completes the handler's future
exceptionally and the API layer maps the exception); nothing is replayed.
A result applied at once (``replay`` False) also marks there what it could
not write, as Kafka's runtime reverts the state to its last snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

Response = TypeVar("Response")
Record = TypeVar("Record")


class CoordinatorResult(NamedTuple, Generic[Response, Record]):
    records: list[Record]
    response: Response
    error_response: Callable[[int], Response]
    # Kafka's replayRecords: False when the handler has already applied the
    # records' change to the state (a KIP-848 heartbeat changes the group as
    # it decides, the way Kafka's runtime replays a result's records before
    # the append); a later replay of them could undo a newer change.
    replay: bool = True


class ResultRunner(Protocol[Record]):
    """What runs a manager's results: run(key, result, callback) appends the
    result's records as one batch to the partition ``key`` maps to, then
    calls ``callback`` with its response (or its error_response)."""

    def __call__(
        self,
        key: str,
        result: CoordinatorResult[Response, Record],
        callback: Callable[[Response], None],
        /,
    ) -> None: ...


def code_response(code: int) -> int:
    """The error_response of a write answered by its error code alone."""
    return code
