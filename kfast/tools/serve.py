"""``kfast serve``: run one kfast node (combined broker + controller).

    kfast serve                                  # PLAINTEXT://127.0.0.1:9092, ./kfast-data
    kfast serve --config server.properties --override log.retention.hours=1

Properties use Kafka's names and defaults; the file is read first, then each
``--override key=value`` in order. An unknown or invalid property, or a valid
one kfast does not implement (GSSAPI/Kerberos, a custom SSL engine, a
controller listener with TLS or SASL), stops the start with one line naming
it (exit status 2). SIGTERM or SIGINT shuts the
node down cleanly: stop accepting, answer requests in flight, flush the
logs, write the checkpoints and the clean-shutdown marker. A log dir that
fails (ENOSPC, EIO) goes offline; when none is left the node logs
"Shutdown broker because all log dirs in ... have failed", stops and
exits 1, as Kafka halts.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from kfast.config import ConfigException, KafkaConfig, parse_properties
from kfast.server.gc_tuning import freeze_startup_heap

# What `kfast serve` uses where Kafka has no default: node.id, listeners,
# a log dir.
SERVE_DEFAULTS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "./kfast-data",
}
# And for the embedded single node only: Kafka's internal topics default to
# 3 replicas (2 in sync for transactions), which one node cannot host
# (Kafka's shipped config/kraft/server.properties sets the same three to 1).
# A node of a multi-node cluster keeps Kafka's defaults.
SINGLE_NODE_DEFAULTS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}

EXIT_CONFIG_ERROR = 2
EXIT_START_FAILED = 1
EXIT_FATAL = 1


def build_config(config_path: str | None, overrides: list[str]) -> KafkaConfig:
    props = dict(SERVE_DEFAULTS)
    if config_path is not None:
        try:
            with open(config_path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigException("--config", config_path, f"cannot read the file: {exc}") from exc
        file_props = parse_properties(text)
        if "log.dir" in file_props and "log.dirs" not in file_props:
            props.pop("log.dirs")
        if "broker.id" in file_props and "node.id" not in file_props:
            props.pop("node.id")
        props.update(file_props)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigException("--override", item, "expected key=value")
        props[key.strip()] = value.strip()
    if _single_node(props):
        props = {**SINGLE_NODE_DEFAULTS, **props}
    return KafkaConfig(props)


def _single_node(props: dict) -> bool:
    """The embedded single node: combined roles, at most one voter and no
    controller.quorum.bootstrap.servers (a dynamic quorum's node)."""
    roles = {r.strip() for r in str(props.get("process.roles", "")).split(",")}
    voters = [v for v in str(props.get("controller.quorum.voters", "")).split(",") if v.strip()]
    bootstrap = str(props.get("controller.quorum.bootstrap.servers", "")).strip()
    return roles == {"broker", "controller"} and len(voters) <= 1 and not bootstrap


def new_server(config: KafkaConfig):
    """The server ``process.roles`` asks for: a controller of a quorum, a
    broker (combined with a controller, or broker-only) of a multi-node
    cluster, or the embedded single node (broker and controller, one voter)."""
    roles = set(config["process.roles"])
    # A combined node of a dynamic quorum (KIP-853) names no voters: its
    # formatted directory and controller.quorum.bootstrap.servers make it
    # a cluster node.
    clustered = len(config["controller.quorum.voters"]) > 1 or bool(
        config["controller.quorum.bootstrap.servers"]
    )
    if roles == {"controller"}:
        from kfast.server.controller_server import ControllerServer

        return ControllerServer(config)
    if roles == {"broker"} or (roles == {"broker", "controller"} and clustered):
        from kfast.server.raft_server import KafkaRaftServer

        return KafkaRaftServer(config)
    from kfast.server.broker import KafkaBroker

    return KafkaBroker(config)


def _client_bootstrap(config: KafkaConfig) -> str:
    """host:port of the first non-controller listener, for the console."""
    from kfast.server.broker import parse_listener

    controllers = set(config["controller.listener.names"])
    for uri in config["listeners"]:
        name, host, port = parse_listener(uri)
        if name not in controllers:
            return f"{host or '127.0.0.1'}:{port}"
    raise ConfigException(
        "listeners", ",".join(config["listeners"]), "no broker listener for the console"
    )


async def serve(config: KafkaConfig, console_port: int | None = None) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        broker = new_server(config)
    except ConfigException as exc:
        # Valid properties the broker cannot serve (an unimplemented SASL
        # mechanism, a keystore it cannot read): the same one-line refusal as
        # an invalid property.
        return _config_error(exc)
    try:
        await broker.start()
    except ConfigException as exc:
        return _config_error(exc)
    except Exception as exc:
        from kfast.protocol.errors import KafkaError

        expected = isinstance(exc, (ConfigException, OSError, KafkaError))
        logging.getLogger("kfast.server").error(
            "kfast failed to start: %s", exc, exc_info=not expected
        )
        return EXIT_START_FAILED
    # The start-up heap is long-lived: out of the collector's walks (the
    # event loop waits for every collection).
    freeze_startup_heap()
    console = None
    if console_port is not None and "broker" in config["process.roles"]:
        from kfast.tools.console_web.command import import_app

        try:
            console = await import_app().start_console(
                _client_bootstrap(config), "127.0.0.1", console_port
            )
        except OSError as exc:  # the port is taken
            logging.getLogger("kfast.server").error("kfast console failed to start: %s", exc)
            await broker.shutdown()
            return EXIT_START_FAILED
    failed = _failed_event(broker)
    waits = [asyncio.ensure_future(stop.wait())]
    if failed is not None:
        waits.append(asyncio.ensure_future(failed.wait()))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waits:
        waiter.cancel()
    fatal = failed is not None and failed.is_set()
    if not fatal:
        logging.getLogger("kfast.server").info("shutting down")
    if console is not None:
        await console.cleanup()
    await broker.shutdown()
    # Every log dir failed, or the metadata log's fsync did (the node
    # logged the one line saying so): exit 1, as Kafka halts.
    return EXIT_FATAL if fatal else 0


def _failed_event(server):
    """The node's ``failed`` event: its broker's (a KafkaRaftServer wraps
    its broker, whose controller's failure halts it), or a controller-only
    node's ControllerServer's."""
    broker = getattr(server, "broker", server)
    return getattr(broker, "failed", None)


def _config_error(exc: ConfigException) -> int:
    print(f"kfast serve: {exc}", file=sys.stderr)
    return EXIT_CONFIG_ERROR


def run(args) -> int:
    from kfast.server.log_config import configure_logging

    configure_logging()
    try:
        overrides = list(args.override or [])
        if args.metrics_port is not None:
            overrides.append(f"kfast.metrics.port={args.metrics_port}")
        config = build_config(args.config, overrides)
        # The configured levels and format (log4j lines, kfast.log.format).
        configure_logging(config)
    except ConfigException as exc:
        return _config_error(exc)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(serve(config, args.console_port))
    return uvloop.run(serve(config, args.console_port))


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run a single-node broker (broker + controller)",
        description="Run a kfast node in the combined broker and controller role.",
    )
    p.add_argument("--config", metavar="server.properties", help="a Kafka server.properties file")
    p.add_argument(
        "--override",
        action="append",
        metavar="key=value",
        help="set a property (repeatable; applied after --config)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics "
        "(kfast.metrics.port; kfast.metrics.host sets the address)",
    )
    p.add_argument(
        "--console-port",
        type=int,
        metavar="PORT",
        help="also serve the web console (kfast console) on 127.0.0.1:PORT",
    )
    p.set_defaults(handler=run)
