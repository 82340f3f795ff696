"""The admin requests behind ``kfast transactions`` (Kafka's Admin
listTransactions, describeTransactions, describeProducers and
abortTransaction, KIP-664), over BlockingConnections.

Retries follow Kafka's admin handlers until ``timeout_s`` (Kafka's
default.api.timeout.ms): a coordinator that is loading or moved
(COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE),
a partition whose leader moved (NOT_LEADER_OR_FOLLOWER, unless a broker id
was named) are asked again on fresh metadata. One difference: a topic the
metadata does not have fails at once with UNKNOWN_TOPIC_OR_PARTITION where
Kafka's admin waits for it until the timeout.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from kfast.protocol import errors as E

_KEY = api_keys.BY_NAME
TRANSACTION_KEY_TYPE = 1
_RETRY_BACKOFF_S = 0.1
_COORDINATOR_MOVED = {
    E.NotCoordinatorException.code,
    E.CoordinatorNotAvailableException.code,
    E.CoordinatorLoadInProgressException.code,
}
_LEADER_MOVED = {
    E.NotLeaderOrFollowerException.code,
    E.UnknownTopicOrPartitionException.code,
    E.ReplicaNotAvailableException.code,
    E.BrokerNotAvailableException.code,
}


class AdminError(Exception):
    """A failed admin call; the message is what the tool prints."""


class AbortTransactionSpec(NamedTuple):
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:  # Kafka's AbortTransactionSpec.toString
        return (
            f"AbortTransactionSpec(topicPartition={self.topic}-{self.partition}, "
            f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
            f"coordinatorEpoch={self.coordinator_epoch})"
        )


def _error(code: int, message: str | None = None) -> E.KafkaError:
    error = E.for_code(code)
    return error(message) if message else error()


class TransactionsAdmin:
    def __init__(self, bootstrap: str, timeout_s: float = 60.0, options: dict | None = None):
        self.timeout_s = timeout_s
        # BlockingConnection settings (client id, --command-config security).
        self._options = {
            "client_id": "kfast-transactions",
            "request_timeout": 30,
            **(options or {}),
        }
        self._bootstrap = self._connect_any(bootstrap)
        self._connections: dict[tuple[str, int], BlockingConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    def _connect_any(self, bootstrap: str) -> BlockingConnection:
        last: Exception | None = None
        for item in bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            try:
                return BlockingConnection(
                    host.strip("[]") or "localhost", int(port), **self._options
                )
            except Exception as exc:
                last = exc
        raise AdminError(f"no bootstrap server answered: {last}")

    def close(self) -> None:
        self._bootstrap.close()
        for connection in self._connections.values():
            connection.close()

    def __enter__(self) -> TransactionsAdmin:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _node(self, broker_id: int) -> BlockingConnection:
        if broker_id not in self.brokers:
            self.metadata([])
        if broker_id not in self.brokers:
            raise AdminError(f"broker {broker_id} is not in the cluster's metadata")
        address = self.brokers[broker_id]
        connection = self._connections.get(address)
        if connection is None:
            connection = BlockingConnection(*address, **self._options)
            self._connections[address] = connection
        return connection

    def _send(self, connection: BlockingConnection, api: str, body: dict):
        return connection.send(body, api_key=_KEY[api].key)

    def _retrying(self, attempt):
        """``attempt()`` until it returns something other than None, or the
        timeout (Kafka's admin: TimeoutException)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            result = attempt()
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise AdminError(
                    E.TimeoutException(f"Timed out after {self.timeout_s:g} s").message
                )
            time.sleep(_RETRY_BACKOFF_S)

    # -- metadata ------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None):
        """{(topic, partition): (leader, replicas)} of ``topics`` (None: every
        topic, internal ones included); remembers the brokers."""
        response = self._send(
            self._bootstrap,
            "Metadata",
            {
                "topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
            },
        )
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        partitions = {}
        for topic in response.topics:
            if topic.error_code:
                raise AdminError(_error(topic.error_code).message)
            for p in topic.partitions:
                partitions[(topic.name, p.partition_index)] = (p.leader_id, tuple(p.replica_nodes))
        return partitions

    # -- DescribeProducers ---------------------------------------------------------------
    def describe_producers(
        self, partitions: list[tuple[str, int]], broker_id: int | None = None
    ) -> dict[tuple[str, int], list]:
        """The active producers of each partition: from its leader, or from
        the replica on ``broker_id``."""
        found: dict[tuple[str, int], list] = {}

        def attempt():
            wanted = [tp for tp in partitions if tp not in found]
            if broker_id is not None:
                by_broker = {broker_id: wanted}
            else:
                leaders = self.metadata(sorted({t for t, _ in wanted}))
                by_broker = {}
                for tp in wanted:
                    if tp not in leaders:
                        raise AdminError(
                            E.UnknownTopicOrPartitionException(
                                f"Partition {tp[0]}-{tp[1]} does not exist"
                            ).message
                        )
                    by_broker.setdefault(leaders[tp][0], []).append(tp)
            for broker, tps in by_broker.items():
                if broker < 0:
                    continue  # no leader now: ask again
                self._describe_producers_on(broker, tps, broker_id is not None, found)
            return found if len(found) == len(partitions) else None

        return self._retrying(attempt)

    def _describe_producers_on(
        self, broker: int, partitions, fixed_broker: bool, found: dict
    ) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        response = self._send(
            self._node(broker),
            "DescribeProducers",
            {"topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]},
        )
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if p.error_code == 0:
                    found[tp] = p.active_producers
                elif p.error_code == E.NotLeaderOrFollowerException.code and fixed_broker:
                    raise AdminError(
                        E.NotLeaderOrFollowerException(
                            f"Failed to describe active producers for partition {tp[0]}-{tp[1]} "
                            f"on brokerId {broker}"
                        ).message
                    )
                elif p.error_code not in _LEADER_MOVED:
                    raise AdminError(_error(p.error_code, p.error_message).message)

    # -- ListTransactions ----------------------------------------------------------------
    def list_transactions(
        self, state_filters=(), producer_ids=(), duration_ms: int = -1, pattern: str | None = None
    ) -> dict[int, list]:
        """Every broker's listing ({broker id: [TransactionState]}): each
        coordinator knows the transactional ids of the __transaction_state
        partitions it leads."""
        self.metadata([])
        body: dict[str, object] = {
            "state_filters": list(state_filters),
            "producer_id_filters": list(producer_ids),
        }
        if duration_ms >= 0:
            body["duration_filter"] = duration_ms
        if pattern is not None:
            body["transactional_id_pattern"] = pattern
        listings: dict[int, list] = {}
        for broker in sorted(self.brokers):

            def attempt(broker=broker):
                response = self._send(self._node(broker), "ListTransactions", body)
                if response.error_code == E.CoordinatorLoadInProgressException.code:
                    return None
                if response.error_code:
                    raise AdminError(_error(response.error_code).message)
                return response.transaction_states

            listings[broker] = self._retrying(attempt)
        return listings

    # -- DescribeTransactions ------------------------------------------------------------
    def find_coordinator(self, transactional_id: str) -> int:
        def attempt():
            connection = self._bootstrap
            if connection.version_for(_KEY["FindCoordinator"].key) >= 4:
                response = self._send(
                    connection,
                    "FindCoordinator",
                    {"key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [transactional_id]},
                )
                answer = response.coordinators[0]
            else:
                answer = self._send(
                    connection,
                    "FindCoordinator",
                    {"key": transactional_id, "key_type": TRANSACTION_KEY_TYPE},
                )
            if answer.error_code in _COORDINATOR_MOVED:
                return None
            if answer.error_code:
                raise AdminError(_error(answer.error_code).message)
            self.brokers[answer.node_id] = (answer.host, answer.port)
            return answer.node_id

        return self._retrying(attempt)

    def describe_transaction(self, transactional_id: str):
        """(coordinator id, DescribeTransactions' TransactionState); raises
        AdminError (TRANSACTIONAL_ID_NOT_FOUND included) as Kafka's handler."""

        def attempt():
            coordinator = self.find_coordinator(transactional_id)
            response = self._send(
                self._node(coordinator),
                "DescribeTransactions",
                {"transactional_ids": [transactional_id]},
            )
            state = response.transaction_states[0]
            if state.error_code in _COORDINATOR_MOVED:
                return None
            if state.error_code == E.TransactionalIdNotFoundException.code:
                raise TransactionalIdNotFound(
                    f"DescribeTransactions request for transactionalId `{transactional_id}` "
                    f"failed because the ID could not be found"
                )
            if state.error_code:
                raise AdminError(
                    _error(
                        state.error_code,
                        f"DescribeTransactions request for transactionalId "
                        f"`{transactional_id}` failed due to unexpected error",
                    ).message
                )
            return coordinator, state

        return self._retrying(attempt)

    # -- abort: WriteTxnMarkers to the partition's leader ---------------------------------
    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        """Write an ABORT marker for the producer to the partition (Kafka's
        AbortTransactionHandler); the producer state ends the transaction
        there and the last stable offset moves past it."""

        def attempt():
            leaders = self.metadata([spec.topic])
            leader = leaders.get((spec.topic, spec.partition), (-1,))[0]
            if leader < 0:
                return None
            response = self._send(
                self._node(leader),
                "WriteTxnMarkers",
                {
                    "markers": [
                        {
                            "producer_id": spec.producer_id,
                            "producer_epoch": spec.producer_epoch,
                            "transaction_result": False,
                            "coordinator_epoch": spec.coordinator_epoch,
                            # The original protocol's marker: the producer's own epoch.
                            "transaction_version": 0,
                            "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
                        }
                    ]
                },
            )
            code = response.markers[0].topics[0].partitions[0].error_code
            if code in _LEADER_MOVED:
                return None
            if code == E.InvalidProducerEpochException.code:
                raise AdminError(
                    f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
                )
            if code == E.TransactionCoordinatorFencedException.code:
                raise AdminError(
                    f"WriteTxnMarkers request with {spec} failed since the "
                    f"provided coordinator epoch {spec.coordinator_epoch} has been "
                    f"fenced by the active coordinator"
                )
            if code:
                raise AdminError(
                    f"WriteTxnMarkers request with {spec} failed due to "
                    f"unexpected error: {_error(code).message}"
                )
            return True

        self._retrying(attempt)


class TransactionalIdNotFound(AdminError):
    """DescribeTransactions' TRANSACTIONAL_ID_NOT_FOUND (find-hanging takes
    it as "no coordinator state": the transaction hangs)."""
