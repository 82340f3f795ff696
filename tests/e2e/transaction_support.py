"""Raw-protocol helpers of the transaction tests (kfast's own client, so
any version can be asked for): a transactional producer's requests one by
one, and the partition offsets that show a transaction open or ended."""

from __future__ import annotations

import time
import uuid

from kfast.protocol import api_keys
from kfast.protocol import errors as E
from kfast.records import RecordBatchBuilder

KEY = {api.name: api.key for api in api_keys.API_KEYS}
TOPIC = "txn-protocol"


def send(conn, api: str, version: int, **body):
    return conn.send(body, api_key=KEY[api], version=version)


def fresh_id() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def init(conn, transactional_id: str, version: int = 4, timeout_ms: int = 60000, **fields):
    """InitProducerId, retried while the coordinator loads or allocates
    (after FindCoordinator, which creates __transaction_state, as clients
    ask it first)."""
    send(conn, "FindCoordinator", 3, key=transactional_id, key_type=1)
    deadline = time.monotonic() + 15
    while True:
        response = send(
            conn,
            "InitProducerId",
            version,
            transactional_id=transactional_id,
            transaction_timeout_ms=timeout_ms,
            **fields,
        )
        if (
            response.error_code
            not in (
                E.CoordinatorLoadInProgressException.code,
                E.CoordinatorNotAvailableException.code,
                E.ConcurrentTransactionsException.code,
            )
            or time.monotonic() > deadline
        ):
            return response
        time.sleep(0.05)


def add_partitions(conn, version, transactional_id, producer_id, epoch, partitions, topic=TOPIC):
    response = send(
        conn,
        "AddPartitionsToTxn",
        version,
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": topic, "partitions": partitions}],
    )
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


def produce_transactional(
    conn,
    transactional_id,
    producer_id,
    epoch,
    partition,
    values,
    sequence=0,
    topic=TOPIC,
    version=9,
):
    builder = RecordBatchBuilder(
        0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    response = send(
        conn,
        "Produce",
        version,
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            {"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}
        ],
    )
    return response.responses[0].partition_responses[0].error_code


def offsets(conn, partition: int, topic: str = TOPIC) -> tuple[int, int]:
    """(last stable offset, high watermark) of a partition."""
    answers = []
    for isolation in (1, 0):
        response = send(
            conn,
            "ListOffsets",
            5,
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}
            ],
        )
        answers.append(response.topics[0].partitions[0].offset)
    return tuple(answers)


def end_txn(conn, version, transactional_id, producer_id, epoch, committed):
    deadline = time.monotonic() + 15
    while True:
        response = send(
            conn,
            "EndTxn",
            version,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            committed=committed,
        )
        if (
            response.error_code != E.ConcurrentTransactionsException.code
            or time.monotonic() > deadline
        ):
            return response
        time.sleep(0.05)


def wait_ended(coordinator, transactional_id: str, timeout: float = 15.0) -> str:
    """Wait until the coordinator has completed the transaction's end
    (DescribeTransactions says CompleteCommit or CompleteAbort): the
    partitions' markers are written before that, and until then the
    coordinator answers a verification with CONCURRENT_TRANSACTIONS, which a
    partition leader turns into the retriable NOT_ENOUGH_REPLICAS (Kafka's
    mapping), not the refusal a test of the ended transaction expects."""
    deadline = time.monotonic() + timeout
    while True:
        response = send(
            coordinator, "DescribeTransactions", 0, transactional_ids=[transactional_id]
        )
        state = response.transaction_states[0].transaction_state
        if state in ("CompleteCommit", "CompleteAbort"):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{transactional_id} still {state} after {timeout}s")
        time.sleep(0.02)  # the coordinator's state change has no event to await here


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float, expected: int = 0
) -> tuple[list[bytes], bool]:
    """(values, reached the end): every value of ``topic``'s partitions read
    with confluent-kafka at ``isolation`` until at least ``expected`` came and
    every partition is at its end (the last stable offset for
    read_committed), or ``timeout`` seconds passed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, at_end, deadline = [], set(), time.monotonic() + timeout
    try:
        while (len(values) < expected or len(at_end) < partitions) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            values.append(message.value())
    finally:
        consumer.close()
    return values, len(at_end) == partitions
