"""How a broker reaches the active controller of its quorum (Kafka's
NodeToControllerChannelManager, BrokerLifecycleManager and
ForwardingManager, for a broker in the same process as a controller).

``ControllerChannel.send(body)`` delivers a request to whichever controller
is active: the one the local Raft layer names as leader, else each voter in
turn, retrying on NOT_CONTROLLER and on connection failures until a
deadline. Every broker-to-controller request takes this path, also when the
active controller is in this very process, so one code path serves all.

``LocalControllerChannel`` is the same channel for the embedded single node
(a quorum of one voter in the broker's process, with no controller
listener): each request is encoded, handed to the controller's request
dispatch as a frame from the network would be, and the answer decoded --
the handlers, versions and error answers of the controller listener,
without a socket.

``QuorumControllerClient`` is what KafkaBroker holds as ``controller`` in a
cluster: the committed metadata image and its subscription come from the
local controller's replica of the metadata log (combined nodes replay every
committed record); writes go to the active controller as Kafka's RPCs
(BrokerRegistration + BrokerHeartbeat, CreateTopics, AllocateProducerIds).
Client admin requests are forwarded whole by KafkaApis (``forward``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kfast.client.connection import BrokerConnection, api_key_of
from kfast.client.security import ClientSecurity
from kfast.config import KafkaConfig
from kfast.controller.cluster_control import SECURITY_PROTOCOLS
from kfast.controller.feature_control import (
    KRAFT_VERSION,
    KRAFT_VERSION_LEVELS,
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    TRANSACTION_VERSION,
    TRANSACTION_VERSION_LEVEL,
)
from kfast.controller.metadata.image import Endpoint, MetadataImage
from kfast.protocol import (
    AllocateProducerIdsRequest,
    AssignReplicasToDirsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    EnvelopeRequest,
    api_keys,
    decode_response,
    encode_request,
    errors,
)
from kfast.protocol.api_keys import api_key as lookup_api
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER_LOGGER
from kfast.security.principal import serialize_principal

if TYPE_CHECKING:
    from kfast.controller.raft_quorum_controller import RaftQuorumController
    from kfast.protocol.schema import Message
    from kfast.server.apis import KafkaApis, RequestContext

logger = logging.getLogger(__name__)

_NOT_CONTROLLER = errors.NotControllerException.code
_ENVELOPE = api_keys.BY_NAME["Envelope"].key
_SIZE_PREFIX = 4  # encode_request's frames start with their int32 size
# Admin requests a broker forwards to the active controller (Kafka forwards
# these through its ForwardingManager).
_INCREMENTAL_ALTER_CONFIGS = api_keys.BY_NAME["IncrementalAlterConfigs"].key
FORWARDED_APIS = frozenset(
    api_keys.BY_NAME[name].key
    for name in (
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "IncrementalAlterConfigs",
        "AlterConfigs",
        "ElectLeaders",
        "AlterPartitionReassignments",
        "UpdateFeatures",
        "DescribeQuorum",
        "UnregisterBroker",
        "CreateAcls",
        "DeleteAcls",
        "AlterUserScramCredentials",
        "AlterClientQuotas",
    )
)
# Forwarded by their handlers, after the broker's own checks of the client's
# channel and rights (Kafka's KafkaApis checks them before
# maybeForwardToController): KafkaApis does not forward them unseen.
CHECKED_BEFORE_FORWARDING = frozenset(
    api_keys.BY_NAME[name].key
    for name in ("CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken")
)
FORWARDED_APIS |= CHECKED_BEFORE_FORWARDING


class ControllerSend(Protocol):
    """``send`` of a channel to the active controller: the response body of
    ``body``'s API (a decoded message, hence Any to its callers)."""

    def __call__(
        self,
        body: Message,
        api_key: int | None = None,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Awaitable[Any]: ...


class ControllerSender(Protocol):
    """A broker's way to the active controller: a ControllerChannel (over
    the controller listener) or a LocalControllerChannel (in this process)."""

    heartbeat_backoff: float

    @property
    def send(self) -> ControllerSend: ...

    async def close(self) -> None: ...


def _error_codes(response: object) -> list[int]:
    """Every error_code in a response body, top level and one level down."""
    codes = [getattr(response, "error_code", 0)]
    for field in ("topics", "results", "responses", "replica_election_results"):
        for item in getattr(response, field, None) or ():
            codes.append(getattr(item, "error_code", 0))
            for partition in getattr(item, "partitions", None) or ():
                codes.append(getattr(partition, "error_code", 0))
    return codes


class ControllerChannel:
    # Between the heartbeats of a controlled shutdown (a remote controller).
    heartbeat_backoff = 0.05

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        leader_hint: Callable[[], int],
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        # The controller listener's TLS/SASL (kfast.client.security.ClientSecurity).
        self.security = security
        # Replaced by a live view of the voters in force (KafkaRaftServer).
        self.voters: Mapping[int, tuple[str, int]] = dict(voters)
        self._leader_hint = leader_hint  # () -> the leader id this node knows, or -1
        self.request_timeout = request_timeout
        self._connections: dict[int, BrokerConnection] = {}
        self._next = 0

    def _candidates(self) -> list[int]:
        leader = self._leader_hint()
        order = sorted(self.voters)
        start = self._next % len(order)
        rotated = order[start:] + order[:start]
        return ([leader] if leader in self.voters else []) + [v for v in rotated if v != leader]

    async def _connection(self, node_id: int, timeout: float) -> BrokerConnection:
        connection = self._connections.get(node_id)
        if connection is None or not connection.connected:
            host, port = self.voters[node_id]
            connection = await asyncio.wait_for(
                BrokerConnection.open(
                    host,
                    port,
                    client_id=f"broker-{self.node_id}-to-controller",
                    request_timeout=self.request_timeout,
                    security=self.security,
                ),
                min(timeout, 5),
            )
            self._connections[node_id] = connection
        return connection

    async def send(
        self,
        body: Message,
        api_key: int | None = None,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The active controller's response to ``body``; raises
        NotControllerException if no controller took it before the deadline.

        No attempt outlives the deadline: a controller cut off by the
        network answers nothing, and a request waiting on it for the
        connection's whole request timeout would miss the controller the
        quorum elected meanwhile (a broker's heartbeats would then stop for
        longer than its session, and the new controller would fence it --
        Kafka bounds its heartbeats the same way, KAFKA-14392). A timed-out
        attempt closes its connection; the next goes to the leader the
        quorum names by then."""
        deadline = time.monotonic() + (timeout or self.request_timeout)
        backoff = 0.02
        last: Exception | None = None
        while time.monotonic() < deadline:
            for node_id in self._candidates():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    connection = await self._connection(node_id, remaining)
                    response = await connection.send(
                        body,
                        api_key=api_key,
                        version=version,
                        timeout=max(deadline - time.monotonic(), 0.001),
                    )
                except Exception as exc:  # a controller that is down: try the next
                    last = exc
                    stale = self._connections.pop(node_id, None)
                    if stale is not None:
                        await stale.close()
                    continue
                if _NOT_CONTROLLER in _error_codes(response):
                    last = errors.NotControllerException(f"controller {node_id} is not active")
                    self._next += 1
                    continue
                return response
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
        raise errors.NotControllerException(f"No active controller answered: {last}")

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()


def registration_features() -> list[BrokerRegistrationRequest.Feature]:
    """What a broker can run, as Kafka's BrokerLifecycleManager sends its
    supported features in BrokerRegistration (the controller refuses a
    broker that cannot run a finalized level)."""
    return [
        BrokerRegistrationRequest.Feature(
            name=METADATA_VERSION,
            min_supported_version=1,
            max_supported_version=METADATA_VERSION_LEVEL,
        ),
        BrokerRegistrationRequest.Feature(
            name=TRANSACTION_VERSION,
            min_supported_version=0,
            max_supported_version=TRANSACTION_VERSION_LEVEL,
        ),
        BrokerRegistrationRequest.Feature(
            name=KRAFT_VERSION,
            min_supported_version=KRAFT_VERSION_LEVELS[0],
            max_supported_version=KRAFT_VERSION_LEVELS[-1],
        ),
    ]


class LocalControllerChannel:
    """ControllerChannel's ``send`` to a controller in this process: ``apis``
    is its controller-listener KafkaApis, ``listener_name`` the name the
    requests arrive on. Requests go at the newest version that listener
    serves; no connection, so nothing to retry but NOT_CONTROLLER (the
    single voter before it has claimed its epoch)."""

    # The frame's size prefix: the network layer cuts it off before dispatch.
    _SIZE_BYTES = 4
    # The controller answers in this process: the next heartbeat of a
    # controlled shutdown can follow at once.
    heartbeat_backoff = 0.001

    def __init__(
        self, node_id: int, apis: KafkaApis, listener_name: str, request_timeout: float = 30.0
    ) -> None:
        self.node_id = node_id
        self.apis = apis
        self.listener_name = listener_name
        self.request_timeout = request_timeout
        self._correlation_id = 0

    async def send(
        self,
        body: Message,
        api_key: int | None = None,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        key = api_key if api_key is not None else api_key_of(body)
        if version is None:
            version = lookup_api(key).max_stable_version
        deadline = time.monotonic() + (timeout or self.request_timeout)
        backoff = 0.001
        while True:
            self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
            frame = encode_request(
                key, version, self._correlation_id, f"broker-{self.node_id}-to-controller", body
            )
            parts = self.apis.handle(
                None, bytearray(memoryview(frame)[self._SIZE_BYTES :]), self.listener_name
            )
            if parts is not None and not isinstance(parts, (list, tuple)):
                parts = await parts
            if parts is None:
                raise errors.InvalidRequestException(
                    f"the controller closed the in-process channel on {lookup_api(key).name}"
                )
            # Responses of controller APIs carry no records, so no FileRegion.
            data = b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]
            _, response = decode_response(key, version, data)
            if _NOT_CONTROLLER not in _error_codes(response) or time.monotonic() >= deadline:
                return response
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.1)

    async def close(self) -> None:
        """Nothing to close: there is no connection."""


class Forwarder:
    """KafkaApis' hook: an admin request this node's controller cannot
    answer (it is not the active one) goes whole to the one that can, at the
    client's version, and its response comes back unchanged."""

    def __init__(self, channel: ControllerChannel, local: RaftQuorumController) -> None:
        self.channel = channel
        self.local = local

    def wants(self, api_key: int, request: Any = None) -> bool:
        if (
            api_key == _INCREMENTAL_ALTER_CONFIGS
            and request is not None
            and request.resources
            and all(r.resource_type == CONFIG_RESOURCE_BROKER_LOGGER for r in request.resources)
        ):
            return False  # logger levels are this broker's own (Kafka answers them locally)
        if api_key in CHECKED_BEFORE_FORWARDING:
            return False  # its handler forwards it (``forwards``)
        return self.forwards(api_key)

    def forwards(self, api_key: int) -> bool:
        """Whether the active controller, not this node's, answers ``api_key``."""
        return api_key in FORWARDED_APIS and not self.local.is_active

    async def forward(
        self, api_key: int, version: int, request: Message, ctx: RequestContext | None = None
    ) -> Any:
        """The controller's answer; with the client's ``ctx`` the request
        travels in an Envelope (KIP-590) carrying the client's principal and
        address, so that the controller authorizes the client, not this
        broker."""
        if ctx is None:
            return await self.channel.send(request, api_key=api_key, version=version)
        frame = encode_request(api_key, version, ctx.correlation_id, ctx.client_id, request)
        address = ctx.client_address
        envelope = EnvelopeRequest(
            request_data=frame[_SIZE_PREFIX:],
            request_principal=serialize_principal(ctx.principal),
            client_host_address=address_bytes(address[0] if address else "0.0.0.0"),
        )
        response = await self.channel.send(envelope, api_key=_ENVELOPE, version=0)
        if response.error_code:
            raise errors.for_code(response.error_code)()
        return decode_response(api_key, version, response.response_data)[1]


def address_bytes(host: str) -> bytes:
    """An IP address as InetAddress.getAddress() gives it: 4 or 16 bytes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.inet_pton(family, host)


class QuorumControllerClient:
    """KafkaBroker's ``controller`` in a cluster (see the module docstring).
    Reads (image, subscribe, feature levels, quorum state on the active node)
    are the local controller's; anything else a broker-side handler calls is
    reached only when the local controller is active (KafkaApis forwards
    those requests otherwise), so it is delegated to it."""

    def __init__(
        self,
        local: RaftQuorumController | None,
        channel: ControllerSender,
        config: KafkaConfig,
        cluster_id: str | None,
    ) -> None:
        # This node's controller (the embedded node's: set once started).
        self.local = local
        self.channel = channel
        self.config = config
        self.cluster_id = cluster_id
        self.broker_epoch = -1
        self._heartbeat_task: asyncio.Task[None] | None = None
        self.fenced = True
        self._in_service = asyncio.Event()
        self._shut_down_acknowledged = False
        # KIP-858: ids of this broker's failed log dirs, sent with every
        # heartbeat (Kafka's BrokerLifecycleManager.offlineDirs).
        self.offline_log_dirs: set[uuid.UUID] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    @property
    def image(self) -> MetadataImage:
        return self._local.image

    @property
    def _local(self) -> RaftQuorumController:
        local = self.local
        if local is None:  # as getattr(None, ...) did: hasattr() stays False
            raise AttributeError("the controller is not started")
        return local

    async def start(self) -> None:
        """The local controller is started by the ControllerServer."""

    async def controlled_shutdown(
        self, leads_any: Callable[[], bool], timeout: float = 30.0
    ) -> bool:
        """Kafka's controlled shutdown (KIP-631): heartbeat with
        want_shut_down until the active controller answers should_shut_down
        -- it has moved this broker's leaderships to other in-sync replicas
        and taken it out of every ISR -- then wait until this broker's own
        metadata shows it leads nothing, so that requests still arriving are
        answered NOT_LEADER_OR_FOLLOWER (a metadata refresh for the client)
        before the listeners close (``leads_any()``: whether this broker
        still leads a partition). Returns whether it completed in time."""
        if self._heartbeat_task is None:
            return False
        self._heartbeat_task.cancel()
        await asyncio.gather(self._heartbeat_task, return_exceptions=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            try:
                response = await self._heartbeat(want_shut_down=True)
                if response.error_code == 0 and response.should_shut_down:
                    self._shut_down_acknowledged = True
                    break
            except (TimeoutError, errors.KafkaError) as exc:
                logger.info("controlled shutdown heartbeat failed: %s", exc)
            await asyncio.sleep(self.channel.heartbeat_backoff)
        if not self._shut_down_acknowledged:
            logger.warning("controlled shutdown not acknowledged within %.0f s", timeout)
            return False
        while loop.time() < deadline and leads_any():
            await asyncio.sleep(0.01)
        return not leads_any()

    async def shutdown(self) -> None:
        """Without a controlled shutdown before, a last heartbeat still
        asks to shut down, so the active controller fences this broker at
        once instead of after its session timeout."""
        if self._heartbeat_task is not None and not self._shut_down_acknowledged:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
            try:
                await asyncio.wait_for(self._heartbeat(want_shut_down=True), 5)
            except (TimeoutError, errors.KafkaError) as exc:
                logger.warning("controlled shutdown not acknowledged: %s", exc)
        await self.channel.close()

    # -- membership ------------------------------------------------------------------------
    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: Iterable[Endpoint],
        rack: str | None,
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> int:
        """BrokerRegistration with the active controller, then heartbeats every
        broker.heartbeat.interval.ms; returns the broker epoch. ``log_dirs``:
        the ids of the online log dirs (KIP-858)."""
        cluster_id = self.cluster_id
        if cluster_id is None:  # known once the metadata log is loaded (start)
            raise RuntimeError("a broker registers only once its cluster id is known")
        request = BrokerRegistrationRequest(
            broker_id=broker_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation_id,
            listeners=[
                BrokerRegistrationRequest.Listener(
                    name=e.name,
                    host=e.host,
                    port=e.port,
                    security_protocol=SECURITY_PROTOCOLS[e.security_protocol],
                )
                for e in listeners
            ],
            features=registration_features(),
            rack=rack,
            log_dirs=list(log_dirs),
        )
        response = await self.channel.send(request, timeout=60)
        if response.error_code:
            raise errors.for_code(response.error_code)("broker registration refused")
        self.broker_epoch = response.broker_epoch
        self._broker_id = broker_id
        try:
            await self._heartbeat()
        except errors.KafkaError as exc:  # registered: the loop beats again shortly
            logger.warning("broker heartbeat failed: %s", exc)
        self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        return self.broker_epoch

    async def _heartbeat(self, want_shut_down: bool = False) -> Any:
        response = await self.channel.send(
            BrokerHeartbeatRequest(
                broker_id=self._broker_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self._local.image.offset,
                want_fence=False,
                want_shut_down=want_shut_down,
                offline_log_dirs=sorted(self.offline_log_dirs),
            ),
            # Half the session, as Kafka's heartbeat channel (KAFKA-14392):
            # a heartbeat stuck on a controller that no longer answers gives
            # way to the next one in time for the active controller to hear
            # from this broker before its session runs out.
            timeout=self.config["broker.session.timeout.ms"] / 2000,
        )
        if response.error_code == 0 and response.is_fenced != self.fenced:
            self.fenced = response.is_fenced
            if not self.fenced:
                self._in_service.set()
            logger.info(
                "broker %d is %s",
                self._broker_id,
                "fenced" if self.fenced else "unfenced (in service)",
            )
        return response

    async def propagate_directory_failure(self, directory: uuid.UUID, timeout: float) -> bool:
        """KIP-858 (Kafka's BrokerLifecycleManager.propagateDirectoryFailure):
        heartbeat at once with ``directory`` among the offline log dirs, so
        the controller moves the leaderships of its replicas; returns whether
        the controller acknowledged it within ``timeout`` seconds (the
        broker halts otherwise)."""
        self.offline_log_dirs.add(directory)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            try:
                response = await asyncio.wait_for(self._heartbeat(), deadline - loop.time())
                if response.error_code == 0:
                    return True
                logger.warning(
                    "offline log dir heartbeat refused: %s", errors.for_code(response.error_code)
                )
            except (TimeoutError, errors.KafkaError) as exc:
                logger.warning("offline log dir heartbeat failed: %s", exc)
            await asyncio.sleep(self.channel.heartbeat_backoff)
        return False

    async def assign_replicas_to_dirs(
        self, assignments: Mapping[uuid.UUID, Sequence[tuple[uuid.UUID, int]]]
    ) -> dict[tuple[uuid.UUID, uuid.UUID, int], int]:
        """AssignReplicasToDirs (KIP-858): ``assignments``: directory id ->
        [(topic id, partition)]; the error code of each."""
        Dir = AssignReplicasToDirsRequest.DirectoryData
        Topic = AssignReplicasToDirsRequest.TopicData
        Partition = AssignReplicasToDirsRequest.PartitionData
        directories = []
        for directory, partitions in assignments.items():
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, index in partitions:
                by_topic.setdefault(topic_id, []).append(index)
            directories.append(
                Dir(
                    id=directory,
                    topics=[
                        Topic(
                            topic_id=topic_id,
                            partitions=[Partition(partition_index=i) for i in indexes],
                        )
                        for topic_id, indexes in by_topic.items()
                    ],
                )
            )
        response = await self.channel.send(
            AssignReplicasToDirsRequest(
                broker_id=self._broker_id, broker_epoch=self.broker_epoch, directories=directories
            )
        )
        if response.error_code:
            raise errors.for_code(response.error_code)("directory assignment refused")
        return {
            (d.id, t.topic_id, p.partition_index): p.error_code
            for d in response.directories
            for t in d.topics
            for p in t.partitions
        }

    async def wait_in_service(self, timeout: float = 60.0) -> None:
        """Until the active controller has unfenced this broker."""
        await asyncio.wait_for(self._in_service.wait(), timeout)

    async def _heartbeat_loop(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            # While fenced, beat often: the broker is unfenced as soon as it
            # has caught up, not a whole interval later (Kafka's
            # BrokerLifecycleManager does the same until it is in service).
            await asyncio.sleep(min(interval, 0.05) if self.fenced else interval)
            try:
                await self._heartbeat()
            except errors.KafkaError as exc:
                logger.warning("broker heartbeat failed: %s", exc)

    # -- writes a broker makes itself ------------------------------------------------------
    async def auto_create_topics(
        self,
        names: Iterable[str],
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        Topic = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(
            timeout_ms=30_000,
            topics=[
                Topic(
                    name=name,
                    num_partitions=-1 if num_partitions is None else num_partitions,
                    replication_factor=-1 if replication_factor is None else replication_factor,
                    configs=[
                        CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                        for k, v in (configs or {}).items()
                    ],
                )
                for name in dict.fromkeys(names)
            ],
        )
        response = await self.channel.send(request)
        return {t.name: t.error_code for t in response.topics}

    async def allocate_producer_ids(self, broker_id: int) -> tuple[int, int]:
        response = await self.channel.send(
            AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=self.broker_epoch)
        )
        if response.error_code:
            raise errors.for_code(response.error_code)("producer id block refused")
        return response.producer_id_start, response.producer_id_len
