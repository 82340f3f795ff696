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
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import threading

from kfast._ext.crc32c import crc32c
from kfast._ext.layout import ATTRIBUTES_OFFSET, BATCH_HEADER
from kfast.config import SERVER_CONFIGS
from kfast.protocol import ProduceResponse, api_keys, decode_request, encode_response
from kfast.protocol.errors import CorruptRecordException

PRODUCE = api_keys.BY_NAME["Produce"].key
_SIZE = struct.Struct(">i")


class _Partition:
    """One partition's file and next offset, shared by the connections."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.next_offset = 0
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


def serve(port: int, data_dir: str, rcvbuf: int) -> None:
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
            target=_serve_connection, args=(sock, data_dir, partitions), daemon=True
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
    args = parser.parse_args()
    serve(args.port, args.dir, args.rcvbuf)


if __name__ == "__main__":
    sys.exit(main())
