"""Exactly-once consume-transform-produce through kill -9 (issue 18).

A worker process (eos_worker.py) consumes an input topic in a group
(read_committed, no auto commit) and, per batch, writes the transformed
records to an output topic and the consumed offsets in one transaction.
The worker, the broker under it, or both are killed with SIGKILL while a
transaction is open, its records in the output log and its offsets sent
(pending in the group coordinator); the worker starts again with the same
transactional.id and group. A
read_committed reader of the output must then see every input record
exactly once: the open transaction's records are aborted (a
read_uncommitted reader still sees them, so the kill did land
mid-transaction) and its pending offsets dropped, and the offsets committed
with each transaction are the ones the restarted worker resumes from.
On a 3-broker cluster, the broker coordinating the worker's transactional
id is killed mid-run, with the same outcome.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import REPO
from test_transactions_cluster import transaction_coordinator
from transaction_support import read_to_end

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]
PARTITIONS = 3
RECORDS = 2000
BATCH = 100
# Transactions committed before the one left open.
PAUSE_AFTER = 3
WORKER = os.path.join(os.path.dirname(__file__), "eos_worker.py")
BROKER_SETTINGS = (
    "num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
)


class Worker:
    """An eos_worker.py process and the lines it printed."""

    def __init__(self, client: str, bootstrap: str, names: dict, pause_after: int | None = None):
        command = [
            sys.executable,
            WORKER,
            client,
            bootstrap,
            "--input",
            names["input"],
            "--output",
            names["output"],
            "--group",
            names["group"],
            "--transactional-id",
            names["transactional_id"],
            "--partitions",
            str(PARTITIONS),
            "--batch",
            str(BATCH),
        ]
        if pause_after is not None:
            command += ["--pause-after", str(pause_after)]
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.stderr: list[str] = []
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(REPO),
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        self._stderr_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_pump.start()

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)  # end of output: the worker exited

    def _pump_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_for(self, prefix: str, timeout: float = 90) -> str | None:
        """The first line starting with ``prefix`` (None if the worker
        exited without it)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._abort()
                raise AssertionError(
                    f"worker printed no {prefix!r} in {timeout} s: "
                    f"{self.seen}\n{''.join(self.stderr[-40:])}"
                )
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.lines.put(None)
                return None
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def _abort(self) -> None:
        """End a stuck worker with its stacks on stderr (faulthandler)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)
            self._stderr_pump.join(10)

    def resume(self) -> None:
        """Let a paused worker commit its open transaction."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 120) -> bool:
        """Whether the worker got to ``done`` (False: it failed and exited)."""
        done = self.wait_for("done", timeout) is not None
        self.proc.wait(30)
        return done

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def workers():
    started: list[Worker] = []

    def start(*args, **kwargs) -> Worker:
        worker = Worker(*args, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


def prepare(bootstrap: str, client: str, replication_factor: int = 1) -> dict:
    """Input and output topics, the input's records, the worker's names."""
    suffix = uuid.uuid4().hex[:8]
    names = {
        "input": f"eos-in-{suffix}",
        "output": f"eos-out-{suffix}",
        "group": f"eos-group-{suffix}",
        "transactional_id": f"eos-{client}-{suffix}",
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [
            NewTopic(names["input"], PARTITIONS, replication_factor),
            NewTopic(names["output"], PARTITIONS, replication_factor),
        ]
    ).values():
        future.result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(RECORDS):
        producer.produce(
            names["input"], key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS
        )
    assert producer.flush(30) == 0
    return names


def read_output(bootstrap: str, topic: str, isolation: str, timeout: float = 60) -> list[bytes]:
    """Every value of ``topic`` up to its end (the last stable offset for
    read_committed), read once the partitions' ends are reached."""
    values, at_end = read_to_end(bootstrap, topic, PARTITIONS, isolation, timeout)
    assert at_end, f"{topic} not read to its end in {timeout} s"
    return values


def assert_exactly_once(bootstrap: str, names: dict, aborted: bool) -> None:
    """``aborted``: the transaction open at the kill was aborted (not
    committed after a restart of the broker)."""
    committed = Counter(read_output(bootstrap, names["output"], "read_committed"))
    expected = Counter(f"out-v{i}".encode() for i in range(RECORDS))
    duplicated = sorted(v for v, n in committed.items() if n > 1)
    missing = sorted(expected - committed)
    extra = sorted(committed - expected)
    assert not duplicated and not missing and not extra, (
        f"duplicated {duplicated[:10]} ({len(duplicated)}), missing {missing[:10]} "
        f"({len(missing)}), unexpected {extra[:10]}"
    )
    if aborted:
        # The transaction open at the kill wrote its records: they are in
        # the log, aborted, so only a read_uncommitted reader sees them twice.
        uncommitted = read_output(bootstrap, names["output"], "read_uncommitted")
        assert len(uncommitted) > RECORDS


def run_to_the_end(
    start_worker, client: str, bootstrap: str, names: dict, attempts: int = 3, timeout: float = 120
) -> None:
    """Restart the worker (same transactional.id and group) until it has
    consumed everything; a worker that fails is restarted like a crashed one."""
    for _ in range(attempts):
        if start_worker(client, bootstrap, names).finish(timeout):
            return
    raise AssertionError(f"the worker did not finish in {attempts} runs")


@pytest.mark.parametrize("client", CLIENTS)
def test_exactly_once_through_kill_9_of_the_worker(serve, workers, client):
    broker = serve(*BROKER_SETTINGS).start()
    bootstrap = broker.bootstrap_servers
    names = prepare(bootstrap, client)
    first = workers(client, bootstrap, names, pause_after=PAUSE_AFTER)
    assert first.wait_for("open") == "open", first.seen
    first.kill()
    assert f"committed {PAUSE_AFTER}" in first.seen
    # The restarted worker's InitProducerId aborts the open transaction; its
    # consumer resumes from the offsets the committed transactions wrote.
    run_to_the_end(workers, client, bootstrap, names)
    assert_exactly_once(bootstrap, names, aborted=True)


@pytest.mark.parametrize("worker_too", [False, True], ids=["worker-survives", "worker-killed-too"])
@pytest.mark.parametrize("client", CLIENTS)
def test_exactly_once_through_kill_9_of_the_broker(serve, workers, client, worker_too):
    """The broker dies with the transaction open (its offsets pending in
    the group coordinator); on restart it loads the Ongoing transaction and
    the pending offsets from its logs. ``worker_too``: the whole system
    crashed, the worker starts again as well."""
    broker = serve(*BROKER_SETTINGS).start()
    bootstrap = broker.bootstrap_servers
    names = prepare(bootstrap, client)
    worker = workers(client, bootstrap, names, pause_after=PAUSE_AFTER)
    assert worker.wait_for("open") == "open", worker.seen
    if worker_too:
        worker.kill()
    broker.kill()
    broker.start()
    if worker_too:
        run_to_the_end(workers, client, bootstrap, names)
        assert_exactly_once(bootstrap, names, aborted=True)
        return
    # The worker goes on committing through the restarted broker (its open
    # transaction committed, or aborted and the worker restarted).
    worker.resume()
    if not worker.finish():
        run_to_the_end(workers, client, bootstrap, names)
    # Whether the open transaction was committed or aborted depends on the
    # client's retries; exactly once either way.
    assert_exactly_once(bootstrap, names, aborted=False)


# kafka-python 3.0.12 is left out: after the coordinator's broker dies its
# sender drops the retried AddPartitionsToTxn / AddOffsetsToTxn requests
# (their queue is empty while the transaction waits on them) and
# send_offsets_to_transaction never returns, also once FindCoordinator names
# the new coordinator. A client bug, reduced to
# bench/kafka_python_coordinator_kill.py (its docstring has the diagnosis).
@pytest.mark.kfast_cluster_config(
    controllers=1,
    brokers=3,
    overrides={
        "broker.session.timeout.ms": 2000,
        "broker.heartbeat.interval.ms": 200,
        "group.initial.rebalance.delay.ms": 0,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    },
)
@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka"])
def test_exactly_once_through_kill_9_of_the_transaction_coordinator(kfast_cluster, workers, client):
    """On a 3-broker cluster (topics with three replicas) the broker that
    coordinates the worker's transactional id dies mid-run: the id's
    __transaction_state partition moves to another broker, which finishes
    or aborts what was in flight; the worker goes on (or is restarted)."""
    cluster = kfast_cluster
    bootstrap = cluster.bootstrap_servers
    names = prepare(bootstrap, client, replication_factor=3)
    worker = workers(client, bootstrap, names)
    assert worker.wait_for(f"committed {PAUSE_AFTER}") is not None, worker.seen
    coordinator = transaction_coordinator(cluster, names["transactional_id"])
    cluster.kill(coordinator)
    # A worker that fails, or whose librdkafka outlives a call's timeout
    # waiting for the killed broker (eos_worker.deadline), is restarted.
    if not worker.finish(180):
        run_to_the_end(workers, client, bootstrap, names)
    assert_exactly_once(bootstrap, names, aborted=False)
