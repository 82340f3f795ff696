"""Below the free-space threshold writes wait for space, reads go on.

A ``kfast serve`` broker on a 64 MiB tmpfs keeps the default threshold,
min(1 GiB, 5% of 64 MiB) = 3.2 MiB. A filler file leaves 2 MiB free: a
confluent-kafka producer without retries gets KAFKA_STORAGE_ERROR,
CreateTopics and CreatePartitions are refused with POLICY_VIOLATION and a
message naming the threshold, a consumer still reads everything; a producer
with retries waits instead of failing, and once the filler is removed its
records are acknowledged with no restart. A kill -9 and restart then has
every acknowledged record, once.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from disk_support import consume_values, fill, free_bytes, mounted_tmpfs
from e2e_support import ServeProcess, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MIB = 1 << 20
THRESHOLD = int(64 * MIB * 0.05)  # the default: 5% of the filesystem, under 1 GiB


def _producer(broker, **config) -> Producer:
    return Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 1, **config}
    )


def _produce(producer: Producer, topic: str, values: list[bytes]) -> dict[bytes, KafkaError | None]:
    """Each value's delivery outcome (None: acknowledged) after flushing."""
    outcome: dict[bytes, KafkaError | None] = {}

    def on_delivery(err, msg):
        outcome[msg.value()] = err

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    return outcome


def test_writes_wait_below_the_threshold_and_resume_once_space_is_freed(tmp_path):
    with mounted_tmpfs(tmp_path / "disk", "64m") as disk:
        broker = ServeProcess(
            str(disk / "data"),
            free_port(),
            ["kfast.log.dirs.free.space.check.interval.ms=100"],
        )
        try:
            broker.start()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic("roomy", 1, 1)])["roomy"].result(30)
            before = [b"before-%d" % i for i in range(100)]
            assert set(_produce(_producer(broker), "roomy", before).values()) == {None}

            filler = fill(disk, leave_bytes=2 * MIB)
            assert free_bytes(disk) < THRESHOLD

            # Refused, with the retriable storage error, as soon as the
            # monitor has looked again (at most 100 ms later).
            strict = _producer(broker, retries=0)
            deadline = time.monotonic() + 30
            while True:
                outcome = _produce(strict, "roomy", [b"probe"])
                if outcome[b"probe"] is not None or time.monotonic() > deadline:
                    break
                before.append(b"probe")
            assert outcome[b"probe"] is not None, "produce below the threshold was acknowledged"
            assert outcome[b"probe"].code() == KafkaError.KAFKA_STORAGE_ERROR

            # No new partitions either, with the reason.
            futures = admin.create_topics([NewTopic("crowded", 1, 1)])
            with pytest.raises(KafkaException) as refused:
                futures["crowded"].result(30)
            error = refused.value.args[0]
            assert error.code() == KafkaError.POLICY_VIOLATION
            assert "below the 3.2 MiB kept free" in error.str()
            assert "kfast.log.dirs.min.free.bytes" in error.str()
            futures = admin.create_partitions([NewPartitions("roomy", 2)])
            with pytest.raises(KafkaException) as refused:
                futures["roomy"].result(30)
            assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

            # Reads go on.
            assert consume_values(broker.bootstrap_servers, "roomy", [0], len(before)) == set(
                before
            )

            # A retrying producer waits for space instead of failing ...
            waiting = _producer(broker, **{"message.timeout.ms": 60000, "retry.backoff.ms": 50})
            outcome = {}

            def on_delivery(err, msg):
                outcome[msg.value()] = err

            after = [b"after-%d" % i for i in range(50)]
            for value in after:
                waiting.produce("roomy", value, partition=0, on_delivery=on_delivery)
            # Nothing can be acknowledged while the disk stays low: poll for
            # a second and see no delivery report.
            waiting.poll(1.0)
            assert outcome == {}
            # ... and is acknowledged once space is freed, with no restart.
            os.unlink(filler)
            assert waiting.flush(60) == 0
            assert outcome == dict.fromkeys(after)
            admin.create_topics([NewTopic("spacious", 1, 1)])["spacious"].result(30)

            output = "".join(broker.output)
            assert "below the 3.2 MiB to keep free: refusing produce" in output
            assert "free again: accepting writes" in output
            assert "Traceback" not in output, output[-5000:]

            # kill -9 and restart: every acknowledged record is there.
            broker.kill()
            broker.start()
            acknowledged = before + after
            values = consume_values(broker.bootstrap_servers, "roomy", [0], len(set(acknowledged)))
            assert values == set(acknowledged)
            assert broker.terminate() == 0
        finally:
            broker.kill()
