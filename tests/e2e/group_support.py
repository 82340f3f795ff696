"""Consumer-group helpers shared by test_groups.py and test_groups_clients.py.

Consumers that must be killed run as subprocesses: ``ConsumerProcess``
starts either the Python script below (kafka-python, confluent-kafka classic
and ``group.protocol=consumer``, aiokafka) or ``kcat -G``, and turns what
they print into events: the partitions assigned after each rebalance and the
values consumed. The script prints one JSON line per event:
{"assigned": [partitions]} after each rebalance and {"value": ...} per record
(committed synchronously before it is printed, so a printed record is a
committed one). kcat reports rebalances on stderr ("% Group g rebalanced
(memberid m): assigned: t [0], t [1]") and records as JSON lines (-J) on
stdout; it commits on its own (auto commit), so for kcat a printed record is
only a consumed one.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import uuid

import pytest
from e2e_support import REPO

from kfast.testing import KfastBroker

SESSION_MS = 6000
PARTITIONS = 6

CONSUMER_SCRIPT = r"""
import json, signal, sys
client, bootstrap, topic, group, instance, session = sys.argv[1:7]
session = int(session)
instance = instance or None
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))

def emit(**event):
    print(json.dumps(event), flush=True)

if client in ("confluent", "confluent-consumer"):
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000}
    if instance:
        conf["group.instance.id"] = instance
    if client == "confluent-consumer":
        # KIP-848: the broker assigns (and sets the session timeout);
        # callbacks are incremental, so the owned set is reported whole.
        conf["group.protocol"] = "consumer"
        owned = set()
        def on_assign(c, ps):
            owned.update(p.partition for p in ps)
            emit(assigned=sorted(owned))
        def on_revoke(c, ps):
            owned.difference_update(p.partition for p in ps)
            emit(assigned=sorted(owned))
        callbacks = {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_revoke}
    else:
        conf.update({"session.timeout.ms": session, "heartbeat.interval.ms": 500})
        callbacks = {
            "on_assign": lambda c, ps: emit(assigned=sorted(p.partition for p in ps)),
            "on_revoke": lambda c, ps: emit(revoked=sorted(p.partition for p in ps))}
    c = Consumer(conf)
    c.subscribe([topic], **callbacks)
    while not stop:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        c.commit(message=m, asynchronous=False)
        emit(value=m.value().decode(), partition=m.partition())
    c.close()
elif client == "kafka-python":
    from kafka import KafkaConsumer, ConsumerRebalanceListener
    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(revoked=sorted(p.partition for p in revoked))
        def on_partitions_assigned(self, assigned):
            emit(assigned=sorted(p.partition for p in assigned))
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=session,
                      heartbeat_interval_ms=500, group_instance_id=instance,
                      metadata_max_age_ms=1000)
    c.subscribe([topic], listener=Listener())
    c.partitions_for_topic(topic)   # metadata before the join: see subscribe_kafka_python
    while not stop:
        for tp, records in c.poll(200).items():
            for r in records:
                c.commit()
                emit(value=r.value.decode(), partition=tp.partition)
    c.close()
elif client == "aiokafka":
    import asyncio
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(revoked=sorted(p.partition for p in revoked))
        def on_partitions_assigned(self, assigned):
            emit(assigned=sorted(p.partition for p in assigned))
    async def main():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             group_instance_id=instance,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=session, heartbeat_interval_ms=500,
                             metadata_max_age_ms=1000)
        c.subscribe([topic], listener=Listener())
        await c.start()
        try:
            while not stop:
                batch = await c.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    for r in records:
                        await c.commit()
                        emit(value=r.value.decode(), partition=tp.partition)
        finally:
            await c.stop()
    asyncio.run(main())
emit(closed=True)
"""

# kcat -G, stderr: "% Group <g> rebalanced (memberid <m>): assigned: <t> [0], <t> [1]"
# (or "revoked: ..."; an empty assignment has no partition list).
_KCAT_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked):?(.*)")
_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


def kcat_command(
    bootstrap: str,
    topic: str,
    group: str,
    instance: str | None = None,
    session_ms: int = SESSION_MS,
    *extra: str,
) -> list[str]:
    """kcat as a balanced consumer (-G) printing records as JSON lines. It
    starts from the committed offsets (-o would override them on every
    assignment), from the beginning where none are committed."""
    cmd = [
        "kcat",
        "-b",
        bootstrap,
        "-G",
        group,
        "-u",
        "-J",
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        f"session.timeout.ms={session_ms}",
        "-X",
        "heartbeat.interval.ms=500",
        "-X",
        "topic.metadata.refresh.interval.ms=1000",
        *extra,
    ]
    if instance:
        cmd += ["-X", f"group.instance.id={instance}"]
    return cmd + [topic]


class ConsumerProcess:
    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        instance: str | None = None,
        session_ms: int = SESSION_MS,
    ):
        self.assigned: list[int] | None = None
        self.assignments: list[list[int]] = []
        self.values: set[str] = set()
        self.consumed: list[tuple[int, str]] = []  # (partition, value), repeats kept
        self.closed = False
        self.events: queue.Queue = queue.Queue()
        if client == "kcat":
            self.proc = subprocess.Popen(
                kcat_command(bootstrap, topic, group, instance, session_ms),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            threading.Thread(target=self._pump_kcat_stderr, daemon=True).start()
            threading.Thread(target=self._pump_kcat_stdout, daemon=True).start()
            return
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONSUMER_SCRIPT,
                client,
                bootstrap,
                topic,
                group,
                instance or "",
                str(session_ms),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _on_event(self, event: dict) -> None:
        if "assigned" in event:
            self.assigned = event["assigned"]
            self.assignments.append(event["assigned"])
        elif "revoked" in event:
            # kafka-python and aiokafka revoke (nothing) before their first join.
            if self.assigned is not None:
                self.assigned = [p for p in self.assigned if p not in event["revoked"]]
        elif "value" in event:
            self.values.add(event["value"])
            self.consumed.append((event["partition"], event["value"]))
        elif "closed" in event:
            self.closed = True
        self.events.put(event)

    def _pump(self):
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._on_event(event)

    def _pump_kcat_stdout(self):
        for line in self.proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            self._on_event({"value": record["payload"], "partition": record["partition"]})
        self._on_event({"closed": True})

    def _pump_kcat_stderr(self):
        for line in self.proc.stderr:
            match = _KCAT_REBALANCE.search(line)
            if match:
                partitions = sorted(int(p) for p in _KCAT_PARTITION.findall(match.group(2)))
                self._on_event({match.group(1): partitions})

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    instance = KfastBroker(
        {
            "num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 1000,
            # KIP-848 members take their timings from the broker.
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.consumer.heartbeat.interval.ms": 500,
        },
        data_dir=str(tmp_path_factory.mktemp("kfast-groups")),
    )
    instance.start()
    yield instance
    instance.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, values, partitions: int = PARTITIONS) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions)
    assert producer.flush(15) == 0


def subscribe_kafka_python(consumer, topic: str, listener=None) -> None:
    """Subscribe a kafka-python consumer and wait for the topic's metadata
    before its first poll() joins the group.

    kafka-python (3.0.12) otherwise joins before it has metadata for a new
    subscription: as leader it assigns nothing, then rejoins when the
    metadata arrives. That second join is owed to its metadata snapshot, not
    to its rejoin flag, and the leader's assignment updates the snapshot; if
    the poll() that started the join times out before the join ends, the
    next poll() sees nothing to rejoin and never applies the assignment (no
    partitions, no heartbeats, expelled after the session timeout). The
    Java client fixed the same race in KAFKA-9815. With the partitions known
    first, the first assignment is the final one. CONSUMER_SCRIPT does the
    same inline.
    """
    consumer.subscribe([topic], listener=listener)
    consumer.partitions_for_topic(topic)


def owned(consumers) -> list[int]:
    """Partitions owned by the live consumers, with repetitions."""
    return sorted(p for c in consumers for p in (c.assigned or []))


@pytest.fixture
def names():
    suffix = uuid.uuid4().hex[:8]
    return f"topic-{suffix}", f"group-{suffix}"
