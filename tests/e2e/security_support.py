"""Helpers of the security e2e tests: a raw Kafka connection (plain or TLS)
for exchanges no client library exposes, and client settings per library."""

from __future__ import annotations

import socket
import ssl
import struct

import kfast.protocol as p
from kfast.protocol import api_keys


class RawConnection:
    """One socket speaking Kafka's framing; ``request`` sends and decodes the
    answer, ``send_frame``/``read_frame`` for raw SASL v0 tokens."""

    def __init__(
        self,
        port: int,
        context: ssl.SSLContext | None = None,
        timeout: float = 10,
        source: str | None = None,
    ):
        # ``source``: the local address to connect from (ACL tests tell
        # clients apart by host).
        sock = socket.create_connection(
            ("127.0.0.1", port), timeout=timeout, source_address=(source, 0) if source else None
        )
        self.sock = context.wrap_socket(sock, server_hostname="localhost") if context else sock
        self.correlation_id = 0

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def send(self, name: str, version: int, **fields) -> int:
        self.correlation_id += 1
        body = p.request_class(name)(**fields)
        self.sock.sendall(
            p.encode_request(api_keys.BY_NAME[name].key, version, self.correlation_id, "raw", body)
        )
        return self.correlation_id

    def request(self, name: str, version: int, **fields):
        correlation_id = self.send(name, version, **fields)
        got, body = p.decode_response(api_keys.BY_NAME[name].key, version, self.read_frame())
        assert got == correlation_id
        return body

    def closed_by_broker(self) -> bool:
        """True once the broker closed the connection (EOF, nothing more)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()
