"""acks=1 against acks=all in alternation: bench/produce_cpu.py's phases for
one kfast tree, the two acks settings in turn and the order flipping each
round (issue 21 item 1: does acks=all cost more, or the phase order?).

    python3 bench/produce_acks_order.py [--broker kfast@PATH] [--batch-records 150]
        [--partitions 8] [--rounds 6] [--gb 0.3] [--json out.json]

Each phase is produce_cpu.phase: a fresh broker, the same clients and the
same CPU-seconds-per-GB figure. Prints every phase, then per acks setting
the median and range, and in how many of the rounds acks=all cost more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from produce_cpu import phase


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default="kfast", help="kfast or kfast@PATH")
    parser.add_argument("--batch-records", type=int, default=150)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--gb", type=float, default=0.3)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--json", help="write every phase's figures here")
    args = parser.parse_args()
    results: list[dict] = []
    higher = 0
    for round_ in range(args.rounds):
        order = (-1, 1) if round_ % 2 == 0 else (1, -1)
        by_acks = {}
        for acks in order:
            r = phase(
                args.broker,
                args.partitions,
                acks,
                args.batch_records,
                args.gb,
                args.clients,
                args.limit_s,
            )
            results.append(r)
            by_acks[acks] = r["cpu_s_per_gb"]
            print(
                f"round {round_ + 1} acks={acks:>2}: {r['cpu_s_per_gb']:.2f} CPU-s/GB "
                f"({r['seconds']:.2f} s)",
                flush=True,
            )
        higher += by_acks[-1] > by_acks[1]
    for acks in (1, -1):
        values = [r["cpu_s_per_gb"] for r in results if r["acks"] == acks]
        print(
            f"acks={acks:>2}: median {statistics.median(values):.2f} "
            f"[{min(values):.2f}-{max(values):.2f}] CPU-s/GB"
        )
    print(f"acks=all above acks=1 in {higher} of {args.rounds} rounds")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
