#!/usr/bin/env python3
"""Produce and consume throughput, and broker CPU per GB, over SASL_SSL and
SSL against PLAINTEXT on one kfast broker, with Tansu 0.6 over PLAINTEXT as
the peer in the same run; and SCRAM-SHA-512 (4096 iterations)
authentications per second.

    python bench/tls_throughput.py                    # 300,000 records of 1000 bytes
    python bench/tls_throughput.py --records 1000000 --json out.json

One ``kfast serve`` subprocess serves PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512; the user made with ``kfast configs``), certificates from a
throwaway CA (kfast.testing.certificates). For each listener in turn: a
fresh topic of one partition, one confluent-kafka producer (acks=1,
linger.ms=5) sends ``--records`` records of ``--record-size`` bytes, then one consumer reads them back
from the start; records/s and MB/s of the client, and the broker process's
CPU seconds (utime + stime from /proc) per GB moved. Tansu runs the same
two phases on PLAINTEXT afterwards (it has no TLS listener to compare).
TLS cannot use sendfile: kfast reads fetched ranges from the page cache in
256 KiB pieces and encrypts them (kfast.server.tls_transport).

Authentications: a client that has the salted password (computed once, as a
client would cache it) runs complete SCRAM-SHA-512 exchanges on new
connections for ``--auth-seconds``; the figure is exchanges per second.
Loopback only, every phase bounded in time.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import (
    cpu_seconds,
    create_topic,
    free_port,
    run_broker,
    wait_listening,
)

PHASE_LIMIT_S = 300
RECORD_SIZE = 1000  # --record-size


@contextmanager
def secured_kfast(workdir: str):
    from kfast.testing.certificates import TestCA

    ca = TestCA(os.path.join(workdir, "ca"))
    server = ca.issue("localhost", server=True)
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL")}
    password = secrets.token_urlsafe(12)
    overrides = (
        "listeners=" + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={server.keystore_path}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    )
    with run_broker("kfast", overrides, port=ports["PLAINTEXT"]) as (proc, _bootstrap, _ready):
        for port in ports.values():
            wait_listening(port, proc)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kfast",
                "configs",
                "--bootstrap-server",
                f"127.0.0.1:{ports['PLAINTEXT']}",
                "--entity-type",
                "users",
                "--entity-name",
                "bench",
                "--alter",
                "--add-config",
                f"SCRAM-SHA-512=[iterations=4096,password={password}]",
            ],
            check=True,
            timeout=60,
        )
        clients = {
            "PLAINTEXT": {},
            "SSL": {"security.protocol": "SSL", "ssl.ca.location": ca.cert_path},
            "SASL_SSL": {
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": ca.cert_path,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": password,
            },
        }
        yield proc, ports, clients, password


def produce(bootstrap: str, conf: dict, topic: str, records: int) -> dict:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            **conf,
        }
    )
    producer.list_topics(topic, timeout=30)
    payload = b"x" * RECORD_SIZE
    start = time.monotonic()
    deadline = start + PHASE_LIMIT_S
    sent = 0
    while sent < records and time.monotonic() < deadline:
        try:
            producer.produce(topic, payload)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    return {"records": sent - left, "seconds": time.monotonic() - start}


def consume(bootstrap: str, conf: dict, topic: str, records: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, start = 0, time.monotonic()
    deadline = start + PHASE_LIMIT_S
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10000, 0.5) if m.error() is None)
    elapsed = time.monotonic() - start
    consumer.close()
    return {"records": got, "seconds": elapsed}


def phases(pid: int, bootstrap: str, conf: dict, records: int, admin_bootstrap: str) -> dict:
    topic = f"tls-{secrets.token_hex(4)}"
    create_topic(admin_bootstrap, topic, 1)
    result = {}
    for name, phase in (("produce", produce), ("consume", consume)):
        cpu = cpu_seconds(pid)
        figures = phase(bootstrap, conf, topic, records)
        cpu = cpu_seconds(pid) - cpu
        gigabytes = figures["records"] * RECORD_SIZE / 1e9
        result[name] = {
            "records_per_s": figures["records"] / figures["seconds"],
            "mb_per_s": figures["records"] * RECORD_SIZE / 1e6 / figures["seconds"],
            "broker_cpu_s_per_gb": cpu / gigabytes if gigabytes else None,
            "records": figures["records"],
        }
    return result


def _request(api_key: int, version: int, correlation_id: int, body) -> bytes:
    from kfast.protocol import encode_request

    return encode_request(api_key, version, correlation_id, "bench", body)


def _read_frame(sock) -> bytes:
    def read(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    return read(struct.unpack(">i", read(4))[0])


def scram_authentications(port: int, password: str, seconds: float) -> float:
    """Complete SCRAM-SHA-512 exchanges per second on new plaintext-TLS-free
    connections to the SASL listener's TLS port (the TLS handshake included)."""
    import ssl

    from kfast.protocol import SaslAuthenticateRequest, SaslHandshakeRequest, decode_response

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    salted = {}
    done, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        with context.wrap_socket(socket.create_connection(("127.0.0.1", port))) as sock:
            sock.sendall(_request(17, 1, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512")))
            _read_frame(sock)
            nonce = base64.b64encode(os.urandom(18)).decode()
            bare = f"n=bench,r={nonce}"
            sock.sendall(
                _request(36, 2, 2, SaslAuthenticateRequest(auth_bytes=f"n,,{bare}".encode()))
            )
            _, first = decode_response(36, 2, _read_frame(sock))
            server_first = bytes(first.auth_bytes).decode()
            fields = dict(item.split("=", 1) for item in server_first.split(","))
            key = (fields["s"], fields["i"])
            if key not in salted:
                salted[key] = hashlib.pbkdf2_hmac(
                    "sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
                )
            client_key = hmac.new(salted[key], b"Client Key", "sha512").digest()
            stored = hashlib.sha512(client_key).digest()
            without_proof = f"c=biws,r={fields['r']}"
            message = f"{bare},{server_first},{without_proof}".encode()
            signature = hmac.new(stored, message, "sha512").digest()
            proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
            sock.sendall(
                _request(
                    36,
                    2,
                    3,
                    SaslAuthenticateRequest(auth_bytes=f"{without_proof},p={proof}".encode()),
                )
            )
            _, final = decode_response(36, 2, _read_frame(sock))
            if final.error_code:
                raise RuntimeError(final.error_message)
            done += 1
    return done / (time.monotonic() - start)


def main() -> int:
    global RECORD_SIZE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-size", type=int, default=RECORD_SIZE)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    parser.add_argument("--no-tansu", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    RECORD_SIZE = args.record_size
    results = {"record_size": RECORD_SIZE}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as workdir:
        with secured_kfast(workdir) as (proc, ports, clients, password):
            admin = f"127.0.0.1:{ports['PLAINTEXT']}"
            for name, conf in clients.items():
                results[f"kfast {name}"] = phases(
                    proc.pid, f"127.0.0.1:{ports[name]}", conf, args.records, admin
                )
            results["scram_sha_512_auth_per_s"] = scram_authentications(
                ports["SASL_SSL"], password, args.auth_seconds
            )
    if not args.no_tansu:
        with run_broker("tansu") as (tansu, bootstrap, _ready):
            results["tansu PLAINTEXT"] = phases(tansu.pid, bootstrap, {}, args.records, bootstrap)
    print(
        "| broker listener | produce rec/s | produce MB/s | broker CPU-s/GB | "
        "consume rec/s | consume MB/s | broker CPU-s/GB |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        if not isinstance(r, dict):
            continue
        p, c = r["produce"], r["consume"]
        print(
            f"| {name} | {p['records_per_s']:,.0f} | {p['mb_per_s']:.1f} | "
            f"{p['broker_cpu_s_per_gb']:.2f} | {c['records_per_s']:,.0f} | "
            f"{c['mb_per_s']:.1f} | {c['broker_cpu_s_per_gb']:.2f} |"
        )
    base = results["kfast PLAINTEXT"]
    for name in ("kfast SSL", "kfast SASL_SSL", "tansu PLAINTEXT"):
        if name in results:
            r = results[name]
            print(
                f"{name} / kfast PLAINTEXT: produce "
                f"{r['produce']['records_per_s'] / base['produce']['records_per_s']:.2f}x, "
                f"consume {r['consume']['records_per_s'] / base['consume']['records_per_s']:.2f}x"
            )
    print(
        f"SCRAM-SHA-512 (4096 iterations) authentications over TLS: "
        f"{results['scram_sha_512_auth_per_s']:.1f}/s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
