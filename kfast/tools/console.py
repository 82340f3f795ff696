"""``kfast produce`` and ``kfast consume``: kafka-console-producer.sh and
kafka-console-consumer.sh (without consumer groups).

Producing: one record per line of stdin. The line syntax is Kafka's
LineMessageReader's, set with ``--property``:

    parse.key=true        key.separator=<TAB>        (KEY<sep>VALUE)
    parse.headers=true    headers.delimiter=<TAB>    (HEADERS<delim>[KEY<sep>]VALUE)
                          headers.separator=,  headers.key.separator=:   (h1:v1,h2:v2)
    null.marker=X         a key, value or header value equal to X is null (a header
                          section equal to X: no headers)
    ignore.error=true     a missing separator is not an error: a line without a key
                          separator is a value (null key), a header without a key
                          separator has a null value

Ambiguous settings (two of the header separators, or the null marker and
one of them, equal) are refused as Kafka refuses them. An empty header
section means no headers.

``--headers`` is short for ``--property parse.headers=true``.

Consuming prints each record as Kafka's DefaultMessageFormatter does, with
``--property print.timestamp|print.partition|print.offset|print.headers|
print.key|print.value=true|false``, ``key.separator``, ``line.separator``,
``headers.separator``, ``null.literal``; ``--format json`` prints one JSON
object per record instead, kcat's ``-J`` envelope (``topic``, ``partition``,
``offset``, ``tstype``, ``ts``, ``broker``, ``headers`` as a flat
[name, value, ...] list, ``key``, ``payload``; bytes decoded as UTF-8 with
undecodable bytes replaced). It stops after ``--max-messages`` records or
``--timeout-ms`` without a new record, and then prints ``Processed a total
of N messages`` on stderr, as kafka-console-consumer.sh.

Kafka client properties come as in Kafka's console tools:
``--producer.config FILE`` / ``--consumer.config FILE``, then
``--producer-property`` / ``--consumer-property NAME=VALUE`` (which win),
then the flags (``--acks``, ``--linger-ms``, ``--batch-size``,
``--compression``, ``--isolation-level``), which win when given. They are
read with kfast's client property table (kfast.client.properties): an
unknown name is logged and ignored, as Kafka's clients do; an invalid value
stops the tool with Kafka's ConfigException message. TLS and SASL listeners
are reached with Kafka's settings (security.protocol, ssl.truststore.*,
ssl.keystore.*, sasl.mechanism, sasl.jaas.config).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

from kfast.client.admin import EARLIEST, LATEST
from kfast.client.fetcher import ConsumerRecord, Fetcher, decode_records
from kfast.client.producer import KafkaProducer
from kfast.client.properties import (
    CODECS,
    Client,
    ClientProperties,
    parse_client_properties,
    read_properties,
)
from kfast.config import ConfigException
from kfast.protocol import errors
from kfast.records import TIMESTAMP_LOG_APPEND_TIME

# The console producer's defaults where they differ from the producer's
# (ConsoleProducer: linger.ms 1000, client.id console-producer).
_PRODUCER_FLAGS = {
    "compression": ("compression.type", "none"),
    "acks": ("acks", "-1"),
    "batch_size": ("batch.size", "16384"),
    "linger_ms": ("linger.ms", "1000"),
}


def producer_properties(args) -> ClientProperties:
    """The producer's properties: --producer.config, then --producer-property,
    then the flags given (else their defaults where no property says
    otherwise); unknown names are logged and ignored, as Kafka's producer
    does, invalid values refused (ConfigException)."""
    props = read_properties(args.producer_property, args.producer_config)
    for flag, (name, default) in _PRODUCER_FLAGS.items():
        given = getattr(args, flag)
        if given is not None or name not in props:
            props[name] = default if given is None else str(given)
    props.setdefault("client.id", "kfast-console-producer")
    return parse_client_properties(props, Client.PRODUCER, strict=False)


def consumer_properties(args) -> ClientProperties:
    """The consumer's properties: --consumer.config, then --consumer-property,
    then --isolation-level; lenient as Kafka's consumer."""
    props = read_properties(args.consumer_property, args.consumer_config)
    if args.isolation_level is not None or "isolation.level" not in props:
        props["isolation.level"] = args.isolation_level or "read_uncommitted"
    props.setdefault("client.id", "kfast-console-consumer")
    return parse_client_properties(props, Client.CONSUMER, strict=False)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "produce",
        help="write lines of stdin as records (like kafka-console-producer.sh)",
        description="Read records from stdin, one per line, and produce them to a topic.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="write every record to this partition")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="line reader property (parse.key, key.separator, parse.headers, ...)",
    )
    p.add_argument("--headers", action="store_true", help="same as --property parse.headers=true")
    # Explicit flags win over --producer-property / --producer.config, which
    # win over the flags' defaults (Kafka's CommandLineUtils.maybeMergeOptions).
    p.add_argument(
        "--compression",
        "--compression-codec",
        dest="compression",
        choices=sorted(CODECS),
        help="compression codec of the record batches (default none)",
    )
    p.add_argument(
        "--acks",
        "--request-required-acks",
        dest="acks",
        choices=["0", "1", "-1", "all"],
        help="acknowledgements to wait for (default -1)",
    )
    p.add_argument("--batch-size", help="record batch size in bytes (default 16384)")
    p.add_argument(
        "--linger-ms",
        "--timeout",
        dest="linger_ms",
        help="how long a batch may wait for more records (ms, default 1000)",
    )
    p.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Kafka producer property (acks, linger.ms, client.id, ...)",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="producer properties file (--producer-property takes precedence)",
    )
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.set_defaults(handler=run_produce)

    c = subparsers.add_parser(
        "consume",
        help="print records of a topic (like kafka-console-consumer.sh, without groups)",
        description="Read records from a topic's partitions and print them.",
    )
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int, help="read only this partition")
    c.add_argument(
        "--offset",
        default=None,
        help="earliest, latest or an offset (with --partition); default latest",
    )
    c.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    c.add_argument("--max-messages", type=int, help="stop after this many records")
    c.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    c.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="formatter property (print.key, print.timestamp, key.separator, ...)",
    )
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        help="default read_uncommitted; wins over the isolation.level property",
    )
    c.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Kafka consumer property (fetch.max.bytes, client.id, ...)",
    )
    c.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer properties file (--consumer-property takes precedence)",
    )
    c.set_defaults(handler=run_consume)


class UsageError(Exception):
    pass


def parse_properties(items: list[str]) -> dict[str, str]:
    properties = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"Invalid property {item!r}: expected NAME=VALUE")
        properties[name.strip()] = value
    return properties


def _unescape(text: str) -> str:
    # A shell hands "\t" over as two characters; Kafka's tools read Java
    # property escapes, so do the same for the separators.
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


# ---- producing ----------------------------------------------------------------------------


class LineReader:
    """Splits a console line into (key, value, headers) by Kafka's LineMessageReader rules."""

    def __init__(self, properties: dict[str, str]):
        self.parse_key = _true(properties.get("parse.key"))
        self.key_separator = _unescape(properties.get("key.separator", "\t"))
        self.parse_headers = _true(properties.get("parse.headers"))
        self.headers_delimiter = _unescape(properties.get("headers.delimiter", "\t"))
        self.headers_separator = _unescape(properties.get("headers.separator", ","))
        self.headers_key_separator = _unescape(properties.get("headers.key.separator", ":"))
        self.ignore_error = _true(properties.get("ignore.error"))
        self.null_marker = properties.get("null.marker")
        if self.null_marker is not None:
            self.null_marker = _unescape(self.null_marker)
        if self.parse_headers:
            self._check_distinct(
                {
                    "headers.delimiter": self.headers_delimiter,
                    "headers.separator": self.headers_separator,
                    "headers.key.separator": self.headers_key_separator,
                }
            )

    def _check_distinct(self, separators: dict[str, str]) -> None:
        # Kafka's LineMessageReader refuses settings that make a line ambiguous.
        names = list(separators)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if separators[first] == separators[second]:
                    raise UsageError(f"{first} and {second} may not be equal")
        if self.null_marker is not None:
            for name in names:
                if self.null_marker == separators[name]:
                    raise UsageError(f"null.marker and {name} may not be equal")

    def _field(self, text: str) -> bytes | None:
        if self.null_marker is not None and text == self.null_marker:
            return None
        return text.encode()

    def _header(self, pair: str, line_number: int) -> tuple[str, bytes | None]:
        name, sep, value = pair.partition(self.headers_key_separator)
        if not sep:
            if self.ignore_error:
                return pair, None
            raise UsageError(
                f"No header key separator found in pair '{pair}' on line number {line_number}"
            )
        if self.null_marker is not None and name == self.null_marker:
            raise UsageError(
                f"Header keys should not be equal to the null marker "
                f"'{self.null_marker}' as they can't be null"
            )
        return name, self._field(value)

    def read(self, line: str, line_number: int):
        rest = line
        headers = []
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise UsageError(
                        f"No headers delimiter found on line number {line_number}: '{line}'"
                    )
            else:
                rest = tail
                # A header section equal to the null marker means no headers;
                # so does an empty one (kfast's leniency: Kafka reads a pair '').
                if head and head != self.null_marker:
                    for pair in head.split(self.headers_separator):
                        headers.append(self._header(pair, line_number))
        key = None
        if self.parse_key:
            key_text, sep, value_text = rest.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise UsageError(
                        f"No key separator found on line number {line_number}: '{line}'"
                    )
                value_text = rest
            else:
                key = self._field(key_text)
            rest = value_text
        return key, self._field(rest), headers


def run_produce(args, stdin=None, err=None) -> int:
    stdin = stdin or sys.stdin
    err = err or sys.stderr
    try:
        properties = parse_properties(args.property)
        if args.headers:
            properties["parse.headers"] = "true"
        reader = LineReader(properties)
        return asyncio.run(_produce(args, producer_properties(args), reader, stdin, err))
    except (UsageError, ConfigException, errors.KafkaError) as exc:
        err.write(f"ERROR {exc}\n")
        return 1


async def _produce(args, props: ClientProperties, reader: LineReader, stdin, err) -> int:
    producer = KafkaProducer(
        args.bootstrap_server, allow_auto_topic_creation=True, **props.producer_arguments()
    )
    await producer.start()
    failures = 0
    pending = []
    try:
        number = 0
        async for line in _lines(stdin):
            number += 1
            line = line.rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            key, value, headers = reader.read(line, number)
            future = await producer.send(
                args.topic, value, key, partition=args.partition, headers=headers
            )
            if args.sync:
                await producer.flush()
            pending.append(future)
            if len(pending) >= 10000:
                failures += _report(pending, err)
                pending = []
        await producer.flush()
        failures += _report(pending, err)
    finally:
        await producer.close()
    return 1 if failures else 0


async def _lines(stdin):
    """Lines of stdin, read on a thread so that the producer keeps sending
    (linger, retries) while an interactive user is typing."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue(maxsize=0)

    def hand_over(item) -> bool:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
            return True
        except RuntimeError:  # the loop is closed: the producer stopped reading
            return False

    def pump():
        try:
            for line in stdin:
                if not hand_over(line):
                    return
        finally:
            hand_over(None)  # end of input (or a read error): stop waiting

    threading.Thread(target=pump, name="kfast-produce-stdin", daemon=True).start()
    while True:
        line = await queue.get()
        if line is None:
            return
        yield line


def _report(futures, err) -> int:
    failures = 0
    for future in futures:
        if not future.done():
            continue
        exc = future.exception()
        if exc is not None:
            failures += 1
            err.write(f"ERROR Error when sending message to topic: {exc}\n")
    return failures


# ---- consuming ----------------------------------------------------------------------------


class MessageFormatter:
    """Kafka's DefaultMessageFormatter: the fields asked for, in its order."""

    def __init__(self, properties: dict[str, str]):
        self.print_timestamp = _true(properties.get("print.timestamp"))
        self.print_partition = _true(properties.get("print.partition"))
        self.print_offset = _true(properties.get("print.offset"))
        self.print_headers = _true(properties.get("print.headers"))
        self.print_key = _true(properties.get("print.key"))
        self.print_value = _true(properties.get("print.value", "true"))
        self.key_separator = _unescape(properties.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(properties.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(properties.get("headers.separator", ",")).encode()
        self.null_literal = _unescape(properties.get("null.literal", "null")).encode()

    def format(self, record: ConsumerRecord) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            # Kafka prints NO_TIMESTAMP only for magic-0 records, which have no
            # timestamp type; a v2 record without a timestamp is CreateTime:-1.
            kind = (
                "LogAppendTime"
                if record.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
                else "CreateTime"
            )
            fields.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if record.headers:
                fields.append(
                    self.headers_separator.join(
                        name.encode() + b":" + (self.null_literal if value is None else value)
                        for name, value in record.headers
                    )
                )
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            fields.append(self.null_literal if record.value is None else record.value)
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator


def json_line(record: ConsumerRecord, broker: int) -> bytes:
    """One record as kcat -J prints it."""

    def text(value):
        return None if value is None else value.decode("utf-8", "replace")

    envelope = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "tstype": "logappend" if record.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else "create",
        "ts": record.timestamp,
        "broker": broker,
    }
    if record.headers:
        envelope["headers"] = [
            item for name, value in record.headers for item in (name, text(value))
        ]
    envelope["key"] = text(record.key)
    envelope["payload"] = text(record.value)
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _start_spec(args):
    """EARLIEST, LATEST or an explicit offset."""
    if args.from_beginning and args.offset is not None:
        raise UsageError("--from-beginning and --offset cannot be used together")
    if args.from_beginning:
        return EARLIEST
    if args.offset is None or args.offset == "latest":
        return LATEST
    if args.offset == "earliest":
        return EARLIEST
    try:
        offset = int(args.offset)
    except ValueError:
        raise UsageError(
            f"--offset must be earliest, latest or a number, not {args.offset!r}"
        ) from None
    if args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if offset < 0:
        raise UsageError("The offset must be non-negative")
    return ("offset", offset)


def run_consume(args, out=None, err=None) -> int:
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    try:
        properties = parse_properties(args.property)
        spec = _start_spec(args)
        return asyncio.run(
            _consume(args, consumer_properties(args), spec, MessageFormatter(properties), out, err)
        )
    except (UsageError, ConfigException, errors.KafkaError) as exc:
        err.write(f"ERROR {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 0


async def _consume(
    args, props: ClientProperties, spec, formatter: MessageFormatter, out, err
) -> int:
    fetcher = Fetcher(args.bootstrap_server, **{"max_wait_ms": 500, **props.fetcher_arguments()})
    isolation = fetcher.isolation_level
    partition_max_bytes = props.get("max.partition.fetch.bytes", 1 << 20)
    await fetcher.start()
    processed = 0
    try:
        partitions = (
            [args.partition]
            if args.partition is not None
            else await fetcher.cluster.partitions_for(args.topic)
        )
        keys = [(args.topic, p) for p in partitions]
        if isinstance(spec, tuple):
            positions = {key: spec[1] for key in keys}
        else:
            positions = await fetcher.list_offsets({key: spec for key in keys})
        last_record = time.monotonic()
        timeout = None if args.timeout_ms is None else args.timeout_ms / 1000.0
        while args.max_messages is None or processed < args.max_messages:
            wait_ms = fetcher.max_wait_ms
            if timeout is not None:
                remaining = timeout - (time.monotonic() - last_record)
                if remaining <= 0:
                    break
                wait_ms = max(0, min(wait_ms, int(remaining * 1000)))
            try:
                fetched = await fetcher.fetch_many(positions, partition_max_bytes, wait_ms)
            except errors.OffsetOutOfRangeException as exc:
                # auto.offset.reset=latest for the console consumer without --from-beginning,
                # earliest with it: the partition moves to that end.
                reset = EARLIEST if spec == EARLIEST else LATEST
                key = exc.topic_partition
                if key is None:  # the fetcher names the partition of every such error
                    raise
                positions[key] = (await fetcher.list_offsets({key: reset}))[key]
                continue
            got_any = False
            for key in keys:
                part = fetched.get(key)
                if part is None:
                    continue
                positions[key] = part.next_offset
                for record in decode_records(part, isolation):
                    got_any = True
                    if args.format == "json":
                        out.write(json_line(record, await fetcher.cluster.leader_for(*key)))
                    else:
                        out.write(formatter.format(record))
                    processed += 1
                    if args.max_messages is not None and processed >= args.max_messages:
                        break
                if args.max_messages is not None and processed >= args.max_messages:
                    break
            if got_any:
                out.flush()
                last_record = time.monotonic()
    finally:
        await fetcher.close()
        err.write(f"Processed a total of {processed} messages\n")
    return 0
