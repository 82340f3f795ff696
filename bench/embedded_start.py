#!/usr/bin/env python3
"""The embedded single node (``kfast serve`` with no quorum settings):
start time and metadata commit latency, against Tansu 0.6 in the same run.

    python3 bench/embedded_start.py [--rounds 7] [--kfast-path DIR ...]

Per round, for each broker (order rotated every round):

  start_to_metadata   process start to the first Metadata answer (a fresh
                      data dir; the connection is retried until it answers)
  create_topics       CreateTopics of one 1-partition topic, sequential,
                      20 topics: p50 / p99 of the round trip (a metadata
                      commit: one fsynced batch on kfast)
  produce_acks_all    one record per request, acks=all, 200 sequential
                      requests (confluent-kafka, flush per record): p50 / p99

and for kfast only, in a fresh interpreter, ``fixture_start``: the median
``KfastBroker.start()`` (the ``kfast_broker`` fixture) over 10 starts on
empty data dirs, and its own start-to-ready (``startup_ms``).

``--kfast-path`` (repeatable) runs another checkout's kfast (its directory
goes first on PYTHONPATH): two of them give the before/after figures of a
change in one run, interleaved with Tansu; without it, the kfast imported.
Bounded: loopback only, temporary data dirs removed, brokers stopped by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import THIS_TREE, kfast_launcher, run_broker

_FIXTURE_SCRIPT = r"""
import json, shutil, statistics, tempfile, time
import kfast.server.broker as b
b.preload()
from kfast.testing import KfastBroker
walls, ready = [], []
for _ in range(10):
    d = tempfile.mkdtemp(prefix="bench-fixture-")
    broker = KfastBroker(data_dir=d)
    began = time.perf_counter()
    broker.start()
    walls.append((time.perf_counter() - began) * 1000)
    ready.append(broker.broker.startup_ms)
    broker.stop()
    shutil.rmtree(d, ignore_errors=True)
print(json.dumps({"fixture_start_ms": statistics.median(walls),
                  "fixture_ready_ms": statistics.median(ready)}))
"""


def _env(kfast_path: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.path.abspath(kfast_path or THIS_TREE)
    return env


@contextmanager
def started(kind: str, kfast_path: str | None):
    """broker_load's run_broker with kfast from ``kfast_path`` (this tree
    by default); yields (port, milliseconds from the process start to the
    first Metadata answer)."""
    launcher = kfast_launcher(kfast_path) if kind == "kfast" else ()
    with run_broker(kind, launcher=launcher) as (proc, bootstrap, listening_s):
        port = int(bootstrap.rsplit(":", 1)[1])
        yield port, listening_s * 1000 + first_metadata(proc, port)


def first_metadata(proc, port: int, timeout: float = 30.0) -> float:
    """Milliseconds until a Metadata request on the open port lists the broker."""
    from kfast.client.connection import BlockingConnection
    from kfast.protocol import MetadataRequest

    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with BlockingConnection("127.0.0.1", port, request_timeout=5) as connection:
                if connection.send(MetadataRequest(topics=[])).brokers:
                    return (time.monotonic() - began) * 1000
        except Exception:
            pass
        time.sleep(0.002)  # nothing to await in another process but its port
    raise TimeoutError("no Metadata answer")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def create_topics(port: int, count: int = 20) -> list[float]:
    from kfast.client.connection import BlockingConnection
    from kfast.protocol import CreateTopicsRequest

    times = []
    with BlockingConnection("127.0.0.1", port, request_timeout=30) as connection:
        for i in range(count):
            request = CreateTopicsRequest(
                timeout_ms=30_000,
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=f"t{i}", num_partitions=1, replication_factor=1
                    )
                ],
            )
            began = time.perf_counter()
            response = connection.send(request)
            times.append((time.perf_counter() - began) * 1000)
            assert response.topics[0].error_code == 0, response
    return times


def produce(port: int, count: int = 200) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "linger.ms": 0})
    times = []
    for i in range(count + 10):
        began = time.perf_counter()
        producer.produce("t0", value=b"x" * 100)
        producer.flush(30)
        if i >= 10:  # the first ones pay for metadata
            times.append((time.perf_counter() - began) * 1000)
    return times


def fixture(kfast_path: str | None) -> dict:
    out = subprocess.run(
        # -P: the current directory (maybe another tree) not before PYTHONPATH.
        [sys.executable, "-P", "-c", _FIXTURE_SCRIPT],
        capture_output=True,
        text=True,
        env=_env(kfast_path),
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kfast-path", action="append", default=[])
    args = parser.parse_args()
    # (label, kind, kfast path)
    brokers = [(f"kfast:{path}", "kfast", path) for path in args.kfast_path] or [
        ("kfast", "kfast", None)
    ]
    brokers.append(("tansu", "tansu", None))
    rows: dict[str, dict[str, list]] = {label: {} for label, _, _ in brokers}
    for round_no in range(args.rounds):
        shift = round_no % len(brokers)
        for label, kind, path in brokers[shift:] + brokers[:shift]:
            with started(kind, path) as (port, start_ms):
                row = rows[label]
                row.setdefault("start_to_metadata_ms", []).append(start_ms)
                ct = create_topics(port)
                row.setdefault("create_topics_p50_ms", []).append(percentile(ct, 0.5))
                row.setdefault("create_topics_p99_ms", []).append(percentile(ct, 0.99))
                pr = produce(port)
                row.setdefault("produce_p50_ms", []).append(percentile(pr, 0.5))
                row.setdefault("produce_p99_ms", []).append(percentile(pr, 0.99))
    result = {
        label: {name: round(statistics.median(v), 2) for name, v in row.items()}
        for label, row in rows.items()
    }
    for label, kind, path in brokers:
        if kind == "kfast":
            result[label].update({k: round(v, 2) for k, v in fixture(path).items()})
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
