"""One listener's SocketServer with its security protocol applied: the TLS
transport and, for SASL listeners, the SASL authenticator in front of
KafkaApis. Brokers and controllers build their listeners with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfast.config import KafkaConfig
from kfast.security.listener import ListenerSecurity
from kfast.server.network import Handler, SocketServer, security_for_listener
from kfast.server.sasl_authenticator import SaslListenerHandler

if TYPE_CHECKING:
    from kfast.server.apis import KafkaApis
    from kfast.server.broker import KafkaBroker
    from kfast.server.controller_server import ControllerServer


def secured_socket_server(
    apis: KafkaApis,
    config: KafkaConfig,
    name: str,
    security: ListenerSecurity,
    owner: KafkaBroker | ControllerServer,
    host: str,
    port: int,
) -> SocketServer:
    """``owner``: the KafkaBroker or ControllerServer whose metadata image
    holds the SCRAM credentials."""
    handler: Handler = apis.network_handler(name)
    sasl_setup = None
    if security.uses_sasl:
        sasl = SaslListenerHandler(
            apis, name, security, owner, config["connection.failed.authentication.delay.ms"]
        )
        handler, sasl_setup = sasl, sasl.setup
    return SocketServer.from_config(
        handler,
        config,
        host,
        port,
        listener_name=name,
        **security_for_listener(security, sasl_setup),
    )
