"""ClientQuotaControlManager: client quotas in the metadata log (Kafka's
ClientQuotaControlManager).

State: entity -> {quota key: value}, built from ClientQuotaRecords (one
key of one entity each; ``remove`` deletes the key, and an entity with no
key left is gone). An entity is a set of (entity type, name) pairs --
``user``, ``client-id`` or ``ip``, name None for the type's default --
kept as a tuple sorted by type (``entity_key``).

AlterClientQuotas is validated as Kafka does before any record is written,
entity by entity (one entity failing does not fail the others):

- the entity: not empty, known types only, no type twice, no empty name
  (INVALID_REQUEST);
- the combination: ``ip`` alone (a valid address or resolvable host), or
  ``user`` and/or ``client-id``;
- each key: one of the entity kind's quota configs (kfast.config's
  CLIENT_QUOTA_CONFIGS or IP_QUOTA_CONFIGS), not given twice, a value
  above 0, whole for the LONG/INT ones and within their range.

Only changes become records: a value equal to the current one writes
nothing, removing a key that is not set writes nothing.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping

from kfast.config import (
    CLIENT_QUOTA_CONFIGS,
    INT_MAX,
    IP_QUOTA_CONFIGS,
    LONG_MAX,
    ConfigKey,
    Type,
)
from kfast.controller.controller_result import ControllerResult, check_records_bound
from kfast.controller.metadata.image import QuotaEntity
from kfast.controller.metadata.records import ClientQuotaRecord, MetadataRecord
from kfast.protocol import errors
from kfast.protocol.constants import QUOTA_ENTITY_CLIENT_ID, QUOTA_ENTITY_IP, QUOTA_ENTITY_USER

ENTITY_TYPES = (QUOTA_ENTITY_USER, QUOTA_ENTITY_CLIENT_ID, QUOTA_ENTITY_IP)
_INTEGRAL_MAX = {
    Type.SHORT: (32767, "a SHORT"),
    Type.INT: (INT_MAX, "an INT"),
    Type.LONG: (LONG_MAX, "a LONG"),
}


def entity_key(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def entity_text(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity.toString: ``ClientQuotaEntity(entries={user=alice})``."""
    return (
        "ClientQuotaEntity(entries={"
        + ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity)
        + "})"
    )


def is_valid_ip_entity(name: str | None) -> bool:
    """An address, or a host name that resolves (Kafka's isValidIpEntity);
    None is the default IP entity."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


class ClientQuotaControlManager:
    def __init__(self) -> None:
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}

    # -- operations ----------------------------------------------------------------
    def alter_client_quotas(
        self, alterations: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]]
    ) -> ControllerResult[list[errors.KafkaError | None]]:
        """``alterations``: (entity pairs, [(key, value or None to remove)])
        per request entry. Response: one KafkaError or None per entry."""
        results: list[errors.KafkaError | None] = []
        records: list[MetadataRecord] = []
        seen: set[QuotaEntity] = set()
        for pairs, ops in alterations:
            try:
                entity = self._validated_entity(pairs)
                if entity in seen:
                    raise errors.InvalidRequestException(
                        f"Ignoring duplicate entity {entity_text(entity)}"
                    )
                seen.add(entity)
                records += self._entity_records(entity, ops)
                results.append(None)
            except errors.KafkaError as exc:
                results.append(exc)
        check_records_bound(len(records))
        return ControllerResult(results, records)

    @staticmethod
    def _validated_entity(pairs: list[tuple[str, str | None]]) -> QuotaEntity:
        if not pairs:
            raise errors.InvalidRequestException("Invalid empty client quota entity")
        types: dict[str, str | None] = {}
        for entity_type, name in pairs:
            if entity_type in types:
                raise errors.InvalidRequestException(
                    f"Invalid client quota entity, duplicate entity entry {entity_type}"
                )
            if entity_type not in ENTITY_TYPES:
                raise errors.InvalidRequestException(
                    f"Unhandled client quota entity type: {entity_type}"
                )
            if name is not None and name == "":
                raise errors.InvalidRequestException(f"Empty {entity_type} not supported")
            types[entity_type] = name
        return entity_key(types.items())

    def _entity_records(
        self, entity: QuotaEntity, ops: list[tuple[str, float | None]]
    ) -> list[MetadataRecord]:
        types = dict(entity)
        if QUOTA_ENTITY_IP in types:
            if len(types) > 1:
                raise errors.InvalidRequestException(
                    "Invalid quota entity combination, IP entity shouldnot be combined with "
                    "User or ClientId"
                )
            if not is_valid_ip_entity(types[QUOTA_ENTITY_IP]):
                raise errors.InvalidRequestException(
                    f"{types[QUOTA_ENTITY_IP]} is not a valid IP or resolvable host."
                )
            valid_keys = IP_QUOTA_CONFIGS
        else:
            valid_keys = CLIENT_QUOTA_CONFIGS
        new: dict[str, float | None] = {}
        for key, value in ops:
            if key in new:
                raise errors.InvalidRequestException(
                    f"Duplicate quota key {key} not updating quota for this entity "
                    f"{entity_text(entity)}"
                )
            new[key] = value
        current = self.quotas.get(entity, {})
        records: list[MetadataRecord] = []
        for key, value in new.items():
            if value is None:
                if key in current:
                    records.append(self._record(entity, key, 0.0, remove=True))
                continue
            _validate_value(valid_keys, key, value)
            if current.get(key) != value:
                records.append(self._record(entity, key, value))
        return records

    @staticmethod
    def _record(
        entity: QuotaEntity, key: str, value: float, remove: bool = False
    ) -> ClientQuotaRecord:
        return ClientQuotaRecord(
            entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            key=key,
            value=value,
            remove=remove,
        )

    # -- replay --------------------------------------------------------------------
    def replay(self, record: ClientQuotaRecord) -> QuotaEntity:
        entity = entity_key((e.entity_type, e.entity_name) for e in record.entity)
        if record.remove:
            values = self.quotas.get(entity)
            if values is not None:
                values.pop(record.key, None)
                if not values:
                    del self.quotas[entity]
        else:
            self.quotas.setdefault(entity, {})[record.key] = record.value
        return entity


def _validate_value(valid_keys: Mapping[str, ConfigKey], key: str, value: float) -> None:
    definition = valid_keys.get(key)
    if definition is None:
        raise errors.InvalidRequestException(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise errors.InvalidRequestException(f"Quota {key} must be greater than 0")
    if definition.type in _INTEGRAL_MAX:
        bound, name = _INTEGRAL_MAX[definition.type]
        if value > bound:
            raise errors.InvalidRequestException(
                f"Proposed value for {key} is too large for {name}."
            )
        if abs(value % 1.0) > 1e-6:
            raise errors.InvalidRequestException(f"{key} cannot be a fractional value.")
