#!/usr/bin/env python3
"""Consume-only A/B: kfast vs Tansu 0.6, one consumer, rounds interleaved.

    python bench/consume_ab.py                          # 8 partitions, 8 rounds
    python bench/consume_ab.py --partitions 1 --rounds 12
    python bench/consume_ab.py --consumer-config fetch.max.bytes=5242880

broker_load.py measures consume inside a full round (produce, consume,
latency); this isolates it. Both brokers start here (subprocesses on free
127.0.0.1 ports, stopped here by PID), each gets the same topic and
--records 100-byte records from the same producer code, then each round
consumes the whole topic once from each broker, back to back, the order
flipping every round. Per round it prints records/s, the consumer's own
user and system CPU seconds (getrusage: librdkafka's threads and the Python
loop) and the broker's CPU seconds (/proc); at the end the medians and the
median of the per-round kfast/Tansu ratios. The consumer is broker_load's
(librdkafka defaults plus broker_load.CONSUMER_QUEUE) with any
--consumer-config added. Bounded: a wall-clock limit per consume, loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import broker_load

TOPIC = "consume-ab"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per consume")
    parser.add_argument("--consumer-config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--kfast-override", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.consumer_config)
    kinds = ("kfast", "tansu")
    results = {kind: [] for kind in kinds}
    ratios = []
    with contextlib.ExitStack() as stack:
        brokers = {}
        for kind in kinds:
            overrides = tuple(args.kfast_override) if kind == "kfast" else ()
            proc, bootstrap, _ = stack.enter_context(broker_load.run_broker(kind, overrides))
            broker_load.warm_up(bootstrap)
            broker_load.create_topic(bootstrap, TOPIC, args.partitions)
            broker_load.produce(bootstrap, TOPIC, args.records, "1", args.limit)
            brokers[kind] = (proc, bootstrap)
        os.sync()  # kfast's segments written back before the first round, not during one
        for round_index in range(args.rounds):
            row = {}
            for kind in kinds if round_index % 2 == 0 else kinds[::-1]:
                proc, bootstrap = brokers[kind]
                cpu_before = broker_load.cpu_seconds(proc.pid)
                out = broker_load.consume(
                    bootstrap, TOPIC, args.partitions, args.records, args.limit, extra=extra
                )
                out["broker_cpu_s"] = broker_load.cpu_seconds(proc.pid) - cpu_before
                results[kind].append(out)
                row[kind] = out
            ratios.append(row["kfast"]["records_per_s"] / row["tansu"]["records_per_s"])
            print(
                f"round {round_index}: "
                + "; ".join(
                    f"{kind} {row[kind]['records_per_s'] / 1e3:,.0f} k/s"
                    f"{' (hit limit)' if row[kind]['hit_limit'] else ''}, client "
                    f"u{row[kind]['client_user_s']:.2f} s{row[kind]['client_system_s']:.2f}, "
                    f"broker {row[kind]['broker_cpu_s']:.2f} CPU-s"
                    for kind in kinds
                )
                + f"; kfast/Tansu {ratios[-1]:.2f}",
                flush=True,
            )
    medians = {kind: statistics.median(r["records_per_s"] for r in results[kind]) for kind in kinds}
    print(
        f"median records/s: kfast {medians['kfast'] / 1e3:,.0f} k, Tansu "
        f"{medians['tansu'] / 1e3:,.0f} k; per-round kfast/Tansu median "
        f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
