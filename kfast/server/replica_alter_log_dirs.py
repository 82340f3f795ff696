"""Moving a partition between log dirs while it serves (JBOD; Kafka's
ReplicaManager.alterReplicaLogDirs and ReplicaAlterLogDirsThread).

AlterReplicaLogDirs asks for a hosted partition to live in another log dir.
A future replica (``<topic>-<partition>.<uuid>-future`` in the destination)
is created empty at the current log's start offset, and one task per move
copies batches from the current log to it, as a follower would fetch them
from a leader (append_as_follower keeps offsets, epochs and producer state),
in chunks of replica.fetch.max.bytes with the loop free between chunks. The
current log keeps taking appends meanwhile. When the future replica's log
end offset equals the current one's, both checked and swapped in one step
on the event loop (no append can come in between): the future replica is
renamed to ``<topic>-<partition>``, takes the high watermark and becomes the
partition's log; the old one is renamed ``-delete`` and removed later.

The current log shrinking under the copy (truncation on a follower,
retention moving the log start) is followed: the future replica is cut to
the current end, or restarted at the current log start.

A restart in the middle of a move keeps the future replica: the log
manager loads it (and checkpoints its recovery point like any log's), and
the move resumes from its log end once the partition is served again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kfast.config import LONG_MAX
from kfast.protocol.errors import KafkaStorageException, OffsetOutOfRangeException

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker
    from kfast.server.partition import Partition
    from kfast.server.replica_manager import PartitionKey

logger = logging.getLogger(__name__)


class ReplicaAlterLogDirsManager:
    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self._moves: dict[PartitionKey, asyncio.Task[None]] = {}
        # Set when a move finishes (tests and shutdown wait on it).
        self.moved = asyncio.Event()
        # Loop time the next chunk may be copied (the IO quota).
        self._next_copy_at = 0.0

    def destination(self, key: PartitionKey) -> str | None:
        """The log dir a partition is moving to, if it is moving."""
        future = self.broker.started_log_manager().get_future_log(*key)
        return None if future is None else future.parent_dir

    def start(self, partition: Partition, log_dir: str) -> None:
        """Move ``partition`` into ``log_dir`` (a different, online dir)."""
        key = partition.key
        self.cancel(key)
        self.broker.started_log_manager().create_future_log(
            partition.topic, partition.partition, log_dir
        )
        self._moves[key] = asyncio.get_running_loop().create_task(self._move(key))

    async def _throttle(self, copied: int) -> None:
        """replica.alter.log.dirs.io.max.bytes.per.second (Kafka's
        alter-log-dirs replication quota, over all moves of the broker):
        each chunk copied pushes the time the next may start by its share."""
        rate = self.broker.current_config["replica.alter.log.dirs.io.max.bytes.per.second"]
        loop = asyncio.get_running_loop()
        now = loop.time()
        if rate <= 0 or rate >= LONG_MAX:
            self._next_copy_at = now
            await asyncio.sleep(0)
            return
        self._next_copy_at = max(self._next_copy_at, now) + copied / rate
        await asyncio.sleep(max(0.0, self._next_copy_at - now))

    def resume_interrupted(self) -> None:
        """Resume the moves a restart interrupted: a future replica loaded
        from disk whose partition this broker now hosts is filled on from
        where it stopped (Kafka's ReplicaManager adds a log dir fetcher for
        every hosted partition with a future log)."""
        log_manager = self.broker.started_log_manager()
        replica_manager = self.broker.started_replica_manager()
        for future in log_manager.future_logs():
            key = (future.topic, future.partition)
            if key in self._moves or replica_manager.get_partition(*key) is None:
                continue
            logger.info(
                "resuming the move of %s-%d to %s at offset %d",
                key[0],
                key[1],
                future.parent_dir,
                future.log_end_offset,
            )
            self._moves[key] = asyncio.get_running_loop().create_task(self._move(key))

    def cancel(self, key: PartitionKey) -> None:
        """Stop a move and remove its future replica."""
        task = self._moves.pop(key, None)
        if task is not None:
            task.cancel()
        self.broker.started_log_manager().remove_future_log(*key)

    async def _move(self, key: PartitionKey) -> None:
        log_manager = self.broker.started_log_manager()
        replica_manager = self.broker.started_replica_manager()
        chunk = self.broker.config["replica.fetch.max.bytes"]
        try:
            while True:
                partition = replica_manager.get_partition(*key)
                future = log_manager.get_future_log(*key)
                if partition is None or future is None or partition.log.offline or future.offline:
                    self._abandon(key)
                    return
                source = partition.log
                if future.log_end_offset > source.log_end_offset:
                    future.truncate_to(source.log_end_offset)
                if future.log_end_offset < source.log_start_offset:
                    future.truncate_fully_and_start_at(source.log_start_offset)
                if future.log_end_offset == source.log_end_offset:
                    self._swap(partition, key)
                    return
                try:
                    info = source.read(future.log_end_offset, chunk)
                except OffsetOutOfRangeException:
                    await asyncio.sleep(0)  # retention moved the start: go round
                    continue
                if info.records is not None and info.records.length:
                    future.append_as_follower(info.records.read())
                    await self._throttle(info.records.length)
                else:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except KafkaStorageException as exc:
            logger.error("moving %s-%d stopped: %s", key[0], key[1], exc)
            self._abandon(key)
        except Exception:
            logger.exception("moving %s-%d failed", key[0], key[1])
            self._abandon(key)

    def _abandon(self, key: PartitionKey) -> None:
        self._moves.pop(key, None)
        self.broker.started_log_manager().remove_future_log(*key)

    def _swap(self, partition: Partition, key: PartitionKey) -> None:
        log = self.broker.started_log_manager().replace_current_with_future_log(*key)
        partition.log = log
        self._moves.pop(key, None)
        logger.info("%s-%d now lives in %s", key[0], key[1], log.parent_dir)
        self.broker.started_replica_manager().complete_delayed_requests(key)
        self.broker.directory_assignments.reconcile([key[0]])
        self.moved.set()

    async def shutdown(self) -> None:
        tasks = list(self._moves.values())
        self._moves.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
