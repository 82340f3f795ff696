"""ClusterControlManager: broker registrations, epochs and fencing.

A broker registers with its incarnation id (new for every process start),
listeners and rack; the controller answers with a broker epoch, the metadata
offset of its RegisterBrokerRecord (as Kafka does), so an epoch identifies
one registration and a restarted broker gets a larger one. A registration is
fenced until the broker has caught up with the metadata log (``heartbeat``),
unless the caller registers it unfenced.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.image import BrokerRegistration, Endpoint
from kfast.controller.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kfast.protocol import errors
from kfast.protocol.constants import DIRECTORY_MIGRATING, DIRECTORY_UNASSIGNED

# Kafka's SecurityProtocol ids.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}


class ClusterControlManager:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}

    # -- queries -------------------------------------------------------------------
    def active_brokers(self) -> list[int]:
        """Registered, unfenced brokers not shutting down, sorted by id
        (placement candidates)."""
        return sorted(
            b for b, r in self.brokers.items() if not r.fenced and not r.in_controlled_shutdown
        )

    def racks(self) -> dict[int, str | None]:
        return {b: r.rack for b, r in self.brokers.items()}

    def is_active(self, broker_id: int) -> bool:
        """May lead and host new replicas: registered, unfenced and not in
        controlled shutdown (Kafka's isActive / usable broker)."""
        registration = self.brokers.get(broker_id)
        return (
            registration is not None
            and not registration.fenced
            and not registration.in_controlled_shutdown
        )

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """The log dir a new replica on ``broker_id`` is assigned (Kafka's
        defaultDir): its only dir, else UNASSIGNED (the broker says where
        with AssignReplicasToDirs), or MIGRATING if it registered none."""
        registration = self.brokers.get(broker_id)
        if registration is None:
            return DIRECTORY_UNASSIGNED
        if not registration.directories:
            return DIRECTORY_MIGRATING
        if len(registration.directories) == 1:
            return registration.directories[0]
        return DIRECTORY_UNASSIGNED

    def has_online_dir(self, broker_id: int, directory: uuid.UUID) -> bool:
        registration = self.brokers.get(broker_id)
        return registration is not None and registration.has_online_dir(directory)

    def broker_epoch(self, broker_id: int) -> int:
        registration = self.brokers.get(broker_id)
        if registration is None:
            raise errors.BrokerIdNotRegisteredException(f"Broker {broker_id} is not registered.")
        return registration.epoch

    # -- operations ----------------------------------------------------------------
    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: Iterable[Endpoint],
        rack: str | None,
        next_offset: int,
        features: Iterable[tuple[str, int, int]] = (),
        unfence: bool = True,
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> ControllerResult[int]:
        """Response: the new broker epoch. ``next_offset`` is the metadata
        offset the RegisterBrokerRecord will get. ``unfence``: the broker is
        in service at once (the in-process broker of a single node, which has
        replayed everything); otherwise it stays fenced until a heartbeat
        shows it caught up (``heartbeat``). ``log_dirs``: the ids of its
        online log dirs (KIP-858)."""
        if broker_id < 0:
            raise errors.InvalidRegistrationException(f"Invalid broker id {broker_id}")
        existing = self.brokers.get(broker_id)
        if (
            existing is not None
            and existing.incarnation_id == incarnation_id
            and not existing.fenced
        ):
            return ControllerResult(existing.epoch, [])  # a retried registration
        endpoints = []
        for endpoint in listeners:
            protocol = SECURITY_PROTOCOLS.get(endpoint.security_protocol)
            if protocol is None:
                raise errors.InvalidRegistrationException(
                    f"Unknown security protocol {endpoint.security_protocol}"
                )
            endpoints.append(
                RegisterBrokerRecord.BrokerEndpoint(
                    name=endpoint.name,
                    host=endpoint.host,
                    port=endpoint.port,
                    security_protocol=protocol,
                )
            )
        epoch = next_offset
        register = RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            broker_epoch=epoch,
            end_points=endpoints,
            rack=rack,
            fenced=True,
            log_dirs=list(log_dirs),
            features=[
                RegisterBrokerRecord.BrokerFeature(
                    name=name, min_supported_version=lo, max_supported_version=hi
                )
                for name, lo, hi in features
            ],
        )
        records: list[MetadataRecord] = [register]
        if unfence:
            records.append(UnfenceBrokerRecord(id=broker_id, epoch=epoch))
        return ControllerResult(epoch, records)

    def heartbeat(
        self, broker_id: int, broker_epoch: int, caught_up: bool, want_fence: bool
    ) -> ControllerResult[bool]:
        """BrokerHeartbeat's fencing decision (Kafka's ClusterControlManager +
        BrokerHeartbeatManager): a broker of the current registration is
        unfenced once caught up with the metadata log, fenced when it asks.
        Response: (is_fenced after the records apply)."""
        registration = self.brokers.get(broker_id)
        if registration is None:
            raise errors.BrokerIdNotRegisteredException(f"Broker {broker_id} is not registered.")
        if registration.epoch != broker_epoch:
            raise errors.StaleBrokerEpochException(
                f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}"
            )
        if want_fence and not registration.fenced:
            return ControllerResult(True, [FenceBrokerRecord(id=broker_id, epoch=broker_epoch)])
        if registration.fenced and caught_up and not want_fence:
            return ControllerResult(False, [UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch)])
        return ControllerResult(registration.fenced, [])

    def unregister_broker(self, broker_id: int) -> ControllerResult[None]:
        """UnregisterBroker (kafka-cluster.sh unregister): the registration
        is removed; a broker that comes back registers anew."""
        registration = self.brokers.get(broker_id)
        if registration is None:
            raise errors.BrokerIdNotRegisteredException(
                f"Broker ID {broker_id} is not currently registered"
            )
        return ControllerResult(
            None, [UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.epoch)]
        )

    def fence_broker(self, broker_id: int) -> ControllerResult[int]:
        """Take a registered broker out of service (its session expired or
        it shut down); response: its epoch."""
        registration = self.brokers.get(broker_id)
        if registration is None:
            raise errors.BrokerIdNotRegisteredException(f"Broker {broker_id} is not registered.")
        if registration.fenced:
            return ControllerResult(registration.epoch, [])
        return ControllerResult(
            registration.epoch, [FenceBrokerRecord(id=broker_id, epoch=registration.epoch)]
        )

    # -- replay --------------------------------------------------------------------
    def replay(
        self,
        record: RegisterBrokerRecord
        | UnregisterBrokerRecord
        | FenceBrokerRecord
        | UnfenceBrokerRecord
        | BrokerRegistrationChangeRecord,
    ) -> int | None:
        """Apply one record; returns the id of the broker it changed."""
        if isinstance(record, RegisterBrokerRecord):
            listeners = {
                e.name: Endpoint(
                    e.name, e.host, e.port, _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")
                )
                for e in record.end_points
            }
            self.brokers[record.broker_id] = BrokerRegistration(
                record.broker_id,
                record.incarnation_id,
                record.broker_epoch,
                listeners,
                record.rack,
                record.fenced,
                record.in_controlled_shutdown,
                tuple(sorted(record.log_dirs or ())),
            )
            return record.broker_id
        if isinstance(record, UnregisterBrokerRecord):
            self.brokers.pop(record.broker_id, None)
            return record.broker_id
        if isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):
            return self._change(
                record.id, record.epoch, fenced=isinstance(record, FenceBrokerRecord)
            )
        if isinstance(record, BrokerRegistrationChangeRecord):
            # Tagged int8 fields, 0 = unchanged (Kafka's
            # BrokerRegistrationFencingChange: 1 fence, -1 unfence;
            # BrokerRegistrationInControlledShutdownChange: 1 = entered).
            changes: dict[str, bool | tuple[uuid.UUID, ...]] = {}
            if record.fenced:
                changes["fenced"] = record.fenced == 1
            if record.in_controlled_shutdown == 1:
                changes["in_controlled_shutdown"] = True
            if record.log_dirs:  # empty: unchanged (KIP-858)
                changes["directories"] = tuple(sorted(record.log_dirs))
            return self._change(record.broker_id, record.broker_epoch, **changes)
        raise TypeError(f"not a cluster record: {type(record).__name__}")

    def _change(
        self, broker_id: int, epoch: int, **changes: bool | tuple[uuid.UUID, ...]
    ) -> int | None:
        current = self.brokers.get(broker_id)
        if current is None or current.epoch != epoch:
            return None  # a record of an older registration
        fields = {name: getattr(current, name) for name in BrokerRegistration.__slots__}
        fields.update(changes)
        self.brokers[broker_id] = BrokerRegistration(**fields)
        return broker_id
