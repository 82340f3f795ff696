"""Incremental fetch sessions (KIP-227; Kafka's kafka.server.FetchSession).

A consumer that fetches the same partitions over and over opens a session
with a full fetch (session_id 0, epoch 0); the broker caches the partition
set and answers with a session id. Later fetches send (session_id, epoch
1, 2, ...) and list only partitions whose fetch position changed, plus
forgotten topics; the response lists only partitions with something new
(records, an error, a moved high watermark / last stable offset / log start
offset). Epoch -1 (FINAL) closes a session; session_id 0 with epoch -1 is a
plain sessionless full fetch, as all Fetch v0-v6 are.

``FetchSessionCache.new_context(...)`` turns one request into a context:

* ``FullFetchContext``      full partition list; may have created a session
* ``IncrementalFetchContext`` the session's partitions after this request's changes
* ``SessionErrorContext``   FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH

``context.partitions`` is the ordered list of CachedPartitions to read;
``context.select(results)`` picks what the response carries and records the
state the next incremental response is compared with.

An incremental fetch reads only the session's *ready* partitions, so one
that changes nothing costs O(1) in the session's size, where Kafka re-reads
every partition of the session. A partition is ready when a read of it
could answer something the last one did not: it was added or its fetch
position changed in a request, or the replica manager reported a change to
it (high watermark / last stable offset / log start offset / leadership:
``FetchSessionCache.mark_ready``, through a per-partition index of the
sessions holding it), or its last read had records, an error, or data left
below the high watermark. A read that finds it caught up (no error, no
records, fetch offset at the high watermark) makes it not ready. A session
fetch that has to wait is watched under its FetchSession, one key, instead
of one per partition.

Eviction follows Kafka's FetchSessionCache: with all
max.incremental.fetch.session.cache.slots in use, a new session may replace
the least recently used one if that has been idle for
min.incremental.fetch.session.eviction.ms, or else the smallest one if the
new session has more partitions; otherwise the broker declines (answers
session_id 0 and the client goes on with full fetches).
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from kfast.protocol.constants import INT32_MAX
from kfast.protocol.errors import FetchSessionIdNotFoundException, InvalidFetchSessionEpochException

if TYPE_CHECKING:
    from kfast.server.delayed_fetch import FetchResults
    from kfast.server.replica_manager import FetchPartitionData, PartitionKey

    # [(CachedPartition, what the fetch read for it)], in the session's order.
    FetchSessionResults = list[tuple["CachedPartition", FetchPartitionData]]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's min.incremental.fetch.session.eviction.ms (an internal default).
MIN_EVICTION_MS = 120_000


def next_epoch(epoch: int) -> int:
    # Epochs wrap from int32 max to 1, never to 0 (initial) or -1 (final).
    return 1 if epoch >= INT32_MAX else epoch + 1


class CachedPartition:
    """A partition of a session: what the client asked for and what it was
    last told."""

    __slots__ = (
        "topic",
        "topic_id",
        "partition",
        "fetch_offset",
        "max_bytes",
        "current_leader_epoch",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "sent_log_start_offset",
        "order",
    )

    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID | None,  # None: a request naming topics (Fetch v0-v12)
        partition: int,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.sent_log_start_offset = -1
        # Position in the session's fetch order (FetchSession.place).
        self.order = 0

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.log_start_offset = other.log_start_offset

    def must_respond(self, data: FetchPartitionData) -> bool:
        """Whether an incremental response must carry this partition; records
        the values sent."""
        # A preferred read replica (KIP-392) is always sent, as Kafka does.
        changed = data.size > 0 or data.error_code != 0 or data.preferred_read_replica >= 0
        if data.high_watermark != self.high_watermark:
            self.high_watermark = data.high_watermark
            changed = True
        if data.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = data.last_stable_offset
            changed = True
        if data.log_start_offset != self.sent_log_start_offset:
            self.sent_log_start_offset = data.log_start_offset
            changed = True
        return changed

    def __repr__(self) -> str:
        return f"CachedPartition({self.topic}-{self.partition}@{self.fetch_offset})"


class FetchSession:
    """A session's partitions and which of them are ready. Hashable by
    identity: a waiting incremental fetch is watched under its session."""

    __slots__ = (
        "session_id",
        "privileged",
        "partitions",
        "ready",
        "clock",
        "marked",
        "epoch",
        "created_ms",
        "last_used_ms",
        "_next_order",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: OrderedDict[PartitionKey, CachedPartition],
        now_ms: int,
    ) -> None:
        self.session_id = session_id
        self.privileged = privileged
        self.partitions = partitions  # key -> CachedPartition, in fetch order
        # Partitions the next incremental fetch reads (see the module doc).
        self.ready: set[PartitionKey] = set(partitions)
        # Counts the replica manager's reports (mark); ``marked`` holds the
        # count at each partition's last one, so a read's results can tell
        # whether a report came after the read (see after_read).
        self.clock = 0
        self.marked: dict[PartitionKey, int] = {}
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self._next_order = 0
        for cached in partitions.values():
            self.place(cached)

    @property
    def size(self) -> int:
        return len(self.partitions)

    def place(self, cached: CachedPartition) -> None:
        """Put ``cached`` last in the fetch order (it is already last in
        ``partitions``, or about to be moved there)."""
        cached.order = self._next_order
        self._next_order += 1

    def ready_partitions(self) -> list[CachedPartition]:
        """The ready partitions, in fetch order: O(ready), not O(session)."""
        partitions = self.partitions
        found = [partitions[key] for key in self.ready if key in partitions]
        found.sort(key=_fetch_order)
        return found

    def mark(self, key: PartitionKey) -> None:
        """The replica manager reports a change to ``key``: read it next."""
        self.clock += 1
        self.marked[key] = self.clock
        self.ready.add(key)

    def forget(self, key: PartitionKey) -> None:
        self.ready.discard(key)
        self.marked.pop(key, None)

    def after_read(
        self, cached: CachedPartition, data: FetchPartitionData, read_clock: int
    ) -> None:
        """Ready stays ready unless this read found ``cached`` caught up
        and nothing was reported for it since the read (``read_clock``: the
        session's clock when the read began). A waiting fetch's results are
        applied one loop turn after the read that completed it; an append in
        between marks the partition, and the older read must not unmark it
        (the consumer would never be told of those records).
        The high watermark is the bound either way: a read_committed fetch
        held at a last stable offset below it stays ready (correct, just not
        O(1)), so a session never misses data whatever its isolation."""
        if (
            self.marked.get(cached.key, 0) <= read_clock
            and data.error_code == 0
            and data.size == 0
            and data.preferred_read_replica < 0
            and data.diverging_epoch is None
            and cached.fetch_offset >= data.high_watermark
        ):
            self.ready.discard(cached.key)
        else:
            self.ready.add(cached.key)


def _fetch_order(cached: CachedPartition) -> int:
    return cached.order


class FetchContext:
    session_id = INVALID_SESSION_ID
    error_code = 0
    # A waiting fetch is watched under this (an incremental session fetch)
    # instead of under each partition it read.
    watch_key: FetchSession | None = None
    # The session's clock when the last read began (FetchSession.after_read).
    read_clock = 0

    def __init__(self, partitions: list[CachedPartition]) -> None:
        self.partitions = partitions

    def partitions_to_read(self) -> list[CachedPartition]:
        """What a (re-)read of this fetch covers, asked again at each read."""
        return self.partitions

    def pair(self, results: FetchResults) -> FetchSessionResults:
        """The read's results with their CachedPartitions (the read covered
        ``partitions``, in order)."""
        return [(cached, data) for cached, (_, data) in zip(self.partitions, results)]

    def select(self, results: FetchSessionResults) -> FetchSessionResults:
        """``results``: [(CachedPartition, data)] in ``partitions`` order;
        returns the entries the response carries."""
        return results


class SessionErrorContext(FetchContext):
    def __init__(self, error_code: int) -> None:
        super().__init__([])
        self.error_code = error_code


class FullFetchContext(FetchContext):
    def __init__(self, partitions: list[CachedPartition], session: FetchSession | None) -> None:
        super().__init__(partitions)
        self.session = session
        if session is not None:
            self.session_id = session.session_id

    def partitions_to_read(self) -> list[CachedPartition]:
        if self.session is not None:
            self.read_clock = self.session.clock
        return self.partitions

    def select(self, results: FetchSessionResults) -> FetchSessionResults:
        session = self.session
        if session is not None:
            for cached, data in results:
                cached.must_respond(data)
                session.after_read(cached, data, self.read_clock)
        return results


class IncrementalFetchContext(FetchContext):
    """Reads the session's ready partitions only (see the module doc)."""

    def __init__(self, session: FetchSession) -> None:
        super().__init__(session.ready_partitions())
        self.session = session
        self.session_id = session.session_id
        self.watch_key = session

    def partitions_to_read(self) -> list[CachedPartition]:
        # Partitions made ready while the fetch waited are read too.
        self.read_clock = self.session.clock
        self.partitions = self.session.ready_partitions()
        return self.partitions

    def pair(self, results: FetchResults) -> FetchSessionResults:
        partitions = self.session.partitions
        paired: FetchSessionResults = []
        for request, data in results:
            cached = partitions.get(request.key)
            if cached is not None:  # else forgotten since (a pipelined request)
                paired.append((cached, data))
        return paired

    def select(self, results: FetchSessionResults) -> FetchSessionResults:
        session = self.session
        chosen: FetchSessionResults = []
        for cached, data in results:
            session.after_read(cached, data, self.read_clock)
            if cached.must_respond(data):
                chosen.append((cached, data))
                if data.size:
                    # Partitions that returned data go to the back, so the
                    # response byte budget is shared fairly across fetches.
                    session.partitions.move_to_end(cached.key)
                    session.place(cached)
        return chosen


class FetchSessionCache:
    def __init__(
        self,
        max_entries: int = 1000,
        eviction_ms: int = MIN_EVICTION_MS,
        time_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.time_ms = time_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU order
        # partition -> the sessions holding it, for mark_ready.
        self._holders: dict[PartitionKey, set[FetchSession]] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def total_partitions(self) -> int:
        return sum(s.size for s in self._sessions.values())

    def mark_ready(self, key: PartitionKey) -> Collection[FetchSession]:
        """Something a fetch of ``key`` would see changed (the replica
        manager calls this where it wakes the fetch purgatory): every session
        holding ``key`` reads it next time. Returns those sessions, whose
        waiting fetch, if any, is watched under the session."""
        holders = self.sessions_holding(key)
        for session in holders:
            session.mark(key)
        return holders

    def sessions_holding(self, key: PartitionKey) -> Collection[FetchSession]:
        return self._holders.get(key) or ()

    def _hold(self, session: FetchSession, key: PartitionKey) -> None:
        holders = self._holders.get(key)
        if holders is None:
            self._holders[key] = {session}
        else:
            holders.add(session)

    def _release(self, session: FetchSession, key: PartitionKey) -> None:
        holders = self._holders.get(key)
        if holders is not None:
            holders.discard(session)
            if not holders:
                del self._holders[key]

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: list[CachedPartition],
        forgotten: Iterable[PartitionKey],
        privileged: bool = False,
        sessionless: bool = False,
    ) -> FetchContext:
        """The fetch context for one request. ``sessionless``: a version
        without sessions (Fetch v0-v6)."""
        if sessionless:
            return FullFetchContext(partitions, None)
        if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FullFetchContext(partitions, None)
            ordered = OrderedDict((p.key, p) for p in partitions)
            session = self._create(privileged, ordered)
            return FullFetchContext(list(ordered.values()), session)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionErrorContext(FetchSessionIdNotFoundException.code)
        if session.epoch != epoch:
            return SessionErrorContext(InvalidFetchSessionEpochException.code)
        for key in forgotten:
            if session.partitions.pop(key, None) is not None:
                session.forget(key)
                self._release(session, key)
        for partition in partitions:
            key = partition.key
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = partition
                session.place(partition)
                self._hold(session, key)
            else:
                cached.update_request(partition)
            session.ready.add(key)
        session.epoch = next_epoch(session.epoch)
        self._touch(session)
        return IncrementalFetchContext(session)

    def _touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.time_ms()
        self._sessions.move_to_end(session.session_id)

    def _new_session_id(self) -> int:
        while True:
            candidate = random.randint(1, INT32_MAX)
            if candidate not in self._sessions:
                return candidate

    def _create(
        self, privileged: bool, partitions: OrderedDict[PartitionKey, CachedPartition]
    ) -> FetchSession | None:
        if self.max_entries <= 0:
            return None
        now = self.time_ms()
        if len(self._sessions) >= self.max_entries and not self._evict_one(
            now, privileged, len(partitions)
        ):
            return None
        session = FetchSession(self._new_session_id(), privileged, partitions, now)
        self._sessions[session.session_id] = session
        for key in partitions:
            self._hold(session, key)
        return session

    def _evict_one(self, now: int, privileged: bool, size: int) -> bool:
        lru_id, lru = next(iter(self._sessions.items()))
        if now - lru.last_used_ms >= self.eviction_ms:
            self._evict(lru_id)
            return True
        # Otherwise a bigger (or privileged) newcomer may take the slot of the
        # smallest unprivileged session.
        candidates = [s for s in self._sessions.values() if not s.privileged]
        if not candidates:
            return False
        smallest = min(candidates, key=lambda s: (s.size, s.last_used_ms))
        if privileged or size > smallest.size:
            self._evict(smallest.session_id)
            return True
        return False

    def _evict(self, session_id: int) -> None:
        self.remove(session_id)
        self.evictions += 1

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for key in session.partitions:
                self._release(session, key)
        return session

    def evict_stale(self) -> int:
        """Drop sessions idle for longer than the eviction time (the broker
        runs this periodically so idle sessions do not pin memory)."""
        now = self.time_ms()
        stale = [
            sid for sid, s in self._sessions.items() if now - s.last_used_ms >= self.eviction_ms
        ]
        for sid in stale:
            self._evict(sid)
        return len(stale)
