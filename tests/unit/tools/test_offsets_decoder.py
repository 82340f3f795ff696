"""dump-log --offsets-decoder prints KIP-848 consumer group records as Kafka's
tool does (camelCase JSON, Kafka's Uuid form, tagged fields when set)."""

import base64
import io
import json
import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder

from kfast.cli import build_parser
from kfast.config import LogConfig
from kfast.coordinator.group import records as R
from kfast.storage.log import Log
from kfast.tools.dump_log import run
from kfast.tools.offsets_decoder import format_offsets_record

from ..coordinator.harness import Harness

T = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T_TEXT = base64.urlsafe_b64encode(T.bytes).rstrip(b"=").decode()


def dump_records(tmp_path, records) -> list[str]:
    log = Log(str(tmp_path / "__consumer_offsets-3"), LogConfig())
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(records):
        b.append(i, timestamp=1, key=key, value=value, headers=[])
    log.append_as_leader(bytes(b.build()), now=1)
    path = log.segments[0].log.path
    log.close()
    out, err = io.StringIO(), io.StringIO()
    assert run(build_parser().parse_args(["dump-log", "--offsets-decoder", path]), out, err) == 0
    return [line for line in out.getvalue().splitlines() if line.startswith("| offset:")]


def parsed(line: str):
    key = line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
    payload = line.split(" payload: ", 1)[1]
    return json.loads(key), (payload if payload == "<DELETE>" else json.loads(payload))


def test_a_heartbeats_records_as_dump_log_prints_them(tmp_path):
    h = Harness()
    response = h.coordinator.consumer_group_heartbeat(
        "cg",
        "",
        0,
        "inst",
        None,
        3000,
        ["orders"],
        "range",
        None,
        "cli",
        "/10.1.2.3",
        {"orders": (T, 2)},
    )
    member = response["member_id"]
    lines = dump_records(tmp_path, h.log)
    got = [parsed(line) for line in lines]
    assert got == [
        (
            {"type": "5", "data": {"groupId": "cg", "memberId": member}},
            {
                "version": "0",
                "data": {
                    "instanceId": "inst",
                    "rackId": None,
                    "clientId": "cli",
                    "clientHost": "/10.1.2.3",
                    "subscribedTopicNames": ["orders"],
                    "subscribedTopicRegex": None,
                    "rebalanceTimeoutMs": 3000,
                    "serverAssignor": "range",
                },
            },
        ),
        (
            {"type": "4", "data": {"groupId": "cg"}},
            {
                "version": "0",
                "data": {
                    "topics": [
                        {
                            "topicId": T_TEXT,
                            "topicName": "orders",
                            "numPartitions": 2,
                            "partitionMetadata": [],
                        }
                    ]
                },
            },
        ),
        ({"type": "3", "data": {"groupId": "cg"}}, {"version": "0", "data": {"epoch": 1}}),
        (
            {"type": "7", "data": {"groupId": "cg", "memberId": member}},
            {
                "version": "0",
                "data": {"topicPartitions": [{"topicId": T_TEXT, "partitions": [0, 1]}]},
            },
        ),
        (
            {"type": "6", "data": {"groupId": "cg"}},
            {"version": "0", "data": {"assignmentEpoch": 1}},
        ),
        (
            {"type": "8", "data": {"groupId": "cg", "memberId": member}},
            {
                "version": "0",
                "data": {
                    "memberEpoch": 1,
                    "previousMemberEpoch": 0,
                    "state": 0,
                    "assignedPartitions": [{"topicId": T_TEXT, "partitions": [0, 1]}],
                    "partitionsPendingRevocation": [],
                },
            },
        ),
    ]


def test_tombstones_tagged_fields_and_bad_values(tmp_path):
    key = R.encode_key(R.ConsumerGroupMetadataKey("g"))
    hashed = R.encode_value(R.ConsumerGroupMetadataValue(epoch=2, metadata_hash=-5))
    lines = dump_records(tmp_path, [(key, hashed), (key, None), (key, b"\x00\x00\x00")])
    assert parsed(lines[0])[1] == {"version": "0", "data": {"epoch": 2, "metadataHash": -5}}
    assert parsed(lines[1]) == ({"type": "3", "data": {"groupId": "g"}}, "<DELETE>")
    assert "Error at offset 2, skipping." in lines[2]


def test_classic_member_metadata_prints_its_protocols():
    cls = R.ConsumerGroupMemberMetadataValue
    value = cls(
        client_id="c",
        client_host="h",
        instance_id=None,
        rack_id=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        classic_member_metadata=cls.ClassicMemberMetadata(
            session_timeout_ms=10_000,
            supported_protocols=[cls.ClassicProtocol(name="range", metadata=b"\x01")],
        ),
    )
    _, payload = format_offsets_record(
        0, R.encode_key(R.ConsumerGroupMemberMetadataKey("g", "m")), R.encode_value(value)
    )
    assert json.loads(payload)["data"]["classicMemberMetadata"] == {
        "sessionTimeoutMs": 10_000,
        "supportedProtocols": [{"name": "range", "metadata": "AQ=="}],
    }


def test_unknown_types_are_still_skipped():
    key_text, payload = format_offsets_record(4, b"\x00\x10\x00\x01g", b"\x00\x00")
    assert key_text == "Unknown record type 16 at offset 4, skipping." and payload is None
