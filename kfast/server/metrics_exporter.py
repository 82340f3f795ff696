"""The Prometheus endpoint: Kafka's broker metrics under the names the
Prometheus JMX exporter's standard Kafka rules (kafka-2_0_0.yml,
``lowercaseOutputName: true``) give them. docs/metrics.md has the table.

How a scrape runs: prometheus_client's HTTP server answers on a thread of
its own; the collector asks the broker's event loop for one snapshot
(``call_soon_threadsafe``) and waits for it, so everything is read on the
thread that writes it, without locks on the hot paths. The snapshot copies
the counters and computes the gauges (partition states, purgatory sizes,
group counts, consumer lag from committed offsets and high watermarks);
turning it into metric families happens back on the HTTP thread.

Histograms (RequestMetrics' times, LogFlushRateAndTimeMs) appear as the JMX
exporter shows a Yammer histogram: a summary with the quantiles 0.50 ..
0.999 and ``_count``; kfast adds ``_sum``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import MetadataImage
from kfast.metrics.broker_stats import LOG_FLUSH_STATS, REQUEST_TIMES, TopicStats
from kfast.metrics.controller_stats import ControllerStats, ControllerStatsSnapshot
from kfast.metrics.histogram import HistogramSnapshot
from kfast.protocol import api_keys

if TYPE_CHECKING:
    from kfast.coordinator.group.coordinator import GroupCoordinator
    from kfast.server.broker import KafkaBroker
    from kfast.server.client_metrics import TelemetryPoint
    from kfast.server.controller_server import ControllerServer
    from kfast.server.network import SocketServer
    from kfast.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")

# How long a scrape waits for the event loop before failing (HTTP 500).
SNAPSHOT_TIMEOUT_S = 10.0

# BrokerTopicMetrics meters: TopicStats attribute -> the exporter's name part
# (Kafka's "<Name>PerSec" lower-cased, without PerSec).
_TOPIC_METERS = (
    ("messages_in", "messagesin", "MessagesInPerSec: records appended"),
    ("bytes_in", "bytesin", "BytesInPerSec: record bytes appended"),
    ("bytes_out", "bytesout", "BytesOutPerSec: record bytes sent to consumers"),
    (
        "total_produce_requests",
        "totalproducerequests",
        "TotalProduceRequestsPerSec: partition appends requested",
    ),
    (
        "failed_produce_requests",
        "failedproducerequests",
        "FailedProduceRequestsPerSec: partition appends that failed",
    ),
    (
        "total_fetch_requests",
        "totalfetchrequests",
        "TotalFetchRequestsPerSec: partition reads by consumers",
    ),
    (
        "failed_fetch_requests",
        "failedfetchrequests",
        "FailedFetchRequestsPerSec: partition reads by consumers that failed",
    ),
)


@dataclass
class Snapshot:
    """Everything one scrape reports, copied on the event loop. A
    controller-only node fills the request, controller and connection
    parts (``broker`` False)."""

    broker: bool = True
    topics: dict[str, TopicStats] = field(default_factory=dict)
    all_topics: TopicStats = field(default_factory=TopicStats)
    # api key -> ({version: count}, the request time histograms)
    requests: dict[int, tuple[dict[int, int], list[HistogramSnapshot]]] = field(
        default_factory=dict
    )
    purgatories: list[tuple[str, int, int]] = field(default_factory=list)  # name, size, delayed
    partition_count: int = 0
    leader_count: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    replication_bytes_in: int = 0
    replication_bytes_out: int = 0
    active_controller: int = 0
    offline_partitions: int = 0
    global_topics: int = 0
    global_partitions: int = 0
    controller_stats: ControllerStatsSnapshot | None = None  # of this node's controller
    groups_by_state: dict[str, int] = field(default_factory=dict)
    num_offsets: int = 0
    # (group, topic, partition, committed offset, lag)
    lag: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    # (quota type, user, client id) -> (throttled requests, throttle time ms)
    throttles: dict[tuple[str, str, str], tuple[int, float]] = field(default_factory=dict)
    connections: list[tuple[str, int]] = field(default_factory=list)  # listener, count
    # KIP-714 pushes: (name, kind, labels, value, count, monotonic)
    telemetry: list[TelemetryPoint] = field(default_factory=list)


def _controller_part(
    snap: Snapshot,
    active: bool,
    image: MetadataImage | None,
    socket_servers: Mapping[str, SocketServer],
    stats: ControllerStats | None,
) -> None:
    snap.active_controller = 1 if active else 0
    snap.controller_stats = None if stats is None else stats.snapshot()
    if active and image is not None:
        # The ControllerMetadataMetrics gauges are the active controller's.
        for topic in image.topics_by_name.values():
            snap.global_topics += 1
            for registration in topic.partitions.values():
                snap.global_partitions += 1
                if registration.leader < 0:
                    snap.offline_partitions += 1
    snap.connections = [
        (name, server.metrics().active_connections) for name, server in socket_servers.items()
    ]


class ControllerSnapshotter:
    """A controller-only node's ``Snapshot``; call only on its loop."""

    def __init__(self, server: ControllerServer) -> None:
        self.server = server

    def take(self) -> Snapshot:
        server = self.server
        snap = Snapshot(broker=False, requests=server.apis.request_metrics.snapshot())
        controller = server.controller
        _controller_part(
            snap,
            controller is not None and controller.is_active,
            server.metadata_image,
            server.socket_servers,
            None if controller is None else controller.stats,
        )
        return snap


class BrokerSnapshotter:
    """Builds a ``Snapshot`` of one KafkaBroker; call only on its loop."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker

    def take(self) -> Snapshot:
        broker = self.broker
        snap = Snapshot()
        image = broker.metadata_image
        replica_manager = broker.replica_manager
        metrics = broker.metrics
        if image is not None:
            metrics.topics.retire_missing(image.topics_by_name)
        snap.topics, snap.all_topics = metrics.topics.snapshot()
        snap.requests = metrics.requests.snapshot()
        snap.isr_shrinks = metrics.replicas.isr_shrinks
        snap.isr_expands = metrics.replicas.isr_expands
        snap.replication_bytes_in = metrics.replicas.replication_bytes_in
        snap.replication_bytes_out = metrics.replicas.replication_bytes_out
        snap.throttles = metrics.quotas.snapshot()
        if replica_manager is not None:
            self._partitions(snap, replica_manager)
        group_runtime = broker.group_coordinator
        if group_runtime is not None:
            coordinator = group_runtime.coordinator
            for name, purgatory in (
                ("Rebalance", coordinator.join_purgatory),
                ("Heartbeat", coordinator.heartbeat_purgatory),
            ):
                snap.purgatories.append((name, purgatory.watched(), purgatory.delayed()))
            self._groups(snap, coordinator, replica_manager)
        _controller_part(
            snap,
            metrics.is_active_controller(),
            image,
            broker.socket_servers,
            metrics.controller_stats(),
        )
        snap.telemetry = broker.client_metrics.snapshot()
        return snap

    @staticmethod
    def _partitions(snap: Snapshot, replica_manager: ReplicaManager) -> None:
        for purgatory in (
            replica_manager.produce_purgatory,
            replica_manager.fetch_purgatory,
            replica_manager.delete_records_purgatory,
        ):
            snap.purgatories.append((purgatory.name, purgatory.watched(), purgatory.delayed()))
        for partition in replica_manager.partitions():
            snap.partition_count += 1
            if not partition.is_leader:
                continue
            snap.leader_count += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                snap.under_replicated += 1
            log = partition.log
            if log is not None and isr < log.config["min.insync.replicas"]:
                snap.under_min_isr += 1

    @staticmethod
    def _groups(
        snap: Snapshot, coordinator: GroupCoordinator, replica_manager: ReplicaManager | None
    ) -> None:
        states: dict[str, int] = {}
        for group in coordinator.groups.values():
            states[group.state] = states.get(group.state, 0) + 1
        for consumer_group in coordinator.consumer_groups.values():
            state = consumer_group.state
            states[state] = states.get(state, 0) + 1
        snap.groups_by_state = states
        for group_id, offsets in coordinator.offsets.items():
            snap.num_offsets += len(offsets)
            if replica_manager is None:
                continue
            for (topic, index), value in offsets.items():
                # Lag as kafka_exporter computes it: high watermark minus
                # the committed offset, for partitions this broker leads.
                partition = replica_manager.get_partition(topic, index)
                if partition is None or not partition.is_leader or partition.log is None:
                    continue
                lag = max(0, partition.log.high_watermark - value.offset)
                snap.lag.append((group_id, topic, index, value.offset, lag))


_REQUEST_TIME_DOCS = (
    "RequestMetrics.TotalTimeMs: frame read to last response byte sent, the sum "
    "of the other five (ms)",
    "RequestMetrics.RequestQueueTimeMs: frame read to handler start (ms)",
    "RequestMetrics.LocalTimeMs: parsing and handling (ms)",
    "RequestMetrics.RemoteTimeMs: waiting in purgatory or on the controller, "
    "a coordinator write (ms)",
    "RequestMetrics.ResponseQueueTimeMs: response ready to its send begun, behind "
    "the connection's earlier responses (ms)",
    "RequestMetrics.ResponseSendTimeMs: send begun to last byte handed to the socket (ms)",
)


def _summary(name: str, documentation: str) -> Metric:
    return Metric(name, documentation, "summary")


def _add_histogram(metric: Metric, labels: dict[str, str], histogram: HistogramSnapshot) -> None:
    for q, value in histogram.quantiles():
        metric.add_sample(metric.name, {**labels, "quantile": _quantile_label(q)}, value)
    metric.add_sample(metric.name + "_count", labels, histogram.count)
    metric.add_sample(metric.name + "_sum", labels, histogram.sum)


def _quantile_label(q: float) -> str:
    # The JMX exporter's "0.$N" from <N>thPercentile: 0.50, 0.75, ... 0.999.
    return f"{q:.2f}" if q < 0.995 else f"{q:g}"


class KafkaCollector:
    """A prometheus_client custom collector over broker snapshots."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot  # safe to call from any thread

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        yield from self._request_metrics(snap)
        yield from self._controller_gauges(snap)
        if not snap.broker:
            return
        yield from self._topic_metrics(snap)
        yield from self._broker_gauges(snap)
        yield from self._groups(snap)
        yield from self._quota(snap)
        flush = LOG_FLUSH_STATS.snapshot()
        metric = _summary(
            "kafka_log_logflushstats_logflushrateandtimems",
            "LogFlushStats.LogFlushRateAndTimeMs: fsyncs of log segments (ms)",
        )
        _add_histogram(metric, {}, flush)
        yield metric
        yield from telemetry_families(snap.telemetry)

    @staticmethod
    def _topic_metrics(snap: Snapshot) -> Iterator[Metric]:
        for attribute, part, doc in _TOPIC_METERS:
            metric = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{part}", doc, labels=["topic"]
            )
            for topic, stats in sorted(snap.topics.items()):
                metric.add_metric([topic], getattr(stats, attribute))
            # The all-topics meter (no topic key in its MBean name).
            metric.add_metric([], getattr(snap.all_topics, attribute))
            yield metric

    @staticmethod
    def _request_metrics(snap: Snapshot) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "RequestMetrics.RequestsPerSec: requests per API and version",
            labels=["request", "version"],
        )
        times = [
            _summary(f"kafka_network_requestmetrics_{name.lower()}timems", doc)
            for name, doc in zip(REQUEST_TIMES, _REQUEST_TIME_DOCS, strict=True)
        ]
        for key, (versions, histograms) in sorted(snap.requests.items()):
            name = api_keys.BY_KEY[key].name
            for version, count in sorted(versions.items()):
                requests.add_metric([name, str(version)], count)
            for metric, histogram in zip(times, histograms):
                _add_histogram(metric, {"request": name}, histogram)
        yield requests
        yield from times

    @staticmethod
    def _controller_gauges(snap: Snapshot) -> Iterator[Metric]:
        for name, value, doc in (
            (
                "kafka_controller_kafkacontroller_activecontrollercount",
                snap.active_controller,
                "KafkaController.ActiveControllerCount: 1 on the active controller",
            ),
            (
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                snap.offline_partitions,
                "KafkaController.OfflinePartitionsCount: partitions without a leader",
            ),
            (
                "kafka_controller_kafkacontroller_globaltopiccount",
                snap.global_topics,
                "KafkaController.GlobalTopicCount",
            ),
            (
                "kafka_controller_kafkacontroller_globalpartitioncount",
                snap.global_partitions,
                "KafkaController.GlobalPartitionCount",
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        stats = snap.controller_stats
        if stats is not None:
            # Kafka's ControllerStats (a node with a controller only).
            metric = _summary(
                "kafka_controller_controllerstats_leaderelectionrateandtimems",
                "ControllerStats.LeaderElectionRateAndTimeMs: controller "
                "operations that elected leaders, and their time to commit (ms)",
            )
            _add_histogram(metric, {}, stats.leader_elections)
            yield metric
            yield CounterMetricFamily(
                "kafka_controller_controllerstats_uncleanleaderelections",
                "ControllerStats.UncleanLeaderElectionsPerSec: leaders elected from outside "
                "the ISR",
                value=stats.unclean_leader_elections,
            )
            yield CounterMetricFamily(
                "kfast_controller_controllerstats_leaderelections",
                "Partitions given a new leader by this controller's elections",
                value=stats.elected_partitions,
            )
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "socket-server-metrics connection-count per listener",
            labels=["listener"],
        )
        for listener, count in snap.connections:
            connections.add_metric([listener], count)
        yield connections

    @staticmethod
    def _broker_gauges(snap: Snapshot) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "DelayedOperationPurgatory.PurgatorySize: watch-list entries",
            labels=["delayedOperation"],
        )
        delayed = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "DelayedOperationPurgatory.NumDelayedOperations",
            labels=["delayedOperation"],
        )
        for name, watched, pending in snap.purgatories:
            size.add_metric([name], watched)
            delayed.add_metric([name], pending)
        yield size
        yield delayed
        for name, value, doc in (
            (
                "kafka_server_replicamanager_partitioncount",
                snap.partition_count,
                "ReplicaManager.PartitionCount",
            ),
            (
                "kafka_server_replicamanager_leadercount",
                snap.leader_count,
                "ReplicaManager.LeaderCount",
            ),
            (
                "kafka_server_replicamanager_underreplicatedpartitions",
                snap.under_replicated,
                "ReplicaManager.UnderReplicatedPartitions: led here, ISR smaller than replicas",
            ),
            (
                "kafka_server_replicamanager_underminisrpartitioncount",
                snap.under_min_isr,
                "ReplicaManager.UnderMinIsrPartitionCount",
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        for name, value, doc in (
            (
                "kafka_server_replicamanager_isrshrinks",
                snap.isr_shrinks,
                "ReplicaManager.IsrShrinksPerSec",
            ),
            (
                "kafka_server_replicamanager_isrexpands",
                snap.isr_expands,
                "ReplicaManager.IsrExpandsPerSec",
            ),
            (
                "kafka_server_brokertopicmetrics_replicationbytesin",
                snap.replication_bytes_in,
                "BrokerTopicMetrics.ReplicationBytesInPerSec: bytes appended from leaders",
            ),
            (
                "kafka_server_brokertopicmetrics_replicationbytesout",
                snap.replication_bytes_out,
                "BrokerTopicMetrics.ReplicationBytesOutPerSec: bytes sent to followers",
            ),
        ):
            yield CounterMetricFamily(name, doc, value=value)

    @staticmethod
    def _groups(snap: Snapshot) -> Iterator[Metric]:
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield GaugeMetricFamily(
            prefix + "numgroups",
            "GroupMetadataManager.NumGroups",
            value=sum(snap.groups_by_state.values()),
        )
        for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"):
            yield GaugeMetricFamily(
                prefix + "numgroups" + state.lower(),
                f"GroupMetadataManager.NumGroups{state}",
                value=snap.groups_by_state.get(state, 0),
            )
        yield GaugeMetricFamily(
            prefix + "numoffsets", "GroupMetadataManager.NumOffsets", value=snap.num_offsets
        )
        # kafka_exporter's names: Kafka brokers publish no lag of their own.
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset",
            labels=["consumergroup", "topic", "partition"],
        )
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The group's committed offset",
            labels=["consumergroup", "topic", "partition"],
        )
        for group, topic, index, offset, value in snap.lag:
            lag.add_metric([group, topic, str(index)], value)
            current.add_metric([group, topic, str(index)], offset)
        yield lag
        yield current

    @staticmethod
    def _quota(snap: Snapshot) -> Iterator[Metric]:
        metric = GaugeMetricFamily(
            "kafka_server_quota_throttle_time",
            "Quota throttle-time: mean throttle of throttled responses (ms)",
            labels=["resource", "user", "clientId"],
        )
        total = CounterMetricFamily(
            "kfast_server_quota_throttle_time_ms",
            "Sum of the throttle times given (ms)",
            labels=["resource", "user", "clientId"],
        )
        for (resource, user, client_id), (count, ms) in sorted(snap.throttles.items()):
            metric.add_metric([resource, user, client_id], ms / count if count else 0.0)
            total.add_metric([resource, user, client_id], ms)
        yield metric
        yield total


def prometheus_name(otlp_name: str) -> str:
    """An OTLP metric or attribute name as Prometheus allows it
    (org.apache.kafka.producer.record.queue.time.avg ->
    org_apache_kafka_producer_record_queue_time_avg)."""
    name = _INVALID_NAME_CHARS.sub("_", otlp_name)
    return "_" + name if not name or name[0].isdigit() else name


def telemetry_families(points: list[TelemetryPoint]) -> list[Metric]:
    """The latest pushed values: monotonic sums as counters (deltas added
    up), gauges and other sums as gauges, histograms as summaries of count
    and sum. A name pushed with two kinds keeps the first."""
    families: dict[str, Metric] = {}
    for name, kind, labels, value, count, monotonic in points:
        metric_name = prometheus_name(name)
        if kind == "sum" and monotonic:
            prom_type = "counter"
        elif kind == "histogram":
            prom_type = "summary"
        else:
            prom_type = "gauge"
        if prom_type == "counter" and metric_name.endswith("_total"):
            metric_name = metric_name[: -len("_total")]  # the sample gets it back
        family = families.get(metric_name)
        if family is None:
            family = families[metric_name] = Metric(
                metric_name, f"KIP-714 client metric {name}", prom_type
            )
        elif family.type != prom_type:
            continue
        label_dict: dict[str, str] = {}
        for key, label_value in labels:
            label_dict.setdefault(prometheus_name(key), label_value)
        if prom_type == "counter":
            family.add_sample(metric_name + "_total", label_dict, value)
        elif prom_type == "summary":
            family.add_sample(metric_name + "_count", label_dict, count)
            family.add_sample(metric_name + "_sum", label_dict, value)
        else:
            family.add_sample(metric_name, label_dict, value)
    return list(families.values())


class MetricsServer:
    """The endpoint of one node: ``take`` builds a Snapshot on the node's
    loop; ``start()`` from the loop's executor once the node is up; ``port``
    is the bound port; ``stop()`` from anywhere."""

    def __init__(self, take: Callable[[], Snapshot], host: str, port: int) -> None:
        self._take = take
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> int:
        self._loop = loop
        registry = CollectorRegistry(auto_describe=False)
        registry.register(KafkaCollector(self.snapshot))
        server, self._thread = start_http_server(self.requested_port, self.host, registry=registry)
        self._server = server
        port: int = server.server_port
        self.port = port
        logger.info("Prometheus metrics on http://%s:%d/metrics", self.host, port)
        return port

    def snapshot(self) -> Snapshot:
        """From the HTTP thread: the loop takes the snapshot, we wait."""
        future: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()
        loop = self._loop
        if loop is None:
            raise RuntimeError("the metrics server is not started")

        def take() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(self._take())
            except BaseException as exc:  # reported to the scraper as a 500
                future.set_exception(exc)

        loop.call_soon_threadsafe(take)
        return future.result(SNAPSHOT_TIMEOUT_S)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(5)
            self._server = None


async def start_metrics_server(
    take: Callable[[], Snapshot], config: KafkaConfig, loop: asyncio.AbstractEventLoop
) -> MetricsServer:
    """The endpoint ``kfast.metrics.port`` / ``kfast.metrics.host`` ask for
    (binding and the thread's start are blocking: run in the executor)."""
    server = MetricsServer(take, config["kfast.metrics.host"], config["kfast.metrics.port"])
    await loop.run_in_executor(None, server.start, loop)
    return server
