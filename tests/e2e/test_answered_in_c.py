"""A plaintext connection's frames answered in C (netio's
PlaintextTransport.answer_frames) with real clients: confluent-kafka and
kafka-python producers, many connections, one small record per request.
The C path is taken (its counter and Produce's fast path count every
request) and nothing is lost."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from disk_support import consume_values
from kafka import KafkaProducer

from kfast.server.produce_fast import STATS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CONFLUENT_PRODUCERS = 12
KAFKA_PYTHON_PRODUCERS = 6
RECORDS_EACH = 15


def _answered_in_c(broker) -> int:
    async def total() -> int:
        servers = broker.broker.socket_servers.values()
        return sum(server.metrics().answered_in_c for server in servers)

    return broker.call(total(), timeout=10)


def _confluent_producer(broker, name: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": "1",
            "linger.ms": 0,
            "client.id": name,
        }
    )


def test_many_connections_of_small_produce_requests_are_answered_in_c(broker, topic) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    before_in_c, before_fast, fell_back = _answered_in_c(broker), STATS.answered, STATS.fell_back
    confluent = [_confluent_producer(broker, f"ck-{i}") for i in range(CONFLUENT_PRODUCERS)]
    kafka_python = [
        KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1, linger_ms=0)
        for _ in range(KAFKA_PYTHON_PRODUCERS)
    ]
    sent: list[bytes] = []
    errors: list[object] = []
    try:
        for n in range(RECORDS_EACH):
            for i, producer in enumerate(confluent):
                value = b"ck-%d-%d" % (i, n)
                producer.produce(topic, value=value, on_delivery=lambda err, _: errors.append(err))
                sent.append(value)
            for producer in confluent:
                # One record per request: each waits for its answer.
                assert producer.flush(15) == 0
            futures = []
            for i, kp in enumerate(kafka_python):
                value = b"kp-%d-%d" % (i, n)
                futures.append(kp.send(topic, value=value))
                sent.append(value)
            for future in futures:
                future.get(timeout=15)
    finally:
        for kp in kafka_python:
            kp.close(timeout=10)
    assert errors == [None] * (CONFLUENT_PRODUCERS * RECORDS_EACH)
    requests = (CONFLUENT_PRODUCERS + KAFKA_PYTHON_PRODUCERS) * RECORDS_EACH
    assert STATS.answered - before_fast >= requests
    assert STATS.fell_back == fell_back
    # Every Produce request (and the clients' metadata requests) went
    # through the C path: none was left to the general one by a handler.
    assert _answered_in_c(broker) - before_in_c >= requests

    # Nothing lost (each producer waited for every answer before its next
    # record, so their order is the offsets').
    assert consume_values(broker.bootstrap_servers, topic, [0], len(sent)) == set(sent)
