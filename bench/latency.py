#!/usr/bin/env python3
"""Produce-to-consume latency at a fixed rate: kfast vs Tansu 0.6, same run.

    python bench/latency.py                                  # both brokers, both tests
    python bench/latency.py --seconds 30 --rounds 3 --plots bench/latency --json out.json
    python bench/latency.py --brokers kfast --tests acks=1 --seconds 10

Tests (each one fresh broker, started and stopped here by PID, as
bench/broker_load.py runs them; a fresh single-partition topic):

  acks=1, acks=all   one confluent-kafka (librdkafka) producer, linger.ms=0,
                     100-byte records at ``--rate`` records/s (10,000), paced
                     with time.sleep; each value starts with time.time() at
                     produce(). How far each send was from its schedule is
                     measured and reported (``pacing_ms``): the producer's own
                     jitter, not the broker's.
  connections        ``--connections`` (1,000) producer connections, each
                     sending ``--rate``/connections records/s (10 records/s;
                     10,000/s in all), acks=1, one record per Produce request.
                     They are asyncio connections speaking Kafka with kfast's
                     protocol codec (_ProducerConnection), split over
                     ``--producer-procs`` processes: each a real Kafka
                     producer connection (ApiVersions, Metadata, Produce v9+ on
                     its own socket). 1,000 librdkafka instances would not fit
                     two cores, nor did 1,000 kfast KafkaProducer objects or
                     BrokerConnections keep the pace on a shared machine
                     (measured: seconds late).

One consumer (confluent-kafka, assign, fetch.wait.max.ms 100, fetch.min.bytes 1,
poll per record) in its own process measures receive time - send time per
record into an HDR histogram (kfast.tools.perf_stats: 1 us to 1 h, 3
significant digits); p50/p99/p99.9/max are reported, and ``--plots`` writes
latency over time and the histogram per broker and test. Producer and
consumer share a clock (one host, time.time()). The producer's librdkafka
statistics (statistics.interval.ms 1000) give its side of the split: rtt
(Produce request to response), int_latency (produce() to the send queue)
and outbuf_latency (queue to socket), medians of the per-second p50/p99.

With ``--rounds R`` the brokers take turns R times, the order flipping each
round; medians over rounds and the quietest round (lowest load average) are
printed. Every figure carries the 1-minute load average at its end. Run it
under ``flock /tmp/kfast-bench.lock`` so benchmarks never overlap. Bounded: a
wall-clock limit per test; traffic goes to loopback only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import RECORD_SIZE, cpu_seconds, create_topic, latency_consumer, run_broker

from kfast.testing.ports import free_port
from kfast.tools.perf_stats import LatencyStats, plot

_METADATA = 3  # the Metadata API key
TESTS = ("acks=1", "acks=all", "connections")
STATS_KEYS = ("rtt", "int_latency", "outbuf_latency")
_STAMP = 20  # the value's first bytes: time.time() as text
WARM_UP = b"warm-up".ljust(RECORD_SIZE, b"x")  # sent before the clock starts; not counted
_LOG_APPEND_TIME = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME


def _value(now: float) -> bytes:
    return f"{now:<{_STAMP}.6f}".encode().ljust(RECORD_SIZE, b"x")


def _consumer(bootstrap: str, topic: str, total: int, limit_s: float, ready, conn) -> None:
    """Receive ``total`` records (or until ``limit_s``); send back the
    (receive time since start, latency ms) arrays, and with a LogAppendTime
    topic (``--append-time``) the broker's append time minus the send time
    (ms; the broker's clock is the same host's, in whole ms)."""
    consumer = latency_consumer(bootstrap, topic, "latency")
    ready.set()
    at, latency, to_append = array("d"), array("d"), array("d")
    start = time.monotonic()
    deadline = start + limit_s
    received = 0
    while received < total and time.monotonic() < deadline:
        # poll(), not consume(n, timeout): consume waits for n records or the
        # timeout, which would add to each record's latency.
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None and msg.value() != WARM_UP:
            now = time.time()
            sent = float(msg.value()[:_STAMP])
            at.append(time.monotonic() - start)
            latency.append((now - sent) * 1000.0)
            kind, stamp = msg.timestamp()
            if kind == _LOG_APPEND_TIME:
                to_append.append(stamp - sent * 1000.0)
            received += 1
    consumer.close()
    cpu = _cpu_now() / (time.monotonic() - start)
    conn.send((at.tobytes(), latency.tobytes(), to_append.tobytes(), cpu))


def _window_stats(windows: list[dict]) -> dict:
    """Medians over librdkafka's per-second windows of the broker's
    rtt/int_latency/outbuf_latency p50 and p99, in ms."""
    out = {}
    for key in STATS_KEYS:
        for p in ("p50", "p99"):
            values = [w[key][p] / 1000.0 for w in windows if w.get(key, {}).get("cnt")]
            if values:
                out[f"{key}_{p}_ms"] = statistics.median(values)
    return out


def _librdkafka_producer(bootstrap: str, topic: str, acks: str, rate: int, total: int, conn):
    import json as json_

    from confluent_kafka import Producer

    windows: list[dict] = []

    def on_stats(text: str) -> None:
        for broker in json_.loads(text)["brokers"].values():
            if broker.get("nodeid", -1) >= 0:
                windows.append({k: broker[k] for k in STATS_KEYS})

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "statistics.interval.ms": 1000,
            "stats_cb": on_stats,
        }
    )
    producer.list_topics(topic, timeout=10)  # connected before the clock starts
    late = array("d")
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the fixed send rate, not synchronisation
        late.append((time.monotonic() - due) * 1000.0)
        while True:
            try:
                producer.produce(topic, _value(time.time()), partition=0)
                break
            except BufferError:
                # librdkafka's queue is full: a broker that cannot keep up
                # (Tansu at 10,000 single-record requests a second). Wait
                # for room; the record is then late, which the latency shows.
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    producer.poll(1.5)  # one more statistics window
    cpu = _cpu_now() / (time.monotonic() - start)
    conn.send({"pacing_ms": _spread(late), "cpu": cpu, **_window_stats(windows)})


class _ProducerConnection:
    """One producer connection, as a Kafka producer opens it: ApiVersions
    (v3, naming its software), Metadata for the topic, then Produce requests
    (one record each) at the newest version both sides support, v9 or
    later. Requests are encoded once; each send writes a fresh record batch
    (Cython RecordBatchBuilder: the value, the time, its CRC) between the
    encoded request's fixed bytes. Answers are cut from the bytes as they
    arrive (an asyncio Protocol, no task per connection): the first ones
    decoded for the handshake, the Produce answers counted. As light as a
    client gets, so 1,000 of them keep their pace on a shared CPU and leave
    the broker the rest of it (StreamReader tasks cost the two producer
    processes 0.35 of a core each at 10,000 records/s; bench/README.md)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.answered = 0
        self.expected = 0
        self.all_answered: object = None  # an asyncio.Future once expected is set
        self._prefix = self._suffix = b""
        self._buffer = bytearray()
        self._waiter: object = None  # a Future for the handshake's next answer
        self.transport: object = None

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        at = 0
        while len(buffer) - at >= 4:
            size = int.from_bytes(buffer[at : at + 4], "big")
            if len(buffer) - at - 4 < size:
                break
            if self._waiter is not None:
                waiter, self._waiter = self._waiter, None
                waiter.set_result(bytes(buffer[at + 4 : at + 4 + size]))
            else:
                self.answered += 1
                if self.answered == self.expected and self.all_answered is not None:
                    self.all_answered.set_result(None)
            at += 4 + size
        del buffer[:at]

    def connection_lost(self, exc) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("connection lost"))
        if self.all_answered is not None and not self.all_answered.done():
            self.all_answered.set_result(None)

    async def open(self, host: str, port: int) -> None:
        import asyncio

        from kfast.protocol import (
            ApiVersionsRequest,
            MetadataRequest,
            ProduceRequest,
            api_key,
            api_keys,
            encode_request,
        )

        await asyncio.get_running_loop().create_connection(lambda: self, host, port)
        versions = await self._call(
            api_keys.API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="latency", client_software_version="1"),
        )
        theirs = {entry.api_key: entry.max_version for entry in versions.api_keys}
        version = min(theirs[api_keys.PRODUCE], api_key(api_keys.PRODUCE).max_stable_version)
        if version < 9:
            raise RuntimeError(f"Produce v{version}: a broker of Kafka 2.4+ supports v9")
        metadata = await self._call(
            _METADATA,
            min(theirs[_METADATA], 12),
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)]),
        )
        data = ProduceRequest.TopicProduceData(
            partition_data=[ProduceRequest.PartitionProduceData(index=0, records=_batch(WARM_UP))]
        )
        if version >= 13:
            data.topic_id = metadata.topics[0].topic_id
        else:
            data.name = self.topic
        body = ProduceRequest(acks=1, timeout_ms=30000, topic_data=[data])
        frame = encode_request(api_keys.PRODUCE, version, 3, "latency", body)
        at = frame.find(_batch(WARM_UP)[:12])  # baseOffset + batchLength: unique
        size = len(_batch(WARM_UP))
        self._prefix, self._suffix = frame[:at], frame[at + size :]
        self.send(WARM_UP)

    async def _call(self, key: int, version: int, body):
        import asyncio

        from kfast.protocol import decode_response, encode_request

        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(encode_request(key, version, 1, "latency", body))
        return decode_response(key, version, await self._waiter)[1]

    def send(self, value: bytes) -> None:
        self.transport.write(self._prefix + _batch(value) + self._suffix)

    def expect(self, expected: int) -> object:
        """A future done once ``expected`` Produce answers came (or the
        connection closed)."""
        import asyncio

        self.expected = expected
        self.all_answered = asyncio.get_running_loop().create_future()
        if self.answered >= expected:
            self.all_answered.set_result(None)
        return self.all_answered


def _batch(value: bytes) -> bytes:
    from kfast.records import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), None, value)
    return builder.build()


def _kfast_producers(
    bootstrap: str,
    topic: str,
    connections: int,
    rate: float,
    total: int,
    offset: float,
    nice: int,
    conn,
):
    """``connections`` producer connections (_ProducerConnection). Once all
    are connected this sends "ready" and waits for the start time (wall
    clock); record i then goes out at start + offset + i/rate on connection
    i % connections: each sends rate/connections records/s."""
    import asyncio

    host, port = bootstrap.rsplit(":", 1)
    if nice:
        os.nice(nice)  # --producer-nice: a diagnosis, see main()

    async def run() -> dict:
        opened = [_ProducerConnection(topic) for _ in range(connections)]
        for chunk in range(0, connections, 50):
            await asyncio.gather(*(c.open(host, int(port)) for c in opened[chunk : chunk + 50]))
        share = [total // connections + (n < total % connections) for n in range(connections)]
        readers = [c.expect(1 + n) for c, n in zip(opened, share)]
        while sum(c.answered for c in opened) < connections:
            await asyncio.sleep(0.05)  # the warm-up answers; a count, not an event
        conn.send("ready")
        loop = asyncio.get_running_loop()
        start_at = await loop.run_in_executor(None, conn.recv)
        mono_start = loop.time() + (start_at - time.time()) + offset
        late = array("d")
        for i in range(total):
            due = mono_start + i / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing, not synchronisation
            late.append((loop.time() - due) * 1000.0)
            opened[i % connections].send(_value(time.time()))
        done, pending = await asyncio.wait(readers, timeout=60)
        for task in pending:
            task.cancel()
        for c in opened:
            c.transport.close()
        cpu = _cpu_now() / (time.monotonic() - mono_start)
        unanswered = sum(1 + n - c.answered for c, n in zip(opened, share))
        return {"unanswered": unanswered, "pacing_ms": _spread(late), "cpu": cpu}

    try:
        import uvloop

        conn.send(uvloop.run(run()))
    except ImportError:
        conn.send(asyncio.run(run()))


def _spread(values: array) -> dict:
    ordered = sorted(values)
    return {
        "p50": ordered[len(ordered) // 2],
        "p99": ordered[int(len(ordered) * 0.99)],
        "max": ordered[-1],
    }


REQUEST_TIMES = (
    "totaltimems",
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsequeuetimems",
    "responsesendtimems",
)


def _request_times(port: int) -> dict:
    """The broker's RequestMetrics p50/p99 (ms) for Produce and Fetch, from
    its Prometheus endpoint: the broker's side of the split (frame read ->
    handler -> purgatory -> response queued -> last byte to the socket)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict = {}
    for line in text.splitlines():
        if not line.startswith("kafka_network_requestmetrics_"):
            continue
        name, _, value = line.rpartition(" ")
        metric, _, labels = name.partition("{")
        kind = metric.removeprefix("kafka_network_requestmetrics_")
        if kind == "totaltimems_count":  # requests answered over the broker's life
            for request in ("Produce", "Fetch"):
                if f'request="{request}"' in labels:
                    out[f"{request}.count"] = out.get(f"{request}.count", 0) + float(value)
            continue
        if kind not in REQUEST_TIMES:
            continue
        for request in ("Produce", "Fetch"):
            for q in ("0.50", "0.99"):
                if f'request="{request}"' in labels and f'quantile="{q}"' in labels:
                    p = "p50" if q == "0.50" else "p99"
                    out[f"{request}.{kind.removesuffix('ms')}.{p}"] = float(value)
    return out


def _cpu_now() -> float:
    times = os.times()
    return times.user + times.system


def _load() -> float:
    return os.getloadavg()[0]


def measure(kind: str, test: str, args, plots: str | None) -> dict:
    ctx = mp.get_context("spawn")
    limit = args.seconds + 120
    total = int(args.rate * args.seconds)
    name = f"{test.replace('=', '')}-{kind}"
    launcher: tuple = ()
    if args.probe and kind == "kfast":
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "latency_probe.py")
        launcher = (
            sys.executable,
            probe,
            *(("--no-gc-freeze",) if args.no_gc_freeze else ()),
            os.path.join(args.probe, f"{name}.txt"),
        )
    metrics_port = free_port()
    overrides = (f"kfast.metrics.port={metrics_port}",)
    with run_broker(kind, overrides, launcher=launcher) as (proc, bootstrap, _ready):
        topic = f"latency-{int(time.time() * 1000)}"
        config = {"message.timestamp.type": "LogAppendTime"} if args.append_time else None
        create_topic(bootstrap, topic, 1, config=config)
        ready = ctx.Event()
        parent, child = ctx.Pipe(duplex=False)
        consumer = ctx.Process(
            target=_consumer, args=(bootstrap, topic, total, limit, ready, child), daemon=True
        )
        consumer.start()
        producers: list = []
        spy = None
        window = (time.time(), time.time() + args.seconds)
        cpu_before, clock_before = cpu_seconds(proc.pid), time.monotonic()
        try:
            if not ready.wait(60):
                raise RuntimeError("consumer did not start")
            pipes = []
            if test == "connections":
                procs = args.producer_procs
                for n in range(procs):
                    p_parent, p_child = ctx.Pipe()
                    producer = ctx.Process(
                        target=_kfast_producers,
                        args=(
                            bootstrap,
                            topic,
                            args.connections // procs,
                            args.rate / procs,
                            total // procs,
                            n / args.rate,
                            args.producer_nice,
                            p_child,
                        ),
                        daemon=True,
                    )
                    producer.start()
                    producers.append(producer)
                    pipes.append(p_parent)
                for p in pipes:
                    if not p.poll(limit) or p.recv() != "ready":
                        raise RuntimeError("producers did not connect")
                start_at = time.time() + 1.0
                window = (start_at, start_at + args.seconds)
                for p in pipes:
                    p.send(start_at)
            else:
                p_parent, p_child = ctx.Pipe(duplex=False)
                producer = ctx.Process(
                    target=_librdkafka_producer,
                    args=(bootstrap, topic, test.split("=")[1], args.rate, total, p_child),
                    daemon=True,
                )
                producer.start()
                producers.append(producer)
                pipes.append(p_parent)
            # While the producers run (their results come at the end).
            if args.profile and kind == "kfast":
                spy = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "-p",
                        str(proc.pid),
                        "-d",
                        str(int(args.seconds)),
                        "-r",
                        "250",
                        *(["--native"] if args.profile_native else []),
                        "-f",
                        "raw",
                        "-o",
                        os.path.join(args.profile, f"{name}.txt"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            client = [p.recv() if p.poll(limit) else {"error": "no result"} for p in pipes]
            if not parent.poll(limit):
                raise RuntimeError("consumer gave no result")
            at_bytes, latency_bytes, to_append_bytes, consumer_cpu = parent.recv()
            broker_cpu = (cpu_seconds(proc.pid) - cpu_before) / (time.monotonic() - clock_before)
            request_times = _request_times(metrics_port) if kind == "kfast" else {}
        finally:
            if spy is not None:
                try:
                    spy.wait(30)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait()
            for p in [consumer, *producers]:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join()
    at, latency, to_append = array("d"), array("d"), array("d")
    at.frombytes(at_bytes)
    latency.frombytes(latency_bytes)
    to_append.frombytes(to_append_bytes)
    stats = LatencyStats(reporting_interval_ms=10**9)
    for t, ms in zip(at, latency):
        stats.record(ms, RECORD_SIZE, stats.start + t)
    summary = stats.summary(elapsed_s=at[-1] if len(at) else 0)
    result = {
        "broker": kind,
        "test": test,
        "records": stats.count,
        "expected": total,
        "p50_ms": summary["percentiles_ms"]["p50"],
        "p99_ms": summary["percentiles_ms"]["p99"],
        "p99.9_ms": summary["percentiles_ms"]["p99.9"],
        "max_ms": summary["max_latency_ms"],
        "load_1m": _load(),
        "broker_cpu": broker_cpu,
        "window": window,
        "request_times_ms": request_times,
        "consumer_cpu": consumer_cpu,
        "client": client,
    }
    if len(to_append) == len(latency) and len(latency):
        # send -> append (client, sockets, the broker's read) and append ->
        # receive (the woken fetch, the consumer), ms; append time is whole ms.
        result["send_to_append_ms"] = _spread(to_append)
        result["append_to_receive_ms"] = _spread(
            array("d", (total_ms - part for total_ms, part in zip(latency, to_append)))
        )
    if plots:
        plot(
            os.path.join(plots, f"{name}.png"),
            stats,
            f"{kind}: produce-to-consume latency, {test}, {args.rate:,} records/s",
        )
    return result


def _median_row(results: list[dict]) -> dict:
    quietest = min(results, key=lambda r: r["load_1m"])
    row = {"rounds": len(results), "quietest": quietest}
    for key in ("p50_ms", "p99_ms", "p99.9_ms", "max_ms", "load_1m"):
        row[key] = statistics.median(r[key] for r in results)
    return row


def table(results: dict) -> str:
    lines = [
        "| test | broker | p50 / p99 / p99.9 / max ms (median of rounds) | load 1m "
        "| quietest round: p50 / p99 / p99.9 / max ms (load) | producer pacing p99 ms |",
        "|---|---|---|---|---|---|",
    ]
    for (test, kind), rounds in results.items():
        row = _median_row(rounds)
        q = row["quietest"]
        paced = [c["pacing_ms"]["p99"] for r in rounds for c in r["client"] if "pacing_ms" in c]
        pacing = f"{statistics.median(paced):.2f}" if paced else "-"

        lines.append(
            f"| {test} | {kind} "
            f"| {row['p50_ms']:.2f} / {row['p99_ms']:.2f} / {row['p99.9_ms']:.2f} / "
            f"{row['max_ms']:.1f} | {row['load_1m']:.2f} "
            f"| {q['p50_ms']:.2f} / {q['p99_ms']:.2f} / {q['p99.9_ms']:.2f} / {q['max_ms']:.1f} "
            f"({q['load_1m']:.2f}) | {pacing} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--tests", default=",".join(TESTS))
    parser.add_argument("--rate", type=int, default=10_000, help="records/s in all")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--producer-procs", type=int, default=2)
    parser.add_argument(
        "--producer-nice",
        type=int,
        default=0,
        help="connections test: the producer processes' nice increment. A diagnosis "
        "of a shared machine (what the broker does when its load generator does "
        "not take its CPU), not the benchmark's figure",
    )
    parser.add_argument("--rounds", type=int, default=1, help="the brokers take turns")
    parser.add_argument("--plots", metavar="DIR", help="PNG per test and broker (last round)")
    parser.add_argument("--probe", metavar="DIR", help="kfast under bench/latency_probe.py")
    parser.add_argument(
        "--no-gc-freeze", action="store_true", help="with --probe: kfast's GC left as CPython's"
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy raw profile of kfast per test")
    parser.add_argument(
        "--profile-native", action="store_true", help="--profile with C frames (py-spy --native)"
    )
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument(
        "--append-time",
        action="store_true",
        help="LogAppendTime topic: split each latency at the broker's append (diagnosis)",
    )
    args = parser.parse_args()
    for directory in (args.plots, args.probe, args.profile):
        if directory:
            os.makedirs(directory, exist_ok=True)
    kinds = args.brokers.split(",")
    tests = args.tests.split(",")
    results: dict = {}
    for round_number in range(args.rounds):
        for test in tests:
            for kind in kinds if round_number % 2 == 0 else kinds[::-1]:
                result = measure(kind, test, args, args.plots)
                print(json.dumps(result), file=sys.stderr, flush=True)
                results.setdefault((test, kind), []).append(result)
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r for rounds in results.values() for r in rounds], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
