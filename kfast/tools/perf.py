"""``kfast perf produce|consume|e2e``: kafka-producer-perf-test.sh,
kafka-consumer-perf-test.sh and Kafka's EndToEndLatency, against any
Kafka-compatible cluster.

    kfast perf produce --bootstrap-server H:P --topic t --num-records 100000 \\
        --record-size 100 --throughput -1 --producer-props acks=all linger.ms=5 \\
        [--payload-file F --payload-delimiter '\\n'] [--json out.json] [--plot out.png]
    kfast perf consume --bootstrap-server H:P --topic t --messages 100000 [--group g] \\
        [--json out.json] [--plot out.png]
    kfast perf e2e --bootstrap-server H:P --topic t --num-records 1000 --record-size 100 --acks all

produce prints ProducerPerformance's line every --reporting-interval ms and
its final line with the 50th/95th/99th/99.9th percentiles; consume prints
ConsumerPerformance's header and row; e2e prints EndToEndLatency's progress
(every 1000th record) and its averages. Percentiles come from an HDR
histogram (kfast.tools.perf_stats). ``--client`` picks confluent-kafka
(the default when installed) or kfast's own client
(kfast.tools.perf_clients).
"""

from __future__ import annotations

import random
import sys
import time

from kfast.client.properties import read_properties
from kfast.config import ConfigException
from kfast.tools import perf_clients
from kfast.tools.perf_stats import (
    CONSUMER_HEADER,
    LatencyStats,
    consumer_row,
    consumer_summary,
    e2e_final_lines,
    plot,
    plot_throughput,
    producer_final_line,
    throughput_windows,
    write_json,
)


def register(subparsers) -> None:
    perf = subparsers.add_parser(
        "perf",
        help="producer, consumer and end-to-end performance tests "
        "(like kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh)",
        description="Measure a Kafka-compatible cluster with a real client.",
    )
    actions = perf.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    def common(p):
        p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        p.add_argument("--topic", required=True)
        p.add_argument(
            "--client",
            choices=perf_clients.CLIENTS,
            default=perf_clients.default_client(),
            help="confluent (librdkafka; default when installed) or kfast's own client",
        )
        p.add_argument("--json", metavar="FILE", help="write the results as JSON ('-': stdout)")

    produce = actions.add_parser("produce", help="like kafka-producer-perf-test.sh")
    common(produce)
    produce.add_argument("--num-records", type=int, required=True)
    size = produce.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="bytes of each record's value")
    size.add_argument("--payload-file", help="values taken at random from this file")
    produce.add_argument(
        "--payload-delimiter",
        default="\\n",
        help="separates the payloads in --payload-file (default \\n)",
    )
    produce.add_argument(
        "--throughput", type=float, required=True, help="records/sec at most; -1: no limit"
    )
    produce.add_argument("--producer-props", nargs="+", default=[], metavar="NAME=VALUE")
    produce.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    produce.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    produce.add_argument("--plot", metavar="PNG", help="latency over time and histogram")
    produce.set_defaults(handler=run_produce)

    consume = actions.add_parser("consume", help="like kafka-consumer-perf-test.sh")
    common(consume)
    consume.add_argument("--messages", type=int, required=True)
    consume.add_argument("--group", default=None, help="default perf-consumer-<random>")
    consume.add_argument("--from-latest", action="store_true")
    consume.add_argument("--fetch-max-wait-ms", type=int, default=500)
    consume.add_argument(
        "--timeout",
        type=int,
        default=10000,
        metavar="MS",
        help="longest time between records before giving up",
    )
    consume.add_argument("--consumer.config", dest="consumer_config", metavar="FILE")
    consume.add_argument("--hide-header", action="store_true")
    consume.add_argument("--plot", metavar="PNG", help="throughput over time (records/s, MB/s)")
    consume.set_defaults(handler=run_consume)

    e2e = actions.add_parser("e2e", help="produce-to-consume latency (Kafka's EndToEndLatency)")
    common(e2e)
    e2e.add_argument("--num-records", type=int, required=True)
    e2e.add_argument("--record-size", type=int, required=True)
    e2e.add_argument("--acks", choices=("1", "all"), default="all")
    e2e.add_argument("--producer-props", nargs="+", default=[], metavar="NAME=VALUE")
    e2e.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="longest wait for one record's round trip",
    )
    e2e.add_argument("--plot", metavar="PNG", help="latency over time and histogram")
    e2e.set_defaults(handler=run_e2e)


def parse_props(items: list[str], path: str | None = None) -> dict[str, str]:
    try:
        return read_properties(items, path)
    except ConfigException as exc:
        raise SystemExit(f"invalid property: {exc}") from None


_LETTERS = bytes(65 + b % 26 for b in range(256))  # byte -> 'A'..'Z'


def random_payload(size: int, seed: int = 0) -> bytes:
    """ProducerPerformance's payload: random upper-case letters."""
    return random.Random(seed).randbytes(size).translate(_LETTERS)


def payloads(args) -> list[bytes]:
    if args.payload_file is None:
        return [random_payload(args.record_size)]
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    with open(args.payload_file, "rb") as f:
        found = [p for p in f.read().split(delimiter) if p]
    if not found:
        raise SystemExit(f"File does not contain any payloads: {args.payload_file}")
    print(f"Reading payloads from: {args.payload_file}")
    print(f"Number of messages read: {len(found)}")
    random.Random(0).shuffle(found)
    return found


def _client_banner(args) -> dict:
    return {"client": args.client, "bootstrap_server": args.bootstrap_server, "topic": args.topic}


def run_produce(args, out=None) -> int:
    out = out or sys.stdout
    props = parse_props(args.producer_props, args.producer_config)
    stats = LatencyStats(args.reporting_interval, out=out)
    failed = perf_clients.PRODUCE[args.client](
        args.bootstrap_server,
        args.topic,
        payloads(args),
        args.num_records,
        args.throughput,
        props,
        stats,
    )
    summary = stats.summary()
    print(producer_final_line(summary), file=out, flush=True)
    if failed:
        print(f"{failed} records failed", file=sys.stderr)
    if args.json:
        write_json(
            args.json,
            {
                "test": "produce",
                **_client_banner(args),
                "producer_props": props,
                "failed": failed,
                "windows": stats.windows,
                **summary,
            },
        )
    if args.plot:
        plot(
            args.plot,
            stats,
            f"kfast perf produce: {args.num_records} x "
            f"{args.record_size or 'file'} B, {args.client} client",
        )
    return 1 if failed else 0


def run_consume(args, out=None) -> int:
    out = out or sys.stdout
    props = parse_props([], args.consumer_config)
    group = args.group or f"perf-consumer-{random.randrange(100000)}"
    timeline: list = []
    start, started = time.time(), time.monotonic()
    records, size, rebalance_ms = perf_clients.CONSUME[args.client](
        args.bootstrap_server,
        args.topic,
        group,
        args.messages,
        args.timeout,
        args.from_latest,
        args.fetch_max_wait_ms,
        props,
        timeline,
    )
    end = time.time()
    windows = throughput_windows(timeline, started)
    if records < args.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout "
            f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the timeout.",
            file=out,
        )
    if not args.hide_header:
        print(CONSUMER_HEADER, file=out)
    print(consumer_row(start, end, records, size, rebalance_ms), file=out, flush=True)
    if args.json:
        write_json(
            args.json,
            {
                "test": "consume",
                **_client_banner(args),
                "group": group,
                "windows": windows,
                **consumer_summary(start, end, records, size, rebalance_ms),
            },
        )
    if args.plot:
        plot_throughput(
            args.plot, windows, f"kfast perf consume: {records} records, {args.client} client"
        )
    return 0


class _E2EProgress(LatencyStats):
    """EndToEndLatency prints ``i<TAB>latency`` for every 1000th record."""

    def record(self, latency_ms: float, size: int, now: float | None = None) -> None:
        if self.count % 1000 == 0 and self.out is not None:
            print(f"{self.count}\t{latency_ms}", file=self.out, flush=True)
        super().record(latency_ms, size, now)

    def print_window(self, now: float) -> None:
        out, self.out = self.out, None  # keep the windows for --json, print only the above
        super().print_window(now)
        self.out = out


def run_e2e(args, out=None) -> int:
    out = out or sys.stdout
    props = parse_props(args.producer_props)
    stats = _E2EProgress(5000, out=out)
    perf_clients.E2E[args.client](
        args.bootstrap_server,
        args.topic,
        [random_payload(args.record_size, i) for i in range(min(args.num_records, 256))],
        args.num_records,
        args.acks,
        props,
        stats,
        args.timeout,
    )
    summary = stats.summary()
    for line in e2e_final_lines(summary):
        print(line, file=out, flush=True)
    if args.json:
        write_json(
            args.json,
            {
                "test": "e2e",
                **_client_banner(args),
                "acks": args.acks,
                "windows": stats.windows,
                **summary,
            },
        )
    if args.plot:
        plot(
            args.plot,
            stats,
            f"kfast perf e2e: {args.num_records} x {args.record_size} B, "
            f"acks={args.acks}, {args.client} client",
        )
    return 0
