"""Which log dir holds each replica, told to the controller (KIP-858).

Kafka's AssignmentsManager. The controller assigns a new replica the only
log dir of its broker, or UNASSIGNED when the broker has several; the broker
then says where it created the log with AssignReplicasToDirs, and again
when AlterReplicaLogDirs moves it. With every replica's dir known, a failed
dir costs the controller only that dir's replicas (BrokerHeartbeat
offline_log_dirs), and the broker keeps serving its other dirs.

``reconcile(topics)`` compares, for this broker's hosted partitions of
``topics`` (all when None), the dir in the metadata image with the dir the
log is in, and queues the differences; one task sends them in batches
(one request per round, retried with a backoff while the controller cannot
be reached); an answered assignment leaves the queue, taken or refused
(the partition left this broker, the topic is gone). The next metadata
change of the topic reconciles it again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from kfast.protocol import errors

logger = logging.getLogger(__name__)

_RETRY_BACKOFF_S = 0.1


class DirectoryAssignments:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        # (topic id, partition) -> directory id to send
        self._pending: dict[tuple[uuid.UUID, int], uuid.UUID] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def reconcile(self, topics: Iterable[str] | None = None) -> None:
        broker = self.broker
        image = broker.metadata_image
        log_manager = broker.log_manager
        if image is None or log_manager is None or self._closed:
            return
        names = image.topics_by_name.keys() if topics is None else topics
        node = broker.node_id
        for name in names:
            topic = image.topics_by_name.get(name)
            if topic is None:
                continue
            for index, registration in topic.partitions.items():
                if node not in registration.replicas:
                    continue
                log_dir = log_manager.log_dir_of(name, index)
                directory = log_manager.directory_ids.get(log_dir) if log_dir else None
                if directory is None:
                    continue  # not created yet, or in a failed dir
                position = registration.replicas.index(node)
                assigned = (
                    registration.directories[position]
                    if len(registration.directories) == len(registration.replicas)
                    else None
                )
                key = (topic.topic_id, index)
                if assigned == directory:
                    self._pending.pop(key, None)
                else:
                    self._pending[key] = directory
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while self._pending and not self._closed:
            batch = dict(self._pending)
            by_dir: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = {}
            for key, directory in batch.items():
                by_dir.setdefault(directory, []).append(key)
            try:
                results = await self.broker.controller.assign_replicas_to_dirs(by_dir)
            except (errors.KafkaError, TimeoutError, OSError) as exc:
                logger.info("directory assignments not sent yet: %s", exc)
                await asyncio.sleep(_RETRY_BACKOFF_S)
                continue
            for key, directory in batch.items():
                if self._pending.get(key) == directory:  # else changed meanwhile: next round
                    del self._pending[key]
            for (_directory, topic_id, index), code in results.items():
                if code:
                    logger.info(
                        "directory assignment of %s-%d refused: %s",
                        topic_id,
                        index,
                        errors.for_code(code).__name__,
                    )

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
