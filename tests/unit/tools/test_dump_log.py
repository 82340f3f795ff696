"""kfast dump-log prints what kafka-dump-log.sh prints."""

import io
import os
import re
import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

from kfast.cli import build_parser, main
from kfast.config import LogConfig
from kfast.storage.log import Log
from kfast.storage.producer_state import ORIGIN_COORDINATOR
from kfast.tools.dump_log import run


def batch(
    values,
    key=b"k",
    headers=(),
    producer_id=-1,
    epoch=-1,
    seq=-1,
    ts=1700000000000,
    transactional=False,
):
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=key, value=v, headers=list(headers))
    return bytes(b.build())


def dump(*argv):
    args = build_parser().parse_args(["dump-log", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run(args, out, err)
    return status, out.getvalue(), err.getvalue()


def make_log(tmp_path, **overrides):
    log = Log(str(tmp_path / "t-0"), LogConfig({"index.interval.bytes": 1, **overrides}))
    log.append_as_leader(
        batch([b"hello", b"world"], headers=[("h1", b"x"), ("h2", b"y")]), leader_epoch=4
    )
    log.append_as_leader(batch([b"again"], key=None, producer_id=9, epoch=1, seq=0), leader_epoch=4)
    return log


def test_batch_and_record_lines(tmp_path):
    log = make_log(tmp_path)
    log_path = log.segments[0].log.path
    size0 = log.segments[0].log.size
    log.close()
    status, out, _ = dump("--print-data-log", log_path)
    lines = out.splitlines()
    assert status == 0
    assert lines[0] == f"Dumping {log_path}"
    assert lines[1] == "Log starting offset: 0"
    first = re.sub(r"crc: \d+", "crc: C", lines[2])
    first_size = struct.unpack(">i", open(log_path, "rb").read(12)[8:])[0] + 12
    assert first == (
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 4 "
        "isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1700000000001 size: {first_size} magic: 2 "
        "compresscodec: none crc: C isvalid: true"
    )
    assert lines[3] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 5 "
        "sequence: -1 headerKeys: [h1,h2] key: k payload: hello"
    )
    assert lines[4] == (
        "| offset: 1 CreateTime: 1700000000001 keySize: 1 valueSize: 5 "
        "sequence: -1 headerKeys: [h1,h2] key: k payload: world"
    )
    assert lines[5].startswith(
        "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 "
        "lastSequence: 0 producerId: 9 producerEpoch: 1 "
    )
    assert f"position: {first_size} " in lines[5]
    assert lines[6] == (
        "| offset: 2 CreateTime: 1700000000000 keySize: -1 valueSize: 5 "
        "sequence: 0 headerKeys: [] payload: again"
    )
    assert len(lines) == 7 and size0 > first_size


def test_corrupt_batch_and_trailing_bytes(tmp_path):
    log = make_log(tmp_path)
    path = log.segments[0].log.path
    log.close()
    with open(path, "r+b") as f:
        f.seek(70)
        f.write(b"\xee")
    with open(path, "ab") as f:
        f.write(b"\x00" * 5)
    _, out, _ = dump(path)
    assert "isvalid: false" in out.splitlines()[2]
    assert out.splitlines()[-1] == "Found 5 invalid bytes at the end of 00000000000000000000.log"


def control_batch(producer_id, epoch, commit, coordinator_epoch):
    from crc32c import crc32c

    data = bytearray(
        batch(
            [struct.pack(">hi", 0, coordinator_epoch)],
            key=struct.pack(">hh", 0, 1 if commit else 0),
            producer_id=producer_id,
            epoch=epoch,
            transactional=True,
        )
    )
    struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x20)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def test_index_timeindex_snapshot_txnindex(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch([b"t"], producer_id=5, epoch=0, seq=0, transactional=True))
    log.append_as_leader(
        control_batch(5, 0, commit=False, coordinator_epoch=7), origin=ORIGIN_COORDINATOR
    )
    segment = log.segments[0]
    index_entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    time_entries = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    d = tmp_path / "t-0"
    log.close()
    _, out, err = dump(str(d / "00000000000000000000.index"))
    assert out.splitlines()[1:] == [f"offset: {o} position: {p}" for o, p in index_entries]
    assert err == ""
    _, out, _ = dump(str(d / "00000000000000000000.timeindex"))
    assert out.splitlines()[1:] == [f"timestamp: {t} offset: {o}" for t, o in time_entries]
    _, out, _ = dump(str(d / "00000000000000000005.snapshot"))
    lines = sorted(out.splitlines()[1:])
    assert lines[0] == (
        "producerId: 5 producerEpoch: 0 coordinatorEpoch: 7 "
        "currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1700000000000 "
        "firstSequence: 0 lastSequence: 0 lastOffset: 3 offsetDelta: 0 "
        "timestamp: 1700000000000"
    )
    assert lines[1].startswith(
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: -1 "
        "currentTxnFirstOffset: OptionalLong.empty"
    )
    _, out, _ = dump(str(d / "00000000000000000000.txnindex"))
    assert out.splitlines()[1] == (
        "version: 0 producerId: 5 firstOffset: 3 lastOffset: 4 lastStableOffset: 5"
    )
    _, out, _ = dump("--deep-iteration", str(d / "00000000000000000000.log"))
    assert (
        "| offset: 4 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 7" in out.splitlines()
    )
    _, out, _ = dump("--index-sanity-check", str(d / "00000000000000000000.index"))
    assert out.splitlines()[1].endswith("passed sanity check.")


def test_verify_index_only_reports_mismatches(tmp_path):
    log = make_log(tmp_path)
    index_path = log.segments[0].offset_index.path
    log.close()
    with open(index_path, "r+b") as f:
        f.write(struct.pack(">ii", 0, 0))  # the first batch's last offset is 1, not 0
    status, out, err = dump("--verify-index-only", index_path)
    assert out.splitlines() == [f"Dumping {index_path}"]
    assert f"Mismatches in :{os.path.abspath(index_path)}" in err
    assert "  Index offset: 0, log offset: 1" in err


def offsets_key(group, topic, partition):
    enc = lambda s: struct.pack(">h", len(s)) + s.encode()
    return struct.pack(">h", 1) + enc(group) + enc(topic) + struct.pack(">i", partition)


def test_offsets_decoder(tmp_path):
    value = struct.pack(">hqi", 3, 42, 5) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 1234)
    log = Log(str(tmp_path / "__consumer_offsets-12"), LogConfig())
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    b.append(0, timestamp=1, key=offsets_key("my-group", "orders", 3), value=value, headers=[])
    b.append(1, timestamp=1, key=offsets_key("my-group", "orders", 4), value=None, headers=[])
    log.append_as_leader(bytes(b.build()), now=1)
    path = log.segments[0].log.path
    log.close()
    _, out, _ = dump("--offsets-decoder", path)
    lines = out.splitlines()
    assert lines[3].endswith(
        ' key: {"type":"1","data":{"group":"my-group","topic":"orders","partition":3}} '
        'payload: {"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"md",'
        '"commitTimestamp":1234}}'
    )
    assert lines[4].endswith(" payload: <DELETE>")


def test_cli_entry_point_and_files_option(tmp_path, capsys):
    log = make_log(tmp_path)
    path = log.segments[0].log.path
    log.close()
    assert main(["dump-log", "--files", path]) == 0
    assert capsys.readouterr().out.startswith(f"Dumping {path}\nLog starting offset: 0\n")
    assert main(["dump-log", str(tmp_path / "nothing.log")]) == 1


def test_kraft_control_records_print_as_kafka_prints_them(tmp_path):
    """A metadata log's LeaderChange batch and a snapshot's header and
    footer, as kafka-dump-log.sh (DumpLogSegments) prints them."""
    from kfast.raft.control_records import (
        LEADER_CHANGE,
        SNAPSHOT_FOOTER,
        SNAPSHOT_HEADER,
        control_batch,
        encode_leader_change,
        encode_snapshot_footer,
        encode_snapshot_header,
    )
    from kfast.raft.log import LeaderChangeMessage

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        control_batch(
            LEADER_CHANGE,
            encode_leader_change(LeaderChangeMessage(2, (1, 2, 3))),
            0,
            5,
            1700000000000,
        )
        + control_batch(SNAPSHOT_HEADER, encode_snapshot_header(1700000000123), 1, 5, 1700000000000)
        + control_batch(SNAPSHOT_FOOTER, encode_snapshot_footer(), 2, 5, 1700000000000)
        + control_batch(9, b"", 3, 5, 1700000000000)
    )
    status, out, _ = dump("--deep-iteration", str(path))
    assert status == 0
    records = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert records[0].endswith(" controlType: LEADER_CHANGE(2)")
    assert records[1].endswith(
        ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000123}'
    )
    assert records[2].endswith(' SnapshotFooter {"version":0}')
    assert records[3].endswith(" controlType: UNKNOWN(9)")
