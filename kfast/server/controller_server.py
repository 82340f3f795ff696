"""ControllerServer: a node in the ``controller`` role of a KRaft quorum
(Kafka's ControllerServer on a SharedServer's Raft manager).

    process.roles=controller
    node.id=1
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
    listeners=CONTROLLER://127.0.0.1:9093
    controller.listener.names=CONTROLLER
    log.dirs=/var/lib/kfast/controller-1

A dynamic quorum (KIP-853) names no voters: the node's storage was
formatted with ``kfast storage format --standalone`` or
``--initial-controllers`` (a bootstrap checkpoint holds the first voter
set) or ``--no-initial-controllers`` (it joins later, AddRaftVoter), and it
finds the quorum through ``controller.quorum.bootstrap.servers``; its voter
key is node.id and the directory.id of its metadata log directory.

Start: the metadata log directory's meta.properties is checked (or written
for a new node) against cluster.id and node.id -> the metadata log
(``__cluster_metadata-0``) and quorum-state are opened -> the controller
listener starts answering -> the Raft manager starts (elections, fetches).
Every node keeps the whole metadata image in memory (hot standby); the
elected leader is the active controller and the only one that accepts
writes (others answer NOT_CONTROLLER).

The controller listener serves the quorum's own RPCs (Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot), broker membership
(BrokerRegistration, BrokerHeartbeat), AllocateProducerIds, and the admin
requests brokers forward to the active controller
(kfast.server.controller_channel.FORWARDED_APIS: CreateTopics, DeleteTopics,
CreatePartitions, the config and election APIs, DescribeQuorum, the
delegation token writes); DescribeConfigs reads the controller's image.

Shutdown (SIGTERM): a leader resigns with EndQuorumEpoch so the others
elect a successor at once, the listener stops, the log is closed cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kfast.client.security import ClientSecurity
from kfast.config import ConfigException, KafkaConfig
from kfast.controller.metadata.image import MetadataImage
from kfast.controller.metadata.records import decode_record, encode_record
from kfast.controller.raft_quorum_controller import RaftQuorumController
from kfast.protocol import api_keys
from kfast.protocol.constants import ZERO_UUID
from kfast.raft.election_state import FileQuorumStateStore
from kfast.raft.manager import RaftManager, parse_bootstrap_servers, parse_quorum_voters
from kfast.raft.quorum_state import QuorumConfig
from kfast.security.acl_publisher import AclPublisher
from kfast.security.authorizer import StandardAuthorizer
from kfast.security.listener import ListenerSecurity, listener_protocols
from kfast.server.apis import ErrorResponseBuilder, Handler, KafkaApis
from kfast.server.network import SocketServer
from kfast.server.quota import ClientQuotas
from kfast.server.secured_listener import secured_socket_server
from kfast.server_common.halt import Halts
from kfast.storage.meta_properties import (
    ensure_meta_properties,
    parse_uuid_base64,
    read_meta_properties,
)

if TYPE_CHECKING:
    from kfast.raft.file_log import FileReplicatedLog
    from kfast.raft.voter_set import Endpoint as VoterEndpoint
    from kfast.server.metrics_exporter import MetricsServer

logger = logging.getLogger("kfast.server")


def controller_client_security(config: KafkaConfig) -> ClientSecurity:
    """kfast's client toward the controllers (Kafka's controller channel and
    Raft client): the first controller listener's TLS settings and a login
    for sasl.mechanism.controller.protocol."""
    names = config["controller.listener.names"]
    if not names:
        return ClientSecurity()
    return ClientSecurity.for_listener(config, names[0], "sasl.mechanism.controller.protocol")


def controller_listeners(config: KafkaConfig) -> list[tuple[str, str, int]]:
    """(name, host, port) of the listeners named in controller.listener.names."""
    from kfast.server.broker import parse_listener

    names = {n.upper() for n in config["controller.listener.names"]}
    found = [l for l in map(parse_listener, config["listeners"]) if l[0] in names]
    if not found:
        raise ConfigException(
            "controller.listener.names",
            config["controller.listener.names"],
            "None of the controller listener names is in listeners",
        )
    return found


def advertised_controller_endpoints(config: KafkaConfig) -> list[VoterEndpoint]:
    """The controller listeners as other nodes reach them (Kafka's
    effectiveAdvertisedControllerListeners): advertised.listeners where it
    names a controller listener, else listeners; a listener bound to every
    interface is published as localhost (kafka-storage.sh --standalone)."""
    from kfast.raft.voter_set import Endpoint
    from kfast.server.broker import parse_listener

    advertised = {}
    for uri in config["advertised.listeners"] or ():
        name, host, port = parse_listener(uri)
        advertised[name] = (host, port)
    endpoints = []
    for name, host, port in controller_listeners(config):
        host, port = advertised.get(name, (host, port))
        endpoints.append(Endpoint(name, host or "localhost", port))
    return endpoints


class ControllerServer(Halts):
    """``await server.start()`` ... ``await server.shutdown()`` on one loop.

    The attributes the shared request handlers read (``config``,
    ``node_id``, ``cluster_id``, ``controller``, ``metadata_image``,
    ``supported_features()``) have the meaning they have on KafkaBroker;
    ``raft_manager`` is what the quorum handlers talk to."""

    def __init__(
        self,
        config: KafkaConfig,
        observer: bool = False,
        embedded: bool = False,
        on_fatal: Callable[[str], None] | None = None,
    ):
        """``observer``: a broker-only node's member of the quorum, which
        follows the metadata log without voting and serves no controller
        listener (Kafka's SharedServer without a ControllerServer).
        ``embedded``: the embedded single node's controller, the only voter
        of a static quorum of one, in the broker's process: it needs no
        controller listener (its broker reaches it with a
        LocalControllerChannel) and no controller.quorum.voters.
        ``on_fatal(message)``: the node cannot go on (the metadata log's
        fsync failed); by default this server's ``failed`` is set and
        ``fatal_error`` says why (``kfast serve`` exits 1, as Kafka halts),
        a node with a broker halts the broker instead."""
        self.config = self.current_config = config
        self.node_id = config.node_id
        self.observer = observer
        self.embedded = embedded
        if self.node_id < 0:
            raise ConfigException("node.id", self.node_id, "A KRaft node needs a node.id")
        # {voter id: (host, port)}; the embedded node's may have no address.
        self.static_voters: dict[int, tuple[str, int] | None]
        try:
            self.static_voters = dict(parse_quorum_voters(config["controller.quorum.voters"]))
        except ValueError as exc:
            raise ConfigException(
                "controller.quorum.voters", config["controller.quorum.voters"], str(exc)
            ) from exc
        if embedded:
            # Whatever one voter the properties name, the quorum is this node.
            self.static_voters = {self.node_id: self.static_voters.get(self.node_id)}
        try:
            self.bootstrap_servers = parse_bootstrap_servers(
                config["controller.quorum.bootstrap.servers"]
            )
        except ValueError as exc:
            raise ConfigException(
                "controller.quorum.bootstrap.servers",
                config["controller.quorum.bootstrap.servers"],
                str(exc),
            ) from exc
        if not self.static_voters and not self.bootstrap_servers:
            raise ConfigException(
                "controller.quorum.voters",
                "",
                "A node of a multi-node cluster needs the quorum's voters or "
                "controller.quorum.bootstrap.servers",
            )
        if self.static_voters and (self.node_id in self.static_voters) == observer:
            raise ConfigException(
                "controller.quorum.voters",
                config["controller.quorum.voters"],
                f"node.id {self.node_id} is {'one' if observer else 'not one'} of the voters",
            )
        self.listeners = [] if observer or embedded else controller_listeners(config)
        # What this node presents to the controllers (Raft, the broker's
        # controller channel): the controller listener's TLS/SASL settings
        # (the embedded node's broker reaches its controller in-process).
        self.client_security = ClientSecurity() if embedded else controller_client_security(config)
        # The controller listeners' own TLS/SASL, checked now (a listener kfast
        # cannot secure as configured stops the start).
        protocols = listener_protocols(config)
        self.listener_security = {
            name: ListenerSecurity.from_config(config, name, protocols.get(name, "PLAINTEXT"))
            for name, _, _ in self.listeners
        }
        self.endpoints = [] if observer or embedded else advertised_controller_endpoints(config)
        self.metadata_dir = config.get("metadata.log.dir") or config["log.dirs"][0]
        self.cluster_id: str | None = config["cluster.id"]
        self.controller: RaftQuorumController | None = None
        self.raft_manager: RaftManager | None = None
        self.init_halt()
        self._on_fatal = on_fatal or self.halt
        self.authorizer = StandardAuthorizer.from_config(config)
        # Client quotas of the requests brokers forward here (the controller
        # mutation quota of CreateTopics and friends, request_percentage).
        self.quotas = ClientQuotas(config)
        self.apis = KafkaApis(self, listener_type="controller")
        self._register_apis()
        self.socket_servers: dict[str, SocketServer] = {}
        self.bound_ports: dict[str, int] = {}
        self.started = False
        # A controller-only node serves its own Prometheus endpoint; on a
        # broker node the broker's endpoint reports for the process.
        self.metrics_server: MetricsServer | None = None
        self._log: FileReplicatedLog | None = None

    def _register_apis(self) -> None:
        from kfast.server import (
            acl_apis,
            admin_apis,
            alter_partition_apis,
            broker_lifecycle_apis,
            delegation_token_apis,
            envelope_apis,
            producer_id_apis,
            quorum_apis,
            quota_apis,
            sasl_apis,
            scram_apis,
        )
        from kfast.server.controller_channel import FORWARDED_APIS

        quorum_apis.register(self.apis)
        broker_lifecycle_apis.register(self.apis)
        alter_partition_apis.register(self.apis)
        producer_id_apis.register_controller(self.apis)
        # The admin APIs brokers forward here, with the handlers (and error
        # responses) the broker listener uses for them.
        wanted = FORWARDED_APIS | {api_keys.BY_NAME["DescribeConfigs"].key}
        admin_apis.register(_Only(self.apis, wanted))
        acl_apis.register(self.apis)
        envelope_apis.register(self.apis)
        scram_apis.register(self.apis)
        delegation_token_apis.register_controller(self.apis)
        quota_apis.register(_Only(self.apis, wanted))
        # Advertised so clients of a SASL controller listener can authenticate.
        sasl_apis.register(self.apis)
        # DescribeQuorum as the quorum's leader knows it, with the replica
        # keys and voter endpoints of KIP-853 (over the broker's answer).
        quorum_apis.register_describe_quorum(self.apis)

    @property
    def voters(self) -> dict[int, tuple[str, int] | None]:
        """The voters in force, {id: (host, port)}: the log's voter set once
        the quorum runs, controller.quorum.voters before."""
        if self.raft_manager is not None:
            return self.raft_manager.voters
        return dict(self.static_voters)

    @property
    def metadata_image(self) -> MetadataImage | None:
        return None if self.controller is None else self.controller.image

    def supported_features(self) -> dict[str, tuple[int, int]]:
        return (
            {} if self.controller is None else self.controller.feature_control.supported_features()
        )

    def kraft_version(self) -> int:
        return 0 if self.controller is None else self.controller.kraft_version()

    # -- start / stop --------------------------------------------------------------------
    async def start(self) -> None:
        from kfast.raft.file_log import FileReplicatedLog
        from kfast.raft.record_batches import RecordBatchCodec, RecordSerde

        began = time.perf_counter()
        loop = asyncio.get_running_loop()
        cluster_id, _ = await loop.run_in_executor(
            None, ensure_meta_properties, [self.metadata_dir], self.node_id, self.cluster_id
        )
        self.cluster_id = cluster_id
        meta = await loop.run_in_executor(None, read_meta_properties, self.metadata_dir)
        if meta is None:  # ensure_meta_properties wrote it
            raise RuntimeError(f"no meta.properties in {self.metadata_dir}")
        directory_id = parse_uuid_base64(meta.directory_id) if meta.directory_id else None
        serde = RecordSerde(encode_record, lambda value: decode_record(value)[0])
        log = FileReplicatedLog(
            self.metadata_dir,
            serde,
            segment_bytes=self.config["metadata.log.segment.bytes"],
            segment_ms=self.config["metadata.log.segment.ms"],
        )
        await loop.run_in_executor(None, log.open)
        # A static quorum's quorum-state names its voters (data_version 0);
        # a dynamic one's does not (data_version 1), its voters are in the log.
        store = await loop.run_in_executor(
            None,
            FileQuorumStateStore.in_partition_dir,
            self.metadata_dir,
            log.dir,
            tuple(sorted(self.static_voters)) if self.static_voters else None,
        )
        self.controller = RaftQuorumController(
            self.config, self.node_id, cluster_id, self.metadata_dir, loop=loop
        )
        self.raft_manager = RaftManager(
            self.node_id,
            self.static_voters,
            cluster_id,
            log,
            store,
            RecordBatchCodec(serde),
            listener=self.controller,
            config=QuorumConfig.from_config(self.config),
            # A static quorum's voters have no directory ids: neither do they.
            directory_id=directory_id if not self.static_voters and directory_id else ZERO_UUID,
            endpoints=self.endpoints,
            bootstrap_servers=self.bootstrap_servers,
            listener_name=self.listeners[0][0]
            if self.listeners
            else (self.config["controller.listener.names"] or [None])[0],
            security=self.client_security,
            on_fatal=self._on_fatal,
            # A broker-only node's observer never votes: its appends are
            # not fsynced before it fetches on (Kafka's followersAlwaysFlush
            # is process.roles contains controller).
            followers_always_flush="controller" in self.config["process.roles"],
        )
        self.controller.attach(self.raft_manager)
        self.controller.subscribe(lambda delta, image: self.quotas.update(image.client_quotas))
        if self.authorizer is not None:
            self.controller.subscribe(AclPublisher(self.authorizer).on_metadata_update)
        self._log = log
        try:
            for name, host, port in self.listeners:
                server = secured_socket_server(
                    self.apis,
                    self.config,
                    name,
                    self.listener_security[name],
                    self,
                    host or "0.0.0.0",
                    port,
                )
                await server.start()
                self.socket_servers[name] = server
                self.bound_ports[name] = server.port
            await self.controller.start()
            if self.config["kfast.metrics.port"] >= 0 and set(self.config["process.roles"]) == {
                "controller"
            }:
                from kfast.server.metrics_exporter import (
                    ControllerSnapshotter,
                    start_metrics_server,
                )

                self.metrics_server = await start_metrics_server(
                    ControllerSnapshotter(self).take, self.config, loop
                )
        except BaseException:
            await self.shutdown()
            raise
        self.started = True
        if self.embedded:
            # The node's one "ready" line is its broker's.
            logger.info(
                "kfast embedded controller %d (the quorum's only voter) started in "
                "%.1f ms (cluster %s)",
                self.node_id,
                (time.perf_counter() - began) * 1000,
                self.cluster_id,
            )
            return
        logger.info(
            "kfast %s %d ready in %.1f ms, quorum voters %s, listening on %s (cluster %s)",
            "metadata observer" if self.observer else "controller",
            self.node_id,
            (time.perf_counter() - began) * 1000,
            ",".join(f"{n}@{a[0]}:{a[1]}" if a else str(n) for n, a in sorted(self.voters.items()))
            or "(not yet known)",
            ", ".join(f"{n}://{h}:{p}" for n, h, p in self.listeners) or "-",
            self.cluster_id,
        )

    async def shutdown(self, timeout: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        if self.metrics_server is not None:
            await loop.run_in_executor(None, self.metrics_server.stop)
            self.metrics_server = None
        if self.controller is not None and self.raft_manager is not None:
            try:
                await self.controller.shutdown()
            except Exception:
                logger.exception("controller shutdown failed")
        for server in self.socket_servers.values():
            server.stop_accepting()
        await asyncio.gather(*(s.shutdown(timeout) for s in self.socket_servers.values()))
        log = getattr(self, "_log", None)
        if log is not None:
            await loop.run_in_executor(None, log.close)
            self._log = None
        self.started = False


class _Only:
    """A KafkaApis that takes only the registrations of ``keys``."""

    def __init__(self, apis: KafkaApis, keys: Iterable[int]) -> None:
        self.apis = apis
        self.keys = frozenset(keys)

    def register(
        self,
        api_key: int,
        handler: Handler,
        error_response: ErrorResponseBuilder | None = None,
    ) -> None:
        if api_key in self.keys:
            self.apis.register(api_key, handler, error_response=error_response)
