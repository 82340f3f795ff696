"""ControllerChannel, the broker's client of the active controller, when the
controller it was talking to is cut off by the network: no attempt outlives
the caller's deadline, and the connection that went silent is not reused.

"Controllers" here are one real kfast broker, reached directly (voter 2)
and through a FaultProxy (voter 1); any request does, as the channel only
routes it.
"""

from __future__ import annotations

import time

import pytest

from kfast.protocol import MetadataRequest, errors
from kfast.server.controller_channel import ControllerChannel
from kfast.testing.proxy import DROP, PASS, FaultProxy


@pytest.fixture
def proxy(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    proxy = FaultProxy(int(port), host).start()
    yield proxy
    proxy.close()


def test_a_request_to_a_silent_controller_gives_up_at_its_deadline(broker, proxy, run):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    leader = {"id": 1}
    channel = ControllerChannel(
        node_id=7,
        voters={1: ("127.0.0.1", proxy.port), 2: (host, int(port))},
        leader_hint=lambda: leader["id"],
        request_timeout=30.0,
    )

    async def scenario():
        try:
            await channel.send(MetadataRequest(topics=[]), timeout=5)  # connected to 1
            silent = channel._connections[1]
            proxy.set_mode(DROP)  # 1 is partitioned away, its connection stays open
            began = time.monotonic()
            with pytest.raises(errors.NotControllerException):
                await channel.send(MetadataRequest(topics=[]), timeout=1.0)
            # The connection's own request timeout is 30 s: the call kept to its 1 s.
            assert time.monotonic() - began < 5
            assert not silent.connected
            # The quorum has elected 2 meanwhile: the next request reaches it.
            leader["id"] = 2
            response = await channel.send(MetadataRequest(topics=[]), timeout=5)
            assert response.brokers
            # 1 is back: a new connection, not the one whose bytes were dropped.
            proxy.set_mode(PASS)
            leader["id"] = 1
            assert (await channel.send(MetadataRequest(topics=[]), timeout=5)).brokers
            assert channel._connections[1] is not silent
        finally:
            await channel.close()

    run(scenario())
