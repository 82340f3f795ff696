"""Malformed frames get Kafka's treatment (the connection is closed without
an answer, as Kafka's Processor does for requests it cannot parse) and the
broker goes on serving every other connection."""

from __future__ import annotations

import os
import socket
import struct

import pytest

import kfast.protocol as p

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def connect(broker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def closed_without_answer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


def api_versions_works(broker) -> bool:
    with connect(broker) as sock:
        sock.sendall(
            p.encode_request(
                18,
                3,
                1,
                "check",
                p.ApiVersionsRequest(client_software_name="check", client_software_version="1"),
            )
        )
        header = sock.recv(4, socket.MSG_WAITALL)
        (size,) = struct.unpack(">i", header)
        frame = sock.recv(size, socket.MSG_WAITALL)
    correlation_id, response = p.decode_response(18, 3, frame)
    return correlation_id == 1 and response.error_code == 0


def metadata_frame() -> bytes:
    return p.encode_request(3, 12, 5, "t", p.MetadataRequest(topics=None))


CASES = {
    # Larger than socket.request.max.bytes (100 MiB): refused before reading it.
    "oversized size prefix": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 64,
    "negative size prefix": struct.pack(">i", -5) + b"\x00" * 8,
    "garbage bytes": struct.pack(">i", 64) + os.urandom(64),
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, -1),
    "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", 3, 999, 1, -1),
    "truncated body": (lambda f: struct.pack(">i", len(f) - 4 - 6) + f[4:-6])(metadata_frame()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_frame_closes_only_its_connection(broker, name):
    bystander = connect(broker)
    try:
        with connect(broker) as sock:
            sock.sendall(CASES[name])
            assert closed_without_answer(sock)
        # An established connection and a new one both still work.
        bystander.sendall(metadata_frame())
        (size,) = struct.unpack(">i", bystander.recv(4, socket.MSG_WAITALL))
        correlation_id, response = p.decode_response(
            3, 12, bystander.recv(size, socket.MSG_WAITALL)
        )
        assert correlation_id == 5 and response.cluster_id == broker.broker.cluster_id
        assert api_versions_works(broker)
    finally:
        bystander.close()


def test_pipelined_requests_before_a_bad_one_are_answered(broker):
    with connect(broker) as sock:
        good = p.encode_request(18, 0, 41, "t", {})
        sock.sendall(good + struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 2, -1))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        correlation_id, response = p.decode_response(18, 0, sock.recv(size, socket.MSG_WAITALL))
        assert correlation_id == 41 and response.error_code == 0
        assert closed_without_answer(sock)
