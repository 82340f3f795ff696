"""TLS connections: the ``Transport`` of SSL and SASL_SSL listeners
(``kfast.server.network``), over ``ssl.SSLObject`` and two memory BIOs.

The socket is read into the incoming BIO, OpenSSL decrypts into a plaintext
buffer, and frames are cut from it with Kafka's framing::

    frame := size:int32 (big-endian) payload:byte[size]

Each frame is a copy in a bytearray of its own (handlers may patch it in
place and keep it). Responses are queued as parts and encrypted lazily, at
most ``_ENCRYPT_CHUNK`` plaintext bytes ahead of the socket, so a large fetch
is read from its files in chunks (sendfile cannot carry TLS: the bytes must
pass through OpenSSL) and never held encrypted in memory whole.

The handshake runs on the first receives; ``on_handshake(transport)`` is
called once it completes (the listener sets the connection's principal from
the client certificate there). A failed handshake raises ``ssl.SSLError``
from ``receive``, which the connection logs at a bounded rate and closes.
"""

from __future__ import annotations

import collections
import os
import socket
import ssl
import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kfast._ext.netio import InvalidReceiveException
from kfast.protocol.file_region import FileRegion

if TYPE_CHECKING:
    from kfast.server.network import Part

__all__ = ["TlsTransport"]

_RECV_SIZE = 256 * 1024
# Plaintext encrypted per step of a flush (16 TLS records of 16 KiB).
_ENCRYPT_CHUNK = 256 * 1024
_SIZE = struct.Struct(">i")


class TlsTransport:
    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        max_receive_size: int,
        on_handshake: Callable[[TlsTransport], None] | None = None,
    ):
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.max_receive_size = max_receive_size
        self.on_handshake = on_handshake
        self.handshake_done = False
        self._plain = bytearray()
        self._plain_start = 0
        # Unsent plaintext parts: bytes-likes and [FileRegion, position, remaining].
        self._queue: collections.deque[bytes | memoryview | list[Any]] = collections.deque()
        self._queued_plain = 0
        self._wire = memoryview(b"")
        self.closed = False
        self.bytes_received = 0
        self.frames_received = 0
        self.responses_queued = 0
        self.sendfile_bytes = 0
        self.copied_bytes = 0

    # ------------------------------------------------------------------ state

    @property
    def unsent_bytes(self) -> int:
        return self._queued_plain + self._outgoing.pending + len(self._wire)

    @property
    def has_unsent(self) -> bool:
        return bool(self._queue) or self._outgoing.pending > 0 or len(self._wire) > 0

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER), None when it sent none."""
        return self._ssl.getpeercert(binary_form=True) if self.handshake_done else None

    @property
    def tls_version(self) -> str | None:
        return self._ssl.version()

    @property
    def cipher(self) -> tuple[str, str, int] | None:
        return self._ssl.cipher()

    # --------------------------------------------------------------- receiving

    def receive(self) -> int:
        """Read what the socket has: > 0 bytes read, 0 when the peer closed
        (TCP or TLS close_notify), -1 when nothing was ready."""
        total = 0
        while True:
            try:
                data = self._sock.recv(_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                return 0
            total += len(data)
            self._incoming.write(data)
            if len(data) < _RECV_SIZE:
                break
        if total == 0:
            return -1
        self.bytes_received += total
        if not self._decrypt():
            return 0
        return total

    def _decrypt(self) -> bool:
        """Advance the handshake, then decrypt into the plaintext buffer;
        False on the peer's close_notify."""
        if not self.handshake_done:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                return True
            self.handshake_done = True
            if self.on_handshake is not None:
                self.on_handshake(self)
        while True:
            try:
                chunk = self._ssl.read(_RECV_SIZE)
            except ssl.SSLWantReadError:
                return True
            except ssl.SSLZeroReturnError:
                return False
            if not chunk:
                return False
            self._plain += chunk

    def next_frame(self) -> memoryview | None:
        plain, start = self._plain, self._plain_start
        if len(plain) - start < 4:
            return None
        size = _SIZE.unpack_from(plain, start)[0]
        if size < 0:
            raise InvalidReceiveException(f"Invalid receive (size = {size})")
        if size > self.max_receive_size:
            raise InvalidReceiveException(
                f"Invalid receive (size = {size} larger than {self.max_receive_size})"
            )
        end = start + 4 + size
        if len(plain) < end:
            return None
        frame = plain[start + 4 : end]
        if end == len(plain):
            plain.clear()
            self._plain_start = 0
        elif end > 1024 * 1024 and end > len(plain) // 2:
            del plain[:end]
            self._plain_start = 0
        else:
            self._plain_start = end
        self.frames_received += 1
        return memoryview(frame)

    # ----------------------------------------------------------------- sending

    def send(self, parts: Iterable[Part]) -> None:
        if self.closed:
            raise OSError("send on a closed transport")
        staged: list[bytes | memoryview | list[Any]] = []
        total = 0
        for part in parts:
            if isinstance(part, FileRegion):
                if part.length:
                    staged.append([part, part.position, part.length])
                    total += part.length
            else:
                view = memoryview(part).cast("B")
                if view.nbytes:
                    staged.append(bytes(view) if view.nbytes <= 512 else view)
                    total += view.nbytes
        self._queue.append(_SIZE.pack(total))
        self._queue.extend(staged)
        self._queued_plain += 4 + total
        self.responses_queued += 1

    def _encrypt_next(self) -> None:
        """Move up to _ENCRYPT_CHUNK queued plaintext bytes through OpenSSL."""
        budget = _ENCRYPT_CHUNK
        pieces: list[bytes | memoryview] = []
        queue = self._queue
        while queue and budget > 0:
            head = queue[0]
            if isinstance(head, list):  # as cheap as type() is: exact type first
                region, position, remaining = head
                n = min(remaining, budget)
                data = os.pread(region.file.fileno(), n, position)
                if not data:
                    raise OSError(f"{region!r} ended before its length")
                n = len(data)
                head[1] += n
                head[2] -= n
                if head[2] == 0:
                    queue.popleft()
                pieces.append(data)
            else:
                n = min(len(head), budget)
                if n == len(head):
                    pieces.append(head)
                    queue.popleft()
                else:
                    pieces.append(head[:n])
                    queue[0] = head[n:]
            budget -= n
            self._queued_plain -= n
        self._ssl.write(b"".join(pieces))

    def flush(self) -> bool:
        """Send what the socket takes; True once nothing is left."""
        sock = self._sock
        while True:
            if self._wire:
                try:
                    n = sock.send(self._wire)
                except (BlockingIOError, InterruptedError):
                    return False
                self.copied_bytes += n
                self._wire = self._wire[n:]
                continue
            if self._outgoing.pending:
                self._wire = memoryview(self._outgoing.read())
                continue
            if not self._queue or not self.handshake_done:
                return not self._queue
            self._encrypt_next()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        self._queued_plain = 0
        self._wire = memoryview(b"")
        self._plain = bytearray()
        if self.handshake_done:
            # Best effort close_notify; the socket is closed right after.
            try:
                self._ssl.unwrap()
            except (ssl.SSLError, ValueError):
                pass
        # The close_notify, or the alert of a failed handshake (the client
        # then reports why instead of a bare disconnect).
        try:
            pending = self._outgoing.read()
            if pending:
                self._sock.send(pending)
        except OSError:
            pass

    @property
    def is_closed(self) -> bool:
        return self.closed

    def fileno(self) -> int:
        return self._sock.fileno()
