"""Metadata records: Kafka's ApiMessageAndVersion framing and record bodies."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.controller.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
    record_type,
)
from kfast.protocol import errors

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_topic_record_bytes():
    # frame version 1, type 2, version 0; compact string "foo" (length + 1);
    # the 16 uuid bytes; no tagged fields.
    raw = encode_record(TopicRecord(name="foo", topic_id=TOPIC_ID))
    assert raw == bytes.fromhex("01020004666f6f00112233445566778899aabbccddeeff00")


def test_partition_record_bytes():
    raw = encode_record(
        PartitionRecord(
            partition_id=2,
            topic_id=TOPIC_ID,
            replicas=[1, 3],
            isr=[3],
            leader=3,
            leader_epoch=5,
            partition_epoch=7,
            directories=[uuid.UUID(int=1), TOPIC_ID],
        )
    )
    # Version 1 (KIP-858 directories), as Kafka writes it at metadata
    # versions with directory assignment.
    assert raw == bytes.fromhex(
        "010301"
        "00000002"  # partition id
        "00112233445566778899aabbccddeeff"  # topic id
        "03"
        "00000001"
        "00000003"  # replicas: compact array of 2
        "02"
        "00000003"  # isr
        "01"
        "01"  # removing, adding: empty
        "00000003"
        "00000005"
        "00000007"  # leader, leader epoch, partition epoch
        "03"
        "00000000000000000000000000000001"
        "00112233445566778899aabbccddeeff"  # directories: UNASSIGNED, a dir id
        "00"
    )  # no tagged fields (recovery state 0)


def test_config_record_bytes_with_null_value():
    raw = encode_record(
        ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value=None)
    )
    assert raw == bytes.fromhex("0104000204666f6f0d" + b"retention.ms".hex() + "0000")


def test_partition_change_record_tagged_fields():
    raw = encode_record(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2))
    # Only the leader (tag 1, 4 bytes) is written; ISR and replicas stay null.
    assert raw.endswith(bytes.fromhex("01010400000002"))
    record, version = decode_record(raw)
    assert record.leader == 2 and record.isr is None and record.directories is None
    assert version == 1


def test_partition_change_record_directories_tag_8():
    raw = encode_record(
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, directories=[TOPIC_ID])
    )
    # Tag 8 (KIP-858), 1 + 16 bytes: a compact array of one uuid.
    assert raw.endswith(bytes.fromhex("01081102" + TOPIC_ID.hex))
    assert decode_record(raw)[0].directories == [TOPIC_ID]


@pytest.mark.parametrize(
    "record",
    [
        TopicRecord(name="orders", topic_id=TOPIC_ID),
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=[1, 2, 3],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
        ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="1000"),
        PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, isr=[1], replicas=[1, 2]),
        RemoveTopicRecord(topic_id=TOPIC_ID),
        FeatureLevelRecord(name="metadata.version", feature_level=21),
        ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=2000),
        UnfenceBrokerRecord(id=1, epoch=4),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=TOPIC_ID,
            broker_epoch=4,
            rack="r1",
            end_points=[
                RegisterBrokerRecord.BrokerEndpoint(
                    name="PLAINTEXT", host="h", port=9092, security_protocol=0
                )
            ],
        ),
    ],
)
def test_round_trip(record):
    decoded, version = decode_record(encode_record(record))
    assert decoded == record
    assert encode_record(decoded) == encode_record(record)
    assert record_type(record) == encode_record(record)[1]


@given(
    name=st.text(min_size=1, max_size=40),
    value=st.none() | st.text(max_size=40),
    resource_type=st.sampled_from([2, 4]),
)
def test_config_record_round_trip_property(name, value, resource_type):
    record = ConfigRecord(resource_type=resource_type, resource_name=name, name=name, value=value)
    assert decode_record(encode_record(record))[0] == record


@given(
    replicas=st.lists(st.integers(0, 2**31 - 1), max_size=8),
    epochs=st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1)),
)
def test_partition_record_round_trip_property(replicas, epochs):
    record = PartitionRecord(
        partition_id=1,
        topic_id=TOPIC_ID,
        replicas=replicas,
        isr=replicas,
        leader=replicas[0] if replicas else -1,
        leader_epoch=epochs[0],
        partition_epoch=epochs[1],
    )
    assert decode_record(encode_record(record))[0] == record


def test_partition_record_v1_and_v2_decode():
    fields = dict(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=[1],
        isr=[1],
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
        directories=[TOPIC_ID],
    )
    decoded, version = decode_record(encode_record(PartitionRecord(**fields), 1))
    assert version == 1 and decoded.directories == [TOPIC_ID]
    with_elr = PartitionRecord(**fields, eligible_leader_replicas=[1])
    decoded, version = decode_record(encode_record(with_elr, 2))
    assert version == 2 and decoded.eligible_leader_replicas == [1]
    # v1 has no ELR field: writing one there is refused, not dropped.
    with pytest.raises(errors.UnsupportedVersionException):
        encode_record(with_elr, 1)


@pytest.mark.parametrize(
    "raw, message",
    [
        (bytes.fromhex("000200"), "frame version"),
        (bytes.fromhex("01630000"), "record type"),
        (encode_record(TopicRecord(name="x", topic_id=TOPIC_ID)) + b"\x00", "after the record"),
        (bytes.fromhex("0102"), "varint"),
    ],
)
def test_corrupt_values_are_rejected(raw, message):
    with pytest.raises(errors.CorruptRecordException, match=message):
        decode_record(raw)


def test_truncated_body_is_rejected():
    raw = encode_record(TopicRecord(name="orders", topic_id=TOPIC_ID))
    with pytest.raises(errors.KafkaError):
        decode_record(raw[:-5])
