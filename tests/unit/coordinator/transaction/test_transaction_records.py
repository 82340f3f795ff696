"""__transaction_state record codecs and placement (records.py), checked
against bytes laid out by hand from Kafka's TransactionLogKey.json /
TransactionLogValue.json."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.coordinator.group import records as group_records
from kfast.coordinator.transaction.records import (
    PartitionsSchema,
    TransactionLogValue,
    UnknownRecordTypeError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
    value_version,
)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _value(**fields):
    base = dict(
        producer_id=4001,
        producer_epoch=7,
        transaction_timeout_ms=60000,
        transaction_status=1,
        transaction_last_update_timestamp_ms=1700000000123,
        transaction_start_timestamp_ms=1700000000000,
        transaction_partitions=[PartitionsSchema(topic="orders", partition_ids=[0, 2])],
    )
    base.update(fields)
    return TransactionLogValue(**base)


def test_placement_is_the_groups_rule():
    # One definition shared with __consumer_offsets (Kafka's partitionFor in
    # TransactionStateManager and GroupMetadataManager is the same rule).
    assert partition_for is group_records.partition_for
    assert partition_for("my-group", 50) == 12
    assert partition_for("é😀", 50) == 12


def test_key_bytes_by_hand():
    assert encode_key("txn-1") == b"\x00\x00" + _string("txn-1")
    assert decode_key(b"\x00\x00" + _string("txn-1")) == "txn-1"
    assert decode_key(encode_key("é😀")) == "é😀"


def test_unknown_key_version_is_skippable():
    with pytest.raises(UnknownRecordTypeError):
        decode_key(b"\x00\x01" + _string("x"))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x00\x00",
        b"\x00\x00\x00\x05ab",
        b"\x00\x00\xff\xff",
        b"\x00\x00\x00\x01ab",
    ],
)
def test_malformed_key(data):
    with pytest.raises(ValueError):
        decode_key(data)


def test_value_v0_bytes_by_hand():
    expected = (
        struct.pack(">hqhib", 0, 4001, 7, 60000, 1)
        + struct.pack(">i", 1)
        + _string("orders")
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 1700000000123, 1700000000000)
    )
    assert encode_value(_value(), 0) == expected
    decoded = decode_value(expected)
    assert decoded == _value()
    # Tagged fields do not exist at v0: their defaults come back.
    assert decoded.previous_producer_id == -1 and decoded.client_transaction_version == 0


def test_value_v0_leaves_tagged_fields_out():
    value = _value(previous_producer_id=9, next_producer_id=10, client_transaction_version=2)
    assert encode_value(value, 0) == encode_value(_value(), 0)


def test_value_v0_empty_has_null_partitions():
    data = encode_value(_value(transaction_status=0, transaction_partitions=None), 0)
    assert data[2 + 8 + 2 + 4 + 1 :][:4] == b"\xff\xff\xff\xff"
    assert decode_value(data).transaction_partitions is None


def test_value_v1_bytes_by_hand():
    value = _value(previous_producer_id=4000, client_transaction_version=2)
    expected = (
        struct.pack(">hqhib", 1, 4001, 7, 60000, 1)
        + b"\x02"  # one partition entry (compact: n + 1)
        + b"\x07orders"  # compact string: length + 1
        + b"\x03"
        + struct.pack(">ii", 0, 2)
        + b"\x00"  # ids, entry's tags
        + struct.pack(">qq", 1700000000123, 1700000000000)
        + b"\x02"  # two tagged fields, in tag order
        + b"\x00\x08"
        + struct.pack(">q", 4000)  # tag 0 previousProducerId
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )  # tag 2 clientTransactionVersion
    assert encode_value(value, 1) == expected
    assert decode_value(expected) == value


def test_value_v1_defaults_write_no_tags_and_null_partitions():
    data = encode_value(_value(transaction_status=0, transaction_partitions=None), 1)
    assert data == (
        struct.pack(">hqhib", 1, 4001, 7, 60000, 0)
        + b"\x00"
        + struct.pack(">qq", 1700000000123, 1700000000000)
        + b"\x00"
    )


def test_value_v1_next_producer_id_and_epoch_tags():
    value = _value(next_producer_id=5000, next_producer_epoch=3)
    data = encode_value(value, 1)
    assert data.endswith(
        b"\x02" + b"\x01\x08" + struct.pack(">q", 5000) + b"\x03\x02" + struct.pack(">h", 3)
    )
    assert decode_value(data) == value


def test_value_v1_unknown_tag_is_skipped():
    # A newer Kafka's tag (say 9) is ignored, as Kafka's generated code does.
    data = encode_value(_value(), 1)
    assert data.endswith(b"\x00")
    with_unknown = data[:-1] + b"\x01" + b"\x09\x02\x00\x05"
    assert decode_value(with_unknown) == _value()


def test_tombstone():
    assert encode_value(None, 1) is None
    assert decode_value(None) is None


def test_unknown_value_version_is_skippable():
    with pytest.raises(UnknownRecordTypeError):
        decode_value(b"\x00\x02" + encode_value(_value(), 1)[2:])


@pytest.mark.parametrize("version", [0, 1])
def test_truncated_or_padded_value(version):
    data = encode_value(_value(), version)
    for cut in (1, 5, len(data) - 1):
        with pytest.raises(ValueError):
            decode_value(data[:cut])
    with pytest.raises(ValueError):
        decode_value(data + b"\x00")


def test_value_version_by_feature_level():
    assert [value_version(level) for level in (0, 1, 2)] == [0, 1, 1]


_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_int16 = st.integers(-(1 << 15), (1 << 15) - 1)
_partitions = st.lists(
    st.builds(
        PartitionsSchema,
        topic=st.text(max_size=20),
        partition_ids=st.lists(st.integers(0, (1 << 31) - 1), max_size=5),
    ),
    max_size=4,
)


@st.composite
def _values(draw, version):
    fields = dict(
        producer_id=draw(_int64),
        producer_epoch=draw(_int16),
        transaction_timeout_ms=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        transaction_status=draw(st.integers(0, 7)),
        transaction_partitions=draw(st.none() | _partitions),
        transaction_last_update_timestamp_ms=draw(_int64),
        transaction_start_timestamp_ms=draw(_int64),
    )
    if version == 1:
        fields.update(
            previous_producer_id=draw(_int64),
            next_producer_id=draw(_int64),
            next_producer_epoch=draw(_int16),
            client_transaction_version=draw(_int16),
        )
    return TransactionLogValue(**fields)


@given(st.data())
def test_value_round_trip(data):
    version = data.draw(st.sampled_from([0, 1]))
    value = data.draw(_values(version))
    assert decode_value(encode_value(value, version)) == value


@given(st.text(max_size=200))
def test_key_round_trip(transactional_id):
    assert decode_key(encode_key(transactional_id)) == transactional_id


@given(st.binary(max_size=64))
def test_decode_never_crashes_on_garbage(data):
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except ValueError:
            pass


def test_declared_value_classes_match_the_schema():
    # records.py declares TransactionLogValue and PartitionsSchema for the
    # type checker under ``if TYPE_CHECKING:``; the codec builds the real
    # classes from the grammar. They must name the same fields.
    import ast
    import pathlib

    from kfast.coordinator.transaction import records

    tree = ast.parse(pathlib.Path(records.__file__).read_text())
    declared = {
        node.name: [
            n.target.id
            for n in node.body
            if isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name)
            and not n.target.id.startswith("_")
        ]
        for block in tree.body
        if isinstance(block, ast.If)
        and isinstance(block.test, ast.Name)
        and block.test.id == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ClassDef)
    }
    assert sorted(declared) == ["PartitionsSchema", "TransactionLogValue"]
    for name, fields in declared.items():
        assert tuple(fields) == tuple(getattr(records, name)._field_names), name
