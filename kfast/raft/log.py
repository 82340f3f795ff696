"""ReplicatedLog: what the Raft core needs of a log, and an in-memory one.

The unit of replication is a batch: the records of one append, all of one
leader epoch, occupying consecutive offsets. A change the controller makes
is one batch, so a replica applies all of it or none of it; log end
offsets, fetch offsets and the high watermark are always batch boundaries.

The leader epoch cache (Kafka's LeaderEpochFileCache) is the list of
(epoch, start offset) pairs, one per epoch that wrote to the log. It answers
``end_offset_for_epoch(e)``: the end of the largest epoch <= e, which is
where a replica that last wrote in epoch ``e`` agrees with this log.

A snapshot ``(end offset, epoch)`` holds the state made by every record
below its end offset; the log may drop those records once the snapshot
exists (its start offset moves up), and a replica that needs them fetches
the snapshot instead.

    log = MemoryReplicatedLog()
    log.append_as_leader(("a", "b"), epoch=1)     # Batch(0, 1, ("a", "b"))
    log.end_offset, log.last_fetched_epoch         # 2, 1
"""

from __future__ import annotations

import json
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class Batch:
    """The records of one append: ``Batch(base_offset, epoch, records,
    is_control)``. A control batch carries Raft's own records
    (LeaderChange); the state machine above skips it.

    A batch read from a log file or a Fetch response also carries ``raw``,
    its bytes as a Kafka v2 record batch (``Batch.of_raw``), and decodes its
    records only when they are first read. The Raft layer moves those bytes
    as they are -- a leader answers a fetch with them, a follower appends
    them -- so a node decodes each record once, for its state machine,
    instead of at every hop (a new broker catching up a 100,000-partition
    metadata log spent seconds per fetch decoding and re-encoding)."""

    __slots__ = ("base_offset", "epoch", "is_control", "raw", "_records", "_count", "_decode")

    def __init__(self, base_offset: int, epoch: int, records: tuple, is_control: bool = False):
        self.base_offset = base_offset
        self.epoch = epoch
        self.is_control = is_control
        self.raw: bytes | None = None
        self._records: tuple | None = records
        self._count = len(records)
        self._decode: Callable[[bytes], tuple] | None = None

    @classmethod
    def of_raw(
        cls,
        base_offset: int,
        epoch: int,
        is_control: bool,
        count: int,
        raw: bytes,
        decode: Callable[[bytes], tuple],
    ) -> Batch:
        """A batch of ``count`` records held as ``raw``; ``decode(raw)``
        gives the records tuple when they are read."""
        batch = cls(base_offset, epoch, (), is_control)
        batch.raw, batch._records, batch._count, batch._decode = raw, None, count, decode
        return batch

    @property
    def records(self) -> tuple:
        records = self._records
        if records is None:
            # Only of_raw leaves the records unset, and it gives both.
            decode, raw = self._decode, self.raw
            if decode is None or raw is None:
                raise AssertionError("a lazy batch without its bytes or decoder")
            records = self._records = decode(raw)
        return records

    @property
    def next_offset(self) -> int:
        return self.base_offset + self._count

    def __len__(self) -> int:
        return self._count

    def _key(self):
        return self.base_offset, self.epoch, self.records, self.is_control

    def __eq__(self, other) -> bool:
        return isinstance(other, Batch) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Batch({self.base_offset}, {self.epoch}, {self.records!r}"
            f"{', True' if self.is_control else ''})"
        )


class LeaderChangeMessage(NamedTuple):
    """The control record a new leader writes first in its epoch (Kafka's
    LeaderChangeMessage, control type 2). Committing it commits every
    record of earlier epochs below it."""

    leader_id: int
    voters: tuple[int, ...]


class ValidOffsetAndEpoch(NamedTuple):
    """Kafka's ValidOffsetAndEpoch: ``kind`` is VALID, DIVERGING (the
    fetcher truncates to ``offset_and_epoch``) or SNAPSHOT (the fetcher
    fetches the snapshot ``offset_and_epoch``)."""

    kind: str
    offset_and_epoch: OffsetAndEpoch


VALID, DIVERGING, SNAPSHOT = "valid", "diverging", "snapshot"


class ReplicatedLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int: ...

    def append_as_leader(
        self, records: Sequence, epoch: int, is_control: bool = False
    ) -> Batch: ...

    def append_as_follower(self, batches: Sequence[Batch]) -> None: ...

    def read(self, start_offset: int, max_batches: int) -> tuple[Batch, ...]: ...

    def truncate_to(self, offset: int) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def flush(self, offset: int | None = None) -> None:
        """Make the log durable below ``offset`` (default: its end).
        Blocking; RaftManager runs it off the event loop, while the loop may
        append -- never while it truncates (RaftClient's rules)."""
        ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None: ...

    def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, data: bytes, kraft_records: tuple = ()
    ) -> None: ...

    def snapshot_kraft_records(self, snapshot_id: OffsetAndEpoch) -> tuple: ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None: ...


def validate_offset_and_epoch(log: ReplicatedLog, offset: int, epoch: int) -> ValidOffsetAndEpoch:
    """Does a replica whose log ends at ``offset`` with a last batch of
    ``epoch`` agree with ``log``? (Kafka's ReplicatedLog.validateOffsetAndEpoch.)"""
    snapshot_id = log.latest_snapshot_id()
    if offset < log.start_offset or (
        snapshot_id is not None and offset == log.start_offset and epoch != snapshot_id.epoch
    ):
        # The records it needs next are only in the snapshot.
        assert snapshot_id is not None, "a log start above 0 needs a snapshot"
        return ValidOffsetAndEpoch(SNAPSHOT, snapshot_id)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return ValidOffsetAndEpoch(DIVERGING, end)
    return ValidOffsetAndEpoch(VALID, OffsetAndEpoch(offset, epoch))


def truncation_offset(log: ReplicatedLog, leader_end: OffsetAndEpoch) -> int:
    """Where a follower's log stops agreeing with a leader that answered
    ``diverging_epoch = leader_end`` (Kafka's truncateToEndOffset)."""
    if leader_end.epoch == 0:
        return min(leader_end.offset, log.end_offset)
    local = log.end_offset_for_epoch(leader_end.epoch)
    if local.epoch == leader_end.epoch:
        return min(local.offset, leader_end.offset)
    return local.offset


def base_epochs(start_offset: int, start_epoch: int) -> list[tuple[int, int]]:
    """The epoch cache of an empty log: the snapshot it starts at, if any."""
    if start_offset == 0 and start_epoch == 0:
        return []
    return [(start_epoch, start_offset)]


def end_offset_for_epoch(
    epochs: Sequence[tuple[int, int]], start_offset: int, end_offset: int, epoch: int
) -> OffsetAndEpoch:
    """ReplicatedLog.end_offset_for_epoch over an epoch cache ``epochs``
    ((epoch, start offset) pairs, the snapshot's first when the log starts
    at one): the start of the epoch after the largest epoch <= ``epoch``."""
    index = bisect_right(epochs, (epoch, float("inf"))) - 1
    if index < 0:
        return OffsetAndEpoch(start_offset, 0)
    found_epoch = epochs[index][0]
    if index + 1 < len(epochs):
        return OffsetAndEpoch(epochs[index + 1][1], found_epoch)
    return OffsetAndEpoch(end_offset, found_epoch)


class _AppendTarget(Protocol):
    """What AppendRules needs of the log it is mixed into."""

    @property
    def end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int: ...

    def _append(self, batch: Batch) -> None: ...


class AppendRules:
    """The append rules every ReplicatedLog enforces (offsets follow on,
    epochs never go back), over the log's own ``_append(batch)``."""

    def append_as_leader(
        self: _AppendTarget, records: Sequence, epoch: int, is_control: bool = False
    ) -> Batch:
        if epoch < self.last_fetched_epoch:
            raise ValueError(f"append in epoch {epoch} after epoch {self.last_fetched_epoch}")
        batch = Batch(self.end_offset, epoch, tuple(records), is_control)
        self._append(batch)
        return batch

    def append_as_follower(self: _AppendTarget, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset != self.end_offset:
                raise ValueError(
                    f"batch at {batch.base_offset} does not follow the log end {self.end_offset}"
                )
            if batch.epoch < self.last_fetched_epoch:
                raise ValueError(
                    f"batch of epoch {batch.epoch} after epoch {self.last_fetched_epoch}"
                )
            self._append(batch)


class MemoryReplicatedLog(AppendRules):
    """A ReplicatedLog in memory. It keeps what ``flush`` made durable
    (``flushed_offset``); the simulator models a crash with
    ``lose_unflushed``, which drops the rest, as a machine that lost power
    would. Truncations and snapshots are durable at once."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self._bases: list[int] = []  # base offsets, for bisect
        self.start_offset = 0
        self._start_epoch = 0
        self.end_offset = 0
        self.epochs: list[tuple[int, int]] = []  # (epoch, start offset)
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.flushed_offset = 0

    @property
    def last_fetched_epoch(self) -> int:
        if self.batches:
            return self.batches[-1].epoch
        return self._start_epoch

    def _append(self, batch: Batch) -> None:
        if not len(batch):
            raise ValueError("empty batch")
        if not self.epochs or batch.epoch > self.epochs[-1][0]:
            self.epochs.append((batch.epoch, batch.base_offset))
        self.batches.append(batch)
        self._bases.append(batch.base_offset)
        self.end_offset = batch.next_offset

    def read(self, start_offset: int, max_batches: int) -> tuple[Batch, ...]:
        index = bisect_right(self._bases, start_offset) - 1
        if index < 0 or start_offset >= self.end_offset:
            return ()
        if self.batches[index].base_offset != start_offset:
            raise ValueError(f"offset {start_offset} is not a batch boundary")
        return tuple(self.batches[index : index + max_batches])

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"truncation to {offset} below the log start {self.start_offset}")
        index = bisect_left(self._bases, offset)
        if index == len(self.batches) or self.batches[index].base_offset != offset:
            raise ValueError(f"offset {offset} is not a batch boundary")
        del self.batches[index:]
        del self._bases[index:]
        self.end_offset = offset
        self.flushed_offset = min(self.flushed_offset, offset)
        self.epochs = [(e, o) for e, o in self.epochs if o < offset] or self._base_epochs()

    def _base_epochs(self) -> list[tuple[int, int]]:
        return base_epochs(self.start_offset, self._start_epoch)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return end_offset_for_epoch(self.epochs, self.start_offset, self.end_offset, epoch)

    def flush(self, offset: int | None = None) -> None:
        target = self.end_offset if offset is None else min(offset, self.end_offset)
        self.flushed_offset = max(self.flushed_offset, target)

    def lose_unflushed(self) -> None:
        """A crash: the batches appended since the last flush are gone."""
        self.truncate_to(max(self.flushed_offset, self.start_offset))

    # -- snapshots -------------------------------------------------------------------------
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self.snapshots) if self.snapshots else None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        return self.snapshots.get(snapshot_id)

    def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, data: bytes, kraft_records: tuple = ()
    ) -> None:
        """A snapshot of the state below ``snapshot_id.offset``, which must be
        a batch boundary of this log with that epoch before it.
        ``kraft_records`` (KRaftVersionRecord, VotersRecord) go into it as
        the key ``"kraft"`` of ``data``, which must then be a JSON object:
        the bytes travel to followers whole, as a snapshot file does."""
        if not self.start_offset <= snapshot_id.offset <= self.end_offset:
            raise ValueError(
                f"snapshot {snapshot_id} outside the log [{self.start_offset}, {self.end_offset}]"
            )
        self.snapshots[snapshot_id] = _embed_kraft_records(data, kraft_records)

    def snapshot_kraft_records(self, snapshot_id: OffsetAndEpoch) -> tuple:
        data = self.snapshots.get(snapshot_id)
        return () if data is None else _embedded_kraft_records(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A follower replaces its whole log with a snapshot fetched from the
        leader: the log then starts and ends at the snapshot's end offset."""
        self.snapshots[snapshot_id] = data
        self.batches.clear()
        self._bases.clear()
        self.start_offset = self.end_offset = self.flushed_offset = snapshot_id.offset
        self._start_epoch = snapshot_id.epoch
        self.epochs = self._base_epochs()

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Drop the batches the snapshot covers, and older snapshots."""
        if snapshot_id not in self.snapshots or snapshot_id.offset <= self.start_offset:
            return
        index = bisect_left(self._bases, snapshot_id.offset)
        if snapshot_id.offset != (
            self.batches[index].base_offset if index < len(self.batches) else self.end_offset
        ):
            raise ValueError(f"snapshot {snapshot_id} does not end at a batch boundary")
        del self.batches[:index]
        del self._bases[:index]
        self.start_offset = snapshot_id.offset
        self.flushed_offset = max(self.flushed_offset, snapshot_id.offset)
        self._start_epoch = snapshot_id.epoch
        # Epochs that ended before the snapshot are answered by the snapshot.
        self.epochs = self._base_epochs() + [
            (e, o)
            for e, o in self.epochs
            if o > snapshot_id.offset or (o == snapshot_id.offset and e > snapshot_id.epoch)
        ]
        for old in [s for s in self.snapshots if s < snapshot_id]:
            del self.snapshots[old]


# -- KRaft records in a MemoryReplicatedLog's snapshots ------------------------------------
# A memory snapshot is whatever its state machine wrote (the simulation's
# are JSON objects); the voter set rides along under "kraft" as
# [["kraft.version", N], ["voters", [[id, directory hex, [[name, host, port]],
# min, max], ...]]]. (A FileReplicatedLog keeps them as Kafka does, in the
# snapshot's header batch.)
def _embed_kraft_records(data: bytes, kraft_records: tuple) -> bytes:
    from kfast.raft.voter_set import KRaftVersionRecord

    if not kraft_records:
        return data
    entries = []
    for record in kraft_records:
        if isinstance(record, KRaftVersionRecord):
            entries.append(["kraft.version", record.kraft_version])
        else:
            entries.append(
                [
                    "voters",
                    [
                        [
                            n.voter_id,
                            n.directory_id.hex,
                            [list(e) for e in n.endpoints],
                            n.min_kraft_version,
                            n.max_kraft_version,
                        ]
                        for n in record.voters.nodes
                    ],
                ]
            )
    state = json.loads(data)
    state["kraft"] = entries
    return json.dumps(state).encode()


def _embedded_kraft_records(data: bytes) -> tuple:
    from kfast.raft.voter_set import Endpoint, KRaftVersionRecord, VoterNode, VoterSet, VotersRecord

    try:
        entries = json.loads(data).get("kraft", [])
    except (ValueError, AttributeError):
        return ()
    records: list[KRaftVersionRecord | VotersRecord] = []
    for kind, value in entries:
        if kind == "kraft.version":
            records.append(KRaftVersionRecord(value))
        else:
            records.append(
                VotersRecord(
                    VoterSet.of(
                        VoterNode(i, uuid.UUID(hex=d), tuple(Endpoint(*e) for e in eps), lo, hi)
                        for i, d, eps, lo, hi in value
                    )
                )
            )
    return tuple(records)
