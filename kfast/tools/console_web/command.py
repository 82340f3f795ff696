"""``kfast console --bootstrap-server H:P [--host 127.0.0.1] [--port 8080]``:
serve the web console until SIGINT/SIGTERM. Needs the ``console`` extra
(aiohttp)."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

DEFAULT_PORT = 8080


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "console",
        help="a read-only web console for a Kafka-compatible cluster",
        description="Serve a web UI showing brokers, topics, consumer groups and messages of a "
        "Kafka-compatible cluster, through the Kafka protocol only.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--host", default="127.0.0.1", help="address to serve the console on")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})"
    )
    p.set_defaults(handler=run)


def import_app():
    try:
        from kfast.tools.console_web import app
    except ImportError as exc:
        raise SystemExit(
            f"kfast console needs aiohttp: pip install 'kfast[console]' ({exc})"
        ) from exc
    return app


async def _serve(bootstrap: str, host: str, port: int) -> int:
    runner = await import_app().start_console(bootstrap, host, port)
    print(f"kfast console on http://{host}:{runner.addresses[0][1]}/ for {bootstrap}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()
    return 0


def run(args) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )
    return asyncio.run(_serve(args.bootstrap_server, args.host, args.port))
