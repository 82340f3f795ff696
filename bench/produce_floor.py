"""The floor under issue 21 item 1: what receiving, checking and writing a
Produce request costs before any broker logic runs.

    python3 bench/produce_floor.py serve PORT DIR [--rcvbuf BYTES]

A server that does, per Produce request, only what any broker that keeps
records in files through the page cache and validates them must do: read
the frame from a TCP socket into a buffer it reuses, find the one batch,
check its CRC-32C (kfast's kernel, over the bytes the CRC covers), append
it to the partition's file (``os.write``, the page-cache copy) and answer
with the base offset. No index, no producer state, no metrics, no
purgatory, no event loop: one thread per connection blocking in recv.
``bench/produce_cpu.py --brokers floor`` drives it with the same client
and the same request stream as kfast and Tansu, and takes its CPU from
/proc the same way, so the figure is the floor in the same run.

The server reads the frame with kfast's codec (the request header and the
Produce body), which is a few microseconds of Python a request: nothing at
~1 MB batches (~0.01 CPU-s/GB), but at 16 KiB batches part of what it
measures is Python, not the floor of the copies.

SO_RCVBUF is Kafka's socket.receive.buffer.bytes default (kfast's too,
102,400) unless ``--rcvbuf -1`` leaves the kernel's autotuning on.

``--splice`` (``produce_cpu.py --brokers floor-splice``) is a what-if, not
a floor: the records go from the socket to the partition file with
splice(2), never through user space, and the CRC is checked afterwards
over the file's pages -- one copy instead of two, at the price of
unvalidated bytes in the file (past its end until checked). It measures
what receiving into the log before validating would buy. It takes the
driver's requests only (one topic, one partition each).
"""

from __future__ import annotations

import argparse
import fcntl
import mmap
import os
import socket
import struct
import sys
import threading

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import ATTRIBUTES_OFFSET, BATCH_HEADER
from kfast._ext.varint import decode_uvarint
from kfast.config import SERVER_CONFIGS
from kfast.protocol import ProduceResponse, api_keys, decode_request, encode_response
from kfast.protocol.errors import CorruptRecordException

PRODUCE = api_keys.BY_NAME["Produce"].key
_SIZE = struct.Struct(">i")


class _Partition:
    """One partition's file and next offset, shared by the connections."""

    def __init__(self, path: str, mode: int = os.O_WRONLY | os.O_APPEND) -> None:
        self.fd = os.open(path, mode | os.O_CREAT, 0o644)
        self.next_offset = 0
        self.size = 0  # --splice: the checked end (the file may hold more, unchecked)
        self.lock = threading.Lock()


def _recv_into(sock: socket.socket, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def _serve_connection(sock: socket.socket, data_dir: str, partitions: dict) -> None:
    buf = bytearray(1 << 16)
    size_buf = bytearray(4)
    try:
        while _recv_into(sock, memoryview(size_buf)):
            (size,) = _SIZE.unpack(size_buf)
            if size > len(buf):
                buf = bytearray(size)
            frame = memoryview(buf)[:size]
            if not _recv_into(sock, frame):
                return
            header, body = decode_request(frame)
            if header.api_key != PRODUCE:
                return  # the driver sends Produce only
            response = ProduceResponse()
            for topic in body.topic_data:
                answers = []
                for data in topic.partition_data:
                    batch = data.records
                    # the v2 header's crc (field 5) and recordsCount (field 13)
                    fields = BATCH_HEADER.unpack_from(batch)
                    crc, count = fields[4], fields[12]
                    error = 0
                    if crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]) != crc:
                        error = CorruptRecordException.code
                    key = (topic.name, data.index)
                    partition = partitions.get(key)
                    if partition is None:
                        partition = partitions.setdefault(
                            key, _Partition(os.path.join(data_dir, f"{topic.name}-{data.index}"))
                        )
                    with partition.lock:
                        base = partition.next_offset
                        if not error:
                            os.write(partition.fd, batch)
                            partition.next_offset += count
                    answers.append(
                        ProduceResponse.PartitionProduceResponse(
                            index=data.index, error_code=error, base_offset=base
                        )
                    )
                response.responses.append(
                    ProduceResponse.TopicProduceResponse(
                        name=topic.name, partition_responses=answers
                    )
                )
            sock.sendall(
                encode_response(PRODUCE, header.api_version, header.correlation_id, response)
            )
    finally:
        sock.close()


def _records_at(prefix: bytes) -> tuple[int, int, str, int] | None:
    """Where a one-topic, one-partition Produce v9 frame's records start
    (offset in the frame), their length, the topic and the partition; None
    if ``prefix`` is too short to say."""
    try:
        i = 8  # api_key, api_version, correlation_id
        (n,) = struct.unpack_from(">h", prefix, i)
        i += 2 + max(n, 0)  # client_id
        _, i = decode_uvarint(prefix, i)  # header tagged fields (none)
        n, i = decode_uvarint(prefix, i)  # transactional_id
        i += max(n - 1, 0) + 2 + 4  # acks, timeout_ms
        _, i = decode_uvarint(prefix, i)  # topics (one)
        n, i = decode_uvarint(prefix, i)
        topic = bytes(prefix[i : i + n - 1]).decode()
        i += n - 1
        _, i = decode_uvarint(prefix, i)  # partitions (one)
        (index,) = struct.unpack_from(">i", prefix, i)
        i += 4
        n, i = decode_uvarint(prefix, i)
        if i > len(prefix):
            return None
        return i, n - 1, topic, index
    except (CorruptRecordException, ValueError, IndexError, struct.error):
        return None


def _serve_connection_splice(sock: socket.socket, data_dir: str, partitions: dict) -> None:
    """What-if, not kfast: the records go socket -> pipe -> file with
    splice(2) (no copy to user space), at the partition file's end, and the
    CRC is checked over the file's pages (mmap) afterwards; a bad batch would
    be left past the end and overwritten by the next. One copy (into the
    page cache) instead of two."""
    pipe_r, pipe_w = os.pipe()
    fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, 1 << 20)
    fd = sock.fileno()
    try:
        while True:
            head = sock.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                return
            (size,) = _SIZE.unpack(head)
            prefix = sock.recv(min(size, 256), socket.MSG_PEEK | socket.MSG_WAITALL)
            where = _records_at(prefix)
            if where is None:
                return
            start, length, topic, index = where
            header = sock.recv(start, socket.MSG_WAITALL)
            (correlation_id,) = struct.unpack_from(">i", header, 4)
            key = (topic, index)
            partition = partitions.get(key)
            if partition is None:
                partition = partitions.setdefault(
                    key, _Partition(os.path.join(data_dir, f"{topic}-{index}"), os.O_RDWR)
                )
            with partition.lock:
                position = partition.size
                moved = 0
                while moved < length:
                    n = os.splice(fd, pipe_w, length - moved)
                    if n == 0:
                        return
                    done = 0
                    while done < n:
                        done += os.splice(
                            pipe_r, partition.fd, n - done, offset_dst=position + moved + done
                        )
                    moved += n
                page = position & ~(mmap.PAGESIZE - 1)
                with mmap.mmap(
                    partition.fd, position + length - page, offset=page, access=mmap.ACCESS_READ
                ) as region:
                    view = memoryview(region)
                    batch = view[position - page :]
                    fields = BATCH_HEADER.unpack_from(batch)
                    crc, count = fields[4], fields[12]
                    ok = crc32c(batch[ATTRIBUTES_OFFSET:]) == crc
                    del batch
                    view.release()
                base = partition.next_offset
                error = 0
                if ok:
                    partition.size = position + length
                    partition.next_offset += count
                else:
                    error = CorruptRecordException.code
            trailer = size - start - length
            if trailer and len(sock.recv(trailer, socket.MSG_WAITALL)) < trailer:
                return
            response = ProduceResponse(
                responses=[
                    ProduceResponse.TopicProduceResponse(
                        name=topic,
                        partition_responses=[
                            ProduceResponse.PartitionProduceResponse(
                                index=index, error_code=error, base_offset=base
                            )
                        ],
                    )
                ]
            )
            sock.sendall(encode_response(PRODUCE, 9, correlation_id, response))
    finally:
        os.close(pipe_r)
        os.close(pipe_w)
        sock.close()


def serve(port: int, data_dir: str, rcvbuf: int, splice: bool = False) -> None:
    listener = socket.create_server(("127.0.0.1", port))
    if rcvbuf != -1:
        # Set on the listener so accepted sockets start with it (as kfast does).
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    partitions: dict = {}
    print("ready", flush=True)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(
            target=_serve_connection_splice if splice else _serve_connection,
            args=(sock, data_dir, partitions),
            daemon=True,
        ).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve")
    run.add_argument("port", type=int)
    run.add_argument("dir")
    run.add_argument(
        "--rcvbuf",
        type=int,
        default=SERVER_CONFIGS["socket.receive.buffer.bytes"].default,
        help="SO_RCVBUF (-1: the kernel's autotuning)",
    )
    run.add_argument("--splice", action="store_true", help="the what-if: splice, then CRC")
    args = parser.parse_args()
    serve(args.port, args.dir, args.rcvbuf, args.splice)


if __name__ == "__main__":
    sys.exit(main())
