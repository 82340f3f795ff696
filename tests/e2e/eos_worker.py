"""A consume-transform-produce worker for tests/e2e/test_transactions_eos.py,
run as its own process so a test can kill -9 it:

    python eos_worker.py CLIENT BOOTSTRAP --input IN --output OUT --group G
                         --transactional-id T [--batch 100] [--pause-after K]

CLIENT is confluent-kafka, kafka-python or aiokafka. A consumer in group G
(read_committed, no auto commit) subscribes to IN; per batch the producer
begins a transaction, writes ``b"out-" + value`` with the input's key to the
same partition of OUT, sends the batch's offsets to the transaction and
commits. Progress goes to stdout, one line each:

    ready            init_transactions done, consuming
    committed N      N transactions committed by this process
    open             (after K commits, with --pause-after K) a transaction
                     is open, its records written and its offsets sent
                     (pending in the group coordinator); the worker reads
                     a line from stdin before it commits
    done             every partition of IN consumed and committed
    error ...        any failure (exit status 2, or 3 when a client call
                     outlived its timeout): a restart with the same
                     transactional.id recovers, as a real worker would

The worker stops with ``done`` once its consumer's position reached the end
of every input partition.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import os
import sys
import threading
import traceback

END_TIMEOUT_S = 60


def say(line: str) -> None:
    print(line, flush=True)


def transform(value: bytes) -> bytes:
    return b"out-" + value


class Progress:
    """Counts commits and says when to pause."""

    def __init__(self, pause_after: int | None):
        self.pause_after = pause_after
        self.committed = 0

    def pause_now(self) -> bool:
        return self.pause_after is not None and self.committed == self.pause_after

    def commit_done(self) -> None:
        self.committed += 1
        say(f"committed {self.committed}")


@contextlib.contextmanager
def deadline(call: str):
    """Hold a client call to the END_TIMEOUT_S it was given: past it (and a
    margin) the worker exits as a failed one, and the test restarts it.

    librdkafka checks no timeout on a request to a coordinator
    (confluentinc/librdkafka#5456, open) and, when the broker it cached as
    the group coordinator left the cluster's metadata (killed, then fenced,
    as in Kafka), waits for that broker forever (#5511, open):
    send_offsets_to_transaction then never returns."""
    timer = threading.Timer(END_TIMEOUT_S + 10, _give_up, (call,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _give_up(call: str) -> None:
    faulthandler.dump_traceback()
    say(f"error {call} did not return in {END_TIMEOUT_S} s")
    os._exit(3)


def run_confluent(args, progress: Progress) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    # No re-bootstrap when every broker is down (the one broker killed):
    # librdkafka then decommissions the broker it cached as the group
    # coordinator and send_offsets_to_transaction waits for it forever
    # (confluentinc/librdkafka#5511, open).
    common = {"bootstrap.servers": args.bootstrap, "metadata.recovery.strategy": "none"}
    consumer = Consumer(
        {
            **common,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer({**common, "transactional.id": args.transactional_id})
    producer.init_transactions(END_TIMEOUT_S)
    consumer.subscribe([args.input])
    say("ready")
    ends = None
    while True:
        messages = [m for m in consumer.consume(args.batch, 0.5) if not m.error()]
        if not messages:
            assignment = consumer.assignment()
            if len(assignment) == args.partitions:
                if ends is None:
                    ends = {
                        tp.partition: consumer.get_watermark_offsets(tp, 10)[1] for tp in assignment
                    }
                positions = consumer.position(assignment)
                if all(tp.offset >= ends[tp.partition] for tp in positions):
                    break
            continue
        producer.begin_transaction()
        next_offsets: dict[int, int] = {}
        for message in messages:
            producer.produce(
                args.output,
                key=message.key(),
                value=transform(message.value()),
                partition=message.partition(),
            )
            next_offsets[message.partition()] = message.offset() + 1
        with deadline("send_offsets_to_transaction"):
            producer.send_offsets_to_transaction(
                [TopicPartition(args.input, p, o) for p, o in next_offsets.items()],
                consumer.consumer_group_metadata(),
                END_TIMEOUT_S,
            )
        if progress.pause_now():
            assert producer.flush(END_TIMEOUT_S) == 0
            say("open")
            sys.stdin.readline()
        producer.commit_transaction(END_TIMEOUT_S)
        progress.commit_done()
    consumer.close()


def run_kafka_python(args, progress: Progress) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap, transactional_id=args.transactional_id
    )
    producer.init_transactions()
    say("ready")
    everything = [TopicPartition(args.input, p) for p in range(args.partitions)]
    ends = None
    while True:
        batches = consumer.poll(timeout_ms=500, max_records=args.batch)
        if not any(batches.values()):
            if consumer.assignment() == set(everything):
                if ends is None:
                    ends = consumer.end_offsets(everything)
                if all(consumer.position(tp) >= ends[tp] for tp in everything):
                    break
            continue
        producer.begin_transaction()
        offsets = {}
        for tp, records in batches.items():
            for record in records:
                producer.send(
                    args.output,
                    key=record.key,
                    value=transform(record.value),
                    partition=tp.partition,
                )
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        if progress.pause_now():
            producer.flush(END_TIMEOUT_S)
            say("open")
            sys.stdin.readline()
        producer.commit_transaction()
        progress.commit_done()
    consumer.close()
    producer.close(timeout=10)


def run_aiokafka(args, progress: Progress) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def main():
        consumer = AIOKafkaConsumer(
            args.input,
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=args.bootstrap, transactional_id=args.transactional_id
        )
        await producer.start()
        await consumer.start()
        say("ready")
        everything = {TopicPartition(args.input, p) for p in range(args.partitions)}
        ends = None
        loop = asyncio.get_running_loop()
        try:
            while True:
                batches = await consumer.getmany(timeout_ms=500, max_records=args.batch)
                if not any(batches.values()):
                    if consumer.assignment() == everything:
                        if ends is None:
                            ends = await consumer.end_offsets(list(everything))
                        positions = {tp: await consumer.position(tp) for tp in everything}
                        if all(positions[tp] >= ends[tp] for tp in everything):
                            break
                    continue
                await producer.begin_transaction()
                sent, offsets = [], {}
                for tp, records in batches.items():
                    for record in records:
                        sent.append(
                            await producer.send(
                                args.output,
                                key=record.key,
                                value=transform(record.value),
                                partition=tp.partition,
                            )
                        )
                    offsets[tp] = records[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, args.group)
                if progress.pause_now():
                    await asyncio.gather(*sent)
                    say("open")
                    await loop.run_in_executor(None, sys.stdin.readline)
                await producer.commit_transaction()
                progress.commit_done()
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(main())


CLIENTS = {
    "confluent-kafka": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("bootstrap")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--pause-after", type=int, default=None)
    args = parser.parse_args()
    # A test that gives up on the worker ends it with SIGABRT: its stacks
    # go to stderr.
    faulthandler.enable()
    progress = Progress(args.pause_after)
    try:
        CLIENTS[args.client](args, progress)
    except Exception as exc:
        traceback.print_exc()
        say(f"error {exc!r}")
        return 2
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
