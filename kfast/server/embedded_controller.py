"""The embedded single node's controller: a KRaft quorum of one voter in the
broker's process (``kfast serve`` with no quorum settings).

It is the cluster code path with one node: a ControllerServer (the Raft
manager, ``__cluster_metadata-0`` and its ``quorum-state``, snapshots, the
RaftQuorumController and the controller-listener handlers) without a
controller listener, and the broker's QuorumControllerClient reaching it
through a LocalControllerChannel instead of a socket. The broker registers
(BrokerRegistration), heartbeats (BrokerHeartbeat) and is unfenced once it
has caught up, as any broker of a cluster; a quorum of one elects itself at
start and commits a batch as soon as it is fsynced.

Its own broker's session never lapses: both live in this process, so the
broker is alive whenever its controller is, and a loop stalled longer than
broker.session.timeout.ms (a loaded machine) must not fence the only
broker of the cluster.

A data directory written before the embedded node ran on Raft (a
``__cluster_metadata-0`` of batches in epoch 1, no ``quorum-state``) is
read as it is: the Raft log takes its batches as committed history (a
quorum of one committed everything it wrote) and the new leader's epoch
follows the log's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kfast.server.controller_channel import LocalControllerChannel, QuorumControllerClient
from kfast.server.controller_server import ControllerServer

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker

# The name the in-process channel's requests arrive on: the controller
# listener's name where the properties give one, else Kafka's usual one.
_DEFAULT_LISTENER = "CONTROLLER"


class EmbeddedController(QuorumControllerClient):
    """KafkaBroker's ``controller`` on the embedded single node: starts and
    stops the in-process quorum with the broker (after the broker's logs
    are loaded, before its partitions)."""

    def __init__(self, broker: KafkaBroker, loop: asyncio.AbstractEventLoop | None = None) -> None:
        # The quorum's failure is the node's: the broker halts.
        self.server = ControllerServer(broker.config, embedded=True, on_fatal=broker.halt)
        names = broker.config["controller.listener.names"]
        channel = LocalControllerChannel(
            broker.node_id, self.server.apis, names[0].upper() if names else _DEFAULT_LISTENER
        )
        super().__init__(None, channel, broker.config, broker.cluster_id)
        self.server.cluster_id = broker.cluster_id

    async def start(self) -> None:
        await self.server.start()
        local = self.server.controller
        if local is None:
            raise RuntimeError("the controller server started without its controller")
        self.local = local
        self.cluster_id = self.server.cluster_id
        local.local_broker_id = self.server.node_id

    async def shutdown(self) -> None:
        try:
            if self.local is not None:
                await super().shutdown()
        finally:
            await self.server.shutdown()
