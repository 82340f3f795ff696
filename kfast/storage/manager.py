"""LogManager: every partition log of a node, across its log.dirs.

Per log dir (Kafka's layout):
    .lock                                flock'ed while a node uses the dir
    meta.properties                      cluster and node identity
    .kafka_cleanshutdown                 present only after a clean shutdown
    recovery-point-offset-checkpoint     flushed offset per partition
    log-start-offset-checkpoint          log start offset per partition
    replication-offset-checkpoint        high watermark per partition
    cleaner-offset-checkpoint            compaction progress per partition
    <topic>-<partition>/                 one Log
    <topic>-<partition>.<uuid>-delete/   a deleted partition awaiting removal
    __cluster_metadata-0/                KRaft's metadata log: the controller's,
                                         never loaded here (so never subject to
                                         retention or the checkpoints above)

Nothing here runs by itself: the broker's scheduler calls ``cleanup_logs``
(every log.retention.check.interval.ms), ``clean_logs`` (compaction, every
log.cleaner.backoff.ms when log.cleaner.enable), ``flush_dirty_logs`` (every
log.flush.scheduler.interval.ms), ``checkpoint_recovery_offsets`` and
``checkpoint_log_start_offsets`` (every log.flush.*.checkpoint.interval.ms),
in an executor, since they block on the disk.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kfast._ext.log_append import now_ms
from kfast.config import KafkaConfig, LogConfig
from kfast.protocol.errors import KafkaStorageException, LogDirNotFoundException
from kfast.storage.atomic_file import write_atomically
from kfast.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointCorruptException,
    OffsetCheckpointFile,
)
from kfast.storage.cleaner import clean_log, dirty_ratio
from kfast.storage.free_space import (
    CHECK_INTERVAL_MS,
    MIN_FREE_BYTES,
    MIN_FREE_PERCENT,
    FreeSpaceMonitor,
)
from kfast.storage.log import Log, parse_topic_partition
from kfast.storage.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from kfast.storage.meta_properties import ensure_directory_id, ensure_meta_properties
from kfast.storage.retention import delete_old_segments

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
# The broker config naming the active segment's block reservation step (Log).
SEGMENT_FALLOCATE_STEP = "kfast.log.segment.fallocate.step.bytes"
STRAY_DIR_SUFFIX = "-stray"
# KRaft's metadata topic (Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME). Its
# partition belongs to the controller's Raft log (kfast.raft.file_log);
# Kafka's LogManager skips it when loading (KafkaRaftServer.MetadataTopic),
# and so does this one: a second Log over the same files would apply
# retention to them and trim them to its stale size at shutdown.
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
# Its fixed topic id (Uuid.METADATA_TOPIC_ID = AAAAAAAAAAAAAAAAAAAAAQ).
METADATA_TOPIC_ID = uuid.UUID(int=1)

TopicPartition = tuple[str, int]  # (topic, partition)


def _read_checkpoint(path: str) -> dict[TopicPartition, int]:
    try:
        return OffsetCheckpointFile(path).read()
    except CheckpointCorruptException as exc:
        logger.warning("ignoring %s", exc)
        return {}


class LogManager:
    def __init__(
        self,
        config: KafkaConfig,
        *,
        cluster_id: str | None = None,
        topic_configs: Callable[[str], Mapping[str, Any]] | None = None,
        time_ms: Callable[[], int] = now_ms,
        flush_requester: Callable[[Log], None] | None = None,
    ):
        self.config = config
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.cluster_id = cluster_id if cluster_id is not None else config["cluster.id"]
        self.node_id = config.node_id
        self.time_ms = time_ms
        # Called with a log whose flush.messages was reached (see Log); None
        # flushes inline on the appending thread.
        self.flush_requester = flush_requester
        self._topic_configs = topic_configs or (lambda topic: {})
        self._overrides: dict[str, dict[str, Any]] = {}
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        # Future replicas (AlterReplicaLogDirs): the copy of a partition being
        # built in another log dir, swapped in once caught up.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._pending_dir_deletes: list[tuple[int, str]] = []
        # Dirs whose partitions were taken away after a disk failure (the
        # channel knows a failed dir first; handle_log_dir_failure moves it here).
        self.offline_dirs: set[str] = set()
        self.failure_channel = LogDirFailureChannel()
        # log dir -> its directory.id (KIP-858), for the dirs loaded at start.
        self.directory_ids: dict[str, uuid.UUID] = {}
        # kfast.log.segment.fallocate.step.bytes, handed to every Log.
        self.segment_fallocate_step: int = config[SEGMENT_FALLOCATE_STEP]
        self.free_space = FreeSpaceMonitor(
            config[MIN_FREE_BYTES],
            config[MIN_FREE_PERCENT],
            config[CHECK_INTERVAL_MS],
            dirs=self.log_dirs,
        )
        self._lock = threading.RLock()
        # One writer at a time per checkpoint file: the periodic jobs and a
        # retired log's checkpoints run on different executor threads, and
        # two writers of one file share its temp file -- the second rename
        # would find it gone (ENOENT) and take a healthy dir offline (Kafka's
        # CheckpointFile.write is synchronized for the same reason). The
        # snapshot is taken under it too, so the last file written is the
        # newest state. Never held while waiting for ``_lock``.
        self._checkpoint_lock = threading.Lock()
        self.had_clean_shutdown: dict[str, bool] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._dir_locks: list[int] = []
        self.started = False

    # -- start and stop ------------------------------------------------------------
    def startup(self) -> None:
        """Check identity, load every partition (recovering after an unclean
        shutdown) and remove the clean-shutdown markers."""
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
        self._lock_dirs()
        try:
            self._load_dirs()
        except BaseException:
            self.abandon()
            raise
        self.started = True

    def _load_dirs(self) -> None:
        self.cluster_id, self.node_id = ensure_meta_properties(
            self.log_dirs, self.node_id, self.cluster_id, self.config["reserved.broker.max.id"]
        )
        for d in self.log_dirs:
            try:
                self.directory_ids[d] = ensure_directory_id(d)
                self._load_dir(d)
            except OSError as exc:
                # A dir that cannot be read goes offline; the others serve
                # (Kafka's LogManager.loadLogs).
                if not is_log_dir_failure(exc):
                    raise
                self.failure_channel.maybe_add_offline_log_dir(
                    d, f"Error while loading log dir {d}", exc
                )
                self.handle_log_dir_failure(d)
            except KafkaStorageException:
                if not self.failure_channel.has_offline_log_dir(d):
                    raise  # not an I/O error (two copies of a partition)
                self.handle_log_dir_failure(d)
        if not self.live_log_dirs:
            raise KafkaStorageException(self.all_dirs_failed_message())
        for tp, future in list(self._future_logs.items()):
            if tp not in self._logs:
                # No current replica left to copy from: nothing to resume.
                logger.info("removing the future replica %s: no current log", future.dir)
                del self._future_logs[tp]
                future.close_handlers()
                self._pending_dir_deletes.append((0, future.dir))

    def _load_dir(self, d: str) -> None:
        threads = self.config["num.recovery.threads.per.data.dir"]
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[d] = clean
        recovery_points = _read_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
        start_offsets = _read_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
        high_watermarks = _read_checkpoint(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT))
        self._cleaner_offsets.update(_read_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)))
        jobs = []
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append((0, path))
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                continue
            try:
                tp = parse_topic_partition(path)
            except ValueError:
                logger.warning("skipping %s: not a topic-partition directory", path)
                continue
            if tp[0] == CLUSTER_METADATA_TOPIC_NAME:
                continue
            # A future replica (a move interrupted by a restart) is loaded
            # too, and the move resumes once the partition is served
            # (Kafka's LogManager loads it with isFuture, ReplicaManager
            # restarts its ReplicaAlterLogDirsThread).
            jobs.append((tp, path, name.endswith(FUTURE_DIR_SUFFIX)))

        def load(job: tuple[TopicPartition, str, bool]) -> tuple[TopicPartition, str, Log]:
            tp, path, _future = job
            log = Log(
                path,
                self.log_config(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                had_clean_shutdown=clean,
                time_ms=self.time_ms,
                flush_requester=self.flush_requester,
                failure_channel=self.failure_channel,
                segment_fallocate_step=self.segment_fallocate_step,
            )
            log.update_high_watermark(high_watermarks.get(tp, log.log_start_offset))
            return tp, path, log

        with ThreadPoolExecutor(max_workers=threads) as pool:
            for (tp, path, log), (*_, future) in zip(pool.map(load, jobs), jobs):
                if future:
                    if tp in self._future_logs:  # one move per partition: the other is stale
                        self._pending_dir_deletes.append((0, path))
                        log.close_handlers()
                    else:
                        self._future_logs[tp] = log
                    continue
                if tp in self._logs:
                    raise KafkaStorageException(
                        f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                        f"{self._logs[tp].dir} and {path}"
                    )
                self._logs[tp] = log
                self._log_dir_of[tp] = d
        if clean:
            os.unlink(marker)

    def abandon(self) -> None:
        """Let go of every file without writing anything (no flush, no
        checkpoint, no marker): what a crash leaves behind. For a failed
        start, and for tests that simulate kill -9 in-process."""
        with self._lock:
            for log in [*self._logs.values(), *self._future_logs.values()]:
                log.close_handlers()
            self._logs.clear()
            self._future_logs.clear()
            self._log_dir_of.clear()
            self._unlock_dirs()
            self.started = False

    def _lock_dirs(self) -> None:
        """Take Kafka's ``.lock`` file of every dir, so two nodes never share one."""
        for d in self.log_dirs:
            fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                self._unlock_dirs()
                raise KafkaStorageException(
                    f"Failed to acquire lock on file {LOCK_FILE} in {d}. A Kafka instance in "
                    f"another process or thread is using this directory."
                ) from None
            self._dir_locks.append(fd)

    def _unlock_dirs(self) -> None:
        for fd in self._dir_locks:
            os.close(fd)  # closing releases the flock
        self._dir_locks.clear()

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush, snapshot producer state, write checkpoints, close every log
        and mark each dir cleanly shut down."""
        with self._lock:
            # Unfinished moves' future replicas too: the next start resumes them.
            for log in [*self._logs.values(), *self._future_logs.values()]:
                if log.offline:
                    continue
                try:
                    log.flush()
                    log.close()
                except KafkaStorageException:
                    # Reported to the failure channel: its dir gets no
                    # clean-shutdown marker, so the next start recovers it.
                    continue
            self.checkpoint_recovery_offsets()
            self.checkpoint_log_start_offsets()
            self.checkpoint_high_watermarks()
            self.checkpoint_cleaner_offsets()
            for d in self.live_log_dirs:
                marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
                try:
                    write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE), marker)
                except OSError as exc:
                    self._dir_failed(d, f"Error while writing {CLEAN_SHUTDOWN_FILE} in {d}", exc)
            self._logs.clear()
            self._future_logs.clear()
            self._unlock_dirs()
            self.started = False

    # -- topic configuration ---------------------------------------------------------
    def log_config(self, topic: str, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        if overrides is None:
            overrides = self._overrides.get(topic)
        if overrides is None:
            overrides = self._topic_configs(topic) or {}
        return LogConfig.from_broker(self.config, overrides)

    def reconfigure_default_log_config(self, config: KafkaConfig) -> None:
        """New broker defaults (the broker's current configuration, with its
        dynamic broker configs) for every live log and every log created
        later; each topic's own overrides stay on top (Kafka's
        LogManager.reconfigureDefaultLogConfig)."""
        with self._lock:
            self.config = config
            by_topic: dict[str, LogConfig] = {}
            for (topic, _), log in self._logs.items():
                if topic not in by_topic:
                    by_topic[topic] = self.log_config(topic)
                log.update_config(by_topic[topic])

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Apply a topic's new overrides to its live logs (AlterConfigs)."""
        config = self.log_config(topic, overrides)
        with self._lock:
            self._overrides[topic] = dict(config.overrides)
            for (t, _), log in self._logs.items():
                if t == topic:
                    log.update_config(config)
        return config

    # -- partitions --------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._log_dir_of.get((topic, partition))

    @property
    def live_log_dirs(self) -> list[str]:
        """The log dirs still online, in configured order."""
        channel = self.failure_channel
        return [
            d
            for d in self.log_dirs
            if d not in self.offline_dirs and not channel.has_offline_log_dir(d)
        ]

    def all_dirs_failed_message(self) -> str:
        return f"Shutdown broker because all log dirs in {', '.join(self.log_dirs)} have failed"

    def _dir_failed(self, log_dir: str, message: str, exc: OSError) -> None:
        """An I/O error of the manager's own files (checkpoints, markers)."""
        if is_log_dir_failure(exc):
            self.failure_channel.maybe_add_offline_log_dir(log_dir, message, exc)
        else:
            logger.error("%s: %s", message, exc)

    def low_space_message(self, topic: str, partition: int) -> str | None:
        """Why client writes to this partition are refused now (its log dir
        is below the free-space threshold), or None."""
        free_space = self.free_space
        if free_space.clock() < free_space.roomy_until:
            return None  # every log dir has room: asked per partition of every produce
        log_dir = self._log_dir_of.get((topic, partition))
        return None if log_dir is None else free_space.low_space_message(log_dir)

    def all_dirs_low_message(self) -> str | None:
        """Why no new partition can be placed on this node (every online
        log dir is below the free-space threshold), or None."""
        messages = [self.free_space.low_space_message(d) for d in self.live_log_dirs]
        if not messages or not all(messages):
            return None
        return "; ".join(m for m in messages if m)

    def _next_log_dir(self) -> str:
        """The online dir holding the fewest partitions (first listed wins
        ties), among those above the free-space threshold when there are any."""
        live = self.live_log_dirs
        roomy = [d for d in live if self.free_space.low_space_message(d) is None]
        counts = {d: 0 for d in roomy or live}
        if not counts:
            raise KafkaStorageException("No log directories are online")
        for _tp, d in self._log_dir_of.items():
            if d in counts:
                counts[d] += 1
        return min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        topic_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        log_dir: str | None = None,
    ) -> Log:
        with self._lock:
            tp = (topic, partition)
            log = self._logs.get(tp)
            if log is not None:
                return log
            if log_dir is not None and os.path.abspath(log_dir) not in self.log_dirs:
                raise LogDirNotFoundException(f"Log dir {log_dir} is not configured")
            if overrides is not None:
                self._overrides[topic] = dict(LogConfig.validate(overrides))
            while True:
                d = os.path.abspath(log_dir) if log_dir else self._next_log_dir()
                path = os.path.join(d, f"{topic}-{partition}")
                try:
                    log = Log(
                        path,
                        self.log_config(topic),
                        had_clean_shutdown=True,
                        topic_id=topic_id,
                        time_ms=self.time_ms,
                        flush_requester=self.flush_requester,
                        failure_channel=self.failure_channel,
                        segment_fallocate_step=self.segment_fallocate_step,
                    )
                    break
                except OSError as exc:
                    message = f"Error while creating log for {topic}-{partition} in dir {d}"
                    # A half-made directory would load as a second copy of
                    # the partition at the next start.
                    shutil.rmtree(path, ignore_errors=True)
                    if log_dir is not None or not is_log_dir_failure(exc):
                        raise KafkaStorageException(f"{message}: {exc}") from exc
                    # The dir failed; another online dir may take the log
                    # (it has no data yet). None left: _next_log_dir raises.
                    self.failure_channel.maybe_add_offline_log_dir(d, message, exc)
            self._logs[tp] = log
            self._log_dir_of[tp] = d
            return log

    # -- future replicas (JBOD moves) ------------------------------------------------
    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def future_logs(self) -> list[Log]:
        return list(self._future_logs.values())

    def create_future_log(self, topic: str, partition: int, log_dir: str) -> Log:
        """An empty future replica of a hosted partition in ``log_dir``
        (Kafka's LogManager.getOrCreateLog(isFuture = true))."""
        with self._lock:
            tp = (topic, partition)
            current = self._logs[tp]
            path = os.path.join(
                log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
            )
            try:
                log = Log(
                    path,
                    self.log_config(topic),
                    had_clean_shutdown=True,
                    topic_id=current.topic_id,
                    log_start_offset=current.log_start_offset,
                    time_ms=self.time_ms,
                    flush_requester=self.flush_requester,
                    failure_channel=self.failure_channel,
                    segment_fallocate_step=self.segment_fallocate_step,
                )
            except OSError as exc:
                shutil.rmtree(path, ignore_errors=True)
                self._dir_failed(
                    log_dir,
                    f"Error while creating the future log of {topic}-{partition} in dir {log_dir}",
                    exc,
                )
                raise KafkaStorageException(
                    f"Error while creating the future log of "
                    f"{topic}-{partition} in dir {log_dir}: {exc}"
                ) from exc
            self._future_logs[tp] = log
            return log

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Abandon a move: the future replica's files go."""
        with self._lock:
            log = self._future_logs.pop((topic, partition), None)
        if log is not None:
            log.close_handlers()
            shutil.rmtree(log.dir, ignore_errors=True)

    def replace_current_with_future_log(self, topic: str, partition: int) -> Log:
        """The future replica becomes the partition's log (renamed to
        ``<topic>-<partition>`` in its dir); the old log is renamed for
        deletion (Kafka's LogManager.replaceCurrentWithFutureLog). The
        caller checked that the future caught up and holds the loop."""
        with self._lock:
            tp = (topic, partition)
            source, future = self._logs[tp], self._future_logs.pop(tp)
            source_dir, dest_dir = self._log_dir_of[tp], future.parent_dir
            future.rename_dir(os.path.join(dest_dir, f"{topic}-{partition}"))
            future.update_high_watermark(source.high_watermark)
            self._logs[tp] = future
            self._log_dir_of[tp] = dest_dir
            self._retire(source, source_dir)
            return future

    def _retire(self, log: Log, log_dir: str) -> str:
        """Rename a log no longer served to ``<tp>.<uuid>-delete``, close it,
        and remove its files after log.segment.delete.delay.ms."""
        log.close()
        renamed = os.path.join(
            log_dir, f"{log.topic}-{log.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        log.rename_dir(renamed)
        due = self.time_ms() + self.config["log.segment.delete.delay.ms"]
        self._pending_dir_deletes.append((due, renamed))
        self.checkpoint_recovery_offsets(log_dir)
        self.checkpoint_log_start_offsets(log_dir)
        self.checkpoint_high_watermarks(log_dir)
        return renamed

    def delete_log(self, topic: str, partition: int) -> str | None:
        """Take a partition away now (rename to ``<tp>.<uuid>-delete``) and
        remove its files later (``delete_pending_dirs``); returns the new path."""
        with self._lock:
            tp = (topic, partition)
            log = self._logs.pop(tp, None)
            d = self._log_dir_of.pop(tp, None)
            if log is None:
                return None
            self.remove_future_log(topic, partition)
            # A served log always has its dir recorded; its parent is the same dir.
            return self._retire(log, d if d is not None else os.path.dirname(log.dir))

    def delete_pending_dirs(self, now: int | None = None) -> int:
        now = self.time_ms() if now is None else now
        with self._lock:
            ready = [p for due, p in self._pending_dir_deletes if due <= now]
            self._pending_dir_deletes = [(d, p) for d, p in self._pending_dir_deletes if d > now]
        for path in ready:
            shutil.rmtree(path, ignore_errors=True)
        return len(ready)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """After a disk failure: stop using the dir, let go of its logs
        without writing anything; returns its partitions (Kafka's
        LogManager.handleLogDirFailure). The caller checks ``live_log_dirs``."""
        with self._lock:
            if log_dir in self.offline_dirs:
                return []
            logger.warning("Stopping serving logs in dir %s", log_dir)
            self.offline_dirs.add(log_dir)
            gone = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            for tp in gone:
                log = self._logs.pop(tp)
                log.offline = True
                log.close_handlers()
                del self._log_dir_of[tp]
            # Moves into or out of the dir stop (Kafka removes the future
            # replica without deleting it).
            for tp, future in list(self._future_logs.items()):
                if future.parent_dir == log_dir or tp in gone:
                    del self._future_logs[tp]
                    future.offline = True
                    future.close_handlers()
            return gone

    # -- periodic jobs ---------------------------------------------------------------
    def cleanup_logs(
        self, now: int | None = None, moved: list[tuple[str, int]] | None = None
    ) -> int:
        """Retention for every log; removes expired ``.deleted`` files and
        ``-delete`` dirs. Returns the number of segments deleted; ``moved``
        gets the (topic, partition) of each log whose log start offset
        retention advanced (fetches waiting on it must re-read: the caller
        wakes them)."""
        now = self.time_ms() if now is None else now
        deleted = 0
        for log in self.all_logs():
            try:
                start = log.log_start_offset
                deleted += delete_old_segments(log, now)
                if moved is not None and log.log_start_offset != start:
                    moved.append((log.topic, log.partition))
                log.delete_pending_files(now)
                log.producer_state.remove_expired_producers(now)
            except KafkaStorageException as exc:
                logger.error("retention failed for %s: %s", log, exc)
        self.delete_pending_dirs(now)
        return deleted

    def flush_dirty_logs(self, now: int | None = None) -> int:
        """flush.ms policy for every log; returns how many were flushed."""
        now = self.time_ms() if now is None else now
        flushed = 0
        for log in self.all_logs():
            try:
                flushed += log.flush_if_due(now)
            except KafkaStorageException as exc:
                logger.error("flush failed for %s: %s", log, exc)
        return flushed

    def _checkpoint(
        self, file_name: str, value: Callable[[Log], int], only_dir: str | None = None
    ) -> None:
        with self._checkpoint_lock:
            # Copies made in one C call each (no Python code runs, so no other
            # thread changes them meanwhile), not iterated under ``_lock``.
            logs = list(self._logs.items())
            future_logs = list(self._future_logs.items())
            log_dir_of = dict(self._log_dir_of)
            for d in self.live_log_dirs:
                if only_dir is not None and d != only_dir:
                    continue
                offsets = {tp: value(log) for tp, log in logs if log_dir_of.get(tp) == d}
                # A future replica is the only log of its partition in its dir
                # (Kafka checkpoints it there too), so a move resumed after a
                # restart does not recover it from scratch.
                offsets.update((tp, value(log)) for tp, log in future_logs if log.parent_dir == d)
                try:
                    OffsetCheckpointFile(os.path.join(d, file_name)).write(offsets)
                except OSError as exc:
                    self._dir_failed(d, f"Error while writing {file_name} in {d}", exc)

    def checkpoint_recovery_offsets(self, only_dir: str | None = None) -> None:
        self._checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, only_dir)

    def checkpoint_log_start_offsets(self, only_dir: str | None = None) -> None:
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, only_dir)

    def checkpoint_high_watermarks(self, only_dir: str | None = None) -> None:
        self._checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark, only_dir)

    def checkpoint_cleaner_offsets(self) -> None:
        """cleaner-offset-checkpoint: where each compacted log's dirty part starts."""
        with self._checkpoint_lock:
            cleaner_offsets = list(self._cleaner_offsets.items())
            log_dir_of = dict(self._log_dir_of)
            for d in self.live_log_dirs:
                offsets = {tp: offset for tp, offset in cleaner_offsets if log_dir_of.get(tp) == d}
                try:
                    OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).write(offsets)
                except OSError as exc:
                    message = f"Error while writing {CLEANER_OFFSET_CHECKPOINT} in {d}"
                    self._dir_failed(d, message, exc)

    def clean_logs(self, now: int | None = None) -> int:
        """One compaction pass over each compacted log whose dirty ratio is at
        least min.cleanable.dirty.ratio; returns the number of logs cleaned.
        Blocking (reads and rewrites segments): run it in an executor."""
        now = self.time_ms() if now is None else now
        cleaned = 0
        for log in self.all_logs():
            # A partition being moved is not cleaned (Kafka pauses it).
            if (
                not log.config.compact
                or log.offline
                or (log.topic, log.partition) in self._future_logs
            ):
                continue
            tp = (log.topic, log.partition)
            first_dirty = max(self._cleaner_offsets.get(tp, 0), log.log_start_offset)
            if dirty_ratio(log, first_dirty, now) < log.config.min_cleanable_dirty_ratio:
                continue
            try:
                result = clean_log(log, first_dirty, now)
            except KafkaStorageException as exc:
                logger.error("compaction failed for %s: %s", log, exc)
                continue
            except OSError as exc:
                self._dir_failed(log.parent_dir, f"Error while compacting {log}", exc)
                continue
            if result is not None:
                self._cleaner_offsets[tp] = result.end_offset
                cleaned += 1
        if cleaned:
            self.checkpoint_cleaner_offsets()
        return cleaned
