"""AclControlManager: the cluster's ACLs as metadata records (Kafka's
AclControlManager).

State: ACL id -> Acl, built from AccessControlEntryRecords (one per ACL,
with a random id) and RemoveAccessControlEntryRecords (by id). CreateAcls
writes a record only for an ACL that does not exist yet (creating it again
succeeds and writes nothing); DeleteAcls removes every ACL each filter
matches, an ACL matched by two filters once, all in one batch.
"""

from __future__ import annotations

import uuid

from kfast.controller.controller_result import (
    MAX_RECORDS_PER_USER_OP,
    BoundedListTooLongException,
    ControllerResult,
)
from kfast.controller.metadata.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from kfast.protocol import errors
from kfast.security.acl import Acl, AclFilter, validate_new_acl


def acl_record(acl_id: uuid.UUID, acl: Acl) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


class AclControlManager:
    def __init__(self) -> None:
        self.acls: dict[uuid.UUID, Acl] = {}
        self._existing: set[Acl] = set()

    def create_acls(self, acls: list[Acl]) -> ControllerResult[list[errors.KafkaError | None]]:
        """KafkaError | None per ACL, and the records of the new ones."""
        results: list[errors.KafkaError | None] = []
        records: list[MetadataRecord] = []
        adding: set[Acl] = set()
        for acl in acls:
            try:
                validate_new_acl(acl)
            except errors.KafkaError as exc:
                results.append(exc)
                continue
            if acl not in self._existing and acl not in adding:
                adding.add(acl)
                records.append(acl_record(self._new_id(), acl))
                if len(records) > MAX_RECORDS_PER_USER_OP:
                    raise BoundedListTooLongException(
                        f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls at once."
                    )
            results.append(None)
        return ControllerResult(results, records)

    def _new_id(self) -> uuid.UUID:
        while True:
            acl_id = uuid.uuid4()
            if acl_id not in self.acls:
                return acl_id

    def delete_acls(
        self, filters: list[AclFilter]
    ) -> ControllerResult[list[tuple[errors.KafkaError | None, list[Acl]]]]:
        """Per filter: (KafkaError | None, [deleted Acl]); the records."""
        results: list[tuple[errors.KafkaError | None, list[Acl]]] = []
        removed: dict[uuid.UUID, MetadataRecord] = {}
        for acl_filter in filters:
            if acl_filter.is_unknown():
                results.append((errors.InvalidRequestException("Unknown filter."), []))
                continue
            matched: list[Acl] = []
            for acl_id, acl in self.acls.items():
                if acl_filter.matches(acl):
                    matched.append(acl)
                    removed[acl_id] = RemoveAccessControlEntryRecord(id=acl_id)
                    if len(removed) > MAX_RECORDS_PER_USER_OP:
                        raise BoundedListTooLongException(
                            f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a "
                            f"single delete operation."
                        )
            results.append((None, matched))
        return ControllerResult(results, list(removed.values()))

    def replay(
        self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord
    ) -> tuple[uuid.UUID, Acl | None]:
        """Apply one record; (id, the ACL now, or None if removed)."""
        if isinstance(record, AccessControlEntryRecord):
            acl = Acl(
                record.resource_type,
                record.resource_name,
                record.pattern_type,
                record.principal,
                record.host,
                record.operation,
                record.permission_type,
            )
            self.acls[record.id] = acl
            self._existing.add(acl)
            return record.id, acl
        removed = self.acls.pop(record.id, None)
        if removed is None:
            raise ValueError(f"cannot replay {record}: no ACL with that id")
        self._existing.discard(removed)
        return record.id, None
