"""RaftQuorumController: the QuorumController of a controller quorum (the
embedded single node's too: a quorum of one voter).

The control managers, records and MetadataImage of QuorumController; this
class says where records go and when they apply:

- An operation runs only on the active controller: the Raft leader, once it
  has applied every committed record up to the start of its epoch (Kafka's
  controller claims leadership the same way). Elsewhere it fails with
  NOT_CONTROLLER and the caller finds the active one.
- Its records are proposed to the Raft log as one batch and the response is
  sent once the batch is committed (a majority of voters has it).
- Every node, active or not, applies committed batches in log order as the
  Raft layer hands them over (``handle_commit``): the standbys keep the full
  state in memory and serve the moment they win an election.
- The first active controller of a new cluster commits the bootstrap records
  (metadata.version; SCRAM credentials from ``kfast storage format
  --add-scram``), as Kafka's bootstrap checkpoint seeds a fresh quorum.
- Broker membership (KIP-631): a broker registers (BrokerRegistration) and
  stays fenced until a heartbeat shows it has caught up with the metadata
  log; the active controller keeps each broker's session in memory and
  fences a broker that sent no heartbeat for broker.session.timeout.ms (its
  leaderships move away). A newly active controller starts every session
  afresh, as Kafka's BrokerHeartbeatManager does, rather than fence brokers
  that were heartbeating to its predecessor.

Snapshots: every node writes its own, as Kafka's controllers do, once
metadata.log.max.record.bytes.between.snapshots of records have been applied
since the last one, or metadata.log.max.snapshot.interval.ms has passed
since it and a record is applied: the image's records at a committed batch boundary, in
Kafka's snapshot format; the Raft log then drops the batches it covers, and
a replica that needs them fetches the snapshot (FetchSnapshot) instead.

The Raft layer calls ``handle_commit``, ``handle_load_snapshot`` and
``handle_leader_change`` (kfast.raft.raft_client.RaftListener).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kfast.config import KafkaConfig
from kfast.controller.controller_result import ControllerResult
from kfast.controller.feature_control import METADATA_VERSION
from kfast.controller.metadata.image import BrokerRegistration, Endpoint
from kfast.controller.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    decode_record,
    encode_record,
)
from kfast.controller.quorum_controller import QuorumController, QuorumView, _DeltaBuilder
from kfast.controller.replication_control import ELECTION_PREFERRED
from kfast.controller.snapshot import image_records
from kfast.protocol import errors
from kfast.protocol.constants import NO_LEADER
from kfast.raft.log import Batch, OffsetAndEpoch
from kfast.raft.manager import RaftManager
from kfast.raft.snapshots import snapshot_bytes, snapshot_records

logger = logging.getLogger(__name__)

T = TypeVar("T")
# (is_caught_up, is_fenced, should_shut_down): a BrokerHeartbeat's answer.
Heartbeat = tuple[bool, bool, bool]


def _decode_record(value: bytes) -> MetadataRecord:
    return decode_record(value)[0]


# Preferred elections per balancing round (Kafka's maxElectionsPerImbalance).
_MAX_ELECTIONS_PER_IMBALANCE = 1000


class RaftQuorumController(QuorumController):
    _unfence_on_register = False

    def __init__(
        self,
        config: KafkaConfig,
        node_id: int,
        cluster_id: str,
        metadata_log_dir: str,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, node_id, cluster_id, metadata_log_dir, loop)
        self.raft: RaftManager | None = None  # attach()
        self.leader_id = NO_LEADER
        self.epoch = 0  # the quorum epoch (Raft term) of ``leader_id``
        self._epoch_start_offset: int | None = None
        self._bootstrap_task: asyncio.Task[None] | None = None
        # broker id -> loop time (s) of its last heartbeat, on the active controller.
        self._sessions: dict[int, float] = {}
        # broker id -> metadata offset in its last heartbeat; broker in
        # controlled shutdown -> the offset of the records moving its leaders.
        self._metadata_offsets: dict[int, int] = {}
        self._shutdown_offsets: dict[int, int] = {}
        self._session_timer: asyncio.TimerHandle | None = None
        self._balance_timer: asyncio.TimerHandle | None = None
        self._token_sweep_timer: asyncio.TimerHandle | None = None
        self._was_active = False
        # A broker in this very process (the embedded single node's): alive
        # whenever this controller is, so its session never lapses.
        self.local_broker_id: int | None = None
        self._bytes_since_snapshot = 0
        self._last_snapshot_time = 0.0

    def attach(self, raft: RaftManager) -> None:
        self.raft = raft

    @property
    def _attached(self) -> RaftManager:
        """The Raft layer, which the server attaches before start()."""
        raft = self.raft
        if raft is None:
            raise errors.NotControllerException("The controller has no Raft layer yet.")
        return raft

    @property
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            raise errors.NotControllerException("The controller is not running.")
        return loop

    # -- life cycle ----------------------------------------------------------------------
    async def start(self) -> None:
        loop = self._loop = self._loop or asyncio.get_running_loop()
        self._last_snapshot_time = loop.time()
        self.started = True
        await self._attached.start()

    async def shutdown(self) -> None:
        for timer in (self._session_timer, self._balance_timer, self._token_sweep_timer):
            if timer is not None:
                timer.cancel()
        async with self._lock:
            self.started = False
        if self._bootstrap_task is not None:
            self._bootstrap_task.cancel()
        await self._attached.shutdown()

    # -- the Raft listener -----------------------------------------------------------------
    def handle_commit(self, batch: Batch) -> None:
        if batch.is_control:
            self._last_offset = batch.next_offset - 1
        else:
            delta = _DeltaBuilder()
            for index, record in enumerate(batch.records):
                self._replay(record, batch.base_offset + index, delta)
                self._bytes_since_snapshot += len(encode_record(record))
            self._publish(delta)
            interval_ms = self.config["metadata.log.max.snapshot.interval.ms"]
            if self._bytes_since_snapshot >= self.snapshot_max_bytes or (
                interval_ms
                and (self._running_loop.time() - self._last_snapshot_time) * 1000 >= interval_ms
            ):
                self._snapshot(OffsetAndEpoch(batch.next_offset, batch.epoch))
        self._maybe_activate()

    def _snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Write a snapshot of the state after the batch ending at
        ``snapshot_id.offset`` and let the log drop what it covers. Blocking:
        metadata snapshots are small next to the records between them."""
        self._bytes_since_snapshot = 0
        self._last_snapshot_time = self._running_loop.time()
        records = image_records(self.image, self.producer_id_control.next_producer_id)
        data = snapshot_bytes(records, snapshot_id.epoch, encode_record)
        try:
            self._attached.client.create_snapshot(snapshot_id, data)
        except (OSError, ValueError) as exc:
            logger.error("metadata snapshot %s failed: %s", snapshot_id, exc)
            return
        self.snapshot_end_offset = snapshot_id.offset
        logger.info(
            "metadata snapshot written up to offset %d (epoch %d), %d records",
            snapshot_id.offset,
            snapshot_id.epoch,
            len(records),
        )

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the whole state with a snapshot's (a follower fetched it
        from the leader, or a restart finds the log starting at one)."""
        records = snapshot_records(data, _decode_record)
        if records is None:
            raise errors.CorruptRecordException(f"metadata snapshot {snapshot_id} is damaged")
        self._new_control_managers()
        delta = _DeltaBuilder()
        for record in records:
            self._replay(record, snapshot_id.offset - 1, delta)
        self._last_offset = snapshot_id.offset - 1
        self.snapshot_end_offset = snapshot_id.offset
        self._bytes_since_snapshot = 0
        self._publish(delta, notify=False)
        logger.info(
            "loaded metadata snapshot up to offset %d (epoch %d), %d records",
            snapshot_id.offset,
            snapshot_id.epoch,
            len(records),
        )
        for callback in list(self._subscribers):
            callback(self.full_delta(), self.image)

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        self._epoch_start_offset = None
        if leader_id == self.node_id:
            state = self._attached.client.quorum.state
            self._epoch_start_offset = getattr(state, "epoch_start_offset", None)
        self._maybe_activate()

    # -- the active controller --------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return (
            self.raft is not None
            and self.raft.is_leader
            and self._epoch_start_offset is not None
            and self._last_offset >= self._epoch_start_offset
        )

    def active_controller_id(self) -> int:
        return self.leader_id

    def kraft_version(self) -> int:
        """kraft.version as this node's Raft log says (its last
        KRaftVersionRecord: 1 for a quorum formatted dynamic)."""
        return 0 if self.raft is None else self.raft.client.kraft.last_kraft_version()

    def _maybe_activate(self) -> None:
        active = self.is_active
        if active != self._was_active:
            self._was_active = active
            if active:
                # Every registered broker gets a full session with the new
                # active controller.
                now = self._running_loop.time()
                self._sessions = {broker_id: now for broker_id in self.cluster_control.brokers}
                self._schedule_session_check()
                self._schedule_leader_balance()
                self._schedule_token_sweep()
            else:
                for timer in (self._session_timer, self._balance_timer, self._token_sweep_timer):
                    if timer is not None:
                        timer.cancel()
                self._session_timer = self._balance_timer = self._token_sweep_timer = None
        if not active or METADATA_VERSION in self.feature_control.finalized:
            return
        if self._bootstrap_task is None or self._bootstrap_task.done():
            self._bootstrap_task = self._running_loop.create_task(self._bootstrap())

    async def _bootstrap(self) -> None:
        try:
            await self._run(lambda: ControllerResult(None, self.bootstrap_records()))
        except errors.KafkaError as exc:
            logger.info("bootstrap records not committed (%s); the next leader will", exc)

    # -- broker membership ------------------------------------------------------------------
    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: list[Endpoint],
        rack: str | None,
        features: Iterable[tuple[str, int, int]] | None = None,
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> int:
        if features is None:
            epoch = await super().register_broker(
                broker_id, incarnation_id, listeners, rack, log_dirs=log_dirs
            )
        else:
            epoch = await super().register_broker(
                broker_id, incarnation_id, listeners, rack, features, log_dirs
            )
        self._sessions[broker_id] = self._running_loop.time()
        return epoch

    async def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        offline_log_dirs: Sequence[uuid.UUID] = (),
    ) -> Heartbeat:
        """(is_caught_up, is_fenced, should_shut_down) for a BrokerHeartbeat.
        Caught up: the broker has replayed the metadata log up to its own
        registration. A broker that wants to shut down goes through Kafka's
        controlled shutdown (BrokerHeartbeatManager): while it leads
        partitions it enters the in-controlled-shutdown state -- still
        listed in Metadata, no longer elected or placed -- and its
        leaderships move to other in-sync replicas; it is told to shut down
        (and fenced) only once it leads nothing and every other active
        broker has replayed the metadata that moved them, so clients asking
        any broker learn the new leaders. ``offline_log_dirs``: log dirs
        that failed on the broker (KIP-858): their replicas leave their ISRs
        and leaderships (handle_directories_offline) while the broker keeps
        serving its other dirs."""

        def operation() -> ControllerResult[Heartbeat]:
            registration = self.cluster_control.brokers.get(broker_id)
            caught_up = registration is not None and current_metadata_offset >= registration.epoch
            dir_records = (
                self.replication_control.handle_directories_offline(
                    broker_id, broker_epoch, offline_log_dirs
                )
                if offline_log_dirs
                else []
            )
            if dir_records and registration is not None:
                # Newly offline dirs are this heartbeat's only change: a
                # fencing or shutdown decision waits for the next one, so
                # no two changes of one partition are computed from the same
                # state.
                return ControllerResult((caught_up, registration.fenced, False), dir_records)
            if (
                want_shut_down
                and registration is not None
                and registration.epoch == broker_epoch
                and not registration.fenced
            ):
                return self._controlled_shutdown(broker_id, broker_epoch, registration, caught_up)
            result = self.cluster_control.heartbeat(
                broker_id, broker_epoch, caught_up, want_fence or want_shut_down
            )
            records: list[MetadataRecord] = list(result.records)
            if records and result.response:  # being fenced now
                records += self.replication_control.broker_fenced(broker_id)
            elif records:  # being unfenced now
                records += self.replication_control.broker_unfenced(broker_id)
            return ControllerResult((caught_up, result.response, want_shut_down), records)

        response = await self._run(operation)
        self._sessions[broker_id] = self._running_loop.time()
        self._metadata_offsets[broker_id] = current_metadata_offset
        return response

    def _controlled_shutdown(
        self, broker_id: int, broker_epoch: int, registration: BrokerRegistration, caught_up: bool
    ) -> ControllerResult[Heartbeat]:
        leads = self.replication_control.leaderships(broker_id)
        if not registration.in_controlled_shutdown and leads:
            records: list[MetadataRecord] = [
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=broker_epoch, in_controlled_shutdown=1
                )
            ]
            records += self.replication_control.broker_fenced(broker_id)
            # The offset the last of these records will get.
            self._shutdown_offsets[broker_id] = self._log_end_offset() + len(records) - 1
            logger.info(
                "broker %d entered controlled shutdown; moving %d leaderships", broker_id, leads
            )
            return ControllerResult((caught_up, False, False), records)
        if registration.in_controlled_shutdown and (
            leads
            or self._lowest_active_offset(broker_id) < self._shutdown_offsets.get(broker_id, -1)
        ):
            return ControllerResult((caught_up, False, False), [])
        result = self.cluster_control.fence_broker(broker_id)
        records = list(result.records) + self.replication_control.broker_fenced(broker_id)
        return ControllerResult((caught_up, True, True), records)

    def _lowest_active_offset(self, excluded: int) -> int:
        """The smallest metadata offset the other active brokers reported."""
        offsets = [
            self._metadata_offsets.get(b, -1)
            for b in self.cluster_control.active_brokers()
            if b != excluded
        ]
        return min(offsets, default=self._log_end_offset())

    # -- preferred leaders (auto.leader.rebalance.enable) ---------------------------------
    def _schedule_leader_balance(self) -> None:
        if self.config["auto.leader.rebalance.enable"]:
            self._balance_timer = self._running_loop.call_later(
                self.config["leader.imbalance.check.interval.seconds"], self._balance_leaders
            )

    def _balance_leaders(self) -> None:
        """Kafka's balancePartitionLeaders: every leader.imbalance.check.
        interval.seconds, a preferred election for each partition whose
        preferred replica is back in sync (after a failover leaderships
        pile up on the survivors)."""
        self._balance_timer = None
        if not self.is_active:
            return
        imbalanced = self.replication_control.imbalanced_partitions(_MAX_ELECTIONS_PER_IMBALANCE)
        if imbalanced:
            self._running_loop.create_task(self._elect_preferred(imbalanced))
        self._schedule_leader_balance()

    async def _elect_preferred(self, partitions: list[tuple[str, int]]) -> None:
        try:
            results = await self.elect_leaders(ELECTION_PREFERRED, partitions)
        except errors.KafkaError as exc:
            logger.info("preferred leader election not committed: %s", exc)
            return
        moved = [p for p, error in results.items() if error is None]
        if moved:
            logger.info("moved %d leaderships back to their preferred replicas", len(moved))

    # -- delegation tokens (delegation.token.expiry.check.interval.ms) ----------------
    def _schedule_token_sweep(self) -> None:
        if self.delegation_token_control.enabled:
            self._token_sweep_timer = self._running_loop.call_later(
                self.config["delegation.token.expiry.check.interval.ms"] / 1000,
                self._sweep_tokens,
            )

    def _sweep_tokens(self) -> None:
        """Kafka's periodic sweepExpiredDelegationTokens on the active
        controller: expired tokens leave the metadata (and so every node's
        token cache)."""
        self._token_sweep_timer = None
        if not self.is_active:
            return
        if self.delegation_token_control.sweep_expired_tokens():
            self._running_loop.create_task(self._remove_expired_tokens())
        self._schedule_token_sweep()

    async def _remove_expired_tokens(self) -> None:
        try:
            removed = await self.sweep_expired_delegation_tokens()
        except errors.KafkaError as exc:
            logger.info("removing expired delegation tokens failed: %s", exc)
            return
        logger.info("removed %d expired delegation tokens", removed)

    def _schedule_session_check(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        self._session_timer = self._running_loop.call_later(interval, self._check_sessions)

    def _check_sessions(self) -> None:
        self._session_timer = None
        if not self.is_active:
            return
        timeout = self.config["broker.session.timeout.ms"] / 1000
        now = self._running_loop.time()
        expired = [
            broker_id
            for broker_id, registration in self.cluster_control.brokers.items()
            if not registration.fenced
            and broker_id != self.local_broker_id
            and now - self._sessions.get(broker_id, now) >= timeout
        ]
        if expired:
            self._running_loop.create_task(self._fence_expired(expired))
        else:
            self._schedule_session_check()

    async def _fence_expired(self, broker_ids: list[int]) -> None:
        try:
            for broker_id in broker_ids:
                logger.info(
                    "broker %d: no heartbeat for broker.session.timeout.ms; fencing it", broker_id
                )
                await self.fence_broker(broker_id)
        except errors.KafkaError as exc:
            logger.info(
                "fencing brokers %s failed (%s); the next active controller will", broker_ids, exc
            )
        finally:
            if self.is_active and self._session_timer is None:
                self._schedule_session_check()

    async def _run(
        self, operation: Callable[[], ControllerResult[T]], validate_only: bool = False
    ) -> T:
        if not self.is_active:
            raise errors.NotControllerException(
                f"Node {self.node_id} is not the active controller (the controller is "
                f"{self.leader_id})."
            )
        return await super()._run(operation, validate_only)

    async def _commit(self, records: list[MetadataRecord], notify: bool = True) -> None:
        """Propose ``records`` as one batch and return once it is committed
        and applied (the Raft layer applies it through handle_commit)."""
        if not self.is_active:
            raise errors.NotControllerException("The controller lost its leadership.")
        raft = self._attached
        offset = raft.propose(records)
        await raft.wait_committed(offset)

    def _log_end_offset(self) -> int:
        return self._attached.client.log.end_offset

    def quorum_state(self) -> QuorumView:
        """DescribeQuorum as the leader answers it: every voter's log end
        offset as last fetched, and the observers (brokers)."""
        raft = self._attached
        client = raft.client
        if not client.is_leader:
            raise errors.NotLeaderOrFollowerException(
                f"Node {self.node_id} is not the quorum leader (the leader is {self.leader_id})."
            )
        now_ms = raft.now_ms()
        replicas = client.leader_replica_states(now_ms)
        voters = client.quorum.voters
        # The Raft layer's clock is the loop's (monotonic); DescribeQuorum
        # reports wall-clock times.
        wall_minus_loop = int(time.time() * 1000) - now_ms

        def row(node_id: int) -> tuple[int, int, int]:
            state = replicas.get(node_id)
            if state is None or state.last_fetch_ms < 0:
                return node_id, -1, -1
            return node_id, state.end_offset, state.last_fetch_ms + wall_minus_loop

        return {
            "leader_id": self.node_id,
            "leader_epoch": client.epoch,
            "high_watermark": client.high_watermark,
            "voters": [row(v) for v in voters],
            "observers": [row(o) for o in sorted(replicas) if o not in voters],
        }
