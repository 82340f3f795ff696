"""KRaft metadata records: their schemas and Kafka's ApiMessageAndVersion framing.

Every value in the ``__cluster_metadata`` log is one metadata record framed
as Kafka's MetadataRecordSerde (AbstractApiMessageSerde) writes it::

    value := frameVersion  uvarint   (always 1)
             recordType    uvarint   (the record's "apiKey" in Kafka's JSON)
             recordVersion uvarint
             body                    (the record in Kafka's message encoding;
                                      every metadata record is flexible from v0)

Record keys are null. The schemas below are Kafka's
``metadata/src/main/resources/common/metadata/*.json`` written in kfast's
grammar (kfast.protocol.schema), so the same compiled codec that speaks the
wire protocol writes the metadata log.

    >>> raw = encode_record(TopicRecord(name="orders", topic_id=uuid.uuid4()))
    >>> decode_record(raw)          # -> (TopicRecord(...), version)
"""

from __future__ import annotations

from typing import NamedTuple, Union

from kfast._ext import protocol_codec as _codec
from kfast.protocol import errors
from kfast.protocol.api_keys import ApiKey
from kfast.protocol.schema import MessageSchema

FRAME_VERSION = 1


class _RecordSchema(NamedTuple):
    record_type: int
    name: str
    version: int  # the version kfast writes
    max_version: int
    grammar: str


# Resource types of ConfigRecord are Kafka's ConfigResource.Type:
# kfast.protocol.constants' CONFIG_RESOURCE_*.

_SCHEMAS = (
    _RecordSchema(
        0,
        "RegisterBrokerRecord",
        3,
        3,
        """
    broker_id                          int32                          0+
    is_migrating_zk_broker             bool                           2+
    incarnation_id                     uuid                           0+
    broker_epoch                       int64                          0+
    end_points                         []BrokerEndpoint               0+
      name                             string                         0+
      host                             string                         0+
      port                             uint16                         0+
      security_protocol                int16                          0+
    features                           []BrokerFeature                0+
      name                             string                         0+
      min_supported_version            int16                          0+
      max_supported_version            int16                          0+
    rack                               string                         0+     nullable=0+
    fenced                             bool                           0+     default=true
    in_controlled_shutdown             bool                           1+
    log_dirs                           []uuid                         3+     tag=0 tagged=3+
""",
    ),
    _RecordSchema(
        1,
        "UnregisterBrokerRecord",
        0,
        0,
        """
    broker_id                          int32                          0+
    broker_epoch                       int64                          0+
""",
    ),
    _RecordSchema(
        2,
        "TopicRecord",
        0,
        0,
        """
    name                               string                         0+
    topic_id                           uuid                           0+
""",
    ),
    _RecordSchema(
        3,
        "PartitionRecord",
        1,
        2,
        """
    partition_id                       int32                          0+     default=-1
    topic_id                           uuid                           0+
    replicas                           []int32                        0+
    isr                                []int32                        0+
    removing_replicas                  []int32                        0+
    adding_replicas                    []int32                        0+
    leader                             int32                          0+     default=-1
    leader_recovery_state              int8                           0+     tag=0 tagged=0+
    leader_epoch                       int32                          0+     default=-1
    partition_epoch                    int32                          0+     default=-1
    directories                        []uuid                         1+
    eligible_leader_replicas           []int32                        2+     default=null nullable=2+ tag=1 tagged=2+
    last_known_elr                     []int32                        2+     default=null nullable=2+ tag=2 tagged=2+
""",
    ),
    _RecordSchema(
        4,
        "ConfigRecord",
        0,
        0,
        """
    resource_type                      int8                           0+
    resource_name                      string                         0+
    name                               string                         0+
    value                              string                         0+     nullable=0+
""",
    ),
    _RecordSchema(
        5,
        "PartitionChangeRecord",
        1,
        1,
        """
    partition_id                       int32                          0+     default=-1
    topic_id                           uuid                           0+
    isr                                []int32                        0+     default=null nullable=0+ tag=0 tagged=0+
    leader                             int32                          0+     default=-2 tag=1 tagged=0+
    replicas                           []int32                        0+     default=null nullable=0+ tag=2 tagged=0+
    removing_replicas                  []int32                        0+     default=null nullable=0+ tag=3 tagged=0+
    adding_replicas                    []int32                        0+     default=null nullable=0+ tag=4 tagged=0+
    leader_recovery_state              int8                           0+     default=-1 tag=5 tagged=0+
    directories                        []uuid                         1+     default=null nullable=1+ tag=8 tagged=1+
""",
    ),
    _RecordSchema(
        7,
        "FenceBrokerRecord",
        0,
        0,
        """
    id                                 int32                          0+
    epoch                              int64                          0+
""",
    ),
    _RecordSchema(
        8,
        "UnfenceBrokerRecord",
        0,
        0,
        """
    id                                 int32                          0+
    epoch                              int64                          0+
""",
    ),
    _RecordSchema(
        9,
        "RemoveTopicRecord",
        0,
        0,
        """
    topic_id                           uuid                           0+
""",
    ),
    # A delegation token (KIP-48 on KRaft, KIP-900): principals as
    # "<type>:<name>"; the HMAC is not stored, every node recomputes it from
    # delegation.token.secret.key and the token id.
    _RecordSchema(
        10,
        "DelegationTokenRecord",
        0,
        0,
        """
    owner                              string                         0+
    requester                          string                         0+
    renewers                           []string                       0+
    issue_timestamp                    int64                          0+
    max_timestamp                      int64                          0+
    expiration_timestamp               int64                          0+
    token_id                           string                         0+
""",
    ),
    _RecordSchema(
        11,
        "UserScramCredentialRecord",
        0,
        0,
        """
    name                               string                         0+
    mechanism                          int8                           0+
    salt                               bytes                          0+
    stored_key                         bytes                          0+
    server_key                         bytes                          0+
    iterations                         int32                          0+
""",
    ),
    _RecordSchema(
        12,
        "FeatureLevelRecord",
        0,
        0,
        """
    name                               string                         0+
    feature_level                      int16                          0+
""",
    ),
    # One quota key of one entity (entity_name null: the default entity).
    _RecordSchema(
        14,
        "ClientQuotaRecord",
        0,
        0,
        """
    entity                             []EntityData                   0+
      entity_type                      string                         0+
      entity_name                      string                         0+     nullable=0+
    key                                string                         0+
    value                              float64                        0+
    remove                             bool                           0+
""",
    ),
    _RecordSchema(
        15,
        "ProducerIdsRecord",
        0,
        0,
        """
    broker_id                          int32                          0+
    broker_epoch                       int64                          0+
    next_producer_id                   int64                          0+
""",
    ),
    _RecordSchema(
        17,
        "BrokerRegistrationChangeRecord",
        2,
        2,
        """
    broker_id                          int32                          0+
    broker_epoch                       int64                          0+
    fenced                             int8                           0+     tag=0 tagged=0+
    in_controlled_shutdown             int8                           1+     tag=1 tagged=1+
    log_dirs                           []uuid                         2+     tag=2 tagged=2+
""",
    ),
    _RecordSchema(
        18,
        "AccessControlEntryRecord",
        0,
        0,
        """
    id                                 uuid                           0+
    resource_type                      int8                           0+
    resource_name                      string                         0+
    pattern_type                       int8                           0+
    principal                          string                         0+
    host                               string                         0+
    operation                          int8                           0+
    permission_type                    int8                           0+
""",
    ),
    _RecordSchema(
        19,
        "RemoveAccessControlEntryRecord",
        0,
        0,
        """
    id                                 uuid                           0+
""",
    ),
    _RecordSchema(
        20,
        "NoOpRecord",
        0,
        0,
        """
""",
    ),
    _RecordSchema(
        22,
        "RemoveUserScramCredentialRecord",
        0,
        0,
        """
    name                               string                         0+
    mechanism                          int8                           0+
""",
    ),
    _RecordSchema(
        26,
        "RemoveDelegationTokenRecord",
        0,
        0,
        """
    token_id                           string                         0+
""",
    ),
)


class _MetadataRecordSchema(MessageSchema):
    """A metadata record as a one-direction MessageSchema: the API table row
    is synthesised from the record type (every version flexible)."""

    def __init__(self, spec: _RecordSchema):
        api = ApiKey(
            spec.record_type, spec.name[: -len("Record")], 0, spec.max_version, 0, False, ()
        )
        super().__init__(api, "Record", spec.grammar)
        self.cls.__module__ = __name__
        self.record_type = spec.record_type
        self.write_version = spec.version


_BY_TYPE: dict[int, _MetadataRecordSchema] = {}
_BY_CLASS: dict[type, _MetadataRecordSchema] = {}
for _spec in _SCHEMAS:
    _schema = _MetadataRecordSchema(_spec)
    _BY_TYPE[_spec.record_type] = _schema
    _BY_CLASS[_schema.cls] = _schema
    globals()[_spec.name] = _schema.cls
del _spec, _schema

# Re-exported names (assigned above through globals()).
RegisterBrokerRecord = _BY_TYPE[0].cls
UnregisterBrokerRecord = _BY_TYPE[1].cls
TopicRecord = _BY_TYPE[2].cls
PartitionRecord = _BY_TYPE[3].cls
ConfigRecord = _BY_TYPE[4].cls
PartitionChangeRecord = _BY_TYPE[5].cls
FenceBrokerRecord = _BY_TYPE[7].cls
UnfenceBrokerRecord = _BY_TYPE[8].cls
RemoveTopicRecord = _BY_TYPE[9].cls
DelegationTokenRecord = _BY_TYPE[10].cls
UserScramCredentialRecord = _BY_TYPE[11].cls
FeatureLevelRecord = _BY_TYPE[12].cls
ClientQuotaRecord = _BY_TYPE[14].cls
ProducerIdsRecord = _BY_TYPE[15].cls
BrokerRegistrationChangeRecord = _BY_TYPE[17].cls
AccessControlEntryRecord = _BY_TYPE[18].cls
RemoveAccessControlEntryRecord = _BY_TYPE[19].cls
NoOpRecord = _BY_TYPE[20].cls
RemoveUserScramCredentialRecord = _BY_TYPE[22].cls
RemoveDelegationTokenRecord = _BY_TYPE[26].cls

# Any metadata record: the union of the classes (records.pyi spells it out).
MetadataRecord = Union[tuple(_BY_CLASS)]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise errors.CorruptRecordException("truncated or overlong varint in a metadata record")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def record_type(record) -> int:
    return _BY_CLASS[type(record)].record_type


def encode_record(record, version: int | None = None) -> bytes:
    """The framed value of one metadata record (kfast's write version unless
    ``version`` is given)."""
    schema = _BY_CLASS[type(record)]
    if version is None:
        version = schema.write_version
    header = _uvarint(FRAME_VERSION) + _uvarint(schema.record_type) + _uvarint(version)
    return header + _codec.encode(schema.program(version), record)


def decode_record(value) -> tuple[object, int]:
    """(record, version) from a framed value; CorruptRecordException if the
    frame is not Kafka's or the record type is unknown to kfast."""
    view = memoryview(value).cast("B") if not isinstance(value, (bytes, bytearray)) else value
    frame, pos = _read_uvarint(view, 0)
    if frame != FRAME_VERSION:
        raise errors.CorruptRecordException(f"unknown metadata frame version {frame}")
    kind, pos = _read_uvarint(view, pos)
    version, pos = _read_uvarint(view, pos)
    schema = _BY_TYPE.get(kind)
    if schema is None:
        raise errors.CorruptRecordException(f"unknown metadata record type {kind}")
    try:
        record, end = _codec.decode(schema.program(version), bytes(view), pos)
    except errors.UnsupportedVersionException as exc:
        raise errors.CorruptRecordException(str(exc)) from None
    if end != len(view):
        raise errors.CorruptRecordException(
            f"{schema.name} v{version}: {len(view) - end} bytes after the record"
        )
    return record, version
