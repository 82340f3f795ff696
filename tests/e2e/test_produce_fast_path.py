"""Produce's fast path (kfast.server.produce_fast) with a real client: the
plain case -- and the idempotent producer's -- is answered by it, not
handed to the generic handler, and what the client sees is the same."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.server.produce_fast import STATS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def _produce(broker, topic: str, values: list[bytes], **config: object) -> list[tuple]:
    reports: list[tuple] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **config})
    for value in values:
        producer.produce(
            topic,
            value=value,
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
        producer.poll(0)
    assert producer.flush(15) == 0
    return reports


def _create(broker, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(15)


@pytest.mark.parametrize("idempotent", [False, True])
def test_plain_and_idempotent_produce_take_the_fast_path(broker, topic, idempotent) -> None:
    _create(broker, topic)
    answered, fell_back = STATS.answered, STATS.fell_back
    values = [b"v%d" % i for i in range(20)]
    reports = _produce(
        broker,
        topic,
        values,
        acks="all" if idempotent else "1",
        **{"enable.idempotence": idempotent, "linger.ms": 0},
    )
    assert [err for err, _ in reports] == [None] * 20
    assert sorted(offset for _, offset in reports) == list(range(20))
    assert STATS.answered > answered
    assert STATS.fell_back == fell_back
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        while len(got) < 20:
            message = consumer.poll(10)
            assert message is not None and not message.error()
            got.append(message.value())
        assert got == values
    finally:
        consumer.close()


def test_an_append_error_is_answered_by_the_fast_path(broker, topic) -> None:
    # max.message.bytes is checked by the append (the same rule as the
    # generic path's); the fast path answers MESSAGE_TOO_LARGE itself.
    _create(broker, topic, **{"max.message.bytes": "200"})
    answered, fell_back = STATS.answered, STATS.fell_back
    reports = _produce(broker, topic, [b"x" * 1000], acks="1", retries=0)
    assert len(reports) == 1 and reports[0][0] is not None
    assert reports[0][0].name() == "MSG_SIZE_TOO_LARGE"
    assert STATS.answered > answered
    assert STATS.fell_back == fell_back


def test_acks_0_falls_back_and_is_still_appended(broker, topic) -> None:
    _create(broker, topic)
    fell_back = STATS.fell_back
    reports = _produce(broker, topic, [b"a", b"b"], acks="0", **{"linger.ms": 0})
    assert [err for err, _ in reports] == [None, None]
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    try:
        # acks=0: the producer's flush returns once the requests are sent, so
        # the broker may still be appending; the high watermark says when
        # it has (the client has no other event to wait on).
        deadline = time.monotonic() + 10
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            if high == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (low, high) == (0, 2)
    finally:
        consumer.close()
    # The fallback is counted before the append, which has happened.
    assert STATS.fell_back > fell_back
