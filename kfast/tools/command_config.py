"""``--command-config FILE`` of the admin tools, as kafka-topics.sh,
kafka-configs.sh, kafka-acls.sh and the other Kafka tools take it: a
properties file of admin client settings (security.protocol, ssl.*,
sasl.mechanism, sasl.jaas.config, client.id, request.timeout.ms, ...),
read with kfast's client property table (kfast.client.properties), so TLS
and SASL listeners are reachable and a setting kfast's client cannot honour
is refused rather than ignored.

A tool's own choices (its client id, --command-timeout) are defaults the
file overrides, as the file's properties override a Kafka tool's.
"""

from __future__ import annotations

import argparse
from typing import Any

from kfast.client.properties import Client, ClientProperties, parse_client_properties
from kfast.config import ConfigException, parse_properties

COMMAND_CONFIG_HELP = (
    "a properties file of admin client settings (security.protocol, ssl.*, sasl.mechanism, "
    "sasl.jaas.config, client.id, request.timeout.ms, ...)"
)


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)


def command_properties(args: argparse.Namespace) -> ClientProperties:
    """The parsed --command-config file (no file: no properties).
    ConfigException for an unreadable file or a refused setting."""
    path = getattr(args, "command_config", None)
    properties: dict[str, str] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                properties = parse_properties(f.read())
        except OSError as exc:
            raise ConfigException("--command-config", path, exc.strerror or str(exc)) from None
    return parse_client_properties(properties, Client.ADMIN, strict=False)


def admin_options(args: argparse.Namespace, **defaults: Any) -> dict[str, Any]:
    """Keyword arguments of KafkaAdmin / Cluster: the tool's ``defaults``
    (client_id, request_timeout, metadata_timeout), then the file's."""
    return {**defaults, **command_properties(args).cluster_arguments()}


def connection_options(args: argparse.Namespace, **defaults: Any) -> dict[str, Any]:
    """Keyword arguments of one BrokerConnection / BlockingConnection
    (client_id, request_timeout, security)."""
    options = {**defaults}
    cluster = command_properties(args).cluster_arguments()
    for name in ("client_id", "request_timeout", "security"):
        if name in cluster:
            options[name] = cluster[name]
    return options
