"""KafkaRaftServer: a broker of a multi-node cluster, Kafka's KafkaRaftServer
with its BrokerServer and the node's member of the metadata quorum sharing
one metadata log: a voting ControllerServer on a combined node
(``process.roles=broker,controller``), a non-voting observer of the log on
a broker-only node (``process.roles=broker``).

    process.roles=broker,controller
    node.id=1
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097
    listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
    controller.listener.names=CONTROLLER

Start: the ControllerServer (the node's voter in the quorum, its replica
of the metadata log, the controller listener), then the broker: its logs,
its partitions from the committed metadata image the local controller
replays, its listeners, and its registration with the active controller
(BrokerRegistration + heartbeats through a ControllerChannel). Admin
requests a client sends to the broker are forwarded to the active
controller when that is not this node. Shutdown: the broker first (a
heartbeat asking to shut down moves its leaderships), then the controller
(a leader resigns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from kfast.config import ConfigException, KafkaConfig
from kfast.metrics.controller_stats import ControllerStats
from kfast.server.broker import KafkaBroker
from kfast.server.controller_channel import ControllerChannel, Forwarder, QuorumControllerClient
from kfast.server.controller_server import ControllerServer


class _KnownVoters(Mapping[int, tuple[str, int]]):
    """{voter id: (host, port)} of the voters in force whose address is known,
    and the quorum's leader (a broker of a dynamic quorum learns where the
    leader is before its log names the voters)."""

    def __init__(self, controller_server: ControllerServer) -> None:
        self.controller_server = controller_server

    def _current(self) -> dict[int, tuple[str, int]]:
        known = {k: v for k, v in self.controller_server.voters.items() if v is not None}
        raft = self.controller_server.raft_manager
        if raft is not None and raft.client.leader_id >= 0:
            address = raft.address(raft.client.leader_id)
            if address is not None:
                known.setdefault(raft.client.leader_id, address)
        return known

    def __getitem__(self, node_id: int) -> tuple[str, int]:
        return self._current()[node_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


class KafkaRaftServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        observer = "controller" not in config["process.roles"]
        # The quorum's failure is the node's: the broker halts (and with it
        # `kfast serve`), as Kafka's shared fault handler does.
        self.controller_server = ControllerServer(
            config, observer=observer, on_fatal=lambda message: self.broker.halt(message)
        )
        self.broker = KafkaBroker(config, controller_factory=self._controller_client)
        self.broker.metrics.is_active_controller = self._is_active_controller
        self.broker.metrics.controller_stats = self._controller_stats
        self.node_id = config.node_id

    def _is_active_controller(self) -> bool:
        controller = getattr(self.controller_server, "controller", None)
        return controller is not None and controller.is_active

    def _controller_stats(self) -> ControllerStats | None:
        controller = getattr(self.controller_server, "controller", None)
        return None if controller is None else controller.stats

    def _controller_client(
        self, broker: KafkaBroker, loop: asyncio.AbstractEventLoop
    ) -> QuorumControllerClient:
        local = self.controller_server.controller
        if local is None:  # the broker starts after its node's controller server
            raise RuntimeError("the broker's controller client before the controller")
        # The controllers are the quorum's voters as the log names them now
        # (a dynamic quorum's change while the broker runs), not at start:
        # the channel's copy of them is replaced by the live view.
        known = _KnownVoters(self.controller_server)
        channel = ControllerChannel(
            self.node_id,
            known,
            leader_hint=lambda: local.leader_id,
            security=self.controller_server.client_security,
        )
        channel.voters = known
        broker.forwarder = Forwarder(channel, local)
        return QuorumControllerClient(
            local, channel, self.config, self.controller_server.cluster_id
        )

    @property
    def started(self) -> bool:
        return self.broker.started and self.controller_server.started

    @property
    def bound_ports(self) -> dict[str, int]:
        return {**self.controller_server.bound_ports, **self.broker.bound_ports}

    async def start(self) -> None:
        await self.controller_server.start()
        try:
            await self._controller_known()
            await self.broker.start()
        except BaseException:
            await self.controller_server.shutdown()
            raise

    async def _controller_known(self, timeout: float = 60.0) -> None:
        """A dynamic quorum's broker starts once it knows where a controller
        is (its observer found the leader through the bootstrap servers)."""
        known = _KnownVoters(self.controller_server)
        deadline = asyncio.get_running_loop().time() + timeout
        while not known:
            if asyncio.get_running_loop().time() >= deadline:
                raise ConfigException(
                    "controller.quorum.bootstrap.servers",
                    self.config["controller.quorum.bootstrap.servers"],
                    f"no controller found within {timeout:.0f} s",
                )
            await asyncio.sleep(0.05)

    async def shutdown(self) -> None:
        await self.broker.shutdown()
        await self.controller_server.shutdown()
