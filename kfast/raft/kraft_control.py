"""KRaftControlRecordStateMachine: kraft.version and the voter set, as the log says at each offset.

Kafka's rule (KIP-853): a VotersRecord takes effect on a replica as soon as
it is in the replica's log -- appended, not committed -- and a truncation
that removes it puts the previous voter set back. So the state is a history
of (offset, value) entries read from every control batch of the log, the
uncommitted tail included, plus the latest snapshot's KRaft records (taken
to be at the snapshot's last contained offset, ``end offset - 1``; the
bootstrap checkpoint's are at -1):

    state = KRaftControlRecordStateMachine(static_voters, log)
    state.update_state()                 # after open, or a snapshot install
    state.observe(batch)                 # every batch appended since
    state.truncate_new_entries(offset)   # the log was truncated to offset
    state.last_voter_set()               # the voter set in force
    state.last_kraft_version()           # 0 = static voters, 1 = dynamic

With nothing in the log or its snapshot (kraft.version 0, a static quorum)
the voter set is the configured controller.quorum.voters.

Changes happen one at a time: a new voter set read from the log (not a
snapshot or bootstrap checkpoint) must differ from the one before it by at
most one voter, so any majority of the old set meets any majority of the
new one (VoterSetHistory.addAt).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Generic, TypeVar

from kfast.raft.voter_set import KRAFT_VERSION_0, KRaftVersionRecord, VoterSet, VotersRecord

T = TypeVar("T")
_STARTING_NEXT_OFFSET = -1
_READ_BATCHES = 256


class LogHistory(Generic[T]):
    """Values by the log offset they start at (Kafka's TreeMapLogHistory)."""

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._values: list[T] = []

    def add_at(self, offset: int, value: T) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"offset {offset} is not past the last entry's {self._offsets[-1]}")
        self._offsets.append(offset)
        self._values.append(value)

    def value_at_or_before(self, offset: int) -> T | None:
        index = bisect_right(self._offsets, offset) - 1
        return self._values[index] if index >= 0 else None

    def last_entry(self) -> tuple[int, T] | None:
        return (self._offsets[-1], self._values[-1]) if self._offsets else None

    def truncate_new_entries(self, end_offset: int) -> None:
        """Drop the entries at ``end_offset`` and after (a log truncation)."""
        index = bisect_right(self._offsets, end_offset - 1)
        del self._offsets[index:], self._values[index:]

    def truncate_old_entries(self, start_offset: int) -> None:
        """Drop entries before ``start_offset`` except the last of them: the
        value in force just below the log start, which the log's snapshot
        stands for. (An entry at ``start_offset`` itself is in the log and
        a divergence can still truncate it, so it cannot be that value.)"""
        index = bisect_left(self._offsets, start_offset) - 1
        if index > 0:
            del self._offsets[:index], self._values[:index]

    def clear(self) -> None:
        self._offsets.clear()
        self._values.clear()

    def __len__(self) -> int:
        return len(self._offsets)

    def offsets(self) -> list[int]:
        return list(self._offsets)


class KRaftControlRecordStateMachine:
    def __init__(self, static_voters: VoterSet, log):
        self.static_voters = static_voters
        self.log = log
        self.voters = LogHistory[VoterSet]()
        self.kraft_versions = LogHistory[int]()
        self.next_offset = _STARTING_NEXT_OFFSET

    # -- reading the log -----------------------------------------------------------------
    def update_state(self) -> None:
        """Catch up with the log: its latest snapshot if the history is
        behind the log start, then every batch from the next offset on."""
        snapshot_id = self.log.latest_snapshot_id()
        if snapshot_id is not None and (
            self.next_offset == _STARTING_NEXT_OFFSET or self.next_offset < self.log.start_offset
        ):
            self.voters.clear()
            self.kraft_versions.clear()
            for record in self.log.snapshot_kraft_records(snapshot_id):
                self._apply(snapshot_id.offset - 1, record, from_log=False)
            self.next_offset = snapshot_id.offset
        elif self.next_offset == _STARTING_NEXT_OFFSET:
            self.next_offset = self.log.start_offset
        while self.next_offset < self.log.end_offset:
            batches = self.log.read(self.next_offset, _READ_BATCHES)
            if not batches:
                break
            for batch in batches:
                self.observe(batch)

    def observe(self, batch) -> None:
        """A batch just appended to the log (or read from it, in order)."""
        if batch.base_offset != self.next_offset:
            if batch.next_offset <= self.next_offset:
                return  # seen already
            raise ValueError(
                f"batch at {batch.base_offset} does not follow offset "
                f"{self.next_offset} of the KRaft control history"
            )
        if batch.is_control:
            for index, record in enumerate(batch.records):
                self._apply(batch.base_offset + index, record, from_log=True)
        self.next_offset = batch.next_offset

    def _apply(self, offset: int, record, from_log: bool) -> None:
        if isinstance(record, VotersRecord):
            last = self.voters.last_entry()
            # Only a change between two sets in the log must overlap: the
            # static and bootstrap sets come from configuration, which the
            # leader never made agree across replicas.
            if (
                from_log
                and last is not None
                and last[0] >= 0
                and not last[1].has_overlapping_majority(record.voters)
            ):
                raise ValueError(
                    f"voter set {record.voters} at offset {offset} has no "
                    f"overlapping majority with {last[1]}"
                )
            self.voters.add_at(offset, record.voters)
        elif isinstance(record, KRaftVersionRecord):
            self.kraft_versions.add_at(offset, record.kraft_version)

    def truncate_new_entries(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: changes above it never happened."""
        self.voters.truncate_new_entries(end_offset)
        self.kraft_versions.truncate_new_entries(end_offset)
        self.next_offset = min(self.next_offset, end_offset)

    def truncate_old_entries(self, start_offset: int) -> None:
        self.voters.truncate_old_entries(start_offset)
        self.kraft_versions.truncate_old_entries(start_offset)

    def reset(self) -> None:
        """The log was replaced (a snapshot installed): read it again."""
        self.voters.clear()
        self.kraft_versions.clear()
        self.next_offset = _STARTING_NEXT_OFFSET
        self.update_state()

    # -- answers ---------------------------------------------------------------------------
    def last_voter_set(self) -> VoterSet:
        last = self.voters.last_entry()
        return last[1] if last is not None else self.static_voters

    def last_voter_set_offset(self) -> int | None:
        """Where the voter set in force was written; None for the static one."""
        last = self.voters.last_entry()
        return last[0] if last is not None else None

    def last_kraft_version(self) -> int:
        last = self.kraft_versions.last_entry()
        return last[1] if last is not None else KRAFT_VERSION_0

    def voter_set_at(self, offset: int) -> VoterSet | None:
        """The voter set from the log in force at ``offset`` (inclusive)."""
        return self.voters.value_at_or_before(offset)

    def kraft_version_at(self, offset: int) -> int:
        value = self.kraft_versions.value_at_or_before(offset)
        return KRAFT_VERSION_0 if value is None else value

    def kraft_records_at(self, offset: int) -> tuple:
        """The records a snapshot covering ``offset`` carries (none at kraft.version 0)."""
        version = self.kraft_version_at(offset)
        voters = self.voter_set_at(offset)
        if version == KRAFT_VERSION_0 or voters is None:
            return ()
        return KRaftVersionRecord(version), VotersRecord(voters)
