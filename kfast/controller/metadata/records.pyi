"""Type stub of records.py, whose record classes are built from their
grammars at import time. Rendered from those grammars by
tests/unit/controller/test_records_stub.py (run it as a module to rewrite
this file); edit the grammars, not this file."""

from typing import NamedTuple, TypeAlias
from uuid import UUID

from kfast.protocol.schema import Message, MessageSchema

FRAME_VERSION: int

class _RecordSchema(NamedTuple):
    record_type: int
    name: str
    version: int
    max_version: int
    grammar: str

class _MetadataRecordSchema(MessageSchema):
    record_type: int
    write_version: int
    def __init__(self, spec: _RecordSchema) -> None: ...

_SCHEMAS: tuple[_RecordSchema, ...]
_BY_TYPE: dict[int, _MetadataRecordSchema]
_BY_CLASS: dict[type[Message], _MetadataRecordSchema]

class RegisterBrokerRecord(Message):
    class BrokerEndpoint(Message):
        name: str
        host: str
        port: int
        security_protocol: int
        def __init__(
            self,
            *,
            name: str = ...,
            host: str = ...,
            port: int = ...,
            security_protocol: int = ...,
        ) -> None: ...

    class BrokerFeature(Message):
        name: str
        min_supported_version: int
        max_supported_version: int
        def __init__(
            self,
            *,
            name: str = ...,
            min_supported_version: int = ...,
            max_supported_version: int = ...,
        ) -> None: ...

    broker_id: int
    is_migrating_zk_broker: bool
    incarnation_id: UUID
    broker_epoch: int
    end_points: list[RegisterBrokerRecord.BrokerEndpoint]
    features: list[RegisterBrokerRecord.BrokerFeature]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: list[UUID]
    def __init__(
        self,
        *,
        broker_id: int = ...,
        is_migrating_zk_broker: bool = ...,
        incarnation_id: UUID = ...,
        broker_epoch: int = ...,
        end_points: list[RegisterBrokerRecord.BrokerEndpoint] = ...,
        features: list[RegisterBrokerRecord.BrokerFeature] = ...,
        rack: str | None = ...,
        fenced: bool = ...,
        in_controlled_shutdown: bool = ...,
        log_dirs: list[UUID] = ...,
    ) -> None: ...

class UnregisterBrokerRecord(Message):
    broker_id: int
    broker_epoch: int
    def __init__(
        self,
        *,
        broker_id: int = ...,
        broker_epoch: int = ...,
    ) -> None: ...

class TopicRecord(Message):
    name: str
    topic_id: UUID
    def __init__(
        self,
        *,
        name: str = ...,
        topic_id: UUID = ...,
    ) -> None: ...

class PartitionRecord(Message):
    partition_id: int
    topic_id: UUID
    replicas: list[int]
    isr: list[int]
    removing_replicas: list[int]
    adding_replicas: list[int]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: list[UUID]
    eligible_leader_replicas: list[int] | None
    last_known_elr: list[int] | None
    def __init__(
        self,
        *,
        partition_id: int = ...,
        topic_id: UUID = ...,
        replicas: list[int] = ...,
        isr: list[int] = ...,
        removing_replicas: list[int] = ...,
        adding_replicas: list[int] = ...,
        leader: int = ...,
        leader_recovery_state: int = ...,
        leader_epoch: int = ...,
        partition_epoch: int = ...,
        directories: list[UUID] = ...,
        eligible_leader_replicas: list[int] | None = ...,
        last_known_elr: list[int] | None = ...,
    ) -> None: ...

class ConfigRecord(Message):
    resource_type: int
    resource_name: str
    name: str
    value: str | None
    def __init__(
        self,
        *,
        resource_type: int = ...,
        resource_name: str = ...,
        name: str = ...,
        value: str | None = ...,
    ) -> None: ...

class PartitionChangeRecord(Message):
    partition_id: int
    topic_id: UUID
    isr: list[int] | None
    leader: int
    replicas: list[int] | None
    removing_replicas: list[int] | None
    adding_replicas: list[int] | None
    leader_recovery_state: int
    directories: list[UUID] | None
    def __init__(
        self,
        *,
        partition_id: int = ...,
        topic_id: UUID = ...,
        isr: list[int] | None = ...,
        leader: int = ...,
        replicas: list[int] | None = ...,
        removing_replicas: list[int] | None = ...,
        adding_replicas: list[int] | None = ...,
        leader_recovery_state: int = ...,
        directories: list[UUID] | None = ...,
    ) -> None: ...

class FenceBrokerRecord(Message):
    id: int
    epoch: int
    def __init__(
        self,
        *,
        id: int = ...,
        epoch: int = ...,
    ) -> None: ...

class UnfenceBrokerRecord(Message):
    id: int
    epoch: int
    def __init__(
        self,
        *,
        id: int = ...,
        epoch: int = ...,
    ) -> None: ...

class RemoveTopicRecord(Message):
    topic_id: UUID
    def __init__(
        self,
        *,
        topic_id: UUID = ...,
    ) -> None: ...

class DelegationTokenRecord(Message):
    owner: str
    requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int
    token_id: str
    def __init__(
        self,
        *,
        owner: str = ...,
        requester: str = ...,
        renewers: list[str] = ...,
        issue_timestamp: int = ...,
        max_timestamp: int = ...,
        expiration_timestamp: int = ...,
        token_id: str = ...,
    ) -> None: ...

class UserScramCredentialRecord(Message):
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    def __init__(
        self,
        *,
        name: str = ...,
        mechanism: int = ...,
        salt: bytes = ...,
        stored_key: bytes = ...,
        server_key: bytes = ...,
        iterations: int = ...,
    ) -> None: ...

class FeatureLevelRecord(Message):
    name: str
    feature_level: int
    def __init__(
        self,
        *,
        name: str = ...,
        feature_level: int = ...,
    ) -> None: ...

class ClientQuotaRecord(Message):
    class EntityData(Message):
        entity_type: str
        entity_name: str | None
        def __init__(
            self,
            *,
            entity_type: str = ...,
            entity_name: str | None = ...,
        ) -> None: ...

    entity: list[ClientQuotaRecord.EntityData]
    key: str
    value: float
    remove: bool
    def __init__(
        self,
        *,
        entity: list[ClientQuotaRecord.EntityData] = ...,
        key: str = ...,
        value: float = ...,
        remove: bool = ...,
    ) -> None: ...

class ProducerIdsRecord(Message):
    broker_id: int
    broker_epoch: int
    next_producer_id: int
    def __init__(
        self,
        *,
        broker_id: int = ...,
        broker_epoch: int = ...,
        next_producer_id: int = ...,
    ) -> None: ...

class BrokerRegistrationChangeRecord(Message):
    broker_id: int
    broker_epoch: int
    fenced: int
    in_controlled_shutdown: int
    log_dirs: list[UUID]
    def __init__(
        self,
        *,
        broker_id: int = ...,
        broker_epoch: int = ...,
        fenced: int = ...,
        in_controlled_shutdown: int = ...,
        log_dirs: list[UUID] = ...,
    ) -> None: ...

class AccessControlEntryRecord(Message):
    id: UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(
        self,
        *,
        id: UUID = ...,
        resource_type: int = ...,
        resource_name: str = ...,
        pattern_type: int = ...,
        principal: str = ...,
        host: str = ...,
        operation: int = ...,
        permission_type: int = ...,
    ) -> None: ...

class RemoveAccessControlEntryRecord(Message):
    id: UUID
    def __init__(
        self,
        *,
        id: UUID = ...,
    ) -> None: ...

class NoOpRecord(Message):
    def __init__(
        self,
    ) -> None: ...

class RemoveUserScramCredentialRecord(Message):
    name: str
    mechanism: int
    def __init__(
        self,
        *,
        name: str = ...,
        mechanism: int = ...,
    ) -> None: ...

class RemoveDelegationTokenRecord(Message):
    token_id: str
    def __init__(
        self,
        *,
        token_id: str = ...,
    ) -> None: ...

MetadataRecord: TypeAlias = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | DelegationTokenRecord
    | UserScramCredentialRecord
    | FeatureLevelRecord
    | ClientQuotaRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | NoOpRecord
    | RemoveUserScramCredentialRecord
    | RemoveDelegationTokenRecord
)

def _uvarint(value: int) -> bytes: ...
def _read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]: ...
def record_type(record: MetadataRecord) -> int: ...
def encode_record(record: MetadataRecord, version: int | None = None) -> bytes: ...
def decode_record(value: bytes | bytearray | memoryview) -> tuple[MetadataRecord, int]: ...
