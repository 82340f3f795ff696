"""ControllerResult: what a control manager's operation returns.

Operations never change state themselves: they read the current state,
decide, and return the response together with the metadata records that
carry the change. The QuorumController appends the records to the metadata
log and only then replays them into the managers, so the log is the one
source of truth and a restart (replaying the log) rebuilds the same state.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class ControllerResult(NamedTuple):
    response: Any
    records: list
