"""``kfast dump-log``: print segment files as kafka-dump-log.sh does.

Per file a ``Dumping <file>`` line, then by suffix:
  .log        ``Log starting offset: N`` and one line per batch:
              baseOffset lastOffset count baseSequence lastSequence producerId
              producerEpoch partitionLeaderEpoch isTransactional isControl
              deleteHorizonMs position CreateTime|LogAppendTime size magic
              compresscodec crc isvalid
              With --deep-iteration or --print-data-log, a ``| offset: ...``
              line per record (keySize, valueSize, sequence, headerKeys; the
              end-transaction marker of control records; with
              --print-data-log also key and payload).
              Bytes after the last whole batch: ``Found N invalid bytes at the
              end of <name>``.
  .index      ``offset: O position: P`` per entry; mismatches against the
              .log are reported on stderr (--verify-index-only prints only those).
  .timeindex  ``timestamp: T offset: O`` per entry.
  .checkpoint a KRaft snapshot of __cluster_metadata (or the bootstrap
              checkpoint of a dynamic quorum): ``Snapshot end offset: N,
              epoch: E``, then its batches as a .log's; the KRaft control
              records print as JSON (SnapshotHeader, KRaftVersion,
              KRaftVoters, SnapshotFooter).
  .snapshot   one line per producer.
  .txnindex   one line per aborted transaction.
The line formats are Kafka's, so scripts written for kafka-dump-log.sh work.
"""

from __future__ import annotations

import json
import os
import struct
import sys

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import (
    ATTRIBUTES_OFFSET,
    CONTROL_RECORD_KEY,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK,
    END_TXN_MARKER_VALUE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
)
from kfast.protocol.constants import INT32_MAX
from kfast.protocol.errors import CorruptRecordException
from kfast.raft.control_records import (
    CONTROL_TYPE_NAMES,
    KRAFT_VERSION,
    KRAFT_VOTERS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    decode_kraft_version,
    decode_snapshot_header,
    decode_voters,
)
from kfast.raft.snapshots import SNAPSHOT_SUFFIX, parse_snapshot_name
from kfast.storage.file_records import (
    LEGACY_MIN_SIZE,
    check_batch,
    read_header,
    read_legacy_header,
)
from kfast.storage.index import CorruptIndexException, OffsetIndex, TimeIndex
from kfast.storage.producer_state import read_snapshot
from kfast.storage.records_access import iter_records
from kfast.storage.segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_filename,
)
from kfast.storage.txn_index import TransactionIndex
from kfast.tools.offsets_decoder import format_offsets_record

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _control_record(control_type: int, value) -> str:
    """What kafka-dump-log.sh prints for a control record other than a
    transaction marker: KRaft's snapshot header/footer as JSON, other types
    by name (LEADER_CHANGE(2)), an unknown one as UNKNOWN(n)."""
    if control_type == SNAPSHOT_HEADER:
        try:
            version, timestamp = decode_snapshot_header(value)
        except CorruptRecordException:
            pass
        else:
            return (
                f' SnapshotHeader {{"version":{version},"lastContainedLogTimestamp":{timestamp}}}'
            )
    if control_type == SNAPSHOT_FOOTER and value is not None and len(value) >= 2:
        return f' SnapshotFooter {{"version":{struct.unpack_from(">h", bytes(value))[0]}}}'
    try:
        if control_type == KRAFT_VERSION:
            record = decode_kraft_version(value)
            return f' KRaftVersion {{"version":0,"kRaftVersion":{record.kraft_version}}}'
        if control_type == KRAFT_VOTERS:
            return f" KRaftVoters {_voters_json(decode_voters(value).voters)}"
    except CorruptRecordException:
        pass
    return f" controlType: {CONTROL_TYPE_NAMES.get(control_type, 'UNKNOWN')}({control_type})"


def _voters_json(voters) -> str:
    """VotersRecordJsonConverter's compact JSON: fields in schema order,
    names in lower camel case, directory ids as Kafka Uuid strings."""
    from kfast.storage.meta_properties import uuid_base64

    def voter(node):
        endpoints = [{"name": e.name, "host": e.host, "port": e.port} for e in node.endpoints]
        return {
            "voterId": node.voter_id,
            "voterDirectoryId": uuid_base64(node.directory_id),
            "endpoints": endpoints,
            "kRaftVersionFeature": {
                "minSupportedVersion": node.min_kraft_version,
                "maxSupportedVersion": node.max_kraft_version,
            },
        }

    return json.dumps(
        {"version": 0, "voters": [voter(n) for n in voters.nodes]}, separators=(",", ":")
    )


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "dump-log",
        help="print the contents of log segment, index and snapshot files",
        description="Parse log, index, time index, producer snapshot and transaction index "
        "files and print their contents, like kafka-dump-log.sh.",
    )
    p.add_argument("paths", nargs="*", metavar="FILE", help="files to dump")
    p.add_argument("--files", default="", help="comma-separated files (kafka-dump-log.sh style)")
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print the records' keys and values (implies --deep-iteration)",
    )
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    p.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="with --print-data-log, omit the record metadata",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="only report index entries that do not match the log",
    )
    p.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the index sanity check used at startup",
    )
    p.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode records as __consumer_offsets keys and values",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=INT32_MAX,
        help="read at most this many bytes of each .log file",
    )
    p.add_argument(
        "--max-message-size",
        type=int,
        default=5 * 1024 * 1024,
        help="size of the largest batch (index verification)",
    )
    p.set_defaults(handler=run)


def run(args, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    files = list(args.paths) + [f for f in args.files.split(",") if f]
    if not files:
        err.write("Missing required argument: FILE (or --files)\n")
        return 1
    deep = args.deep_iteration or args.print_data_log or args.offsets_decoder
    mismatches: dict[str, list[tuple[int, int]]] = {}
    status = 0
    for path in files:
        out.write(f"Dumping {path}\n")
        name = os.path.basename(path)
        suffix = name[name.rfind(".") :] if "." in name else ""
        try:
            if suffix == LOG_FILE_SUFFIX:
                dump_log_file(
                    path,
                    out,
                    deep=deep,
                    print_data=args.print_data_log or args.offsets_decoder,
                    offsets_decoder=args.offsets_decoder,
                    skip_metadata=args.skip_record_metadata,
                    max_bytes=args.max_bytes,
                )
            elif (
                suffix == SNAPSHOT_SUFFIX and (snapshot_id := parse_snapshot_name(name)) is not None
            ):
                dump_log_file(
                    path,
                    out,
                    deep=deep,
                    print_data=args.print_data_log,
                    offsets_decoder=False,
                    skip_metadata=args.skip_record_metadata,
                    max_bytes=args.max_bytes,
                    first_line=f"Snapshot end offset: {snapshot_id.offset}, "
                    f"epoch: {snapshot_id.epoch}",
                )
            elif suffix == INDEX_FILE_SUFFIX:
                dump_index(
                    path,
                    out,
                    sanity_only=args.index_sanity_check,
                    verify_only=args.verify_index_only,
                    mismatches=mismatches,
                )
            elif suffix == TIME_INDEX_FILE_SUFFIX:
                dump_time_index(
                    path,
                    out,
                    sanity_only=args.index_sanity_check,
                    verify_only=args.verify_index_only,
                    err=err,
                )
            elif suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
                dump_snapshot(path, out, err)
            elif suffix == TXN_INDEX_FILE_SUFFIX:
                dump_txn_index(path, out)
            else:
                err.write(f"Ignoring unknown file {path}\n")
        except (OSError, ValueError, CorruptIndexException, CorruptRecordException) as exc:
            err.write(f"{exc}\n")
            status = 1
    for path, pairs in mismatches.items():
        err.write(f"Mismatches in :{os.path.abspath(path)}\n")
        for index_offset, log_offset in sorted(pairs, reverse=True):
            err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
    return status


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def dump_log_file(
    path: str,
    out,
    *,
    deep: bool,
    print_data: bool,
    offsets_decoder: bool,
    skip_metadata: bool,
    max_bytes: int = INT32_MAX,
    first_line: str | None = None,
) -> None:
    out.write((first_line or f"Log starting offset: {offset_from_filename(path)}") + "\n")
    with open(path, "rb") as f:
        data = f.read(max_bytes if max_bytes < INT32_MAX else -1)
    view = memoryview(data)
    position = 0
    while position + MAGIC_OFFSET < len(data):
        batch_length = struct.unpack_from(">i", data, position + LENGTH_OFFSET)[0]
        size = LOG_OVERHEAD + batch_length
        magic = data[position + MAGIC_OFFSET]
        if position + size > len(data):
            break
        if magic in LEGACY_MIN_SIZE and size >= LEGACY_MIN_SIZE[magic]:
            _dump_legacy_message(
                out, view[position : position + size], position, deep=deep, print_data=print_data
            )
            position += size
            continue
        if batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            break
        header = read_header(data, position)
        batch = view[position : position + size]
        valid = header.magic == CURRENT_MAGIC and crc32c(batch[ATTRIBUTES_OFFSET:]) == header.crc
        delete_horizon = (
            header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG_MASK else None
        )
        ts_type = "LogAppendTime" if header.is_log_append_time else "CreateTime"
        out.write(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} baseSequence: {header.base_sequence} "
            f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_bool(header.is_transactional)} "
            f"isControl: {_bool(header.is_control)} "
            f"deleteHorizonMs: {_optional_long(delete_horizon)} position: {position} "
            f"{ts_type}: {header.max_timestamp} size: {size} magic: {header.magic} "
            f"compresscodec: {CODEC_NAMES.get(header.compression, header.compression)} "
            f"crc: {header.crc} isvalid: {_bool(valid)}\n"
        )
        if deep and valid:
            for record in iter_records(batch):
                line = []
                if not skip_metadata:
                    sequence = (
                        -1
                        if header.base_sequence < 0
                        else header.base_sequence + record.offset - header.base_offset
                    )
                    line.append(
                        f"| offset: {record.offset} {ts_type}: {record.timestamp} "
                        f"keySize: {-1 if record.key is None else len(record.key)} "
                        f"valueSize: {-1 if record.value is None else len(record.value)} "
                        f"sequence: {sequence} "
                        f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
                    )
                    if (
                        header.is_control
                        and record.key is not None
                        and len(record.key) >= CONTROL_RECORD_KEY.size
                    ):
                        control_type = CONTROL_RECORD_KEY.unpack_from(record.key)[1]
                        if (
                            control_type in (0, 1)
                            and record.value is not None
                            and len(record.value) >= END_TXN_MARKER_VALUE.size
                        ):
                            epoch = END_TXN_MARKER_VALUE.unpack_from(record.value)[1]
                            line.append(
                                f" endTxnMarker: {'COMMIT' if control_type else 'ABORT'}"
                                f" coordinatorEpoch: {epoch}"
                            )
                        else:
                            line.append(_control_record(control_type, record.value))
                if print_data and not header.is_control:
                    prefix = "| " if skip_metadata else " "
                    key_text: str | None
                    if offsets_decoder:
                        key_text, payload = format_offsets_record(
                            record.offset, record.key, record.value
                        )
                    else:
                        key_text = (
                            None if record.key is None else record.key.decode("utf-8", "replace")
                        )
                        payload = (
                            None
                            if record.value is None
                            else record.value.decode("utf-8", "replace")
                        )
                    if key_text is not None:
                        line.append(f"{prefix}key: {key_text}")
                        prefix = " "
                    if payload is not None:
                        line.append(f"{prefix}payload: {payload}")
                out.write("".join(line) + "\n")
        position += size
    trailing = len(data) - position
    if trailing > 0 and max_bytes == INT32_MAX:
        out.write(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}\n")


def _dump_legacy_message(out, message, position: int, *, deep: bool, print_data: bool) -> int:
    """A magic 0/1 entry, in kafka-dump-log.sh's legacy format; returns its offset."""
    header = read_legacy_header(message, 0, message[MAGIC_OFFSET])
    try:
        check_batch(message, 0, len(message))
        valid = True
    except CorruptRecordException:
        valid = False
    ts_type = (
        "NoTimestampType"
        if header.magic == 0
        else "LogAppendTime"
        if header.is_log_append_time
        else "CreateTime"
    )
    out.write(
        f"offset: {header.last_offset} position: {position} {ts_type}: "
        f"{header.max_timestamp} size: {len(message)} magic: {header.magic} "
        f"compresscodec: {CODEC_NAMES.get(header.compression, header.compression)} "
        f"crc: {header.crc} isvalid: {_bool(valid)}\n"
    )
    if deep and valid:
        for record in iter_records(message):
            line = (
                f"| offset: {record.offset} {ts_type}: {record.timestamp} "
                f"keySize: {-1 if record.key is None else len(record.key)} "
                f"valueSize: {-1 if record.value is None else len(record.value)}"
            )
            if print_data:
                if record.key is not None:
                    line += f" key: {record.key.decode('utf-8', 'replace')}"
                if record.value is not None:
                    line += f" payload: {record.value.decode('utf-8', 'replace')}"
            out.write(line + "\n")
    return header.last_offset


def _sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(path), f"{offset_from_filename(path):020d}{suffix}")


def _batch_last_offset_at(log_path: str, position: int) -> int | None:
    try:
        with open(log_path, "rb") as f:
            f.seek(position)
            head = f.read(RECORD_BATCH_OVERHEAD)
    except FileNotFoundError:
        return None
    if len(head) > MAGIC_OFFSET and head[MAGIC_OFFSET] in LEGACY_MIN_SIZE:
        return read_legacy_header(head, 0, head[MAGIC_OFFSET]).last_offset
    if len(head) < RECORD_BATCH_OVERHEAD:
        return None
    return read_header(head).last_offset


def dump_index(path: str, out, *, sanity_only: bool, verify_only: bool, mismatches: dict) -> None:
    base = offset_from_filename(path)
    index = OffsetIndex(path, base, writable=False)
    try:
        if index.entries == 0:
            out.write(f"{path} is empty.\n")
            return
        if sanity_only:
            index.sanity_check()
            out.write(f"{path} passed sanity check.\n")
            return
        log_path = _sibling(path, LOG_FILE_SUFFIX)
        for i in range(index.entries):
            entry = index.entry(i)
            # A crash leaves zero entries after the real ones: stop at the first.
            if i > 0 and entry.offset == base:
                return
            found = _batch_last_offset_at(log_path, entry.position)
            if found != entry.offset:
                mismatches.setdefault(path, []).append(
                    (entry.offset, -1 if found is None else found)
                )
            if not verify_only:
                out.write(f"offset: {entry.offset} position: {entry.position}\n")
    finally:
        index.close_handler()


def dump_time_index(path: str, out, *, sanity_only: bool, verify_only: bool, err) -> None:
    base = offset_from_filename(path)
    index = TimeIndex(path, base, writable=False)
    try:
        if sanity_only:
            index.sanity_check()
            out.write(f"{path} passed sanity check.\n")
            return
        previous = -1
        for i in range(index.entries):
            entry = index.entry(i)
            if i > 0 and entry.offset == base:
                return
            if previous >= entry.timestamp:
                err.write(
                    f"Found out of order timestamp in :{os.path.abspath(path)}\n"
                    f"  Index timestamp: {entry.timestamp}, Previously indexed "
                    f"timestamp: {previous}\n"
                )
            if not verify_only:
                out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
            previous = entry.timestamp
    finally:
        index.close_handler()


def dump_snapshot(path: str, out, err) -> None:
    try:
        entries = read_snapshot(path)
    except CorruptRecordException as exc:
        err.write(f"{exc}\n")
        return
    for entry in entries:
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.last_timestamp}"
        )
        if entry.batch_metadata:
            meta = entry.batch_metadata[0]
            line += (
                f" firstSequence: {meta.first_seq} lastSequence: {meta.last_seq} "
                f"lastOffset: {meta.last_offset} offsetDelta: {meta.offset_delta} "
                f"timestamp: {meta.timestamp}"
            )
        out.write(line + "\n")


def dump_txn_index(path: str, out) -> None:
    for txn in TransactionIndex(offset_from_filename(path), path).entries:
        out.write(
            f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}\n"
        )
