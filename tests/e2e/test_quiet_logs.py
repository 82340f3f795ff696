"""Garbage connections do not flood the log: ``kfast serve`` sent 500
connections of non-Kafka bytes writes a handful of WARNING lines, and every
connection is either logged or counted in them."""

from __future__ import annotations

import re
import socket
import struct

import pytest
from e2e_support import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CONNECTIONS_PER_KIND = 250
# What port scanners and clients of other protocols send: an HTTP request
# (its first four bytes read as a size beyond socket.request.max.bytes), and
# a well-sized frame with an API key Kafka does not have.
HTTP_REQUEST = b"GET / HTTP/1.1\r\nHost: kfast\r\n\r\n"
UNKNOWN_API_KEY = struct.pack(">ihhih", 10, 9999, 0, 1, -1)
_COUNT = re.compile(r"(\d+) more like this in the last .*? \((.+?)\), the first: ")


def _send_garbage(port: int, payload: bytes) -> None:
    """One connection: send ``payload``, wait until the broker closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(payload)
        while sock.recv(4096):
            pass


def test_garbage_connections_log_a_few_lines_with_counts(serve):
    node = serve().start()
    for _ in range(CONNECTIONS_PER_KIND):
        _send_garbage(node.port, HTTP_REQUEST)
        _send_garbage(node.port, UNKNOWN_API_KEY)
    assert node.terminate() == 0
    # The pump thread may still be reading the last lines after the exit.
    wait_until(
        lambda: any(" shut down in " in line for line in node.output), message="the shutdown line"
    )
    warnings = [line for line in node.output if " WARNING " in line]
    assert 2 <= len(warnings) <= 8, "".join(warnings)
    logged = {"invalid receive": 0, "unparseable request": 0}
    counted = dict(logged)
    for line in warnings:
        found = _COUNT.search(line)
        if found:
            counted[found.group(2)] += int(found.group(1))
        elif "Invalid receive" in line:
            logged["invalid receive"] += 1
        elif "cannot parse the request header" in line:
            logged["unparseable request"] += 1
    # Every garbage connection is accounted for, most of them in a count.
    for kind in logged:
        assert logged[kind] + counted[kind] == CONNECTIONS_PER_KIND, (kind, warnings)
        assert counted[kind] >= CONNECTIONS_PER_KIND // 2
