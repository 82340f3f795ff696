"""Transactions with real clients (issue 18): confluent-kafka (librdkafka),
kafka-python and aiokafka transactional producers commit and abort, and
read_committed / read_uncommitted consumers of each client see what they
should; a second producer with the same transactional.id fences the first
(zombie fencing); the coordinator aborts a transaction past its timeout and
the last stable offset moves on; an open transaction survives neither a
clean restart nor kill -9 of the broker: it is aborted afterwards and a
read_committed consumer is not stuck behind it; an idle transactional id
expires (transactional.id.expiration.ms) and can be used again."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import wait_until
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.errors import ProducerFencedError

from kfast.client.connection import BlockingConnection
from kfast.coordinator.transaction.records import encode_key, partition_for
from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

COMMITTED = [b"c0", b"c1", b"c2"]
ABORTED = [b"a0", b"a1"]
AFTER = [b"after"]
# librdkafka's fencing errors (it reports INVALID_PRODUCER_EPOCH and
# PRODUCER_FENCED as _FENCED once fatal).
CONFLUENT_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {
            "num.partitions": 1,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
            "group.initial.rebalance.delay.ms": 0,
        },
        data_dir=str(tmp_path_factory.mktemp("kfast-txn")),
    )
    instance.start()
    yield instance
    instance.close()


def new_topic(bootstrap: str) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def transaction_state(bootstrap: str, transactional_id: str) -> str:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        response = connection.send(
            {"transactional_ids": [transactional_id]},
            api_key=api_keys.BY_NAME["DescribeTransactions"].key,
            version=0,
        )
    return response.transaction_states[0].transaction_state


# -- producers: (committed, aborted, committed) transactions, each flushed ----------------
def produce_confluent(bootstrap, topic, transactional_id):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    for values, commit in ((COMMITTED, True), (ABORTED, False), (AFTER, True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value, partition=0)
        # Delivered before the end: the aborted records are in the log.
        assert producer.flush(30) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def produce_kafka_python(bootstrap, topic, transactional_id):
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        for values, commit in ((COMMITTED, True), (ABORTED, False), (AFTER, True)):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value=value, partition=0)
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)()
    finally:
        producer.close(timeout=10)


def produce_aiokafka(bootstrap, topic, transactional_id):
    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
        await producer.start()
        try:
            for values, commit in ((COMMITTED, True), (ABORTED, False), (AFTER, True)):
                await producer.begin_transaction()
                for value in values:
                    await (await producer.send(topic, value=value, partition=0))
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


# -- consumers: every value up to and including b"after" ----------------------------------
def consume_confluent(bootstrap, topic, isolation, until=AFTER[0], timeout=20):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + timeout
    try:
        while until not in values and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


def consume_kafka_python(bootstrap, topic, isolation, until=AFTER[0], timeout=20):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    partition = KafkaPythonTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    values, deadline = [], time.monotonic() + timeout
    try:
        while until not in values and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                values.extend(record.value for record in records)
    finally:
        consumer.close()
    return values


def consume_aiokafka(bootstrap, topic, isolation, until=AFTER[0], timeout=20):
    async def main():
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        partition = AioTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        values, deadline = [], time.monotonic() + timeout
        try:
            while until not in values and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(record.value for record in records)
        finally:
            await consumer.stop()
        return values

    return asyncio.run(main())


PRODUCERS = {
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}
CONSUMERS = {
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


@pytest.mark.parametrize("client", PRODUCERS)
def test_commit_and_abort_seen_by_every_client(broker, client):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"{client}-{uuid.uuid4().hex[:8]}"
    PRODUCERS[client](bootstrap, topic, transactional_id)
    for name, consume in CONSUMERS.items():
        assert consume(bootstrap, topic, "read_committed") == COMMITTED + AFTER, name
        assert consume(bootstrap, topic, "read_uncommitted") == COMMITTED + ABORTED + AFTER, name
    # The broker finalizes transaction.version 2, yet these clients speak the
    # original protocol (AddPartitionsToTxn, EndTxn below v5): the epoch of
    # their InitProducerId stays through the three transactions.
    described = describe_transaction(bootstrap, transactional_id)
    assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", 0)


def test_the_broker_finalizes_transaction_version_2(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        response = connection.send(
            {"client_software_name": "kfast-test", "client_software_version": "1"},
            api_key=api_keys.BY_NAME["ApiVersions"].key,
            version=3,
        )
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    assert finalized["transaction.version"] == 2


# -- zombie fencing ------------------------------------------------------------------------
def test_a_second_confluent_producer_fences_the_first(broker):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    zombie = Producer(config)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = Producer(config)
    # Its InitProducerId aborts the zombie's open transaction first.
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, value=b"after", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].code() in CONFLUENT_FENCED
    assert consume_confluent(bootstrap, topic, "read_committed") == [b"after"]
    assert consume_confluent(bootstrap, topic, "read_uncommitted") == [b"zombie", b"after"]


def test_a_second_kafka_python_producer_fences_the_first(broker):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    successor = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, value=b"zombie", partition=0)
        zombie.flush(30)
        successor.init_transactions()
        successor.begin_transaction()
        successor.send(topic, value=b"after", partition=0)
        successor.commit_transaction()
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
    finally:
        zombie.close(timeout=5)
        successor.close(timeout=5)
    assert consume_kafka_python(bootstrap, topic, "read_committed") == [b"after"]


def test_a_second_aiokafka_producer_fences_the_first(broker):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"

    async def main():
        zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
        successor = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await (await zombie.send(topic, value=b"zombie", partition=0))
            await successor.start()
            async with successor.transaction():
                await (await successor.send(topic, value=b"after", partition=0))
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
        finally:
            await successor.stop()
            await zombie.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert consume_aiokafka(bootstrap, topic, "read_committed") == [b"after"]


# -- timeouts ------------------------------------------------------------------------------
def open_transaction(bootstrap, topic, transactional_id, timeout_ms=None) -> Producer:
    """A confluent producer with a transaction left open (its record written)."""
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    if timeout_ms is not None:
        config.update({"transaction.timeout.ms": timeout_ms, "message.timeout.ms": timeout_ms})
    producer = Producer(config)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(30) == 0
    return producer


def append_after(bootstrap, topic) -> None:
    """A plain record after the open transaction (held back by its LSO)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, value=b"after", partition=0)
    assert producer.flush(30) == 0


def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"slow-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    producer = open_transaction(bootstrap, topic, transactional_id, timeout_ms=1500)
    append_after(bootstrap, topic)
    # Not readable while the transaction is open, readable once it is aborted.
    assert consume_confluent(bootstrap, topic, "read_committed", timeout=20) == [b"after"]
    assert time.monotonic() - began >= 1.5
    wait_until(
        lambda: transaction_state(bootstrap, transactional_id) == "CompleteAbort",
        10,
        "the timed-out transaction to be aborted",
    )
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(30)
    assert raised.value.args[0].code() in CONFLUENT_FENCED | {KafkaError._STATE}


# -- broker restarts -----------------------------------------------------------------------
@pytest.mark.parametrize("stop", ["sigterm", "kill -9"])
def test_an_open_transaction_is_aborted_after_a_broker_restart(serve, stop):
    """The transaction's Ongoing record is in __transaction_state; the
    restarted coordinator loads it and aborts it once its timeout has
    passed, so the last stable offset moves and a new producer with the
    same transactional.id goes on."""
    process = serve(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200", "num.partitions=1"
    ).start()
    bootstrap = process.bootstrap_servers
    topic = new_topic(bootstrap)
    transactional_id = f"restart-{uuid.uuid4().hex[:8]}"
    producer = open_transaction(bootstrap, topic, transactional_id, timeout_ms=3000)
    if stop == "sigterm":
        assert process.terminate() == 0
    else:
        process.kill()
    del producer  # the producer died with its broker's connections
    process.start()
    append_after(bootstrap, topic)
    assert consume_confluent(bootstrap, topic, "read_committed", timeout=30) == [b"after"]
    assert transaction_state(bootstrap, transactional_id) == "CompleteAbort"
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, value=b"next", partition=0)
    successor.commit_transaction(30)
    assert consume_confluent(bootstrap, topic, "read_committed", until=b"next") == [
        b"after",
        b"next",
    ]


# -- consume-transform-produce -------------------------------------------------------------
def test_send_offsets_to_transaction_commits_the_offsets_with_the_output(broker):
    """confluent-kafka's exactly-once loop: the consumed offsets are
    committed by the transaction that writes the output (TxnOffsetCommit,
    then the marker on the group's __consumer_offsets partition), and not
    by one that aborts."""
    bootstrap = broker.bootstrap_servers
    source, sink = new_topic(bootstrap), new_topic(bootstrap)
    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        feeder.produce(source, value=f"in-{i}".encode(), partition=0)
    assert feeder.flush(30) == 0
    group = f"eos-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"eos-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    try:
        for batch, commit in ((3, True), (3, False)):
            taken = []
            while len(taken) < batch:
                message = consumer.poll(5)
                assert message is not None and not message.error()
                taken.append(message)
            producer.begin_transaction()
            for message in taken:
                producer.produce(sink, value=message.value().replace(b"in", b"out"), partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, taken[-1].offset() + 1)],
                consumer.consumer_group_metadata(),
                30,
            )
            (producer.commit_transaction if commit else producer.abort_transaction)(30)
        committed = consumer.committed([TopicPartition(source, 0)], 30)
        assert committed[0].offset == 3  # the aborted transaction's offsets are gone
    finally:
        consumer.close()
    assert consume_confluent(bootstrap, sink, "read_committed", until=b"out-2") == [
        b"out-0",
        b"out-1",
        b"out-2",
    ]


# -- transactional.id expiration -----------------------------------------------------------
def describe_transaction(bootstrap: str, transactional_id: str):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        response = connection.send(
            {"transactional_ids": [transactional_id]},
            api_key=api_keys.BY_NAME["DescribeTransactions"].key,
            version=0,
        )
    return response.transaction_states[0]


def listed_transactions(bootstrap: str) -> set[str]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        response = connection.send(
            {"state_filters": [], "producer_id_filters": []},
            api_key=api_keys.BY_NAME["ListTransactions"].key,
            version=0,
        )
    assert response.error_code == 0
    return {state.transactional_id for state in response.transaction_states}


def transaction_log_records(bootstrap: str, transactional_id: str) -> list[bytes | None]:
    """The values of ``transactional_id``'s records in its __transaction_state
    partition (None: a tombstone), in log order."""
    key = encode_key(transactional_id)
    partition = partition_for(transactional_id, 50)  # transaction.state.log.num.partitions
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition("__transaction_state", partition, 0)])
    values, deadline = [], time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return values
                continue
            if message.key() == key:
                values.append(message.value())
    finally:
        consumer.close()
    raise AssertionError("__transaction_state not read to its end")


@pytest.mark.kfast_broker_config(
    {
        "num.partitions": 1,
        "transactional.id.expiration.ms": 1500,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
    }
)
def test_an_idle_transactional_id_expires(kfast_broker):
    """After transactional.id.expiration.ms without a transaction, a
    completed transactional id is removed (a tombstone in
    __transaction_state): DescribeTransactions no longer finds it,
    ListTransactions no longer lists it, and a producer starts with it
    again on a new producer id. An id with an open transaction stays."""
    bootstrap = kfast_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    idle_id, open_id = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("idle", "open"))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": idle_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"before", partition=0)
    producer.commit_transaction(30)
    # The commit is answered once PrepareCommit is written; the markers follow.
    wait_until(
        lambda: describe_transaction(bootstrap, idle_id).transaction_state == "CompleteCommit",
        10,
        "the commit markers",
    )
    before = describe_transaction(bootstrap, idle_id)
    del producer
    # Open longer than the expiration: not expired, as Kafka expires only
    # Empty, CompleteCommit and CompleteAbort.
    still_open = open_transaction(bootstrap, topic, open_id, timeout_ms=60000)
    wait_until(
        lambda: (
            describe_transaction(bootstrap, idle_id).error_code
            == E.TransactionalIdNotFoundException.code
        ),
        20,
        f"{idle_id} to expire",
    )
    assert describe_transaction(bootstrap, open_id).transaction_state == "Ongoing"
    assert open_id in listed_transactions(bootstrap)
    assert idle_id not in listed_transactions(bootstrap)
    records = transaction_log_records(bootstrap, idle_id)
    assert records[-1] is None and len(records) > 1  # states, then the tombstone
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": idle_id})
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce(topic, value=b"again", partition=0)
    successor.commit_transaction(30)
    wait_until(
        lambda: describe_transaction(bootstrap, idle_id).transaction_state == "CompleteCommit",
        10,
        "the commit markers",
    )
    again = describe_transaction(bootstrap, idle_id)
    assert again.producer_id != before.producer_id
    still_open.abort_transaction(30)
    assert consume_confluent(bootstrap, topic, "read_committed", until=b"again") == [
        b"before",
        b"again",
    ]
