"""Free space of the log dirs: writes are refused below a threshold.

Kafka has no such rule: it writes until ENOSPC takes the log dir offline
(LogDirFailureChannel), and the dir comes back only with a restart. kfast
does as Redpanda does (storage_min_free_bytes): below a threshold of free
space, client produce and topic/partition creation are refused while reads
and fetches go on, and writes are accepted again by themselves as soon as
space is freed. Replication, coordinator records (offset commits,
transaction state) and transaction markers still append: the margin is
there for them, and refusing them would shrink ISRs or stall consumers.

The threshold of a dir is ``min(kfast.log.dirs.min.free.bytes,
kfast.log.dirs.min.free.percent of the dir's filesystem)``; either set to 0
turns the check off. A dir's free space (statvfs: blocks available to an
unprivileged user) is read at most once per
``kfast.log.dirs.free.space.check.interval.ms``, however many requests ask.
``roomy_until`` says until when no dir given at construction is low or due
for a re-read, so the produce path's usual answer is one clock read and one
comparison (LogManager.low_space_message), not a per-partition lookup.

Transitions are logged once each way (WARNING when a dir goes below,
INFO when it recovers); an unreadable dir (statvfs fails) counts as not
low: I/O errors are the failure channel's business.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

MIN_FREE_BYTES = "kfast.log.dirs.min.free.bytes"
MIN_FREE_PERCENT = "kfast.log.dirs.min.free.percent"
CHECK_INTERVAL_MS = "kfast.log.dirs.free.space.check.interval.ms"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@dataclass
class _DirState:
    next_check: float = 0.0  # monotonic seconds
    free: int = 0
    threshold: int = 0
    low: bool = False


class FreeSpaceMonitor:
    def __init__(
        self,
        min_free_bytes: int,
        min_free_percent: float,
        check_interval_ms: int,
        *,
        dirs: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
    ) -> None:
        """``dirs``: the log dirs ``roomy_until`` speaks for (read at the
        first question about any of them); others are tracked from their
        first question on."""
        self.min_free_bytes = min_free_bytes
        self.min_free_percent = min_free_percent
        self.interval = check_interval_ms / 1000.0
        self.clock = clock
        self._statvfs = statvfs
        self._dirs: dict[str, _DirState] = {d: _DirState() for d in dirs}
        # Before this clock reading no dir of ``_dirs`` is low or due for a
        # re-read: every question about one of them is answered None without
        # looking. Never when checks are on and nothing was read yet; always
        # when they are off.
        self.roomy_until = 0.0 if self.enabled else math.inf

    @property
    def enabled(self) -> bool:
        return self.min_free_bytes > 0 and self.min_free_percent > 0

    def threshold(self, total_bytes: int) -> int:
        """The free bytes a filesystem of ``total_bytes`` must keep."""
        if not self.enabled:
            return 0
        return min(self.min_free_bytes, int(total_bytes * self.min_free_percent / 100))

    def low_space_message(self, log_dir: str) -> str | None:
        """Why writes to ``log_dir`` are refused now, or None when they are not."""
        if not self.enabled:
            return None
        now = self.clock()
        state = self._dirs.get(log_dir)
        if state is None:
            state = self._dirs[log_dir] = _DirState()
        elif now < self.roomy_until:
            return None
        if now >= state.next_check:
            self._refresh_due(now)
        if not state.low:
            return None
        return (
            f"Log dir {log_dir} has {_mib(state.free)} free, below the "
            f"{_mib(state.threshold)} kept free ({MIN_FREE_BYTES} / {MIN_FREE_PERCENT}): "
            f"writes are refused until space is freed"
        )

    def _refresh_due(self, now: float) -> None:
        """Re-read every dir whose interval has passed (all at once, so one
        dir nobody asks about does not keep ``roomy_until`` in the past)."""
        for log_dir, state in self._dirs.items():
            if now >= state.next_check:
                state.next_check = now + self.interval
                self._refresh(log_dir, state)
        states = self._dirs.values()
        if any(state.low for state in states):
            self.roomy_until = 0.0
        else:
            self.roomy_until = min(state.next_check for state in states)

    def _refresh(self, log_dir: str, state: _DirState) -> None:
        try:
            stat = self._statvfs(log_dir)
        except OSError:
            state.low = False
            return
        state.free = stat.f_bavail * stat.f_frsize
        state.threshold = self.threshold(stat.f_blocks * stat.f_frsize)
        low = state.free < state.threshold
        if low and not state.low:
            logger.warning(
                "Log dir %s has %s free, below the %s to keep free: refusing produce and "
                "topic creation until space is freed",
                log_dir,
                _mib(state.free),
                _mib(state.threshold),
            )
        elif state.low and not low:
            logger.info("Log dir %s has %s free again: accepting writes", log_dir, _mib(state.free))
        state.low = low
