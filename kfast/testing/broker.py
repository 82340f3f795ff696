"""KfastBroker: a KafkaBroker on a background thread's event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kfast.config import KafkaConfig

if TYPE_CHECKING:
    from kfast.server.broker import KafkaBroker

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 60.0


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class KfastBroker:
    """A single-node kfast broker for tests.

    ``overrides``: broker properties (Kafka names) over the defaults of
    ``kfast serve`` (node.id 1, single-replica internal topics) with PLAINTEXT
    on 127.0.0.1 and a free port, and log.dirs in a temporary directory
    (removed by close() unless ``data_dir`` was given).
    ``restart()`` stops and starts again on the same data dir and port.
    ``controller_factory(broker, loop)`` replaces the QuorumController
    (unit tests of the broker alone).
    """

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        data_dir: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        controller_factory=None,
    ):
        self._controller_factory = controller_factory
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kfast-test-")
        self.host = host
        self.port = port
        self.overrides = dict(overrides or {})
        self.broker: KafkaBroker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- properties -------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.broker is not None and self.broker.started

    def config(self) -> KafkaConfig:
        from kfast.tools.serve import SERVE_DEFAULTS, SINGLE_NODE_DEFAULTS

        props = {**SERVE_DEFAULTS, **SINGLE_NODE_DEFAULTS}
        props.update(
            {
                "listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "log.dirs": self.data_dir,
            }
        )
        props.update(
            {k: str(v) if not isinstance(v, str) else v for k, v in self.overrides.items()}
        )
        return KafkaConfig(props)

    # -- life cycle ---------------------------------------------------------------------
    def start(self) -> KfastBroker:
        from kfast.server.broker import KafkaBroker

        if self.running:
            return self
        config = self.config()
        self.loop = loop = _new_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="kfast-broker", daemon=True)
        self._thread.start()
        self.broker = broker = KafkaBroker(config, controller_factory=self._controller_factory)
        try:
            self.call(broker.start(), timeout=_START_TIMEOUT_S)
        except BaseException:
            self._stop_loop()
            raise
        self.port = broker.bound_ports[next(iter(broker.bound_ports))]
        return self

    def stop(self) -> None:
        """Clean shutdown (flush, checkpoints, clean-shutdown marker)."""
        if self.loop is None:
            return
        try:
            if self.broker is not None:
                self.call(self.broker.shutdown(), timeout=_STOP_TIMEOUT_S)
        finally:
            self._stop_loop()

    def restart(self) -> KfastBroker:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _stop_loop(self) -> None:
        loop, thread = self.loop, self._thread
        self.loop = self._thread = None
        if loop is None:
            return

        async def cancel_leftovers():
            # Handlers of connections closed mid-request: nothing awaits them.
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(cancel_leftovers(), loop).result(_STOP_TIMEOUT_S)
            except Exception:
                pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(_STOP_TIMEOUT_S)
        loop.close()

    # -- running code on the broker's loop ------------------------------------------------
    def call(self, coroutine, timeout: float | None = None):
        """Run a coroutine on the broker's loop and wait for its result."""
        if self.loop is None:
            coroutine.close()
            raise RuntimeError("the broker is not running: call start() first")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def call_soon(self, function, *args):
        """Run a plain function on the broker's loop and return its result."""

        async def run():
            return function(*args)

        return self.call(run())

    # -- context managers -------------------------------------------------------------
    def __enter__(self) -> KfastBroker:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    async def __aenter__(self) -> KfastBroker:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc_info) -> None:
        await asyncio.to_thread(self.close)
