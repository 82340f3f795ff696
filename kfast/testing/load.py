"""Acknowledged load for fault tests: what was acknowledged, and whether it
all came back.

    load = AckedLoad(cluster.bootstrap_servers, "chaos", partitions=3).start()
    ...                                       # kill -9, partition, restart
    load.stop()                               # flushes; load.failures lists errors
    read = read_back(cluster.bootstrap_servers, "chaos", 3, load.total)
    assert audit(load.acked, read) == Audit(lost=0, duplicated=0, moved=0)

AckedLoad is a confluent-kafka (librdkafka) producer with
enable.idempotence and acks=all writing ``v0, v1, ...`` round-robin over
the partitions on a thread of its own, keeping every acknowledgement as
(offset, value) per partition. ``audit`` is Kafka's guarantee as a test
states it: every acknowledged record is read back, exactly once, at the
offset it was acknowledged at. Used by the replication tests and
bench/replication_chaos.py; usable in a project's own fault tests.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple


class AckedLoad:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        linger_ms: int = 5,
        pause_every: int = 50,
        pause_s: float = 0.005,
    ):
        """Every ``pause_every`` records the producer sleeps ``pause_s``:
        a steady load that leaves the brokers' cores some room."""
        self.bootstrap_servers = bootstrap_servers
        self.topic, self.partitions = topic, partitions
        self.linger_ms, self.pause_every, self.pause_s = linger_ms, pause_every, pause_s
        self.acked: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        self.ack_times: list[float] = []
        self.failures: list[str] = []
        self.unflushed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"acked-load-{topic}", daemon=True)

    @property
    def total(self) -> int:
        return sum(map(len, self.acked.values()))

    def start(self) -> AckedLoad:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        """Stop producing and wait for the outstanding acknowledgements
        (``unflushed``: messages still unanswered after ``flush_timeout``)."""
        self._flush_timeout = flush_timeout
        self._stop.set()
        self._thread.join(flush_timeout + 60)

    def _on_delivery(self, err, message) -> None:
        if err:
            self.failures.append(str(err))
        else:
            self.acked[message.partition()].append((message.offset(), message.value().decode()))
            self.ack_times.append(time.monotonic())

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": self.linger_ms,
            }
        )
        i = 0
        while not self._stop.is_set():
            try:
                producer.produce(
                    self.topic,
                    value=f"v{i}",
                    partition=i % self.partitions,
                    on_delivery=self._on_delivery,
                )
                i += 1
            except BufferError:
                producer.poll(0.05)  # the local queue is full: let it drain
            producer.poll(0)
            if i % self.pause_every == 0:
                time.sleep(self.pause_s)
        self.unflushed = producer.flush(self._flush_timeout)


def read_back(
    bootstrap_servers: str, topic: str, partitions: int, count: int, timeout: float = 60.0
) -> dict[int, list[tuple[int, str]]]:
    """{partition: [(offset, value)]} read from offset 0 (assigned, no
    group) until ``count`` records or ``timeout`` seconds."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "read-back",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                # assign()ed partitions: every message has a partition and offset;
                # the load's values are never null.
                partition, value = message.partition(), message.value()
                assert partition is not None and value is not None
                got[partition].append((message.offset(), value.decode()))
    finally:
        consumer.close()
    return got


class Audit(NamedTuple):
    lost: int  # acknowledged, never read back
    duplicated: int  # read back more than once
    moved: int  # read back at another offset than acknowledged


def audit(acked: dict[int, list], read: dict[int, list]) -> Audit:
    lost = duplicated = moved = 0
    for partition, records in acked.items():
        got = read.get(partition, [])
        values = [value for _, value in got]
        present = set(values)
        duplicated += len(values) - len(present)
        at = dict(got)
        lost += sum(1 for _, value in records if value not in present)
        moved += sum(1 for offset, value in records if at.get(offset) != value)
    return Audit(lost, duplicated, moved)
