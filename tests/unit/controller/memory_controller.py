"""A QuorumController whose metadata log is a list in memory: a quorum of one
that commits a batch the moment it is appended, for tests of the
operations, the replay and the images without Raft. The durable log is
RaftQuorumController's, tested in tests/unit/raft and tests/e2e."""

from __future__ import annotations

import asyncio

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import Endpoint
from kfast.controller.quorum_controller import QuorumController, _DeltaBuilder

CLUSTER_ID = "test-cluster-id-000000"
ENDPOINTS = [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]


class InMemoryController(QuorumController):
    """``log``: the records a previous controller committed (a restart
    replays them); an empty log is formatted with the bootstrap records."""

    def __init__(self, config: KafkaConfig, metadata_log_dir: str, log: list | None = None):
        super().__init__(config, config["node.id"], CLUSTER_ID, metadata_log_dir)
        self.log: list = list(log or [])

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        delta = _DeltaBuilder()
        for offset, record in enumerate(self.log):
            self._replay(record, offset, delta)
        self._publish(delta, notify=False)
        if not self.log:
            await self._commit(self.bootstrap_records(), notify=False)
        self.started = True
        for callback in list(self._subscribers):
            callback(self.full_delta(), self.image)

    async def shutdown(self) -> None:
        self.started = False

    async def _commit(self, records: list, notify: bool = True) -> None:
        first = len(self.log)
        self.log += records
        delta = _DeltaBuilder()
        for index, record in enumerate(records):
            self._replay(record, first + index, delta)
        self._publish(delta, notify)

    def _log_end_offset(self) -> int:
        return len(self.log)

    def quorum_state(self) -> dict:
        end = len(self.log)
        return {
            "leader_id": self.node_id,
            "leader_epoch": 1,
            "high_watermark": end,
            "voters": [(self.node_id, end, 0)],
            "observers": [],
        }


def make_controller(path, log: list | None = None, **props) -> InMemoryController:
    """``path``: the metadata log dir (where ``kfast storage format`` may
    have left a bootstrap.checkpoint)."""
    config = KafkaConfig({"node.id": 1, "log.dirs": str(path), **props})
    return InMemoryController(config, str(path), log)


async def started(path, log: list | None = None, **props) -> InMemoryController:
    controller = make_controller(path, log, **props)
    await controller.start()
    return controller
