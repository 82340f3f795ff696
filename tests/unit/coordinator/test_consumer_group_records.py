"""KIP-848 record codecs (ConsumerGroup*Key/Value): bytes written by hand from
Kafka's JSON schemas, and round trips."""

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.coordinator.group import records as R

from ..declared_classes import declared_attributes

TID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TID_BYTES = bytes.fromhex("00112233445566778899aabbccddeeff")


@pytest.mark.parametrize(
    "key, data",
    [
        (R.ConsumerGroupMetadataKey("g"), b"\x00\x03\x00\x01g"),
        (R.ConsumerGroupPartitionMetadataKey("g"), b"\x00\x04\x00\x01g"),
        (R.ConsumerGroupMemberMetadataKey("g", "m"), b"\x00\x05\x00\x01g\x00\x01m"),
        (R.ConsumerGroupTargetAssignmentMetadataKey("g"), b"\x00\x06\x00\x01g"),
        (R.ConsumerGroupTargetAssignmentMemberKey("g", "m"), b"\x00\x07\x00\x01g\x00\x01m"),
        (R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), b"\x00\x08\x00\x01g\x00\x01m"),
    ],
)
def test_key_bytes(key, data):
    assert R.encode_key(key) == data
    assert R.decode_key(data) == key


def test_keys_of_different_types_are_different_records():
    assert R.ConsumerGroupMemberMetadataKey("g", "m") != R.ConsumerGroupTargetAssignmentMemberKey(
        "g", "m"
    )
    assert (
        len(
            {
                R.ConsumerGroupMetadataKey("g"),
                R.ConsumerGroupPartitionMetadataKey("g"),
                R.ConsumerGroupTargetAssignmentMetadataKey("g"),
            }
        )
        == 3
    )


def tp(cls, partitions):
    return cls(topic_id=TID, partitions=partitions)


VECTORS = [
    # version 0, epoch 5, no tagged fields
    (R.ConsumerGroupMetadataKey("g"), R.ConsumerGroupMetadataValue(epoch=5), "00000000000500"),
    # 4.1's MetadataHash: tagged field 0, 8 bytes
    (
        R.ConsumerGroupMetadataKey("g"),
        R.ConsumerGroupMetadataValue(epoch=5, metadata_hash=7),
        "0000000000050100080000000000000007",
    ),
    # one topic: id, compact "t", 4 partitions, empty partitionMetadata,
    # the struct's tags, the value's tags
    (
        R.ConsumerGroupPartitionMetadataKey("g"),
        R.ConsumerGroupPartitionMetadataValue(
            topics=[
                R.ConsumerGroupPartitionMetadataValue.TopicMetadata(
                    topic_id=TID, topic_name="t", num_partitions=4
                )
            ]
        ),
        "000002" + TID_BYTES.hex() + "027400000004010000",
    ),
    # instanceId null, rackId "r", clientId "c", clientHost "/h",
    # subscribedTopicNames ["t"], regex null, rebalanceTimeoutMs 300,
    # serverAssignor "uniform", no classic metadata
    (
        R.ConsumerGroupMemberMetadataKey("g", "m"),
        R.ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id="r",
            client_id="c",
            client_host="/h",
            subscribed_topic_names=["t"],
            subscribed_topic_regex=None,
            rebalance_timeout_ms=300,
            server_assignor="uniform",
        ),
        "00000002720263032f68020274000000012c08" + b"uniform".hex() + "00",
    ),
    (
        R.ConsumerGroupTargetAssignmentMetadataKey("g"),
        R.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=3),
        "00000000000300",
    ),
    (
        R.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        R.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=[tp(R.ConsumerGroupTargetAssignmentMemberValue.TopicPartition, [0, 1])]
        ),
        "000002" + TID_BYTES.hex() + "0300000000000000010000",
    ),
    # epoch 3, previous 2, UNREVOKED_PARTITIONS (1), assigned [tid: [1]],
    # pending revocation []
    (
        R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        R.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=3,
            previous_member_epoch=2,
            state=1,
            assigned_partitions=[
                tp(R.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions, [1])
            ],
        ),
        "000000000003000000020102" + TID_BYTES.hex() + "0200000001000100",
    ),
]


@pytest.mark.parametrize(
    "key, value, hex_data", VECTORS, ids=[type(v).__name__ for _, v, _ in VECTORS]
)
def test_value_bytes(key, value, hex_data):
    data = bytes.fromhex(hex_data)
    assert R.encode_value(value) == data
    assert R.decode_value(key, data) == value


def test_tombstones_and_malformed_values():
    key = R.ConsumerGroupMetadataKey("g")
    assert R.encode_value(None) is None and R.decode_value(key, None) is None
    with pytest.raises(ValueError):
        R.decode_value(key, b"\x00\x01\x00\x00\x00\x05\x00")  # version 1 is unknown
    with pytest.raises(ValueError):
        R.decode_value(key, b"\x00\x00\x00\x00")  # truncated
    with pytest.raises(ValueError):
        R.decode_value(key, b"\x00\x00\x00\x00\x00\x05\x00\xff")  # trailing bytes
    with pytest.raises(ValueError):
        # an array claiming 2^28 elements in a few bytes
        R.decode_value(
            R.ConsumerGroupTargetAssignmentMemberKey("g", "m"), b"\x00\x00\xff\xff\xff\x7f"
        )
    with pytest.raises(ValueError):
        R.decode_key(b"\x00\x05\x00\x01g")  # member id missing


def test_classic_member_metadata_round_trips_as_a_tagged_field():
    cls = R.ConsumerGroupMemberMetadataValue
    value = cls(
        instance_id="i",
        rack_id=None,
        client_id="c",
        client_host="h",
        subscribed_topic_names=["a", "b"],
        subscribed_topic_regex="x.*",
        rebalance_timeout_ms=1,
        server_assignor=None,
        classic_member_metadata=cls.ClassicMemberMetadata(
            session_timeout_ms=45000,
            supported_protocols=[cls.ClassicProtocol(name="range", metadata=b"\x00\x01")],
        ),
    )
    data = R.encode_value(value)
    # without it the value ends with an empty tag section; with it, the
    # section holds one field, tag 0, right after serverAssignor (null)
    plain = R.encode_value(cls(**{**value.to_dict(), "classic_member_metadata": None}))
    assert plain.endswith(b"\x00\x00") and data.startswith(plain[:-1])
    assert data[len(plain) - 1 : len(plain) + 1] == b"\x01\x00"
    decoded = R.decode_value(R.ConsumerGroupMemberMetadataKey("g", "m"), data)
    assert decoded.classic_member_metadata.session_timeout_ms == 45000
    assert decoded.classic_member_metadata.supported_protocols[0].name == "range"
    assert bytes(decoded.classic_member_metadata.supported_protocols[0].metadata) == b"\x00\x01"


names = st.text(max_size=12)
ids = st.uuids()
partition_lists = st.lists(st.integers(0, 2**31 - 1), max_size=6)
int32 = st.integers(-(2**31), 2**31 - 1)


def topic_partitions(cls):
    return st.lists(st.builds(cls, topic_id=ids, partitions=partition_lists), max_size=4)


CG = R
values = st.one_of(
    st.builds(
        lambda g, e, h: (
            CG.ConsumerGroupMetadataKey(g),
            CG.ConsumerGroupMetadataValue(epoch=e, metadata_hash=h),
        ),
        names,
        int32,
        st.integers(-(2**63), 2**63 - 1),
    ),
    st.builds(
        lambda g, topics: (
            CG.ConsumerGroupPartitionMetadataKey(g),
            CG.ConsumerGroupPartitionMetadataValue(topics=topics),
        ),
        names,
        st.lists(
            st.builds(
                CG.ConsumerGroupPartitionMetadataValue.TopicMetadata,
                topic_id=ids,
                topic_name=names,
                num_partitions=int32,
                partition_metadata=st.lists(
                    st.builds(
                        CG.ConsumerGroupPartitionMetadataValue.PartitionMetadata,
                        partition=int32,
                        racks=st.lists(names, max_size=3),
                    ),
                    max_size=3,
                ),
            ),
            max_size=3,
        ),
    ),
    st.builds(
        lambda g, m, v: (CG.ConsumerGroupMemberMetadataKey(g, m), v),
        names,
        names,
        st.builds(
            CG.ConsumerGroupMemberMetadataValue,
            instance_id=st.none() | names,
            rack_id=st.none() | names,
            client_id=names,
            client_host=names,
            subscribed_topic_names=st.lists(names, max_size=4),
            subscribed_topic_regex=st.none() | names,
            rebalance_timeout_ms=int32,
            server_assignor=st.none() | names,
        ),
    ),
    st.builds(
        lambda g, e: (
            CG.ConsumerGroupTargetAssignmentMetadataKey(g),
            CG.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=e),
        ),
        names,
        int32,
    ),
    st.builds(
        lambda g, m, t: (
            CG.ConsumerGroupTargetAssignmentMemberKey(g, m),
            CG.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=t),
        ),
        names,
        names,
        topic_partitions(CG.ConsumerGroupTargetAssignmentMemberValue.TopicPartition),
    ),
    st.builds(
        lambda g, m, e, p, s, a, r: (
            CG.ConsumerGroupCurrentMemberAssignmentKey(g, m),
            CG.ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=e,
                previous_member_epoch=p,
                state=s,
                assigned_partitions=a,
                partitions_pending_revocation=r,
            ),
        ),
        names,
        names,
        int32,
        int32,
        st.sampled_from([0, 1, 2]),
        topic_partitions(CG.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions),
        topic_partitions(CG.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions),
    ),
)


@given(values)
def test_round_trip(kv):
    key, value = kv
    key_bytes = R.encode_key(key)
    assert R.decode_key(key_bytes) == key
    assert R.decode_value(key, R.encode_value(value)) == value


@given(values, st.data())
def test_truncated_values_never_decode_silently(kv, data):
    key, value = kv
    encoded = R.encode_value(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(ValueError):
        R.decode_value(key, encoded[:cut])


def _declared_value_classes() -> dict[str, list[str]]:
    """qualified name -> fields, of the classes records.py declares for the
    type checker under ``if TYPE_CHECKING:``."""
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(R.__file__).read_text())
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        and any(
            isinstance(c, ast.ClassDef) and c.name == "ConsumerGroupMetadataValue"
            for c in node.body
        )
    ]
    return declared_attributes(block.body)


def test_declared_value_classes_match_the_schemas():
    # The type checker reads the declarations; the codec builds the real
    # classes from the grammars. They must name the same fields.
    declared = _declared_value_classes()
    assert len([n for n in declared if "." not in n]) == 6
    for qualified, fields in declared.items():
        cls = R
        for part in qualified.split("."):
            cls = getattr(cls, part)
        assert tuple(fields) == tuple(cls._field_names), qualified
