"""KafkaBroker: one kfast node in the combined broker + controller role
(Kafka's KafkaRaftServer with BrokerServer and ControllerServer).

Start order: timer -> LogManager (loads and recovers the partition logs, in
an executor) -> controller (its Raft log replays __cluster_metadata) -> metadata
publisher (creates the Partitions of the replayed image) -> listeners ->
broker registration (publishes this broker's endpoints) -> periodic jobs.

Shutdown (SIGTERM/SIGINT in ``kfast serve``): stop accepting, answer the
requests in flight, stop the periodic jobs, then the controller, then flush
every log, write the checkpoints and the clean-shutdown marker.

Periodic jobs run on the loop's timer with Kafka's intervals; the ones that
touch the disk run in the default executor, and a job is rescheduled only
after its previous run finished.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from kfast.client.security import ClientSecurity
from kfast.config import ConfigException, KafkaConfig
from kfast.controller.feature_control import TRANSACTION_VERSION
from kfast.controller.metadata.image import Endpoint, MetadataDelta, MetadataImage
from kfast.controller.topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kfast.coordinator.group.runtime import GroupCoordinatorRuntime
from kfast.coordinator.transaction.runtime import TransactionCoordinatorRuntime
from kfast.metrics.broker_stats import BrokerMetrics
from kfast.metrics.controller_stats import ControllerStats
from kfast.protocol.errors import KafkaStorageException
from kfast.security.acl_publisher import AclPublisher
from kfast.security.authorizer import StandardAuthorizer
from kfast.security.listener import ListenerSecurity
from kfast.server.alter_partition_manager import AlterPartitionManager
from kfast.server.apis import KafkaApis
from kfast.server.client_metrics import ClientMetricsManager
from kfast.server.connection_rate_quota import ConnectionRateQuotas
from kfast.server.controller_channel import Forwarder, QuorumControllerClient
from kfast.server.coordinator_partition_writer import CoordinatorPartitionWriter
from kfast.server.directory_assignments import DirectoryAssignments
from kfast.server.fetch_session import MIN_EVICTION_MS, FetchSessionCache
from kfast.server.metadata_publisher import BrokerMetadataPublisher
from kfast.server.network import SocketServer
from kfast.server.producer_id_apis import ProducerIdManager
from kfast.server.quota import ClientQuotas
from kfast.server.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from kfast.server.replica_fetcher import ReplicaFetcherManager
from kfast.server.replica_manager import ReplicaManager
from kfast.server.secured_listener import secured_socket_server
from kfast.server.transaction_verification import AddPartitionsToTxnManager
from kfast.server.txn_marker_channel import TransactionMarkerChannelManager
from kfast.server_common.halt import Halts
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

if TYPE_CHECKING:
    from kfast.server.metrics_exporter import MetricsServer

# Makes a cluster node's controller client (kfast.server.raft_server); the
# embedded single node makes its EmbeddedController itself.
ControllerFactory = Callable[["KafkaBroker", asyncio.AbstractEventLoop], QuorumControllerClient]

logger = logging.getLogger("kfast.server")

_API_MODULES = (
    "kfast.server.produce_apis",
    "kfast.server.fetch_apis",
    "kfast.server.metadata_apis",
    "kfast.server.log_apis",
    "kfast.server.producer_id_apis",
    "kfast.server.admin_apis",
    "kfast.server.group_apis",
    "kfast.server.txn_offset_commit_apis",
    # After producer_id_apis: its InitProducerId handler takes transactional ids.
    "kfast.server.transaction_apis",
    "kfast.server.write_txn_markers_apis",
    "kfast.server.describe_producers_apis",
    "kfast.server.acl_apis",
    "kfast.server.sasl_apis",
    "kfast.server.telemetry_apis",
    "kfast.server.scram_apis",
    "kfast.server.delegation_token_apis",
    "kfast.server.quota_apis",
)
# Intervals at or above this are "never" (Kafka's Long.MAX_VALUE defaults).
_NEVER_MS = 2**31
_LOG_CLEANER_JOB = "kafka-log-cleaner"


def handler_modules() -> list[ModuleType]:
    """The request handler modules, imported (each has ``register(apis)``)."""
    import importlib

    return [importlib.import_module(name) for name in _API_MODULES]


def preload() -> None:
    """Import everything a broker's start imports (handler modules, the
    controller), so that a process which knows it will start brokers pays
    for its imports once, up front."""
    handler_modules()
    import kfast.raft.file_log
    import kfast.server.embedded_controller  # noqa: F401


def parse_listener(uri: str) -> tuple[str, str, int]:
    """``NAME://host:port`` -> (NAME, host, port); an empty host binds all
    interfaces."""
    name, sep, rest = uri.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit() or not name:
        raise ConfigException(
            "listeners", uri, "Unable to parse the listener; expected NAME://host:port"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return name.upper(), host, int(port)


class _PeriodicJob:
    """``interval_ms``: a number, or a callable read at each scheduling (an
    interval that is a dynamic broker config)."""

    def __init__(
        self,
        broker: KafkaBroker,
        name: str,
        interval_ms: int | Callable[[], int],
        job: Callable[[], object],
        in_executor: bool = True,
    ) -> None:
        self.broker = broker
        self.name = name
        self.interval_ms = interval_ms
        self.job = job
        self.in_executor = in_executor
        self.handle: asyncio.TimerHandle | None = None
        self.running: asyncio.Future[object] | None = None

    def schedule(self) -> None:
        interval_ms = self.interval_ms() if callable(self.interval_ms) else self.interval_ms
        if interval_ms < _NEVER_MS and not self.broker._stopping:
            self.handle = asyncio.get_running_loop().call_later(interval_ms / 1000.0, self._run)

    def _run(self) -> None:
        self.handle = None
        loop = asyncio.get_running_loop()
        if not self.in_executor:
            try:
                self.job()
            except Exception:
                logger.exception("periodic job %s failed", self.name)
            self.schedule()
            return
        self.running = loop.run_in_executor(None, self.job)
        self.running.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[object]) -> None:
        self.running = None
        if not future.cancelled() and future.exception() is not None:
            logger.error("periodic job %s failed", self.name, exc_info=future.exception())
        self.schedule()

    def reschedule(self) -> None:
        """Wait the (changed) interval from now instead of the rest of the
        old one; a run in progress schedules itself when it ends."""
        if self.handle is not None:
            self.handle.cancel()
            self.schedule()

    async def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        if self.running is not None:
            try:
                await asyncio.shield(self.running)
            except Exception:
                pass


class KafkaBroker(Halts):
    """``await broker.start()`` ... ``await broker.shutdown()`` on one loop.

    Attributes handlers use (see kfast.server.apis): ``config`` (static),
    ``current_config`` (with the dynamic broker configs),
    ``controller``, ``log_manager``, ``replica_manager``, ``metadata_image``,
    ``timer``, ``node_id``, ``cluster_id``, ``fetch_session_cache``,
    ``producer_id_manager``, ``metadata_publisher``, ``group_coordinator`` (the
    GroupCoordinatorRuntime), ``transaction_coordinator`` (the
    TransactionCoordinatorRuntime) with its ``txn_marker_channel``; after
    start ``bound_ports`` maps listener name -> the bound port (useful with
    port 0).
    """

    def __init__(
        self, config: KafkaConfig, *, controller_factory: ControllerFactory | None = None
    ) -> None:
        self.config = config
        # server.properties with the dynamic broker configs over it (see
        # reconfigure); ``config`` stays the static configuration.
        self.current_config = config
        self.node_id = config.node_id
        self.cluster_id: str | None = config["cluster.id"]
        self.listeners = [parse_listener(uri) for uri in config["listeners"]]
        controller_listeners = {n.upper() for n in config["controller.listener.names"]}
        # The controller runs in-process; only broker listeners are served.
        self.listeners = [l for l in self.listeners if l[0] not in controller_listeners]
        if not self.listeners:
            raise ConfigException("listeners", ",".join(config["listeners"]), "No broker listener")
        protocols = dict(entry.split(":", 1) for entry in config["listener.security.protocol.map"])
        for name, _, _ in self.listeners:
            protocol = protocols.get(name)
            if protocol is None:
                raise ConfigException(
                    "listener.security.protocol.map",
                    ",".join(config["listener.security.protocol.map"]),
                    f"No security protocol defined for listener {name}",
                )
        # Each listener's TLS and SASL settings, checked now: a listener kfast
        # cannot secure as configured stops the start.
        self.listener_security = {
            name: ListenerSecurity.from_config(config, name, protocols[name])
            for name, _, _ in self.listeners
        }
        self._protocols = protocols
        # What this broker presents to the others' inter-broker listener
        # (replica fetchers, transaction markers and verification).
        self.inter_broker_security = ClientSecurity.for_listener(
            config,
            (config["inter.broker.listener.name"] or self.listeners[0][0]).upper(),
            "sasl.mechanism.inter.broker.protocol",
        )
        # None without authorizer.class.name: every request is allowed.
        self.authorizer = StandardAuthorizer.from_config(config)
        self._controller_factory = controller_factory
        self.controller: QuorumControllerClient | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.metadata_image: MetadataImage | None = None
        self.metadata_publisher: BrokerMetadataPublisher | None = None
        self.timer: SystemTimer | None = None
        self.fetch_session_cache = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"]
        )
        # Client quotas (kfast.server.quota), fed by the metadata publisher.
        self.quotas = ClientQuotas(config)
        # max.connection.creation.rate, broker-wide and per listener (dynamic).
        self.connection_rate = ConnectionRateQuotas(
            config["quota.window.num"],
            config["quota.window.size.seconds"],
            config["inter.broker.listener.name"] or self.listeners[0][0],
            [name for name, _, _ in self.listeners],
        )
        self.connection_rate.configure(config)
        self.producer_id_manager: ProducerIdManager | None = None
        self.group_coordinator: GroupCoordinatorRuntime | None = None
        self.transaction_coordinator: TransactionCoordinatorRuntime | None = None
        self.txn_marker_channel: TransactionMarkerChannelManager | None = None
        # KIP-890: partition leaders verify transactional writes with the
        # transaction coordinator.
        self.add_partitions_to_txn_manager = AddPartitionsToTxnManager(self)
        self.apis = KafkaApis(self)
        # Counters the hot paths update and the Prometheus endpoint reads
        # (kfast.metrics, kfast.server.metrics_exporter).
        self.metrics = BrokerMetrics()
        for manager in (self.quotas.produce, self.quotas.fetch, self.quotas.request):
            manager.throttle_stats = self.metrics.quotas
        self.apis.request_metrics = self.metrics.requests
        if controller_factory is None:
            # The embedded single node's controller is the only voter.
            self.metrics.is_active_controller = lambda: True
            self.metrics.controller_stats = self._embedded_controller_stats
        self.metrics_server: MetricsServer | None = None
        # A cluster node's forwarding of admin requests to the active
        # controller (kfast.server.raft_server); None on the embedded node.
        self.forwarder: Forwarder | None = None
        # KIP-714 client instances and what they pushed (kfast.server.telemetry_apis).
        self.client_metrics = ClientMetricsManager(config["telemetry.max.bytes"])
        self.socket_servers: dict[str, SocketServer] = {}
        self.bound_ports: dict[str, int] = {}
        self.broker_epoch = -1
        self.incarnation_id = uuid.uuid4()
        self._jobs: list[_PeriodicJob] = []
        self._stopping = False
        self.started = False
        self.startup_ms: float | None = None
        # Set when the broker cannot go on (every log dir failed, or the
        # metadata log's fsync): Halts.
        self.init_halt()
        # Partitions moving between log dirs (AlterReplicaLogDirs).
        self.replica_alter_log_dirs = ReplicaAlterLogDirsManager(self)
        self.directory_assignments = DirectoryAssignments(self)
        self._background_tasks: set[asyncio.Task[None]] = set()
        self._register_apis()

    def started_log_manager(self) -> LogManager:
        """The log manager, for what runs only on a started broker."""
        if self.log_manager is None:
            raise RuntimeError(f"broker {self.node_id} is not started")
        return self.log_manager

    def started_replica_manager(self) -> ReplicaManager:
        """The replica manager, for what runs only on a started broker."""
        if self.replica_manager is None:
            raise RuntimeError(f"broker {self.node_id} is not started")
        return self.replica_manager

    def _register_apis(self) -> None:
        for module in handler_modules():
            module.register(self.apis)

    # -- start ---------------------------------------------------------------------------
    def _embedded_controller_stats(self) -> ControllerStats | None:
        controller = self.controller
        local = None if controller is None else controller.local
        return None if local is None else local.stats

    def _new_controller(self, loop: asyncio.AbstractEventLoop) -> QuorumControllerClient:
        if self._controller_factory is not None:
            return self._controller_factory(self, loop)
        from kfast.server.embedded_controller import EmbeddedController

        return EmbeddedController(self, loop)

    async def start(self) -> None:
        began = time.perf_counter()
        loop = asyncio.get_running_loop()
        self.timer = SystemTimer(loop)
        self.log_manager = LogManager(
            self.config, cluster_id=self.cluster_id, topic_configs=self._topic_configs
        )
        await loop.run_in_executor(None, self.log_manager.startup)
        self.cluster_id = self.log_manager.cluster_id
        self.node_id = self.log_manager.node_id
        self.replica_manager = ReplicaManager(
            self.node_id, self.log_manager, self.timer, self.config
        )
        self.replica_manager.metadata_image = lambda: self.metadata_image
        self.replica_manager.fetch_sessions = self.fetch_session_cache
        self.replica_manager.topic_stats = self.metrics.topics
        self.replica_manager.replica_stats = self.metrics.replicas
        self.log_manager.failure_channel.listener = self._log_dir_failure_listener(loop)
        self.controller = self._new_controller(loop)
        channel = getattr(self.controller, "channel", None)
        if channel is not None:
            # A cluster: partitions have followers on other brokers.
            replica_manager = self.replica_manager
            replica_manager.replica_fetchers = ReplicaFetcherManager(self)
            replica_manager.alter_partition_manager = AlterPartitionManager(self, channel.send)
            replica_manager.isr_eligible = self._isr_eligible
            replica_manager.broker_alive = self._broker_alive
            replica_manager.rack_of = self._rack_of
        self.producer_id_manager = ProducerIdManager(self.controller, self.node_id)
        await self.controller.start()
        self.metadata_image = self.controller.image
        if self.authorizer is not None:
            self.controller.subscribe(AclPublisher(self.authorizer).on_metadata_update)
        publisher = self.metadata_publisher = BrokerMetadataPublisher(
            self, self.coordinator_partitions_changed
        )
        self.controller.subscribe(publisher.on_metadata_update)
        if not publisher.published:
            # The replayed image was delivered before we subscribed.
            publisher.on_metadata_update(MetadataDelta(), self.controller.image)
        await publisher.wait_idle()
        # Before the listeners: the group APIs answer from the first request.
        self.group_coordinator = GroupCoordinatorRuntime(
            self.config, self.timer, CoordinatorPartitionWriter(self, GROUP_METADATA_TOPIC_NAME)
        )
        # Group configs (GROUP config resources) live in the metadata image.
        self.group_coordinator.coordinator.group_config_overrides = self._group_configs
        self.txn_marker_channel = TransactionMarkerChannelManager(self)
        self.transaction_coordinator = TransactionCoordinatorRuntime(
            self.config,
            self.timer,
            CoordinatorPartitionWriter(self, TRANSACTION_STATE_TOPIC_NAME),
            self.producer_id_manager.generate_producer_id_now,
            self.txn_marker_channel.send,
            self.metadata_image.features.get(TRANSACTION_VERSION, 0),
        )
        try:
            await self._start_listeners()
            wait_in_service = getattr(self.controller, "wait_in_service", None)
            if wait_in_service is not None:
                # A cluster's broker takes clients only once the controller
                # has it in service (Kafka enables request processing after
                # the first unfence): until then connections wait in the
                # listen backlog rather than see a cluster without brokers.
                for server in self.socket_servers.values():
                    server.hold_accepting()
            advertised = self._advertised_endpoints()
            log_manager = self.log_manager
            # KIP-858: the controller learns the online dirs at registration
            # and those that failed while loading with the first heartbeat.
            self.controller.offline_log_dirs.update(
                log_manager.directory_ids[d]
                for d in log_manager.log_dirs
                if d not in log_manager.live_log_dirs and d in log_manager.directory_ids
            )
            self.broker_epoch = await self.controller.register_broker(
                self.node_id,
                self.incarnation_id,
                advertised,
                self.config.get("broker.rack"),
                log_dirs=[
                    log_manager.directory_ids[d]
                    for d in log_manager.live_log_dirs
                    if d in log_manager.directory_ids
                ],
            )
            if wait_in_service is not None:
                await wait_in_service()
                await publisher.wait_idle()
                for server in self.socket_servers.values():
                    server.release_accepting()
        except BaseException:
            await self.shutdown()
            raise
        self._start_jobs()
        if self.config["kfast.metrics.port"] >= 0:
            await self._start_metrics_server(loop)
        # Replay the __consumer_offsets partitions this broker leads, as
        # Kafka does on becoming their leader: groups, offsets and member
        # sessions are back before the first client asks.
        self.group_coordinator.load_all()
        # And __transaction_state's: decided transactions get their markers.
        self.transaction_coordinator.load_all()
        self.started = True
        self.startup_ms = (time.perf_counter() - began) * 1000
        logger.info(
            "kfast broker %d ready in %.1f ms, listening on %s (cluster %s)",
            self.node_id,
            self.startup_ms,
            ", ".join(f"{e.name}://{e.host}:{e.port}" for e in advertised),
            self.cluster_id,
        )

    def _group_configs(self, group_id: str) -> Mapping[str, str]:
        image = self.metadata_image
        return {} if image is None else image.group_configs.get(group_id, {})

    async def _start_metrics_server(self, loop: asyncio.AbstractEventLoop) -> None:
        from kfast.server.metrics_exporter import BrokerSnapshotter, start_metrics_server

        try:
            self.metrics_server = await start_metrics_server(
                BrokerSnapshotter(self).take, self.config, loop
            )
        except BaseException:
            await self.shutdown()
            raise

    def _log_dir_failure_listener(self, loop: asyncio.AbstractEventLoop) -> Callable[[str], None]:
        def listener(log_dir: str) -> None:
            # Reports come from executor threads too: handle on the loop.
            try:
                loop.call_soon_threadsafe(self._handle_log_dir_failure, log_dir)
            except RuntimeError:
                pass  # the loop is closed: the node is gone already

        return listener

    def _handle_log_dir_failure(self, log_dir: str) -> None:
        """A log dir failed: its partitions answer KAFKA_STORAGE_ERROR; with
        no log dir left, or any failed dir in a cluster, the broker stops
        (Kafka's ReplicaManager.handleLogDirFailure and its halts).
        Stopping is a controlled shutdown: leaderships move first."""
        log_manager = self.started_log_manager()
        partitions = log_manager.handle_log_dir_failure(log_dir)
        self.started_replica_manager().handle_log_dir_failure(partitions)
        if partitions:
            logger.warning(
                "Stopped serving replicas in dir %s: %s",
                log_dir,
                ", ".join(f"{t}-{p}" for t, p in sorted(partitions)),
            )
        if self.fatal_error is not None:
            return
        if not log_manager.live_log_dirs:
            self.halt(log_manager.all_dirs_failed_message())
        elif self._other_brokers_registered():
            # KIP-858: the controller is told (heartbeat offline_log_dirs) and
            # moves the leaderships of the failed dir's replicas, which it
            # knows from the directory assignments; this broker keeps serving
            # its other dirs, and halts only if the controller cannot be told
            # within log.dir.failure.timeout.ms (Kafka's BrokerLifecycleManager).
            # A single node has nobody to move them to: it keeps serving its
            # other dirs, the failed dir's partitions answer KAFKA_STORAGE_ERROR.
            task = asyncio.get_running_loop().create_task(
                self._propagate_directory_failure(log_dir)
            )
            self._background_tasks.add(task)
            task.add_done_callback(self._background_tasks.discard)

    async def _propagate_directory_failure(self, log_dir: str) -> None:
        directory = self.started_log_manager().directory_ids.get(log_dir)
        timeout = self.config["log.dir.failure.timeout.ms"] / 1000
        controller = self.controller
        if (
            directory is not None
            and controller is not None
            and await controller.propagate_directory_failure(directory, timeout)
        ):
            logger.info("the controller knows log dir %s (%s) is offline", log_dir, directory)
            return
        self.halt(
            f"Shutting down because couldn't communicate offline log dir {log_dir} with controllers"
        )

    def coordinator_partitions_changed(self, topics: Collection[str]) -> None:
        """The metadata publisher applied changes to ``topics`` (names) on
        this broker: a coordinator whose internal topic is among them loads
        the partitions it now leads and drops the others (Kafka's
        onElection / onResignation). The finalized transaction.version is
        read again too. Replicas created or moved in another log dir
        than the metadata says are assigned there (KIP-858)."""
        self.directory_assignments.reconcile(topics)
        self.replica_alter_log_dirs.resume_interrupted()
        coordinator = self.transaction_coordinator
        image = self.metadata_image
        if coordinator is None or image is None or self._stopping:
            return
        coordinator.set_transaction_version_level(image.features.get(TRANSACTION_VERSION, 0))
        if TRANSACTION_STATE_TOPIC_NAME in topics:
            coordinator.load_all()

    def broker_endpoint(self, broker_id: int) -> Endpoint | None:
        """Where this broker reaches another (replica fetches): its endpoint
        on inter.broker.listener.name, else on this broker's first listener."""
        image = self.metadata_image
        registration = None if image is None else image.brokers.get(broker_id)
        if registration is None:
            return None
        name = (self.config["inter.broker.listener.name"] or self.listeners[0][0]).upper()
        return registration.listeners.get(name)

    def _other_brokers_registered(self) -> bool:
        image = self.metadata_image
        return image is not None and any(b != self.node_id for b in image.brokers)

    def _rack_of(self, broker_id: int) -> str | None:
        image = self.metadata_image
        registration = None if image is None else image.brokers.get(broker_id)
        return None if registration is None else registration.rack

    def _isr_eligible(self, broker_id: int) -> bool:
        """A broker may join an ISR while registered, unfenced and not
        shutting down (Kafka's isReplicaIsrEligible)."""
        image = self.metadata_image
        registration = None if image is None else image.brokers.get(broker_id)
        return (
            registration is not None
            and not registration.fenced
            and not registration.in_controlled_shutdown
        )

    def _broker_alive(self, broker_id: int) -> bool:
        """Registered and unfenced (Kafka's hasAliveBroker)."""
        image = self.metadata_image
        registration = None if image is None else image.brokers.get(broker_id)
        return registration is not None and not registration.fenced

    def supported_features(self) -> dict[str, tuple[int, int]]:
        """{feature: (min level, max level)} for ApiVersions'
        SupportedFeatures (metadata.version: kfast's one level, 21-21)."""
        feature_control = getattr(self.controller, "feature_control", None)
        return {} if feature_control is None else feature_control.supported_features()

    def kraft_version(self) -> int:
        """kraft.version of this node's Raft log (0 without one)."""
        kraft_version = getattr(self.controller, "kraft_version", None)
        return 0 if kraft_version is None else kraft_version()

    def reconfigure(self, current: KafkaConfig) -> None:
        """Apply the dynamic broker configs that live outside the logs
        (the publisher gives the logs theirs): ``current`` is
        server.properties with the dynamic overrides in force on this
        broker. Thread-pool sizes are accepted and ignored (one event loop)."""
        previous, self.current_config = self.current_config, current
        self.connection_rate.configure(current)
        for server in self.socket_servers.values():
            server.max_connections = current["max.connections"]
            server.max_connections_per_ip = current["max.connections.per.ip"]
        self.started_replica_manager().update_replication_rates(
            current["leader.replication.throttled.rate"],
            current["follower.replication.throttled.rate"],
        )
        if current["log.cleaner.backoff.ms"] != previous["log.cleaner.backoff.ms"]:
            # As Kafka restarts its cleaner threads on this change.
            for job in self._jobs:
                if job.name == _LOG_CLEANER_JOB:
                    job.reschedule()

    def _topic_configs(self, topic: str) -> dict[str, str]:
        image = self.metadata_image
        return {} if image is None else dict(image.topic_configs.get(topic, {}))

    async def _start_listeners(self) -> None:
        for name, host, port in self.listeners:
            server = secured_socket_server(
                self.apis,
                self.current_config,
                name,
                self.listener_security[name],
                self,
                host or "0.0.0.0",
                port,
            )
            try:
                await server.start()
            except OSError as exc:
                raise OSError(
                    exc.errno, f"Cannot listen on {name}://{host}:{port}: {exc.strerror}"
                ) from exc
            # KIP-714: a client instance goes with its connection.
            server.disconnect_listeners.append(self.client_metrics.connection_closed)
            server.connection_quotas = self.quotas.connection_creation
            server.connection_rate = self.connection_rate
            self.socket_servers[name] = server
            self.bound_ports[name] = server.port

    def _wake_fetches(self, keys: list[tuple[str, int]]) -> None:
        replica_manager = self.replica_manager
        if replica_manager is not None:
            for key in keys:
                replica_manager.wake_fetches(key)

    def _advertised_endpoints(self) -> list[Endpoint]:
        """advertised.listeners where given (port 0 -> the bound port), else
        the listener itself; a wildcard host advertises this host's name."""
        import socket

        advertised = self.config["advertised.listeners"] or []
        by_name = {name: (host, port) for name, host, port in map(parse_listener, advertised)}
        endpoints = []
        for name, bind_host, _ in self.listeners:
            host, port = by_name.get(name, (bind_host, 0))
            if port == 0:
                port = self.bound_ports[name]
            if not host or host in ("0.0.0.0", "::"):
                host = socket.getfqdn()
            endpoints.append(Endpoint(name, host, port, self._protocols.get(name, "PLAINTEXT")))
        return endpoints

    def _start_jobs(self) -> None:
        config, log_manager = self.config, self.started_log_manager()
        loop = asyncio.get_running_loop()

        def retention() -> None:
            # In the executor; the fetches waiting on a log whose start
            # offset moved are woken on the loop (their answer carries the
            # log start offset, and a fetch offset below it is out of range).
            moved: list[tuple[str, int]] = []
            log_manager.cleanup_logs(moved=moved)
            if moved and not loop.is_closed():  # closed: the broker has stopped
                loop.call_soon_threadsafe(self._wake_fetches, moved)

        self._jobs = [
            _PeriodicJob(
                self, "kafka-log-retention", config["log.retention.check.interval.ms"], retention
            ),
            _PeriodicJob(
                self,
                "kafka-log-flusher",
                config["log.flush.scheduler.interval.ms"],
                log_manager.flush_dirty_logs,
            ),
            _PeriodicJob(
                self,
                "kafka-recovery-point-checkpoint",
                config["log.flush.offset.checkpoint.interval.ms"],
                log_manager.checkpoint_recovery_offsets,
            ),
            _PeriodicJob(
                self,
                "kafka-log-start-offset-checkpoint",
                config["log.flush.start.offset.checkpoint.interval.ms"],
                log_manager.checkpoint_log_start_offsets,
            ),
            _PeriodicJob(
                self,
                "highwatermark-checkpoint",
                config["replica.high.watermark.checkpoint.interval.ms"],
                log_manager.checkpoint_high_watermarks,
            ),
            _PeriodicJob(
                self,
                "fetch-session-eviction",
                MIN_EVICTION_MS // 2,
                self.fetch_session_cache.evict_stale,
                in_executor=False,
            ),
            # Kafka's isr-expiration: followers that fell behind leave the ISR.
            _PeriodicJob(
                self,
                "isr-expiration",
                config["replica.lag.time.max.ms"] // 2,
                self.started_replica_manager().maybe_shrink_isr,
                in_executor=False,
            ),
        ]
        if config["log.cleaner.enable"]:
            # Kafka's cleaner threads sleep log.cleaner.backoff.ms when no log
            # is dirty enough; kfast runs one pass per interval.
            self._jobs.append(
                _PeriodicJob(
                    self,
                    _LOG_CLEANER_JOB,
                    lambda: self.current_config["log.cleaner.backoff.ms"],
                    log_manager.clean_logs,
                )
            )
        for job in self._jobs:
            job.schedule()

    # -- shutdown ----------------------------------------------------------------------------
    async def shutdown(self, timeout: float = 30.0) -> None:
        if self._stopping:
            return
        self._stopping = True
        began = time.perf_counter()
        loop = asyncio.get_running_loop()
        controlled_shutdown = getattr(self.controller, "controlled_shutdown", None)
        # A broker that halts (fatal_error) skips it, as Kafka's Exit.halt
        # does: the controller may be what failed, and it would wait out
        # the timeout for a commit that cannot come.
        if (
            controlled_shutdown is not None
            and self.started
            and self.fatal_error is None
            and self.config["controlled.shutdown.enable"]
        ):
            # Leaderships move away while the listeners still answer.
            moved = await controlled_shutdown(self.started_replica_manager().leads_any, timeout)
            logger.info(
                "controlled shutdown of broker %d %s in %.1f ms",
                self.node_id,
                "completed" if moved else "did not complete",
                (time.perf_counter() - began) * 1000,
            )
        for server in self.socket_servers.values():
            server.stop_accepting()
        if self.metrics_server is not None:
            await loop.run_in_executor(None, self.metrics_server.stop)
            self.metrics_server = None
        if self.replica_manager is not None:
            # Waiting fetches answer now instead of holding the drain up.
            self.replica_manager.complete_delayed_operations()
        if self.group_coordinator is not None:
            # JoinGroup/SyncGroup waiting for a rebalance answer now too.
            self.group_coordinator.shutdown()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self.txn_marker_channel is not None:
            await self.txn_marker_channel.shutdown()
        await self.add_partitions_to_txn_manager.shutdown()
        # A halting broker answers nothing more (Kafka's Exit.halt): its
        # in-flight requests may wait on what failed.
        drain = 0.0 if self.fatal_error is not None else timeout
        await asyncio.gather(*(server.shutdown(drain) for server in self.socket_servers.values()))
        self.apis.warnings.flush()
        for job in self._jobs:
            await job.stop()
        await self.replica_alter_log_dirs.shutdown()
        await self.directory_assignments.close()
        if self.replica_manager is not None:
            for manager in (
                self.replica_manager.replica_fetchers,
                self.replica_manager.alter_partition_manager,
            ):
                if manager is not None:
                    await manager.shutdown()
            self.replica_manager.shutdown()
        if self.metadata_publisher is not None:
            self.metadata_publisher.close()
            await self.metadata_publisher.wait_idle()
        if self.controller is not None:
            try:
                await self.controller.shutdown()
            except KafkaStorageException as exc:
                # The metadata log's dir failed (a full disk): expected, no traceback.
                logger.error("controller shutdown failed: %s", exc)
            except Exception:
                logger.exception("controller shutdown failed")
        if self.log_manager is not None and self.log_manager.started:
            await loop.run_in_executor(None, self.log_manager.shutdown, self.broker_epoch)
        if self.timer is not None:
            self.timer.shutdown()
        self.started = False
        logger.info(
            "kfast broker %d shut down in %.1f ms",
            self.node_id,
            (time.perf_counter() - began) * 1000,
        )
