#!/usr/bin/env python3
"""Transactional produce vs idempotent produce, kfast vs Tansu 0.6, with
confluent-kafka (librdkafka) as the client.

    python bench/transactions.py                        # both brokers, 100,000 records
    python bench/transactions.py --repeat 3 --json out.json
    python bench/transactions.py --brokers kfast --records 200000

For each broker (started here on a free 127.0.0.1 port with broker_load's
run_broker, stopped by PID) and each round, on a fresh one-partition topic
per phase, with 100-byte records:

  idempotent: one producer with enable.idempotence (acks=all), produce()
      every record, then flush(); records/s over the whole run;
  transactional: one producer with a transactional.id; begin, produce
      --commit-every records (1,000), commit, and again; records/s over the
      whole run (init_transactions() not included). Each end of a
      transaction is timed twice: ``commit`` is commit_transaction() after a
      flush() (EndTxn: the coordinator writes PrepareCommit and answers; the
      markers follow), ``end`` is flush() + commit_transaction() (what a
      caller waits for after its last produce());
  read_committed check: a read_committed consumer reads the transactional
      topic back and must find every committed record (a broker that
      acknowledged commits but hides or drops the records fails here);
  abort check: an aborted transaction of 10 records and a committed one of
      1 on a new topic: read_committed must read 1, read_uncommitted 11.

Broker CPU seconds (utime + stime from /proc/<pid>/stat) are taken around
each phase. Everything is bounded: a record count and a wall-clock limit per
phase (a phase that hits the limit says so), and init_transactions() and
each commit are given that limit too; a client error ends the phase and is
reported with librdkafka's message. Tansu is run with memory storage as in
broker_load.py (`pip install 'kfast[bench]'`). The producer runs in this
process: on a two-core machine it shares the CPU with the broker, the same
for both brokers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import RECORD_SIZE, cpu_seconds, create_topic, run_broker

PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "delivery.report.only.error": True,
}


class PhaseFailed(Exception):
    pass


def _producer(bootstrap: str, errors: list, **config):
    from confluent_kafka import Producer

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))

    return Producer(
        {"bootstrap.servers": bootstrap, "on_delivery": on_delivery, **PRODUCER, **config}
    )


def _produce(producer, topic: str, payload: bytes, count: int, deadline: float) -> int:
    sent = 0
    while sent < count and time.monotonic() < deadline:
        try:
            producer.produce(topic, payload, partition=0)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    return sent


def idempotent(bootstrap: str, topic: str, records: int, limit_s: float) -> dict:
    errors: list[str] = []
    producer = _producer(bootstrap, errors, **{"enable.idempotence": True})
    # One record delivered before the clock starts: connected, and the
    # producer id acquired (librdkafka asks for it 500 ms after start when
    # no broker connection was up yet, as init_transactions() does for the
    # transactional phase before its clock).
    producer.produce(topic, b"x" * RECORD_SIZE, partition=0)
    if producer.flush(limit_s) or errors:
        raise PhaseFailed(f"the first record was not delivered: {errors[:3]}")
    start = time.monotonic()
    deadline = start + limit_s
    sent = _produce(producer, topic, b"x" * RECORD_SIZE, records, deadline)
    undelivered = producer.flush(max(0.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - start
    delivered = sent - undelivered - len(errors)
    return {
        "records": delivered,
        "seconds": elapsed,
        "records_per_s": delivered / elapsed,
        "errors": errors[:3],
        "hit_limit": delivered < records,
    }


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def transactional(
    bootstrap: str, topic: str, records: int, commit_every: int, limit_s: float
) -> dict:
    from confluent_kafka import KafkaException

    errors: list[str] = []
    producer = _producer(bootstrap, errors, **{"transactional.id": f"bench-{uuid.uuid4().hex}"})
    try:
        producer.init_transactions(limit_s)
    except KafkaException as exc:
        raise PhaseFailed(f"init_transactions(): {exc.args[0]}") from None
    payload = b"x" * RECORD_SIZE
    commits, ends = [], []
    committed = 0
    start = time.monotonic()
    deadline = start + limit_s
    try:
        while committed < records and time.monotonic() < deadline:
            producer.begin_transaction()
            sent = _produce(
                producer, topic, payload, min(commit_every, records - committed), deadline
            )
            flush_start = time.monotonic()
            if producer.flush(max(0.0, deadline - flush_start)):
                break  # the limit: this transaction is not counted
            commit_start = time.monotonic()
            producer.commit_transaction(max(0.1, deadline - commit_start))
            done = time.monotonic()
            commits.append(done - commit_start)
            ends.append(done - flush_start)
            committed += sent
    except KafkaException as exc:
        raise PhaseFailed(f"after {committed} committed records: {exc.args[0]}") from None
    elapsed = time.monotonic() - start
    if errors:
        raise PhaseFailed(f"delivery errors: {errors[:3]}")
    return {
        "records": committed,
        "transactions": len(commits),
        "seconds": elapsed,
        "records_per_s": committed / elapsed,
        "commit_p50_ms": 1000 * statistics.median(commits),
        "commit_p99_ms": 1000 * _percentile(commits, 0.99),
        "end_p50_ms": 1000 * statistics.median(ends),
        "end_p99_ms": 1000 * _percentile(ends, 0.99),
        "hit_limit": committed < records,
    }


def read_committed(bootstrap: str, topic: str, expected: int, limit_s: float) -> int:
    """Records a read_committed consumer reads from the beginning (stops at
    ``expected`` or at the limit)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-rc",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + limit_s
    while got < expected and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10000, 0.5) if m.error() is None)
    consumer.close()
    return got


def abort_check(bootstrap: str, topic: str, limit_s: float) -> dict:
    """An aborted transaction of 10 records, then a committed one of 1: a
    read_committed consumer must read 1 record, a read_uncommitted one 11."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    errors: list[str] = []
    producer = _producer(bootstrap, errors, **{"transactional.id": f"bench-{uuid.uuid4().hex}"})
    try:
        producer.init_transactions(limit_s)
        for count, commit in ((10, False), (1, True)):
            producer.begin_transaction()
            _produce(producer, topic, b"x" * RECORD_SIZE, count, time.monotonic() + limit_s)
            producer.flush(limit_s)
            (producer.commit_transaction if commit else producer.abort_transaction)(limit_s)
    except KafkaException as exc:
        return {"failed": str(exc.args[0])}
    read = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-abort",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        got, deadline = 0, time.monotonic() + min(limit_s, 15)
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                got += 1
            elif message.error().code() == -191:  # _PARTITION_EOF
                break
        consumer.close()
        read[isolation] = got
    return read


def _phase(proc, name: str, run) -> dict:
    before = cpu_seconds(proc.pid)
    try:
        result = run()
    except PhaseFailed as exc:
        result = {"failed": str(exc)}
    result["broker_cpu_s"] = cpu_seconds(proc.pid) - before
    print(f"    {name}: {_summary(result)}", flush=True)
    return result


def _summary(result: dict) -> str:
    if "failed" in result:
        return f"FAILED: {result['failed']}"
    text = f"{result['records_per_s']:,.0f} records/s"
    if "commit_p50_ms" in result:
        text += (
            f", commit p50/p99 {result['commit_p50_ms']:.2f}/{result['commit_p99_ms']:.2f} "
            f"ms, flush+commit p50/p99 {result['end_p50_ms']:.2f}/"
            f"{result['end_p99_ms']:.2f} ms"
        )
    if result.get("hit_limit"):
        text += " (hit the phase limit)"
    return text + f", broker CPU {result['broker_cpu_s']:.2f} s"


def run_round(kind: str, args) -> dict:
    overrides = tuple(args.kfast_override) if kind == "kfast" else ()
    with run_broker(kind, overrides) as (proc, bootstrap, _ready):
        print(f"  {kind} on {bootstrap}", flush=True)
        results = {}
        for name in ("idempotent", "transactional"):
            topic = f"bench-{name}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, 1)
            if name == "idempotent":
                results[name] = _phase(
                    proc, name, lambda: idempotent(bootstrap, topic, args.records, args.phase_limit)
                )
                continue
            results[name] = _phase(
                proc,
                name,
                lambda: transactional(
                    bootstrap, topic, args.records, args.commit_every, args.phase_limit
                ),
            )
            committed = results[name].get("records", 0)
            if committed:
                got = read_committed(bootstrap, topic, committed, args.phase_limit)
                results["read_committed"] = {"expected": committed, "read": got}
                print(f"    read_committed: {got:,} of {committed:,} committed records", flush=True)
            topic = f"bench-abort-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, 1)
            results["abort_check"] = abort_check(bootstrap, topic, args.phase_limit)
            print(
                f"    abort check (expect read_committed 1, read_uncommitted 11): "
                f"{results['abort_check']}",
                flush=True,
            )
        return results


def _median(rounds: list[dict], kind: str, phase: str, key: str) -> float | None:
    values = [r[kind][phase][key] for r in rounds if key in r[kind].get(phase, {})]
    return statistics.median(values) if values else None


def report(rounds: list[dict], kinds: list[str]) -> None:
    print("\nmedians over", len(rounds), "round(s)")
    rows = [
        ("idempotent records/s", "idempotent", "records_per_s"),
        ("transactional records/s", "transactional", "records_per_s"),
        ("commit p50 ms", "transactional", "commit_p50_ms"),
        ("commit p99 ms", "transactional", "commit_p99_ms"),
        ("flush+commit p50 ms", "transactional", "end_p50_ms"),
        ("flush+commit p99 ms", "transactional", "end_p99_ms"),
        ("broker CPU s, transactional", "transactional", "broker_cpu_s"),
    ]
    print("| | " + " | ".join(kinds) + " |")
    for label, phase, key in rows:
        cells = []
        for kind in kinds:
            value = _median(rounds, kind, phase, key)
            cells.append(
                "failed"
                if value is None
                else f"{value:,.2f}"
                if "ms" in label or "CPU" in label
                else f"{value:,.0f}"
            )
        print(f"| {label} | " + " | ".join(cells) + " |")
    for kind in kinds:
        txn = _median(rounds, kind, "transactional", "records_per_s")
        idem = _median(rounds, kind, "idempotent", "records_per_s")
        if txn and idem:
            print(f"{kind}: transactional / idempotent = {txn / idem:.2f}x")
    if "kfast" in kinds and "tansu" in kinds:
        for phase in ("idempotent", "transactional"):
            ours = _median(rounds, "kfast", phase, "records_per_s")
            theirs = _median(rounds, "tansu", phase, "records_per_s")
            if ours and theirs:
                print(f"{phase}: kfast / Tansu = {ours / theirs:.2f}x")
            else:
                print(f"{phase}: no ratio (a broker failed the phase)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--commit-every", type=int, default=1_000)
    parser.add_argument("--phase-limit", type=float, default=60.0, help="seconds per phase")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds; the brokers take turns, the order flipping each round",
    )
    parser.add_argument(
        "--kfast-override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kfast broker property (repeatable), e.g. "
        "transaction.partition.verification.enable=false",
    )
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    kinds = args.brokers.split(",")
    rounds = []
    for i in range(args.repeat):
        print(f"round {i + 1}", flush=True)
        order = kinds if i % 2 == 0 else list(reversed(kinds))
        rounds.append({kind: run_round(kind, args) for kind in order})
    report(rounds, kinds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds}, f, indent=1)


if __name__ == "__main__":
    main()
