"""Small disks for the full-disk e2e tests: a tmpfs of a given size at a
fresh mount point (root mounts it; the test is skipped with the reason where
mounting is impossible), a filler file leaving a chosen amount free, and a
read-back of a partition's values."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: 8m, 64m) at ``mount_point``;
    unmounted afterwards, also when the test fails."""
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def free_bytes(mount_point) -> int:
    stat = os.statvfs(mount_point)
    return stat.f_bavail * stat.f_frsize


def fill(mount_point, leave_bytes: int) -> str:
    """A filler file taking all but ``leave_bytes`` of the disk."""
    filler = os.path.join(mount_point, "filler")
    with open(filler, "ab") as f:
        try:
            f.write(b"\0" * max(free_bytes(mount_point) - leave_bytes, 0))
            f.flush()
        except OSError:
            pass  # full already: what the caller wants
    return filler


def consume_values(
    bootstrap_servers: str, topic: str, partitions: list[int], expected: int
) -> set[bytes]:
    """The values read from ``partitions`` from offset 0, until ``expected``
    distinct ones are there or 30 s have passed."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "audit", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    values: set[bytes] = set()
    deadline = time.monotonic() + 30
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
    finally:
        consumer.close()
    return values
