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
A result applied at once (``replay`` False: its records were replayed
before the append, as Kafka's runtime does, or the handler's change is the
state itself) undoes there what it could not write, as Kafka's runtime
reverts the state to its last snapshot.

A response that other requests complete (a JoinGroup waits for the other
members, a follower's SyncGroup for the leader's) is a ``DeferredResponse``
(Kafka's responseFuture of classicGroupJoin / classicGroupSync): the runner
answers once the records are appended *and* the deferred response is
completed; an append error completes it with ``error_response(code)`` if
nothing completed it first. ``on_append(code)`` (Kafka's appendFuture) is
called once the append is done (0) or failed (its code), before the answer:
the classic group's assignment becomes Stable there, or is reset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

Response = TypeVar("Response")
Record = TypeVar("Record")


class DeferredResponse(Generic[Response]):
    """A response completed later, once (the first ``complete`` wins; later
    ones are ignored, as a CompletableFuture's): the runner registers its
    answer with ``when_complete``, called at once if already complete."""

    __slots__ = ("_done", "_value", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._value: Response | None = None
        self._callbacks: list[Callable[[Response], None]] = []

    @property
    def done(self) -> bool:
        return self._done

    def complete(self, value: Response) -> bool:
        """Complete with ``value``; False if it was complete already."""
        if self._done:
            return False
        self._done, self._value = True, value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)
        return True

    def when_complete(self, callback: Callable[[Response], None]) -> None:
        if self._done:
            callback(self._value)  # type: ignore[arg-type]  # set by complete
        else:
            self._callbacks.append(callback)


class CoordinatorResult(NamedTuple, Generic[Response, Record]):
    records: list[Record]
    response: Response | DeferredResponse[Response]
    error_response: Callable[[int], Response]
    # Kafka's replayRecords: False when the records' change is in the state
    # already (a KIP-848 heartbeat's records are replayed before the append,
    # as Kafka's runtime does; a classic group changes as it decides); a
    # later replay of them could undo a newer change.
    replay: bool = True
    # Kafka's appendFuture: on_append(0) once the records are appended,
    # on_append(code) if the append failed; before the response is answered.
    on_append: Callable[[int], None] | None = None


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
