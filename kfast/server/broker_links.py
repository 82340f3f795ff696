"""BrokerLinks: connections from this broker to the other brokers for the
requests it sends on its own account -- transaction markers
(WriteTxnMarkers) and transaction verification (AddPartitionsToTxn) --
on the inter-broker listener.

One connection per other broker, opened on first use and opened again
after a failure or when the broker's advertised endpoint changed (it
restarted elsewhere).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kfast.client.connection import BrokerConnection, api_key_of
from kfast.client.security import ClientSecurity
from kfast.controller.metadata.image import Endpoint

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker


class BrokerLink:
    """The connection to one other broker."""

    def __init__(
        self, client_id: str, request_timeout_s: float, security: ClientSecurity | None = None
    ) -> None:
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.security = security  # the inter-broker listener's TLS/SASL (ClientSecurity)
        self.endpoint: Endpoint | None = None
        self.connection: BrokerConnection | None = None
        self.lock = asyncio.Lock()

    async def get(self, endpoint: Endpoint) -> BrokerConnection:
        async with self.lock:
            connection = self.connection
            if connection is not None and (not connection.connected or endpoint != self.endpoint):
                await connection.close()
                connection = self.connection = None
            if connection is None:
                connection = await BrokerConnection.open(
                    endpoint.host,
                    endpoint.port,
                    client_id=self.client_id,
                    request_timeout=self.request_timeout_s,
                    security=self.security,
                )
                self.connection, self.endpoint = connection, endpoint
            return connection

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
            self.connection = None


class NoEndpoint(Exception):
    """The metadata has no endpoint for the broker (not registered, or not
    on the inter-broker listener)."""


class BrokerLinks:
    """``purpose`` names the connections (client id
    ``broker-<id>-<purpose>``); ``broker``: the KafkaBroker, whose metadata
    gives each broker's endpoint at each send."""

    def __init__(self, broker: KafkaBroker, purpose: str) -> None:
        self.broker = broker
        self.purpose = purpose
        self._links: dict[int, BrokerLink] = {}

    async def send(self, broker_id: int, request: Any, min_version: int | None = None) -> Any:
        """``request``'s answer from ``broker_id`` (at the highest version
        both speak, at least ``min_version``). Raises NoEndpoint, OSError or
        a KafkaError."""
        endpoint = self.broker.broker_endpoint(broker_id)
        if endpoint is None:
            raise NoEndpoint(f"broker {broker_id} has no inter-broker endpoint")
        link = self._links.get(broker_id)
        if link is None:
            link = self._links[broker_id] = BrokerLink(
                f"broker-{self.broker.node_id}-{self.purpose}",
                self.broker.config["request.timeout.ms"] / 1000,
                getattr(self.broker, "inter_broker_security", None),
            )
        connection = await link.get(endpoint)
        version = (
            None
            if min_version is None
            else connection.version_for(api_key_of(request), min_version=min_version)
        )
        return await connection.send(request, version=version)

    async def close(self) -> None:
        for link in self._links.values():
            await link.close()
        self._links.clear()
