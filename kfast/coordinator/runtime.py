"""CoordinatorRuntime: what the group and the transaction coordinators share
to run inside a broker (the part of Kafka's CoordinatorRuntime kfast needs).

A coordinator keeps its state in the partitions of an internal topic
(__consumer_offsets, __transaction_state) and serves the keys of the
partitions this broker leads. The runtime knows the broker only through a
PartitionWriter (kfast.coordinator.partition_writer) for that topic.

* Ownership: a key belongs to one partition; this broker coordinates it
  while it leads that partition. Otherwise requests get NOT_COORDINATOR
  (the client looks the coordinator up again), or COORDINATOR_NOT_AVAILABLE
  while the partition does not exist or has no leader.
* Loading: a partition this broker leads is replayed up to its log end
  offset (latest record per key wins, tombstones delete, so an uncompacted
  log gives the same state) when a request asks for it, when the broker
  starts, or when the runtime is told the leadership changed; a new leader
  epoch means loading again (another broker wrote meanwhile). The replay
  runs on the loop in slices of LOAD_SLICE_MS, a batch at a time: a small
  partition loads within the request that asked for it; a large one goes on
  in later loop iterations (call_soon), so the loop keeps serving, and its
  keys are answered COORDINATOR_LOAD_IN_PROGRESS (which clients retry) until
  it is loaded, as Kafka answers while its loader thread replays.
* Writing: a coordinator's records go out as one uncompressed record batch
  per call, appended as leader with acks=-1; the coordinator hears back only
  when the high watermark covers the batch. ``coordinator_error`` maps the
  append error to what Kafka's coordinators answer.

A subclass says what loading means for its coordinator: ``_begin_load``,
``_replay_batch``, ``_complete_load`` and ``_unload_partition``.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator

from kfast.coordinator.partition_writer import CoordinatorReplica, PartitionWriter
from kfast.protocol import errors as E
from kfast.records import RecordBatch, RecordBatchBuilder, iter_batches

logger = logging.getLogger(__name__)

# How long one slice of a partition load may hold the event loop.
LOAD_SLICE_MS = 20.0

# Append errors -> what a coordinator answers (Kafka's CoordinatorRuntime,
# GroupMetadataManager and TransactionStateManager agree on these).
_APPEND_ERRORS = {
    E.UnknownTopicOrPartitionException.code: E.CoordinatorNotAvailableException.code,
    E.NotEnoughReplicasException.code: E.CoordinatorNotAvailableException.code,
    E.NotEnoughReplicasAfterAppendException.code: E.CoordinatorNotAvailableException.code,
    # REQUEST_TIMED_OUT: a timed-out append is retriable for the client.
    E.TimeoutException.code: E.CoordinatorNotAvailableException.code,
    E.NotLeaderOrFollowerException.code: E.NotCoordinatorException.code,
    E.KafkaStorageException.code: E.NotCoordinatorException.code,
}
# What differs by coordinator: a batch too large for the partition.
_TOO_LARGE = frozenset(
    {
        E.RecordTooLargeException.code,
        E.RecordBatchTooLargeException.code,
        E.InvalidFetchSizeException.code,
    }
)


def coordinator_error(
    append_error: int, too_large: int = E.UnknownServerException.code, other: int | None = None
) -> int:
    """The error a coordinator answers for an append that failed with
    ``append_error`` (0 stays 0). ``too_large``: the answer for a batch over
    the size limits (an offset commit's is INVALID_COMMIT_OFFSET_SIZE);
    ``other``: the answer for any other error, None to pass it through (the
    transaction coordinator does, the group coordinator answers
    UNKNOWN_SERVER_ERROR)."""
    if append_error == 0:
        return 0
    mapped = _APPEND_ERRORS.get(append_error)
    if mapped is not None:
        return mapped
    if append_error in _TOO_LARGE:
        return too_large
    return append_error if other is None else other


def keyed_records(batch: RecordBatch) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of each keyed record of a data batch; nothing
    for a control batch (a transaction marker holds no coordinator record)."""
    if batch.is_control:
        return
    for record in batch:
        if record.key is not None:
            yield (
                record.offset,
                bytes(record.key),
                None if record.value is None else bytes(record.value),
            )


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class _PartitionLoad:
    """A partition being replayed: where the next slice starts."""

    __slots__ = (
        "index",
        "partition",
        "offset",
        "end_offset",
        "leader_epoch",
        "records",
        "began",
        "handle",
    )

    def __init__(self, index: int, partition: CoordinatorReplica):
        self.index = index
        self.partition = partition
        self.offset = partition.log.log_start_offset
        # To the log end, not the high watermark (Kafka's CoordinatorLoader):
        # a new leader's high watermark waits for its followers' first
        # fetches, but everything in its log was in sync and is what the
        # partition holds from now on.
        self.end_offset = partition.log.log_end_offset
        self.leader_epoch = getattr(partition, "leader_epoch", -1)
        self.records = 0
        self.began = time.perf_counter()
        self.handle: asyncio.Handle | None = None


class CoordinatorRuntime(abc.ABC):
    """``topic``: the internal topic's name (for logs); ``partitions``: its
    PartitionWriter on the hosting broker; ``load_buffer_size``: bytes read
    per step of a load (offsets.load.buffer.size,
    transaction.state.log.load.buffer.size)."""

    def __init__(
        self, topic: str, num_partitions: int, load_buffer_size: int, partitions: PartitionWriter
    ):
        self.topic = topic
        self.num_partitions = num_partitions
        self.load_buffer_size = load_buffer_size
        self.partitions = partitions
        self.loaded: set[int] = set()
        # The leader epoch each loaded partition was loaded in.
        self._loaded_epochs: dict[int, int] = {}
        self.loading: dict[int, _PartitionLoad] = {}
        self._stopped = False

    # -- what a coordinator adds -------------------------------------------------------
    def _begin_load(self, index: int, leader_epoch: int) -> None:
        """A load of partition ``index`` starts (its records follow)."""

    @abc.abstractmethod
    def _replay_batch(self, index: int, batch: RecordBatch) -> int:
        """Apply one batch of a loading partition (``keyed_records`` gives
        its records); returns the records applied."""

    def _complete_load(self, index: int, leader_epoch: int) -> None:
        """Every record of partition ``index`` is applied: it serves now."""

    def _unload_partition(self, index: int) -> None:
        """Forget what partition ``index`` held (loaded or half-loaded)."""

    # -- ownership ---------------------------------------------------------------------
    def check_coordinator_partition(self, index: int) -> int:
        """0 when this broker coordinates partition ``index`` (loaded), else
        the error code for the request. Starts the load when needed."""
        if self._stopped:
            return E.CoordinatorNotAvailableException.code
        partition = self.partitions.replica(index)
        if partition is None:
            leader = self.partitions.metadata_leader(index)
            if leader is None:
                return E.CoordinatorNotAvailableException.code
            if leader != self.partitions.node_id:
                return E.NotCoordinatorException.code
            # Ours in the metadata, its log not created yet: Kafka's
            # "loading" answer, which clients retry.
            return E.CoordinatorLoadInProgressException.code
        if not partition.is_leader:
            if index in self.loaded or index in self.loading:
                self._unload(index)
            return E.NotCoordinatorException.code
        leader_epoch = getattr(partition, "leader_epoch", -1)
        load = self.loading.get(index)
        if load is not None:
            if load.leader_epoch == leader_epoch:
                return E.CoordinatorLoadInProgressException.code
            self._unload(index)
        if index in self.loaded and self._loaded_epochs.get(index) != leader_epoch:
            self._unload(index)
        if index not in self.loaded and not self._load(index, partition):
            return E.CoordinatorLoadInProgressException.code
        return 0

    def load_all(self) -> None:
        """Load every partition this broker leads and unload those it no
        longer leads (at start, and when the leadership changed)."""
        for index in range(self.num_partitions):
            if (
                index in self.loaded
                or index in self.loading
                or self.partitions.replica(index) is not None
            ):
                self.check_coordinator_partition(index)

    def _load(self, index: int, partition: CoordinatorReplica) -> bool:
        """Start replaying a partition: True if it is loaded already (its
        first slice covered it), False while it goes on in later slices."""
        load = self.loading[index] = _PartitionLoad(index, partition)
        self._begin_load(index, load.leader_epoch)
        return self._load_slice(load)

    def _load_slice(self, load: _PartitionLoad) -> bool:
        load.handle = None
        if self._stopped or self.loading.get(load.index) is not load:
            return False
        if not load.partition.is_leader:
            self._unload(load.index)
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None  # no loop to come back on (a caller outside the broker)
        deadline = time.perf_counter() + LOAD_SLICE_MS / 1000 if loop is not None else float("inf")
        try:
            finished = self._replay_until(load, deadline)
        except Exception:
            logger.exception("loading %s-%d failed", self.topic, load.index)
            # What it replayed goes; the next request starts over.
            self._unload(load.index)
            return False
        if not finished:
            # Only a load with a loop to come back on stops early (without
            # one the deadline is infinite).
            assert loop is not None
            load.handle = loop.call_soon(self._load_slice, load)
            return False
        del self.loading[load.index]
        self.loaded.add(load.index)
        self._loaded_epochs[load.index] = load.leader_epoch
        logger.info(
            "loaded %d records of %s-%d in %.1f ms",
            load.records,
            self.topic,
            load.index,
            (time.perf_counter() - load.began) * 1000,
        )
        self._complete_load(load.index, load.leader_epoch)
        return True

    def _replay_until(self, load: _PartitionLoad, deadline: float) -> bool:
        """Replay whole batches from ``load.offset`` until the end offset
        (True) or, after at least one batch, the deadline (False)."""
        log = load.partition.log
        while load.offset < load.end_offset:
            info = log.read(load.offset, self.load_buffer_size, load.end_offset, True)
            if info.records is None:
                return True
            data = info.records.read()
            start = load.offset
            for batch in iter_batches(data, allow_partial=True):
                load.records += self._replay_batch(load.index, batch)
                load.offset = batch.last_offset + 1
                if time.perf_counter() >= deadline and load.offset < load.end_offset:
                    return False
            if load.offset <= start:
                return True
        return True

    def _unload(self, index: int) -> None:
        self.loaded.discard(index)
        self._loaded_epochs.pop(index, None)
        load = self.loading.pop(index, None)
        if load is not None and load.handle is not None:
            load.handle.cancel()
        self._unload_partition(index)

    # -- writing -----------------------------------------------------------------------
    def append(
        self,
        index: int,
        records: Iterable[tuple[bytes, bytes | None]],
        timeout_ms: int,
        on_committed: Callable[[int], None],
        builder: RecordBatchBuilder | None = None,
    ) -> None:
        """Append ``records`` ((key, value) pairs) to partition ``index`` as
        one batch (``builder``: a transactional one) with acks=-1 and call
        ``on_committed(append_error)``: 0 once replicated, else the produce
        error (raw; see coordinator_error)."""
        if builder is None:
            builder = RecordBatchBuilder(0)
        now = wall_clock_ms()
        for key, value in records:
            builder.append(now, key, value)

        def committed(append_error: int) -> None:
            if append_error:
                logger.warning(
                    "appending to %s-%d failed: %s",
                    self.topic,
                    index,
                    E.for_code(append_error).__name__,
                )
            on_committed(append_error)

        self.partitions.append(index, builder.build(), timeout_ms, committed)

    # -- life cycle --------------------------------------------------------------------
    def _stop_loading(self) -> None:
        self._stopped = True
        for load in self.loading.values():
            if load.handle is not None:
                load.handle.cancel()
        self.loading.clear()
