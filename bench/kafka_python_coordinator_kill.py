#!/usr/bin/env python3
"""Minimal reproduction: kafka-python's transactional producer after its
transaction coordinator's broker is killed -9 (the reason kafka-python is
left out of test_exactly_once_through_kill_9_of_the_transaction_coordinator
in tests/e2e/test_transactions_eos.py).

    python bench/kafka_python_coordinator_kill.py [--deadline 60] [--debug]

A KRaft cluster of one controller and three brokers (kfast serve
processes, KfastCluster); a topic with three replicas; one kafka-python
KafkaProducer with a transactional.id: init_transactions, one committed
transaction, then begin, send + flush, and the broker that coordinates the
transactional id (FindCoordinator) is killed with SIGKILL. The producer
then calls send_offsets_to_transaction and commit_transaction, each on a
thread with a deadline (kafka-python's calls have none). Confluent-kafka
and aiokafka complete the same steps on the successor coordinator (the e2e
test); the script prints what kafka-python does, how long each step took,
and, with --debug, kafka-python's transaction manager log. Exit status 0
when both calls return within the deadline, 1 when one hangs.

What it shows with kafka-python 3.0.12 (a client bug): the broker names the
successor at once, but send_offsets_to_transaction never returns. The
debug log: AddOffsetsToTxn is dequeued for the dead coordinator;
``KafkaClient.await_ready`` raises KafkaConnectionError (ECONNREFUSED)
instead of returning False, and ``Sender._maybe_send_pending_request``'s
``except`` branch enqueues a FindCoordinator and breaks out -- with
``target_node`` still set to the dead node, so its closing ``if target_node
is None: retry(request)`` does not put the AddOffsetsToTxn back. The
FindCoordinator is answered (the successor), the queue is then empty, and
the request's result is never completed. Kafka's Java Sender re-enqueues
the request in that path (``maybeFindCoordinatorAndRetry``). The same
drop hits AddPartitionsToTxn and EndTxn sent to a dead coordinator.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka import KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from kfast.testing.cluster import KfastCluster

OVERRIDES = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}


def coordinator_of(cluster: KfastCluster, key: str, key_type: int, other_than: int = -1) -> int:
    """The broker FindCoordinator names for ``key`` once one (other than
    ``other_than``) is named."""
    found: list[int] = []

    def ask() -> bool:
        for node in cluster.nodes.values():
            if not node.broker_port or not node.alive:
                continue
            try:
                with BlockingConnection("127.0.0.1", node.broker_port) as connection:
                    response = connection.send(
                        {"key": key, "key_type": key_type},
                        api_key=api_keys.BY_NAME["FindCoordinator"].key,
                        version=3,
                    )
            except OSError:
                continue
            if response.error_code == 0 and response.node_id != other_than:
                found.append(response.node_id)
                return True
        return False

    cluster.wait_until(ask, 30, f"a coordinator for {key}")
    return found[0]


def within(deadline: float, name: str, call) -> bool:
    """Run ``call`` on a daemon thread; whether it returned within ``deadline``."""
    outcome: list = []

    def run() -> None:
        try:
            call()
            outcome.append("returned")
        except Exception as exc:  # the client's error is a result here
            outcome.append(f"raised {type(exc).__name__}: {exc}")

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline)
    took = time.monotonic() - began
    print(f"{name}: {outcome[0] if outcome else 'no answer'} after {took:.1f} s", flush=True)
    return bool(outcome)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per call")
    parser.add_argument("--debug", action="store_true", help="kafka-python's producer log")
    args = parser.parse_args()
    if args.debug:
        logging.basicConfig(
            level=logging.DEBUG, format="%(relativeCreated)8.0f %(name)s %(message)s"
        )
        for name in ("kafka.conn", "kafka.client", "kafka.metrics", "kafka.protocol"):
            logging.getLogger(name).setLevel(logging.INFO)
    suffix = uuid.uuid4().hex[:8]
    topic, group, transactional_id = f"in-{suffix}", f"g-{suffix}", f"kp-{suffix}"
    with KfastCluster(controllers=1, brokers=3, overrides=OVERRIDES) as cluster:
        cluster.wait_for_brokers()
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic(topic, 3, 3)])
        admin.close()
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            transactional_id=transactional_id,
            request_timeout_ms=10000,
        )
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
        print("first transaction committed", flush=True)
        producer.begin_transaction()
        producer.send(topic, b"in flight", partition=0)
        producer.flush()
        victim = coordinator_of(cluster, transactional_id, 1)
        print(f"killing broker {victim} (the transaction coordinator)", flush=True)
        cluster.kill(victim)
        successor = coordinator_of(cluster, transactional_id, 1, other_than=victim)
        print(f"FindCoordinator names broker {successor} now", flush=True)
        offsets = {TopicPartition(topic, 0): OffsetAndMetadata(1, None, -1)}
        ok = within(
            args.deadline,
            "send_offsets_to_transaction",
            lambda: producer.send_offsets_to_transaction(offsets, group),
        ) and within(args.deadline, "commit_transaction", producer.commit_transaction)
        if not ok:
            # The sender thread still waits; close without waiting for it.
            producer.close(timeout=0)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
