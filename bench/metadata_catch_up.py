#!/usr/bin/env python3
"""A new broker catching up a large metadata log (issue 16's benchmark).

    python3 bench/metadata_catch_up.py [--partitions 100000] [--topics 100]
                                       [--trials 3] [--snapshot-bytes 4194304]
                                       [--json out.json]

A real ``kfast serve`` controller (KRaft, one voter) holds a metadata log
with --partitions partitions in --topics topics. A new broker process with
an empty data directory then starts, fetches the controller's latest
snapshot (FetchSnapshot) and the log after it (Fetch on
``__cluster_metadata-0``), replays both into its MetadataImage, registers,
and is unfenced once a heartbeat shows it has caught up. Timed per trial:

  process start -> the broker's own Metadata lists it (it is in service),
  with the broker's log lines for its steps (observer ready, unfenced).

Three logs: --baseline-partitions (what the start costs with next to
nothing to catch up); --partitions; and the same after the broker they are
placed on was fenced, which appended a leader change for every partition
in one batch (a broker leading them all died).

Baseline in the same run: the same broker on a log of --baseline-partitions
(what the start costs with next to nothing to catch up). Each trial uses a
new node id and data directory: nothing cached from the last one.

The partitions need a broker to be placed on. So that 100,000 partitions
cost no logs anywhere, this script registers a placeholder broker with
BrokerRegistration and keeps it unfenced with BrokerHeartbeats -- Kafka's
own RPCs, from this process -- and creates the topics on it. The new
brokers host none of the partitions: what is timed is the metadata
catch-up alone.

There is no peer here that runs KRaft (Tansu has no Raft); Kafka publishes
no figure for this. Bounded: --trials + 1 broker starts and --max-seconds;
loopback only; every process and directory is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import threading
import time
import uuid

import kfast
from kfast.client.connection import BlockingConnection
from kfast.controller.feature_control import METADATA_VERSION, METADATA_VERSION_LEVEL
from kfast.protocol import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    MetadataRequest,
)
from kfast.testing.cluster import KfastCluster

PLACEHOLDER = 1000  # the placeholder broker's id
TOPICS_PER_REQUEST = 5  # 5 x 1,000 partitions: under Kafka's 10,000 records per request


def controller(cluster: KfastCluster) -> BlockingConnection:
    return cluster.connect(1, request_timeout=120)


class Placeholder:
    """The broker the partitions are placed on: registered and kept
    unfenced by heartbeats from this process (so the metadata log does not
    change under the trials: a fencing would add a leader change for every
    partition)."""

    def __init__(self, cluster: KfastCluster):
        self.connection = controller(cluster)
        registered = self.connection.send(
            BrokerRegistrationRequest(
                broker_id=PLACEHOLDER,
                cluster_id=cluster.cluster_id,
                incarnation_id=uuid.uuid4(),
                listeners=[
                    BrokerRegistrationRequest.Listener(
                        name="PLAINTEXT", host="127.0.0.1", port=9, security_protocol=0
                    )
                ],
                features=[
                    BrokerRegistrationRequest.Feature(
                        name=METADATA_VERSION,
                        min_supported_version=1,
                        max_supported_version=METADATA_VERSION_LEVEL,
                    )
                ],
                rack=None,
            )
        )
        assert registered.error_code == 0, registered
        self.epoch = registered.broker_epoch
        self.beat()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def beat(self) -> None:
        # Caught up by construction: it claims every offset there is.
        beat = self.connection.send(
            BrokerHeartbeatRequest(
                broker_id=PLACEHOLDER,
                broker_epoch=self.epoch,
                current_metadata_offset=1 << 62,
                want_fence=False,
                want_shut_down=False,
            )
        )
        assert beat.error_code == 0 and not beat.is_fenced, beat

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.beat()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(10)
        self.connection.close()


def create_topics(cluster: KfastCluster, prefix: str, topics: int, partitions: int) -> None:
    per_topic = max(1, partitions // topics)
    names = [f"{prefix}-{i:04d}" for i in range(topics)]
    with controller(cluster) as connection:
        for start in range(0, len(names), TOPICS_PER_REQUEST):
            batch = names[start : start + TOPICS_PER_REQUEST]
            response = connection.send(
                CreateTopicsRequest(
                    timeout_ms=120_000,
                    topics=[
                        CreateTopicsRequest.CreatableTopic(
                            name=name,
                            num_partitions=per_topic,
                            replication_factor=1,
                            assignments=[],
                            configs=[],
                        )
                        for name in batch
                    ],
                    validate_only=False,
                )
            )
            failed = [
                (t.name, t.error_code, t.error_message) for t in response.topics if t.error_code
            ]
            assert not failed, failed[:3]


def fence(
    cluster: KfastCluster, placeholder: Placeholder, partitions: int, overrides: dict
) -> None:
    """Stop the placeholder's heartbeats and wait for the controller to
    fence it: one leader change per partition lands in the metadata log
    (what a broker leading 100,000 partitions dying looks like)."""
    before = cluster.describe_quorum(1).high_watermark
    placeholder.stop()
    timeout = overrides["broker.session.timeout.ms"] / 1000 + 60
    cluster.wait_until(
        lambda: (cluster.describe_quorum(1, 30) or before).high_watermark >= before + partitions,
        timeout,
        "the placeholder fenced",
    )
    print(f"  placeholder fenced: +{partitions:,} leader changes in the log", flush=True)


def time_to_service(cluster: KfastCluster, node_id: int, timeout: float) -> float:
    """Seconds from starting ``node_id``'s process to its own Metadata
    listing it (registered, caught up, unfenced, listeners open)."""
    began = time.monotonic()
    cluster.start_node(node_id)
    deadline = began + timeout
    while time.monotonic() < deadline:
        if in_service(cluster, node_id):
            return time.monotonic() - began
        time.sleep(0.02)
    raise TimeoutError(
        f"broker {node_id} not in service within {timeout} s\n{cluster.log_tail(node_id)}"
    )


def in_service(cluster: KfastCluster, node_id: int) -> bool:
    try:
        with BlockingConnection(
            "127.0.0.1", cluster.nodes[node_id].broker_port, request_timeout=5
        ) as connection:
            metadata = connection.send(MetadataRequest(topics=[]), version=12)
    except Exception:
        return False
    return any(b.node_id == node_id for b in metadata.brokers)


def logged_steps(cluster: KfastCluster, node_id: int) -> dict:
    """Milliseconds the broker logged for its own steps."""
    tail = cluster.log_tail(node_id, 200)
    found = {}
    for name, pattern in (
        ("observer_ready_ms", r"metadata observer \d+ ready in ([\d.]+) ms"),
        ("broker_ready_ms", r"kfast broker \d+ ready in ([\d.]+) ms"),
    ):
        match = re.search(pattern, tail)
        if match:
            found[name] = float(match.group(1))
    return found


def run_trials(cluster: KfastCluster, broker_ids, timeout: float) -> list[dict]:
    results = []
    for node_id in broker_ids:
        seconds = time_to_service(cluster, node_id, timeout)
        steps = logged_steps(cluster, node_id)
        results.append({"seconds": round(seconds, 3), **steps})
        print(f"  broker {node_id}: in service after {seconds:.2f} s {steps}")
        cluster.kill(node_id)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--baseline-partitions", type=int, default=10)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument(
        "--snapshot-bytes",
        type=int,
        default=4 << 20,
        help="metadata.log.max.record.bytes.between.snapshots",
    )
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json")
    args = parser.parse_args()
    overrides = {
        "metadata.log.max.record.bytes.between.snapshots": args.snapshot_bytes,
        "broker.session.timeout.ms": 9000,
    }
    report = {
        "kfast": kfast.__version__,
        "python": platform.python_version(),
        "partitions": args.partitions,
        "topics": args.topics,
    }
    for name, partitions, topics in (
        ("baseline", args.baseline_partitions, 1),
        ("large", args.partitions, args.topics),
    ):
        # Brokers 2.. are written but not started: each trial starts one.
        cluster = KfastCluster(controllers=1, brokers=2 * args.trials, overrides=overrides)
        try:
            cluster.start_node(1)
            cluster.wait_listening(1)
            cluster.wait_for_leader()
            placeholder = Placeholder(cluster)
            began = time.monotonic()
            create_topics(cluster, "t", topics, partitions)
            created = time.monotonic() - began
            print(
                f"{name}: {partitions:,} partitions in {topics} topics created in "
                f"{created:.1f} s; metadata dir "
                f"{_metadata_bytes(cluster) / 1e6:.1f} MB"
            )
            scenarios = [(name, range(2, 2 + args.trials))]
            if name == "large":
                scenarios.append(
                    ("large_after_fencing", range(2 + args.trials, 2 + 2 * args.trials))
                )
            for scenario, broker_ids in scenarios:
                if scenario == "large_after_fencing":
                    fence(cluster, placeholder, partitions, overrides)
                results = run_trials(cluster, broker_ids, args.timeout)
                seconds = sorted(r["seconds"] for r in results)
                report[scenario] = {
                    "partitions": partitions,
                    "create_seconds": round(created, 1),
                    "metadata_bytes": _metadata_bytes(cluster),
                    "trials": results,
                    "median_seconds": seconds[len(seconds) // 2],
                }
            placeholder.stop()
        finally:
            cluster.close()
    print(json.dumps({k: v for k, v in report.items() if isinstance(v, dict)}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


def _metadata_bytes(cluster: KfastCluster) -> int:
    root = os.path.join(cluster.nodes[1].data_dir, "data", "__cluster_metadata-0")
    # The records: log segments and snapshots (not the preallocated indexes).
    return sum(
        os.path.getsize(os.path.join(root, f))
        for f in os.listdir(root)
        if f.endswith((".log", ".checkpoint"))
    )


if __name__ == "__main__":
    sys.exit(main())
