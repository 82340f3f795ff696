"""Delayed operations and the purgatory that holds them until they can finish.

A request that cannot be answered yet (a produce with acks=-1 waiting for
the ISR, a fetch waiting for fetch.min.bytes, a JoinGroup waiting for the
other members, a member's heartbeat deadline) becomes a DelayedOperation.
Its purgatory watches it under one or more keys (a partition, a group, a
member) and keeps its timeout in the timer. It leaves the purgatory exactly
once, by whichever comes first:

* completion: an event on one of its keys (high watermark moved, records
  appended, member joined) makes the code that caused it call
  ``purgatory.check_and_complete(key)``, which asks each watched operation
  ``try_complete()``;
* expiry: its delay elapses, the timer calls ``run()``, which forces it to
  complete and then calls ``on_expiration()``.

The contract for subclasses (DelayedProduce, DelayedFetch, DelayedJoin,
DelayedHeartbeat, ...):

* ``try_complete()`` checks the operation's condition. If it holds, it
  returns ``self.force_complete()``; otherwise it returns False and changes
  nothing. It may be called many times, including after completion by
  someone else (force_complete then returns False).
* ``on_complete()`` builds and sends the response. It runs exactly once,
  from force_complete(), whether the operation completed or expired.
* ``on_expiration()`` runs after on_complete() when the completion was a
  timeout (metrics, logging); never otherwise.

Example, a heartbeat deadline completed by the member's next heartbeat::

    class DelayedHeartbeat(DelayedOperation):
        def __init__(self, coordinator, member, session_timeout_ms):
            super().__init__(session_timeout_ms)
            self.coordinator = coordinator
            self.member = member

        def try_complete(self):
            if self.member.heartbeat_satisfied:
                return self.force_complete()
            return False

        def on_complete(self):
            pass

        def on_expiration(self):
            self.coordinator.on_member_session_expired(self.member)

    heartbeats = DelayedOperationPurgatory("Heartbeat", timer)
    heartbeats.try_complete_else_watch(
        DelayedHeartbeat(coordinator, member, 10_000), [member.key])
    # on each heartbeat:
    member.heartbeat_satisfied = True
    heartbeats.check_and_complete(member.key)

Everything runs on the event loop's thread, so unlike Kafka's purgatory
there are no locks and no reaper thread: the SystemTimer expires
operations from the loop, and completed operations are purged from watch
lists as new ones are watched.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "Timer"]


class TimerHandle(Protocol):
    """A scheduled callback (kfast._ext.timer.TimerTaskEntry in the broker)."""

    def cancel(self) -> bool:
        """True if the callback was still pending (it will not run now)."""


class Timer(Protocol):
    """What a purgatory needs from its timer: kfast.server_common.timer.SystemTimer
    in the broker; a TimingWheel with a manual clock works too."""

    def schedule(self, delay_ms: int, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback()`` ``delay_ms`` from now."""

    def now_ms(self) -> int:
        """The clock ``schedule`` adds its delay to, in whole ms."""

    def add(self, expiration_ms: int, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback()`` at ``expiration_ms`` of that clock."""


class DelayedOperation(abc.ABC):
    """An operation that completes on an event or after ``delay_ms``."""

    __slots__ = ("delay_ms", "_completed", "_timer_entry", "_purgatory")

    #: Non-zero: the timeout is rounded up to the next multiple of this many
    #: ms of the timer's clock, so operations expiring close together share
    #: one wake-up of the loop (DelayedFetch).
    expiry_step_ms: int = 0

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._completed = False
        self._timer_entry: TimerHandle | None = None
        # Set by DelayedOperationPurgatory.watch() before it schedules the
        # timeout, so an operation with a timer entry always has one.
        self._purgatory: DelayedOperationPurgatory | None = None

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """If the condition holds, return self.force_complete(); else False."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Complete the operation (send the response); runs exactly once."""

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Runs after on_complete() when the operation timed out."""

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call did it."""
        if self._completed:
            return False
        self._completed = True
        self.cancel()
        self.on_complete()
        return True

    def cancel(self) -> bool:
        """Remove the pending timeout without completing the operation
        (Kafka's DelayedOperation.cancel); True if one was pending."""
        entry = self._timer_entry
        if entry is None:
            return False
        self._timer_entry = None
        if not entry.cancel():
            return False
        purgatory = self._purgatory
        assert purgatory is not None  # set before the timer entry (see __init__)
        purgatory._delayed_count -= 1
        return True

    def run(self) -> None:
        """The timer's callback: the delay elapsed."""
        self._timer_entry = None
        purgatory = self._purgatory
        assert purgatory is not None  # only a watched operation has a timeout
        purgatory._delayed_count -= 1
        if self.force_complete():
            self.on_expiration()


class DelayedOperationPurgatory:
    """Watch lists by key plus timeouts for one kind of DelayedOperation.

    ``timer`` may be shared by several purgatories (the broker has one
    SystemTimer); ``delayed()`` counts this purgatory's operations only.
    ``purge_interval``: once more than this many operations are estimated
    to be completed but still sitting in some watch list (an operation
    completed through one key stays in its other keys' lists, an expired
    one in all of them), every watch list is swept.
    """

    def __init__(self, name: str, timer: Timer, purge_interval: int = 1000) -> None:
        self.name = name
        self.purge_interval = purge_interval
        self._timer = timer
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        # Kafka's estimate of the operations in watch lists: +1 per watched
        # operation, reset to delayed() at each purge. Minus delayed(), it
        # estimates how many completed operations linger in watch lists.
        self._estimated_total = 0
        self._delayed_count = 0
        self._shutdown = False

    def try_complete_else_watch(
        self, operation: DelayedOperation, watch_keys: Iterable[Hashable]
    ) -> bool:
        """Complete ``operation`` now if it can; else watch it under every
        key and start its timeout. True iff it completed in this call.

        The second try_complete() after watching closes the gap in which
        the awaited event happens between the first try and the watch: it
        would call check_and_complete() before the operation is watched.
        """
        keys = self._watchable(operation, watch_keys)
        if operation.try_complete():
            return True
        self._add_watches(operation, keys)
        if operation.try_complete():
            return True
        self._schedule(operation)
        return False

    def watch(self, operation: DelayedOperation, watch_keys: Iterable[Hashable]) -> None:
        """Watch ``operation`` under every key and start its timeout, without
        trying it first: for a caller that has just found its condition false
        on the loop's thread, with nothing in between that could have made
        it true (everything that completes operations runs on that thread,
        so the gap try_complete_else_watch closes cannot open). A fetch
        already read its partitions; trying again would read them twice more.
        """
        self._add_watches(operation, self._watchable(operation, watch_keys))
        self._schedule(operation)

    def _watchable(
        self, operation: DelayedOperation, watch_keys: Iterable[Hashable]
    ) -> list[Hashable]:
        """The keys, once ``operation`` is known to be new to every purgatory
        and this one is running."""
        if self._shutdown:
            raise RuntimeError(f"purgatory {self.name} is shut down")
        # A list is taken as it is (a fetch's ten partition keys, built for
        # this call); any other iterable is copied once.
        keys = watch_keys if type(watch_keys) is list else list(watch_keys)
        if not keys:
            raise ValueError("an operation needs at least one watch key")
        if operation._purgatory is not None or operation._completed:
            # Its timeout would be scheduled twice, or after completion.
            raise ValueError("operation was already handed to a purgatory")
        return keys

    def _add_watches(self, operation: DelayedOperation, keys: list[Hashable]) -> None:
        for key in keys:
            if operation._completed:
                break
            watchers = self._watchers.get(key)
            if watchers is None:
                self._watchers[key] = [operation]
            else:
                watchers.append(operation)
        self._estimated_total += 1

    def _schedule(self, operation: DelayedOperation) -> None:
        """Start the timeout of a watched operation, then purge if completed
        operations have piled up in watch lists."""
        if not operation._completed:
            operation._purgatory = self
            timer = self._timer
            step = operation.expiry_step_ms
            if step:
                deadline = timer.now_ms() + operation.delay_ms
                entry = timer.add(deadline + (-deadline) % step, operation.run)
            else:
                entry = timer.schedule(operation.delay_ms, operation.run)
            operation._timer_entry = entry
            self._delayed_count += 1
        if self._estimated_total - self._delayed_count > self.purge_interval:
            # Reset first, as Kafka does: operations completed while
            # purging make the next estimate slightly high, never low.
            self._estimated_total = self._delayed_count
            self.purge_completed()

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched under ``key``; return
        how many this call completed. Completed operations leave the list."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        completed = 0
        # Iterate a snapshot but leave the live list intact until the end: a
        # completion may re-enter (watch new operations under this key, or
        # check it again) and must see every operation still waiting.
        for operation in watchers.copy():
            if not operation._completed and operation.try_complete():
                completed += 1
        self._keep_pending(key, watchers)
        return completed

    def _keep_pending(self, key: Hashable, watchers: list[DelayedOperation]) -> int:
        pending = [operation for operation in watchers if not operation._completed]
        removed = len(watchers) - len(pending)
        if pending:
            watchers[:] = pending
        elif self._watchers.get(key) is watchers:
            del self._watchers[key]
        return removed

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list; return how many
        watch-list entries were removed."""
        purged = 0
        for key, watchers in list(self._watchers.items()):
            purged += self._keep_pending(key, watchers)
        return purged

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching ``key`` and cancel the timeouts of its operations
        without completing them (for a group or member that is gone).
        Return the operations that were watched under it."""
        watchers = self._watchers.pop(key, None)
        if watchers is None:
            return []
        for operation in watchers:
            operation.cancel()
        return watchers

    def watched(self, key: Hashable | None = None) -> int:
        """Watch-list entries under ``key`` (all keys if None). An
        operation watched under several keys counts once per key, and a
        completed one counts until it is purged, as in Kafka."""
        if key is not None:
            return len(self._watchers.get(key, ()))
        return sum(len(watchers) for watchers in self._watchers.values())

    def pending(self, key: Hashable) -> int:
        """Operations watched under ``key`` that have not completed: those an
        event on ``key`` would try now."""
        return sum(1 for operation in self._watchers.get(key, ()) if not operation._completed)

    def waiting(self) -> list[DelayedOperation]:
        """The operations watched here that have not completed, each once."""
        seen: dict[int, DelayedOperation] = {}
        for watchers in self._watchers.values():
            for operation in watchers:
                if not operation._completed:
                    seen[id(operation)] = operation
        return list(seen.values())

    def delayed(self) -> int:
        """Operations of this purgatory whose timeout is pending."""
        return self._delayed_count

    def shutdown(self) -> None:
        """Cancel every pending timeout and forget every watch list, without
        completing anything. The timer itself belongs to its owner."""
        self._shutdown = True
        for watchers in self._watchers.values():
            for operation in watchers:
                operation.cancel()
        self._watchers.clear()

    def __repr__(self) -> str:
        return (
            f"<DelayedOperationPurgatory {self.name} keys={len(self._watchers)}"
            f" delayed={self._delayed_count}>"
        )
