"""One listener's SocketServer with its security protocol applied: the TLS
transport and, for SASL listeners, the SASL authenticator in front of
KafkaApis. Brokers and controllers build their listeners with it."""

from __future__ import annotations

from kfast.config import KafkaConfig
from kfast.security.listener import ListenerSecurity
from kfast.server.network import SocketServer, security_for_listener
from kfast.server.sasl_authenticator import SaslListenerHandler


def secured_socket_server(
    apis, config: KafkaConfig, name: str, security: ListenerSecurity, owner, host: str, port: int
) -> SocketServer:
    """``owner``: the KafkaBroker or ControllerServer whose metadata image
    holds the SCRAM credentials."""
    handler, sasl_setup = apis.network_handler(name), None
    if security.uses_sasl:
        handler = SaslListenerHandler(
            apis, name, security, owner, config["connection.failed.authentication.delay.ms"]
        )
        sasl_setup = handler.setup
    return SocketServer.from_config(
        handler,
        config,
        host,
        port,
        listener_name=name,
        **security_for_listener(security, sasl_setup),
    )
