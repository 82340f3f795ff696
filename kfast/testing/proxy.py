"""FaultProxy: a TCP proxy on 127.0.0.1 that can cut, drop or delay traffic.

A test puts one proxy on each directed link between two nodes (node A
reaches node B only through A->B's proxy), then breaks links while real
processes run, without touching the kernel's network:

    proxy = FaultProxy(target_port=9093)       # listens on a free port
    proxy.start()                              # on its own thread
    proxy.mode = "drop"      # bytes vanish, connections stay up (a partition)
    proxy.mode = "reset"     # connections are closed, new ones refused
    proxy.delay = 0.05       # every chunk waits 50 ms each way
    proxy.mode = "pass"      # heal
    proxy.close()

"drop" is what a network partition looks like to Raft: requests time out.
"reset" is a crashed peer or a closed port: requests fail at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading

_CHUNK = 64 * 1024
PASS, DROP, RESET = "pass", "drop", "reset"


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1", listen_port: int = 0):
        self.target = (target_host, target_port)
        self.mode = PASS
        self.delay = 0.0
        self._listen_port = listen_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def start(self) -> FaultProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run():
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._accept, "127.0.0.1", self._listen_port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(
            target=run, name=f"fault-proxy-{self.target[1]}", daemon=True
        )
        self._thread.start()
        ready.wait(10)
        return self

    def set_mode(self, mode: str) -> None:
        """Switch mode; "reset" also closes the connections already open."""
        self.mode = mode
        if mode == RESET and self._loop is not None:
            self._loop.call_soon_threadsafe(self._close_all)

    def _close_all(self) -> None:
        for writer in list(self._writers):
            _abort(writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == RESET:
            _abort(writer)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        self._writers.update((writer, upstream_writer))
        pipes = [
            asyncio.ensure_future(self._pipe(reader, upstream_writer)),
            asyncio.ensure_future(self._pipe(upstream_reader, writer)),
        ]
        # One side closing (a killed process resets its sockets) closes the
        # other at once, as a direct connection would.
        _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for w in (writer, upstream_writer):
            self._writers.discard(w)
            _abort(w)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(_CHUNK)
                if not data or self.mode == RESET:
                    break
                if self.mode == DROP:
                    continue
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass

    def close(self) -> None:
        if self._loop is None:
            return

        async def stop():
            self._server.close()
            self._close_all()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None


def _abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if transport is not None and not transport.is_closing():
        sock = transport.get_extra_info("socket")
        try:
            if sock is not None:
                # RST rather than FIN: the peer sees a reset connection.
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
        except OSError:
            pass
        transport.abort()
