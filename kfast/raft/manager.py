"""RaftManager: the Raft core on an asyncio event loop, over Kafka's RPCs
(Kafka's KafkaRaftManager + KafkaNetworkChannel).

The core (RaftClient) decides; this class does what it cannot: it reads
the loop's clock, wakes the core when its next timer is due, carries its
outgoing requests to the other quorum members over BrokerConnections
(one per destination, opened on first use), hands incoming requests from
the controller listener's handlers to it and returns its answers, and
turns the core's commits into futures a caller can await.

    manager = RaftManager(node_id=1, voters={1: ("127.0.0.1", 9093), ...},
                          cluster_id=..., log=..., store=..., codec=...,
                          listener=controller, config=QuorumConfig())
    await manager.start()
    offset = manager.propose(records)         # leader only
    await manager.wait_committed(offset)      # the records are committed
    response = await manager.handle_request(api_key, wire_request)   # a handler
    await manager.shutdown()                  # a leader resigns first

Where a quorum member is: the voter set in force (its VotersRecord
endpoints on the controller listener, KIP-853), else what a response's
node_endpoints said (a leader named by a node that is not the leader),
else controller.quorum.voters. controller.quorum.bootstrap.servers get the
ids -2, -3, ... (as Kafka numbers them) so the core can ask them for the
leader before it knows any voter.

A request the destination does not answer (connection refused, reset,
timeout) is reported to the core as failed; the core decides when to try
again. Everything runs on the loop's thread but the log's fsync: the core
names the offset to flush (``begin_flush``), one thread of this manager's
runs it, one flush at a time, and the core hears of it (``on_flushed``) on
the loop -- so the loop never waits for the disk on a metadata write (Kafka
fsyncs on its Raft I/O thread), and what was appended while one flush ran
goes into the next.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from kfast.client.connection import BrokerConnection
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import ZERO_UUID
from kfast.raft import wire
from kfast.raft.log import ReplicatedLog
from kfast.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    RaftRequest,
    RaftResponse,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from kfast.raft.quorum_state import QuorumConfig
from kfast.raft.raft_client import NotLeaderException, RaftClient, RaftListener
from kfast.raft.voter_set import VoterSet

logger = logging.getLogger(__name__)

VOTE = api_keys.BY_NAME["Vote"].key
BEGIN_QUORUM_EPOCH = api_keys.BY_NAME["BeginQuorumEpoch"].key
END_QUORUM_EPOCH = api_keys.BY_NAME["EndQuorumEpoch"].key
FETCH = api_keys.FETCH
FETCH_SNAPSHOT = api_keys.BY_NAME["FetchSnapshot"].key
ADD_RAFT_VOTER = api_keys.BY_NAME["AddRaftVoter"].key
REMOVE_RAFT_VOTER = api_keys.BY_NAME["RemoveRaftVoter"].key
UPDATE_RAFT_VOTER = api_keys.BY_NAME["UpdateRaftVoter"].key
QUORUM_API_KEYS = (
    VOTE,
    BEGIN_QUORUM_EPOCH,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    ADD_RAFT_VOTER,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
)
# The sender of an administrator's request: not a quorum member.
_ADMIN_SOURCE = -1
# Kafka's ids for controller.quorum.bootstrap.servers: -2, -3, ...
_FIRST_BOOTSTRAP_ID = -2
_INCONSISTENT_CLUSTER_ID = errors.InconsistentClusterIdException.code
_INVALID_REQUEST = errors.InvalidRequestException.code


def parse_quorum_voters(entries) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters: ``id@host:port`` entries -> {id: (host, port)}."""
    voters = {}
    for entry in entries:
        node, at, address = entry.strip().partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not node.isdigit() or not port.isdigit():
            raise ValueError(f"{entry!r} is not id@host:port")
        voters[int(node)] = (host.strip("[]"), int(port))
    return voters


def parse_bootstrap_servers(entries) -> list[tuple[str, int]]:
    """controller.quorum.bootstrap.servers: ``host:port`` entries."""
    servers = []
    for entry in entries:
        host, colon, port = entry.strip().rpartition(":")
        if not colon or not port.isdigit() or not host:
            raise ValueError(f"{entry!r} is not host:port")
        servers.append((host.strip("[]"), int(port)))
    return servers


class RaftManager:
    """``voters``: controller.quorum.voters ({} for a dynamic quorum);
    ``bootstrap_servers``: controller.quorum.bootstrap.servers;
    ``directory_id``/``endpoints``: this replica's key and its controller
    listeners as voter sets name them; ``listener_name``: the controller
    listener other members are reached on."""

    _loop: asyncio.AbstractEventLoop  # the running loop, from start()

    def __init__(
        self,
        node_id: int,
        # None: a voter no one reaches (the embedded single node; VoterSet.static).
        voters: dict[int, tuple[str, int] | None],
        cluster_id: str,
        log: ReplicatedLog,
        store,
        codec: wire.BatchCodec,
        listener: RaftListener | None = None,
        config: QuorumConfig | None = None,
        rng: random.Random | None = None,
        connect: Callable[[int], Coroutine[Any, Any, BrokerConnection]] | None = None,
        *,
        directory_id=ZERO_UUID,
        endpoints=(),
        bootstrap_servers=(),
        listener_name: str | None = None,
        security=None,
        on_fatal: Callable[[str], None] | None = None,
        followers_always_flush: bool = True,
    ):
        self.node_id = node_id
        # Told when this member cannot go on (a failed fsync of the log):
        # the node halts, as Kafka's Raft thread's fault handler does.
        self.on_fatal = on_fatal
        # The controller listener's TLS/SASL (kfast.client.security.ClientSecurity).
        self.security = security
        self.static_voters = dict(voters)
        self.bootstrap_servers = list(bootstrap_servers)
        self.listener_name = listener_name
        self.cluster_id = cluster_id
        self.config = config or QuorumConfig()
        self.codec = codec
        bootstrap_ids = [_FIRST_BOOTSTRAP_ID - i for i in range(len(self.bootstrap_servers))]
        self.client = RaftClient(
            node_id,
            VoterSet.static(self.static_voters),
            log,
            store,
            self.config,
            rng or random.Random(),
            listener,
            directory_id=directory_id,
            endpoints=endpoints,
            bootstrap_ids=bootstrap_ids,
            followers_always_flush=followers_always_flush,
        )
        # Where nodes are, as responses' node_endpoints told (a leader this
        # replica learned of before its log named it).
        self._learned_addresses: dict[int, tuple[str, int]] = {}
        self._connect = connect or self._open_connection
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._tasks: set[asyncio.Task] = set()
        # Incoming requests waiting for the core's answer: id -> future.
        self._inbound: dict[int, asyncio.Future] = {}
        self._next_inbound_id = 1 << 30
        # propose() offsets waiting for the high watermark: (offset, future).
        self._commit_waiters: list[tuple[int, asyncio.Future]] = []
        self._leader_epoch_seen: tuple[int, int] | None = None
        self._stopped = False
        # The log's fsyncs, one at a time (the core begins one only when the
        # last is done); the one running, if any.
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"raft-io-{node_id}")
        self._flushing: asyncio.Future | None = None

    # -- addresses ---------------------------------------------------------------------
    def address(self, node_id: int) -> tuple[str, int] | None:
        if node_id <= _FIRST_BOOTSTRAP_ID:
            index = _FIRST_BOOTSTRAP_ID - node_id
            return self.bootstrap_servers[index] if index < len(self.bootstrap_servers) else None
        node = self.client.quorum.voter_set.get(node_id)
        if node is not None:
            endpoint = node.endpoint(self.listener_name) or node.endpoint()
            if endpoint is not None and endpoint.host:
                return endpoint.host, endpoint.port
        return self._learned_addresses.get(node_id) or self.static_voters.get(node_id)

    @property
    def voters(self) -> dict[int, tuple[str, int] | None]:
        """The voters in force and where they are."""
        return {voter: self.address(voter) for voter in self.client.quorum.voters}

    def _learn_addresses(self, response) -> None:
        for endpoint in getattr(response, "node_endpoints", None) or ():
            if endpoint.node_id >= 0 and endpoint.host:
                self._learned_addresses[endpoint.node_id] = (endpoint.host, endpoint.port)

    def _leader_endpoints(self, response) -> None:
        """Name the leader's address in a quorum RPC's answer (node_endpoints,
        a tagged field of the newer versions) so the asker can reach it."""
        leader = self.client.leader_id
        address = self.address(leader) if leader >= 0 else None
        if address is not None and hasattr(response, "node_endpoints"):
            response.node_endpoints = [
                type(response).NodeEndpoint(node_id=leader, host=address[0], port=address[1])
            ]

    # -- life cycle --------------------------------------------------------------------
    def now_ms(self) -> int:
        return int(self._loop.time() * 1000)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.client.start(self.now_ms())
        self._poll()

    async def shutdown(self, resign_timeout: float = 1.0) -> None:
        """A leader resigns (EndQuorumEpoch reaches the voters, so they elect
        a successor without waiting for a timeout), then everything stops."""
        if self._stopped:
            return
        if self.client.is_leader and len(self.client.quorum.voters) > 1:
            self.client.resign(self.now_ms())
            self._poll()
            try:
                await asyncio.wait_for(self._end_epoch_delivered(), resign_timeout)
            except TimeoutError:
                pass
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._flushing is not None:
            # The log closes after this returns: let its fsync finish first.
            await asyncio.wait([self._flushing])
        self._io.shutdown(wait=False)
        for future in self._inbound.values():
            if not future.done():
                future.cancel()
        self._fail_commit_waiters(errors.NotControllerException("The quorum member is stopping."))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()

    async def _end_epoch_delivered(self) -> None:
        state = self.client.quorum.state
        others = set(self.client.quorum.voters) - {self.node_id}
        while (
            getattr(state, "end_epoch_acked", others) != others
            and self.client.quorum.state is state
        ):
            await asyncio.sleep(0.01)

    # -- the core's work -----------------------------------------------------------------
    def _poll(self) -> None:
        if self._stopped:
            return
        self._timer = None
        self._timer_at = None
        self._dispatch(self.client.poll(self.now_ms()))

    def _dispatch(self, messages) -> None:
        """Send what the core produced, then wake it when it next needs to be."""
        for message in messages:
            if isinstance(message, RaftRequest):
                self._spawn(self._send(message))
            else:
                future = self._inbound.pop(message.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(message.body)
        self._after_core_call()

    def _after_core_call(self) -> None:
        client = self.client
        leader = (client.leader_id, client.epoch)
        if leader != self._leader_epoch_seen:
            self._leader_epoch_seen = leader
            logger.info(
                "quorum member %d: %s in epoch %d, leader %d",
                self.node_id,
                client.state_name,
                client.epoch,
                client.leader_id,
            )
            if not client.is_leader:
                self._fail_commit_waiters(
                    errors.NotControllerException(
                        f"Node {self.node_id} is no longer the quorum leader."
                    )
                )
        high_watermark = client.high_watermark
        if self._commit_waiters:
            waiting = []
            for offset, future in self._commit_waiters:
                if future.done():
                    continue
                if offset < high_watermark:
                    future.set_result(offset)
                else:
                    waiting.append((offset, future))
            self._commit_waiters = waiting
        if self._stopped:
            return
        self._maybe_begin_flush()
        at = client.next_poll_ms() / 1000
        if self._timer_at is None or at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = at
            self._timer = self._loop.call_at(max(at, self._loop.time()), self._poll)

    def _maybe_begin_flush(self) -> None:
        offset = self.client.begin_flush()
        if offset is None:
            return
        flushing = self._loop.run_in_executor(self._io, self.client.log.flush, offset)
        self._flushing = flushing
        flushing.add_done_callback(lambda done: self._flushed(done, offset))

    def _flushed(self, done: asyncio.Future, offset: int) -> None:
        self._flushing = None
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            # Kafka halts the process on a failed fsync of the metadata log.
            # Until the node is down nothing more is flushed, so nothing more
            # commits or is acknowledged (a later fsync may succeed without
            # the lost pages: never retried).
            message = (
                f"quorum member {self.node_id}: fsync of the metadata log up to "
                f"{offset} failed: {error}"
            )
            if self.on_fatal is not None:
                self.on_fatal(message)
            else:
                logger.critical("%s", message)
            return
        self._dispatch_call(lambda now: self.client.on_flushed(now, offset))

    def _spawn(self, coroutine) -> None:
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- outgoing ----------------------------------------------------------------------
    async def _open_connection(self, node_id: int) -> BrokerConnection:
        address = self.address(node_id)
        if address is None:
            raise ConnectionError(f"no address known for quorum member {node_id}")
        host, port = address
        timeout = self.config.request_timeout_ms / 1000 + 1
        return await asyncio.wait_for(
            BrokerConnection.open(
                host,
                port,
                client_id=f"raft-client-{self.node_id}",
                request_timeout=timeout,
                security=self.security,
            ),
            timeout,
        )

    async def _connection(self, node_id: int) -> BrokerConnection:
        connection = self._connections.get(node_id)
        if connection is not None and connection.connected:
            return connection
        pending = self._connecting.get(node_id)
        if pending is None:
            pending = self._loop.create_task(self._connect(node_id))
            self._connecting[node_id] = pending
        try:
            connection = await asyncio.shield(pending)
        finally:
            if self._connecting.get(node_id) is pending and pending.done():
                del self._connecting[node_id]
        self._connections[node_id] = connection
        return connection

    def _encode(self, request: RaftRequest, connection: BrokerConnection):
        body = request.body
        if isinstance(body, VoteRequest):
            return VOTE, wire.vote_request(body, self.cluster_id, request.destination), None
        if isinstance(body, BeginQuorumEpochRequest):
            return (
                BEGIN_QUORUM_EPOCH,
                wire.begin_quorum_epoch_request(body, self.cluster_id, request.destination),
                None,
            )
        if isinstance(body, EndQuorumEpochRequest):
            return (
                END_QUORUM_EPOCH,
                wire.end_quorum_epoch_request(body, self.cluster_id, self.client.voter_directory),
                None,
            )
        if isinstance(body, FetchRequest):
            # The request's layout depends on the version: fix it here.
            version = connection.version_for(FETCH, min_version=13)
            return FETCH, wire.fetch_request(body, self.cluster_id, version), version
        if isinstance(body, FetchSnapshotRequest):
            return FETCH_SNAPSHOT, wire.fetch_snapshot_request(body, self.cluster_id), None
        if isinstance(body, UpdateRaftVoterRequest):
            return UPDATE_RAFT_VOTER, wire.update_raft_voter_request(body, self.cluster_id), None
        raise TypeError(type(body).__name__)

    def _decode(self, api_key: int, response):
        if api_key == VOTE:
            return wire.from_vote_response(response)
        if api_key == BEGIN_QUORUM_EPOCH:
            return wire.from_begin_quorum_epoch_response(response)
        if api_key == END_QUORUM_EPOCH:
            return wire.from_end_quorum_epoch_response(response)
        if api_key == FETCH:
            return wire.from_fetch_response(response, self.codec)
        if api_key == UPDATE_RAFT_VOTER:
            return wire.from_voter_change_response(response)
        return wire.from_fetch_snapshot_response(response)

    async def _send(self, request: RaftRequest) -> None:
        try:
            connection = await self._connection(request.destination)
            api_key, body, version = self._encode(request, connection)
            response = await connection.send(body, api_key=api_key, version=version)
            self._learn_addresses(response)
            decoded = self._decode(api_key, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._stopped:
                return
            logger.debug(
                "quorum request %s to %d failed: %s",
                type(request.body).__name__,
                request.destination,
                exc,
            )
            stale = self._connections.pop(request.destination, None)
            if stale is not None:
                self._spawn(stale.close())
            self._dispatch_call(lambda now: self._send_failed(now, request))
            return
        if getattr(response, "error_code", 0) == _INCONSISTENT_CLUSTER_ID:
            logger.error(
                "quorum member %d belongs to another cluster than %s",
                request.destination,
                self.cluster_id,
            )
            self._dispatch_call(lambda now: self._send_failed(now, request))
            return
        reply = RaftResponse(request.correlation_id, request.destination, self.node_id, decoded)
        self._dispatch_call(lambda now: self.client.handle(now, reply))

    def _send_failed(self, now_ms: int, request: RaftRequest) -> list[RaftMessage]:
        """The core learns a request was not delivered; it sends nothing."""
        self.client.on_send_failed(now_ms, request)
        return []

    def _dispatch_call(self, call: Callable[[int], list[RaftMessage]]) -> None:
        if not self._stopped:
            self._dispatch(call(self.now_ms()))

    # -- incoming ----------------------------------------------------------------------
    async def handle_request(self, api_key: int, request):
        """The response body for a quorum RPC received on the controller
        listener (``request`` as decoded by kfast.protocol)."""
        rpc = _QUORUM_RPCS[api_key]
        cluster_id = getattr(request, "cluster_id", None)
        if cluster_id is not None and cluster_id != self.cluster_id:
            return rpc.encode(self, rpc.error_body, _INCONSISTENT_CLUSTER_ID)
        try:
            body = rpc.decode(request)
        except wire.WireError:
            return rpc.encode(self, rpc.error_body, _INVALID_REQUEST)
        source = getattr(body, rpc.source) if rpc.source else _ADMIN_SOURCE
        if self._stopped:
            raise errors.NotControllerException("The quorum member is stopping.")
        inbound_id = self._next_inbound_id
        self._next_inbound_id += 1
        future = self._loop.create_future()
        self._inbound[inbound_id] = future
        message = RaftRequest(inbound_id, source, self.node_id, body)
        self._dispatch(self.client.handle(self.now_ms(), message))
        try:
            answer = await future
        finally:
            self._inbound.pop(inbound_id, None)
        response = rpc.encode(self, answer, 0)
        self._leader_endpoints(response)
        return response

    # -- the controller's side ---------------------------------------------------------
    def propose(self, records) -> int:
        """Append ``records`` as one batch; the offset of its last record.
        Raises NotLeaderException on a replica that is not the leader."""
        offset = self.client.propose(self.now_ms(), records)
        self._dispatch(self.client.poll(self.now_ms()))
        return offset

    def wait_committed(self, offset: int) -> asyncio.Future:
        """Resolves once ``offset`` is committed; fails with
        NotControllerException if this replica stops leading first."""
        future = self._loop.create_future()
        if offset < self.client.high_watermark:
            future.set_result(offset)
        elif not self.client.is_leader:
            future.set_exception(
                errors.NotControllerException(f"Node {self.node_id} is not the quorum leader.")
            )
        else:
            self._commit_waiters.append((offset, future))
        return future

    def _fail_commit_waiters(self, error: Exception) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    @property
    def is_leader(self) -> bool:
        return self.client.is_leader

    def leader_endpoint(self, leader_id: int):
        from kfast.raft.voter_set import Endpoint

        address = self.address(leader_id) if leader_id >= 0 else None
        return Endpoint(self.listener_name or "", *address) if address else None


class _QuorumRpc(NamedTuple):
    """How one quorum RPC crosses the controller listener: the request's
    body and the field naming its sender; the response's encoder and the
    body a request-level error (another cluster, a malformed request)
    answers with."""

    decode: Callable
    source: str | None  # None: an administrator, not a quorum member
    encode: Callable  # (manager, body, error_code) -> wire response
    error_body: object


_QUORUM_RPCS = {
    VOTE: _QuorumRpc(
        wire.from_vote_request,
        "replica_id",
        lambda m, body, code: wire.vote_response(body, code),
        VoteResponse(0, -1, -1, False),
    ),
    BEGIN_QUORUM_EPOCH: _QuorumRpc(
        wire.from_begin_quorum_epoch_request,
        "leader_id",
        lambda m, body, code: wire.begin_quorum_epoch_response(body, code),
        BeginQuorumEpochResponse(0, -1, -1),
    ),
    END_QUORUM_EPOCH: _QuorumRpc(
        wire.from_end_quorum_epoch_request,
        "leader_id",
        lambda m, body, code: wire.end_quorum_epoch_response(body, code),
        EndQuorumEpochResponse(0, -1, -1),
    ),
    FETCH: _QuorumRpc(
        wire.from_fetch_request,
        "replica_id",
        lambda m, body, code: wire.fetch_response(body, m.codec, code),
        FetchResponse(0, -1, -1),
    ),
    FETCH_SNAPSHOT: _QuorumRpc(
        wire.from_fetch_snapshot_request,
        "replica_id",
        lambda m, body, code: wire.fetch_snapshot_response(body, code),
        FetchSnapshotResponse(0, -1, -1),
    ),
    ADD_RAFT_VOTER: _QuorumRpc(
        wire.from_add_raft_voter_request,
        None,
        lambda m, body, code: wire.add_raft_voter_response(body, code),
        VoterChangeResponse(0),
    ),
    REMOVE_RAFT_VOTER: _QuorumRpc(
        wire.from_remove_raft_voter_request,
        None,
        lambda m, body, code: wire.remove_raft_voter_response(body, code),
        VoterChangeResponse(0),
    ),
    UPDATE_RAFT_VOTER: _QuorumRpc(
        wire.from_update_raft_voter_request,
        None,
        lambda m, body, code: wire.update_raft_voter_response(
            body, code, m.leader_endpoint(body.leader_id)
        ),
        VoterChangeResponse(0),
    ),
}

__all__ = [
    "RaftManager",
    "NotLeaderException",
    "QUORUM_API_KEYS",
    "parse_quorum_voters",
    "parse_bootstrap_servers",
]
