"""Checkpoint files, each replaced whole (kfast.storage.atomic_file).

    checkpoint := version line, count line, entry line*      (text, '\\n')

Kafka's CheckpointFile format. Offset checkpoints in a log dir
(recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint, cleaner-offset-checkpoint) are version 0 with
entries ``<topic> <partition> <offset>``. A partition's
leader-epoch-checkpoint is version 0 with entries ``<epoch> <startOffset>``.
partition.metadata is ``version: 0`` / ``topic_id: <base64 uuid>``.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterable
from typing import Generic, NamedTuple, TypeVar

from kfast.storage.atomic_file import write_atomically

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"


class CheckpointCorruptException(Exception):
    """A checkpoint file could not be parsed (Kafka: IOException naming the file)."""


# A checkpoint's entry type (one line each).
EntryT = TypeVar("EntryT")


class CheckpointFile(Generic[EntryT]):
    """A versioned list of entries; ``formatter``/``parser`` map entries to lines."""

    def __init__(
        self,
        path: str,
        version: int,
        formatter: Callable[[EntryT], str],
        parser: Callable[[str], EntryT],
    ):
        self.path = path
        self.version = version
        self.formatter = formatter
        self.parser = parser
        # One writer at a time (Kafka's CheckpointFile.write is synchronized):
        # writers share the temp file, so a second concurrent rename would
        # find it gone (ENOENT) and take the log dir offline -- e.g. a leader
        # epoch assigned on the loop while an executor's flush writes it.
        self._lock = threading.Lock()

    def write(self, entries: Iterable[EntryT], sync: bool = True) -> None:
        with self._lock:
            listed = list(entries)
            lines = [str(self.version), str(len(listed))]
            lines += [self.formatter(e) for e in listed]
            write_atomically(self.path, ("\n".join(lines) + "\n").encode(), sync)

    def read(self) -> list[EntryT]:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        try:
            if not lines:
                raise ValueError("empty file")
            version = int(lines[0])
            if version != self.version:
                raise ValueError(f"unrecognised version {version}")
            count = int(lines[1])
            body = [line for line in lines[2:] if line.strip()]
            if count != len(body):
                raise ValueError(f"expected {count} entries but found {len(body)}")
            return [self.parser(line) for line in body]
        except (ValueError, IndexError) as exc:
            raise CheckpointCorruptException(
                f"Malformed line in checkpoint file {self.path}: {exc}"
            ) from None


class TopicPartitionOffset(NamedTuple):
    topic: str
    partition: int
    offset: int


# An offset checkpoint's entry: ((topic, partition), offset).
_TopicPartitionOffset = tuple[tuple[str, int], int]


def _format_tp_offset(entry: _TopicPartitionOffset) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_tp_offset(line: str) -> _TopicPartitionOffset:
    topic, partition, offset = line.split(" ")
    return (topic, int(partition)), int(offset)


class OffsetCheckpointFile:
    """``{(topic, partition): offset}`` in a log dir's offset checkpoint."""

    def __init__(self, path: str):
        self._file = CheckpointFile(path, 0, _format_tp_offset, _parse_tp_offset)

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, offsets: dict[tuple[str, int], int], sync: bool = True) -> None:
        self._file.write(sorted(offsets.items()), sync)

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _format_epoch(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _parse_epoch(line: str) -> EpochEntry:
    epoch, start = line.split(" ")
    return EpochEntry(int(epoch), int(start))


class LeaderEpochFileCache:
    """Which leader epoch started at which offset (for OffsetsForLeaderEpoch
    and replica truncation). Entries have increasing epochs and offsets."""

    def __init__(self, path: str):
        self._file = CheckpointFile(path, 0, _format_epoch, _parse_epoch)
        try:
            self._entries: list[EpochEntry] = self._file.read()
        except CheckpointCorruptException:
            self._entries = []
        # Entries assigned with flush=False that the file does not hold yet.
        self.dirty = False

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether
        the cache changed. As Kafka's assign: anything but the latest epoch
        again at the same or a later start is an update, and entries it
        contradicts (an epoch at or above it, or a start at or after it) are
        dropped first, keeping epochs and starts increasing. The latest epoch
        at an earlier start matters on recovery: truncate_from_start moved
        the entry up to a log start that a kill -9 then took back (its
        checkpoint was not written), and the batches below get their epoch
        again."""
        if epoch < 0:
            return False
        if self._entries:
            last = self._entries[-1]
            if epoch == last.epoch and start_offset >= last.start_offset:
                return False
            while self._entries and (
                self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
            ):
                self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        if flush:
            self.flush()
        else:
            self.dirty = True
        return True

    def assign_recovered(self, epoch: int, start_offset: int) -> bool:
        """A batch met by log recovery, where the log is the truth: an epoch
        newer than every known one is assigned (Kafka's LogSegment.recover);
        an older one only where the cache disagrees with the batch. Blindly
        re-assigning a known epoch at a recovered batch's later start drops
        the entries below it (a batch of epoch 1 recovered at 4 would turn
        [(1, 0), (3, 5)] into [(1, 4), (3, 5)]); skipping every older epoch
        keeps a checkpoint that contradicts the log ([(1, 0), (2, 4)] for a
        batch of epoch 2 at 3) or that a stale log start moved above the
        first batch. Not flushed: recovery derives it again after a crash."""
        if epoch < 0:
            return False
        entries = self._entries
        if entries and epoch <= entries[-1].epoch:
            index = bisect.bisect_right([e.start_offset for e in entries], start_offset) - 1
            if index >= 0 and entries[index].epoch == epoch:
                return False
        return self.assign(epoch, start_offset, flush=False)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch and a leader checking a
        follower's last fetched epoch answer (Kafka's endOffsetFor): the
        largest epoch <= ``requested_epoch`` and the start of the epoch after
        it (the log end for the latest). An epoch older than every one known
        (its data was deleted) answers (requested_epoch, start of the first
        known epoch), so a follower truncates to where the leader's log
        begins; an unknown or future epoch answers (-1, -1)."""
        entries = self._entries
        if requested_epoch < 0 or not entries:
            return -1, -1
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        for i, entry in enumerate(entries):
            if entry.epoch > requested_epoch:
                if i == 0:
                    return requested_epoch, entry.start_offset
                return entries[i - 1].epoch, entry.start_offset
        return -1, -1

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Drop epochs that start at or after ``end_offset`` (log truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            if flush:
                self.flush()
            else:
                self.dirty = True

    def truncate_from_start(self, start_offset: int, flush: bool = True) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there."""
        covering = None
        rest = []
        for entry in self._entries:
            if entry.start_offset <= start_offset:
                covering = entry
            else:
                rest.append(entry)
        entries = ([EpochEntry(covering.epoch, start_offset)] if covering else []) + rest
        if entries != self._entries:
            self._entries = entries
            if flush:
                self.flush()
            else:
                self.dirty = True

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def flush(self) -> None:
        self._file.write(self._entries)
        self.dirty = False

    def flush_if_dirty(self) -> None:
        if self.dirty:
            self.flush()

    def rename_dir(self, directory: str) -> None:
        self._file.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)


class PartitionMetadataFile:
    """partition.metadata: the topic id the partition belongs to."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, PARTITION_METADATA_FILE)

    def write(self, topic_id: str) -> None:
        write_atomically(self.path, f"version: 0\ntopic_id: {topic_id}\n".encode())

    def read(self) -> str | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        fields = {}
        for line in lines:
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields.get("version") != "0" or "topic_id" not in fields:
            raise CheckpointCorruptException(f"Malformed partition metadata file {self.path}")
        return fields["topic_id"]
