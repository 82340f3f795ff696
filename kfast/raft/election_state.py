"""ElectionState and the quorum-state file.

What a voter must not forget across a crash: the highest epoch it has
seen, whom it voted for in that epoch (so it never votes twice), and the
leader of that epoch if it knows one. It is written, and fsynced, before
the vote or the new epoch is acted on.

    quorum-state := one line of JSON (Kafka's QuorumStateData)
      data_version 0 (static quorum, kraft.version 0):
        {"clusterId":"","leaderId":L,"leaderEpoch":E,"votedId":V,
         "appliedOffset":0,"currentVoters":[{"voterId":N},...],"data_version":0}
      data_version 1 (dynamic quorum, KIP-853):
        {"leaderId":L,"leaderEpoch":E,"votedId":V,
         "votedDirectoryId":"<base64 uuid>","data_version":1}

-1 means none for leaderId and votedId; votedDirectoryId is the zero uuid
when the vote names no directory (kfast keeps no voted directory id).
The file lives in ``__cluster_metadata-0/``, as Kafka's KafkaRaftManager
keeps it; kfast before 2026-11-26 wrote it beside that directory, and
``FileQuorumStateStore.in_partition_dir`` moves such a file in.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple, Protocol

from kfast.storage.atomic_file import fsync_dir, write_atomically

QUORUM_STATE_FILE = "quorum-state"
ZERO_UUID_BASE64 = "AAAAAAAAAAAAAAAAAAAAAA"


class ElectionState(NamedTuple):
    epoch: int
    leader_id: int = -1
    voted_id: int = -1

    def has_leader(self) -> bool:
        return self.leader_id >= 0

    def has_voted(self) -> bool:
        return self.voted_id >= 0


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """Keeps the state in memory; it survives a simulated restart."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state


class QuorumStateCorruptException(Exception):
    """The quorum-state file cannot be parsed (the node refuses to start:
    voting without it could elect two leaders in one epoch)."""


class FileQuorumStateStore:
    """``voters``: the static voter ids (data_version 0), or None for a
    dynamic quorum (data_version 1)."""

    def __init__(self, directory: str, voters: tuple[int, ...] | None = None):
        self.path = os.path.join(directory, QUORUM_STATE_FILE)
        self.voters = voters

    @classmethod
    def in_partition_dir(
        cls, metadata_log_dir: str, partition_dir: str, voters: tuple[int, ...] | None = None
    ) -> FileQuorumStateStore:
        """The store in ``partition_dir`` (``__cluster_metadata-0``), where
        Kafka keeps it; a file left in ``metadata_log_dir`` by an older kfast
        is moved in first (durably: the vote it holds must not be lost)."""
        legacy = os.path.join(metadata_log_dir, QUORUM_STATE_FILE)
        store = cls(partition_dir, voters)
        if os.path.exists(legacy) and not os.path.exists(store.path):
            os.replace(legacy, store.path)
            fsync_dir(partition_dir)
            fsync_dir(metadata_log_dir)
        return store

    def read(self) -> ElectionState | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                line = f.readline()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(line)
            version = data["data_version"]
            if version not in (0, 1):
                raise ValueError(
                    f"data_version ({version}) is not within the min (0) and "
                    f"max (1) supported version"
                )
            return ElectionState(
                int(data.get("leaderEpoch", -1)),
                int(data.get("leaderId", -1)),
                int(data.get("votedId", -1)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise QuorumStateCorruptException(
                f"Error while reading the Quorum status from the file {self.path}: {exc}"
            ) from exc

    def write(self, state: ElectionState) -> None:
        data: dict = {}
        if self.voters is not None:
            data["clusterId"] = ""
        data.update(leaderId=state.leader_id, leaderEpoch=state.epoch, votedId=state.voted_id)
        if self.voters is not None:
            data["appliedOffset"] = 0
            data["currentVoters"] = [{"voterId": v} for v in sorted(self.voters)]
            data["data_version"] = 0
        else:
            data["votedDirectoryId"] = ZERO_UUID_BASE64
            data["data_version"] = 1
        write_atomically(self.path, json.dumps(data, separators=(",", ":")).encode())
