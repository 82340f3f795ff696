#!/usr/bin/env python3
"""Many partitions: file descriptors held, and restart time after kill -9.

    python3 bench/partition_restart.py [--partitions 1000] [--records 5]
                                       [--fd-limit N] [--checkpoint-wait]

Starts ``kfast serve`` (a subprocess on a free 127.0.0.1 port, a temporary
data dir, stopped here by PID), creates one topic with --partitions
partitions (confluent-kafka AdminClient), produces --records records to every
partition (acks=all) and reads the first one back from each, then:

  fds      descriptors the broker holds (``/proc/<pid>/fd``), per partition
           above the count of an empty broker;
  restart  kill -9, start again on the same data dir, and time from the
           start of the process to the first Metadata answer that lists
           every partition (the port opens only after the logs are loaded).
           The same is timed for a broker with no topic; the difference,
           divided by the partition count, is the per-partition restart cost.

``--checkpoint-wait`` lets the recovery-point checkpoint run (every
log.flush.offset.checkpoint.interval.ms, lowered to 1 s here) before the
kill, as a broker that has been up for a minute has; without it the kill
comes right after the produce. ``--fd-limit`` runs the broker under
``ulimit -n N``. Bounded: --partitions x --records small records on disk,
loopback only; the data dir is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing.ports import free_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "restart"


class Broker:
    def __init__(self, data_dir: str, fd_limit: int | None, overrides=()):
        self.data_dir = data_dir
        self.port = free_port()
        self.fd_limit = fd_limit
        self.overrides = list(overrides)
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start and wait for the port; returns the seconds it took."""
        cmd = [
            sys.executable,
            "-m",
            "kfast",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
        ]
        for item in self.overrides:
            cmd += ["--override", item]
        limit = self.fd_limit

        def lower_fd_limit():
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        began = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=open(
                os.path.join(
                    os.path.dirname(self.data_dir), os.path.basename(self.data_dir) + ".stderr"
                ),
                "a",
            ),
            preexec_fn=lower_fd_limit,
        )
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kfast serve exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return time.monotonic() - began
            except OSError:
                time.sleep(0.002)  # polling a port: there is no event to await

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


def metadata_partitions(bootstrap: str) -> int:
    from kfast.client.blocking import BlockingFetcher

    with BlockingFetcher(bootstrap) as fetcher:
        return len(fetcher.partitions_for(TOPIC))


def time_to_metadata(broker: Broker, partitions: int) -> tuple[float, float]:
    """(seconds to the port, seconds to a Metadata answer with every partition)."""
    began = time.monotonic()
    port_s = broker.start()
    found = metadata_partitions(broker.bootstrap) if partitions else 0
    assert found == partitions, (found, partitions)
    return port_s, time.monotonic() - began


def fill(broker: Broker, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(120)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(records):
        for p in range(partitions):
            producer.produce(TOPIC, value=b"record %d" % i, partition=p)
            producer.poll(0)
    assert producer.flush(120) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(seen) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    seen.add(message.partition())
        assert len(seen) == partitions, f"read back {len(seen)} of {partitions} partitions"
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=5)
    parser.add_argument("--fd-limit", type=int, default=None)
    parser.add_argument("--checkpoint-wait", action="store_true")
    parser.add_argument("--dir", default=None, help="parent directory for the data dirs")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="kfast-restart-", dir=args.dir)
    overrides = ["num.partitions=1", "log.flush.offset.checkpoint.interval.ms=1000"]
    try:
        empty = Broker(os.path.join(root, "empty"), args.fd_limit, overrides)
        empty.start()
        empty_fds = empty.fds()
        empty.kill()
        empty_port_s, empty_s = time_to_metadata(empty, 0)
        empty.kill()

        broker = Broker(os.path.join(root, "full"), args.fd_limit, overrides)
        broker.start()
        began = time.monotonic()
        fill(broker, args.partitions, args.records)
        fill_s = time.monotonic() - began
        fds = broker.fds()
        if args.checkpoint_wait:
            checkpoint = os.path.join(broker.data_dir, "recovery-point-offset-checkpoint")
            before = os.stat(checkpoint).st_mtime_ns if os.path.exists(checkpoint) else 0
            while not os.path.exists(checkpoint) or os.stat(checkpoint).st_mtime_ns == before:
                time.sleep(0.1)  # a file written by another process: nothing to await
        broker.kill()
        port_s, metadata_s = time_to_metadata(broker, args.partitions)
        restarted_fds = broker.fds()
        broker.stop()
        n = args.partitions
        per_partition_ms = (metadata_s - empty_s) * 1000 / n
        print(
            f"{n} partitions x {args.records} records (created, produced and read back "
            f"in {fill_s:.1f} s), fd limit {args.fd_limit or 'inherited'}"
        )
        print(
            f"fds: empty broker {empty_fds}, with the partitions {fds} "
            f"({(fds - empty_fds) / n:.2f} per partition), after the restart {restarted_fds}"
        )
        print(
            f"kill -9 restart: port {port_s:.3f} s, Metadata {metadata_s:.3f} s "
            f"(empty broker: port {empty_port_s:.3f} s, Metadata {empty_s:.3f} s)"
        )
        print(f"restart cost per partition: {per_partition_ms:.2f} ms")
    finally:
        for proc_owner in ("empty", "broker"):
            owner = locals().get(proc_owner)
            if owner is not None:
                owner.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
