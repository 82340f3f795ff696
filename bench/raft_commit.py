#!/usr/bin/env python3
"""The Raft layer alone: metadata commits of a quorum of one on its file log.

    python3 bench/raft_commit.py [--proposals 400] [--trees DIR ...]

A RaftManager over a FileReplicatedLog in a temporary directory (no
network, no controller): ``--proposals`` sequential proposals, each awaited
until committed (p50 / p99 ms, commits/s), then as many proposed at once
and awaited together (commits/s: how far fsyncs are shared). Each commit
is one fsync of the metadata log. ``--trees`` runs each given checkout in
its own interpreter, in turn, as many ``--rounds`` times (before/after
figures from the same minutes); without it, the kfast imported.

Bounded: one process at a time, the directory removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


async def _measure(proposals: int) -> dict:
    from kfast.raft.election_state import MemoryQuorumStateStore
    from kfast.raft.file_log import FileReplicatedLog
    from kfast.raft.manager import RaftManager
    from kfast.raft.record_batches import RecordSerde

    directory = tempfile.mkdtemp(prefix="bench-raft-commit-")
    log = FileReplicatedLog(directory, RecordSerde(str.encode, bytes.decode))
    log.open()
    manager = RaftManager(1, {1: None}, "bench", log, MemoryQuorumStateStore(), codec=None)  # type: ignore[arg-type]
    try:
        await manager.start()
        while manager.client.high_watermark < 1:  # the LeaderChange committed
            await asyncio.sleep(0.001)
        times = []
        for i in range(proposals):
            began = time.perf_counter()
            await manager.wait_committed(manager.propose([f"s{i}"]))
            times.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        waits = [manager.wait_committed(manager.propose([f"c{i}"])) for i in range(proposals)]
        await asyncio.gather(*waits)
        together = proposals / (time.perf_counter() - began)
        await manager.shutdown()
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    times.sort()
    return {
        "sequential_p50_ms": round(times[len(times) // 2], 3),
        "sequential_p99_ms": round(times[int(len(times) * 0.99)], 3),
        "sequential_per_s": round(len(times) / (sum(times) / 1000)),
        "together_per_s": round(together),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proposals", type=int, default=400)
    parser.add_argument("--trees", nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not args.trees:
        print(json.dumps(asyncio.run(_measure(args.proposals))))
        return
    for round_no in range(args.rounds):
        for tree in args.trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            out = subprocess.run(
                [
                    sys.executable,
                    "-P",
                    os.path.abspath(__file__),
                    "--proposals",
                    str(args.proposals),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
            ).stdout.strip()
            load = os.getloadavg()[0]
            print(f"round {round_no + 1} {tree} (load {load:.1f}): {out}", flush=True)


if __name__ == "__main__":
    main()
