"""LogDirFailureChannel: where an I/O error in a log dir takes that dir offline.

Kafka's LogDirFailureChannel: any code touching a log dir's files reports an
I/O error with ``maybe_add_offline_log_dir``; a dir is added once, and stays
offline until the node restarts. The first report of a dir is logged (one
line, no traceback: a full disk is an expected failure, not a bug) and
handed to the listener - the broker, which stops serving the dir's
partitions (KAFKA_STORAGE_ERROR), and shuts down when no log dir is left
(Kafka's ReplicaManager/LogManager.handleLogDirFailure).

Reports come from the event loop (appends, rolls) and from executor threads
(flushes, checkpoints, retention), so the channel is thread-safe and the
listener must be too (the broker passes one that hops to its loop).

Not every OSError is a failing dir: running out of file descriptors
(EMFILE/ENFILE) is the process's limit, answered per request with
KAFKA_STORAGE_ERROR while the dir stays online (issue 14 item 1), so
``is_log_dir_failure`` leaves those out.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

# Errors of the process, not of the disk: the dir stays online.
_PROCESS_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def is_log_dir_failure(exc: BaseException) -> bool:
    """Whether ``exc`` means the dir itself failed (ENOSPC, EIO, EROFS, ...)."""
    return isinstance(exc, OSError) and exc.errno not in _PROCESS_LIMIT_ERRNOS


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # dir -> the message that took it offline
        # Called once per newly offline dir, from the reporting thread.
        self.listener: Callable[[str], None] | None = None

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return log_dir in self._offline

    @property
    def offline_log_dirs(self) -> dict[str, str]:
        with self._lock:
            return dict(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, exc: BaseException) -> bool:
        """Take ``log_dir`` offline after ``exc``; True if this report did
        (later reports of the same dir are not logged again)."""
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = message
        logger.error("%s; log dir %s is offline: %s", message, log_dir, exc)
        listener = self.listener
        if listener is not None:
            listener(log_dir)
        return True
