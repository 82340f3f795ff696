"""Receive-side CPU per large request, the receive pool on and off.

    python3 bench/receive_pool.py [--frames 300] [--size 990000] [--rounds 3]

A kfast PlaintextTransport receives frames of --size bytes (a librdkafka-sized
produce request by default) over a socketpair from a sender thread that
sends the next frame only once the previous one was cut, so the receive
buffer is empty between frames -- a broker that keeps up with its producers.
Measured: the receiving thread's CPU time (thread_time) per frame, with
kfast._ext.netio's receive pool at its default and turned off
(set_receive_pool_limit(0): each frame then starts in a fresh 64 KiB chunk
that grows by doubling, copying what arrived at each step, into memory the
kernel faults in page by page). Rounds alternate the two.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import struct
import threading
import time

from kfast._ext import netio
from kfast._ext.netio import PlaintextTransport

POOL_DEFAULT = 64 * 1024 * 1024  # RECEIVE_POOL_BYTES in netio.pxd


def receive_cpu_per_frame(frames: int, size: int, pool: bool) -> float:
    netio.set_receive_pool_limit(0)  # start empty either way
    netio.set_receive_pool_limit(POOL_DEFAULT if pool else 0)
    body = os.urandom(size)
    data = struct.pack(">i", size) + body
    receiver, sender = socket.socketpair()
    receiver.setblocking(False)
    transport = PlaintextTransport(receiver.fileno(), 100 * 1024 * 1024)
    cut = threading.Semaphore(0)

    def send() -> None:
        for _ in range(frames):
            sender.sendall(data)
            cut.acquire()

    thread = threading.Thread(target=send)
    thread.start()
    got = 0
    start = time.thread_time()
    try:
        while got < frames:
            select.select([receiver], [], [], 10)
            while transport.receive() > 0:
                pass
            while (frame := transport.next_frame()) is not None:
                assert len(frame) == size
                got += 1
                del frame
                cut.release()
        return (time.thread_time() - start) / frames * 1e6
    finally:
        thread.join(10)
        transport.close()
        receiver.close()
        sender.close()
        netio.set_receive_pool_limit(POOL_DEFAULT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--size", type=int, default=990_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pooled, unpooled = [], []
    for round_ in range(args.rounds):
        order = (True, False) if round_ % 2 == 0 else (False, True)
        for pool in order:
            us = receive_cpu_per_frame(args.frames, args.size, pool)
            (pooled if pool else unpooled).append(us)
            print(f"round {round_} pool {'on ' if pool else 'off'}: {us:8.1f} us CPU per frame")
    on, off = statistics.median(pooled), statistics.median(unpooled)
    print(
        f"median: pool on {on:.1f} us, off {off:.1f} us per {args.size}-byte frame "
        f"({off / on:.1f}x); {on * 1e3 / args.size:.2f} vs {off * 1e3 / args.size:.2f} CPU-s/GB"
    )


if __name__ == "__main__":
    main()
