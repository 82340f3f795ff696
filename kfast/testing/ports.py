"""free_port: a loopback port for a server a test starts later.

A port found by binding port 0 and closing the socket is in the kernel's
ephemeral range, where the next outgoing connection or the next server
binding port 0 (a FaultProxy) may be given it before the test's server
binds it -- "Address already in use" at a cluster node's start, seen in
CI. Ports here come from below that range, checked free by binding, and
never twice from one process. Under pytest-xdist each worker draws from its
own slice of that range, so two workers never hand out the same port.
"""

from __future__ import annotations

import os
import random
import socket

_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_slice(low: int, high: int) -> tuple[int, int]:
    """This pytest-xdist worker's share of [low, high] (all of it outside
    xdist): worker gwN of M takes the N-th of M equal slices."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index = int(worker.removeprefix("gw"))
        count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return low, high
    if not 0 <= index < count:
        return low, high
    width = (high - low + 1) // count
    return low + index * width, low + (index + 1) * width - 1


def free_port() -> int:
    """A free port below the kernel's ephemeral range (module doc)."""
    low = max(1024, min(_ephemeral_low(), 65536) - 20000)
    high = max(low + 1000, min(_ephemeral_low(), 65536) - 1)
    low, high = _worker_slice(low, high)
    for _ in range(200):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # a crowded range: the old way
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
