"""Decode the OTLP MetricsData protobuf clients push with PushTelemetry
(KIP-714): a protobuf wire reader with bounds checks, for the fields a
broker exposes.

Protobuf wire grammar (varints little-endian base 128, at most 10 bytes)::

    message   := field*
    field     := key payload            key = varint (field_number << 3 | wire_type)
    payload   := varint                 wire_type 0
               | 8 bytes little-endian  wire_type 1 (fixed64, sfixed64, double)
               | varint length, bytes   wire_type 2 (string, bytes, message, packed)
               | 4 bytes little-endian  wire_type 5 (fixed32, float)
    (wire types 3 and 4, groups, are not used by OTLP and are rejected)

The OTLP messages read (opentelemetry/proto/metrics/v1/metrics.proto;
field number: type name; fields not listed are skipped)::

    MetricsData          1: ResourceMetrics resource_metrics (repeated)
    ResourceMetrics      1: Resource resource   2: ScopeMetrics scope_metrics (repeated)
    Resource             1: KeyValue attributes (repeated)
    ScopeMetrics         2: Metric metrics (repeated)
    Metric               1: string name   5: Gauge gauge   7: Sum sum   9: Histogram histogram
    Gauge                1: NumberDataPoint data_points (repeated)
    Sum                  1: NumberDataPoint data_points (repeated)
                         2: enum aggregation_temporality (1 DELTA, 2 CUMULATIVE)
                         3: bool is_monotonic
    Histogram            1: HistogramDataPoint data_points (repeated)
                         2: enum aggregation_temporality
    NumberDataPoint      7: KeyValue attributes (repeated)   4: double as_double
                         6: sfixed64 as_int
    HistogramDataPoint   9: KeyValue attributes (repeated)   4: fixed64 count   5: double sum
    KeyValue             1: string key   2: AnyValue value
    AnyValue             1: string string_value   2: bool bool_value   3: int64 int_value
                         4: double double_value   (arrays, kvlists, bytes: skipped)

Anything that breaks the grammar -- a truncated varint or payload, a length
past its message's end, a group, invalid UTF-8 in a name -- raises
``OtlpDecodeError``; the broker answers INVALID_RECORD, as Kafka does when
its receiver fails.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

TEMPORALITY_DELTA = 1
TEMPORALITY_CUMULATIVE = 2

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")


class OtlpDecodeError(ValueError):
    pass


class MetricPoint(NamedTuple):
    """One data point: ``kind`` "gauge", "sum" or "histogram"; ``value`` is
    the number (a histogram's sum); ``count`` a histogram's count."""

    name: str
    kind: str
    attributes: tuple[tuple[str, str], ...]  # resource attributes, then the point's
    value: float
    # OTLP's name for it; as a NamedTuple field it hides tuple.count (a method).
    count: int  # type: ignore[assignment]
    temporality: int
    monotonic: bool


Span = tuple[int, int]  # (start, end) of a length-delimited field in the buffer
# A field's value by wire type: 0 an int, 1 and 5 the 8 or 4 raw bytes, 2 a Span.
FieldValue = int | bytes | Span
Attributes = tuple[tuple[str, str], ...]


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise OtlpDecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise OtlpDecodeError("varint longer than 10 bytes")


def _fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, FieldValue]]:
    """(field number, wire type, value): an int for varints, the 8 or 4 raw
    bytes for fixed fields, (start, end) for length-delimited ones."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise OtlpDecodeError("field number 0")
        value: FieldValue
        if wire_type == 0:
            value, pos = _varint(buf, pos, end)
        elif wire_type == 1:
            if pos + 8 > end:
                raise OtlpDecodeError("truncated fixed64")
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = _varint(buf, pos, end)
            if length > end - pos:
                raise OtlpDecodeError("length past the end of its message")
            value, pos = (pos, pos + length), pos + length
        elif wire_type == 5:
            if pos + 4 > end:
                raise OtlpDecodeError("truncated fixed32")
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise OtlpDecodeError(f"unsupported wire type {wire_type}")
        yield number, wire_type, value


def _wrong_type(wire_type: int, wanted: int, what: str) -> OtlpDecodeError:
    return OtlpDecodeError(f"{what}: wire type {wire_type}, expected {wanted}")


# A value's Python type follows from its wire type (_fields), so checking the
# type is checking the wire type.
def _span(wire_type: int, value: FieldValue, what: str) -> Span:
    if not isinstance(value, tuple):
        raise _wrong_type(wire_type, 2, what)
    return value


def _int(wire_type: int, value: FieldValue, what: str) -> int:
    if not isinstance(value, int):
        raise _wrong_type(wire_type, 0, what)
    return value


def _fixed64(wire_type: int, value: FieldValue, what: str) -> bytes:
    if wire_type != 1 or not isinstance(value, bytes):
        raise _wrong_type(wire_type, 1, what)
    return value


def _string(buf: bytes, span: Span) -> str:
    try:
        return buf[span[0] : span[1]].decode("utf-8")
    except UnicodeDecodeError:
        raise OtlpDecodeError("invalid UTF-8") from None


def _any_value(buf: bytes, start: int, end: int) -> str | None:
    for number, _, value in _fields(buf, start, end):
        if number == 1 and isinstance(value, tuple):
            return _string(buf, value)
        if number == 2 and isinstance(value, int):
            return "true" if value else "false"
        if number == 3 and isinstance(value, int):
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and isinstance(value, bytes) and len(value) == 8:
            return repr(_DOUBLE.unpack(value)[0])
    return None


def _key_value(buf: bytes, start: int, end: int) -> tuple[str, str] | None:
    key = value = None
    for number, wire_type, field in _fields(buf, start, end):
        if number == 1:
            key = _string(buf, _span(wire_type, field, "KeyValue.key"))
        elif number == 2:
            value = _any_value(buf, *_span(wire_type, field, "KeyValue.value"))
    return None if key is None or value is None else (key, value)


def _attributes(buf: bytes, spans: list[Span]) -> Attributes:
    pairs = (_key_value(buf, *span) for span in spans)
    return tuple(pair for pair in pairs if pair is not None)


# What a data point's fields are: field number -> role (attributes are
# length-delimited, the numbers fixed64).
_NUMBER_POINT = {7: "attributes", 4: "double", 6: "int"}
_HISTOGRAM_POINT = {9: "attributes", 5: "double", 4: "count"}


def _point(
    buf: bytes, start: int, end: int, layout: dict[int, str]
) -> tuple[Attributes, float, int]:
    """(attributes, value, count) of a NumberDataPoint or HistogramDataPoint."""
    spans: list[Span] = []
    value, count = 0.0, 0
    for number, wire_type, field in _fields(buf, start, end):
        role = layout.get(number)
        if role is None:
            continue
        what = f"data point field {number}"
        if role == "attributes":
            spans.append(_span(wire_type, field, what))
        elif role == "double":
            value = _DOUBLE.unpack(_fixed64(wire_type, field, what))[0]
        elif role == "int":
            value = float(_INT64.unpack(_fixed64(wire_type, field, what))[0])
        else:
            count = _UINT64.unpack(_fixed64(wire_type, field, what))[0]
    return _attributes(buf, spans), value, count


_METRIC_KINDS = {5: "gauge", 7: "sum", 9: "histogram"}


def _metric(buf: bytes, start: int, end: int, resource: Attributes, out: list[MetricPoint]) -> None:
    name = None
    data: tuple[str, Span] | None = None
    for number, wire_type, field in _fields(buf, start, end):
        if number == 1:
            name = _string(buf, _span(wire_type, field, "Metric.name"))
        elif number in _METRIC_KINDS:
            data = (_METRIC_KINDS[number], _span(wire_type, field, "Metric.data"))
    if name is None or data is None:
        return
    kind, (data_start, data_end) = data
    layout = _HISTOGRAM_POINT if kind == "histogram" else _NUMBER_POINT
    spans: list[Span] = []
    temporality, monotonic = 0, False
    for number, wire_type, field in _fields(buf, data_start, data_end):
        if number == 1:
            spans.append(_span(wire_type, field, "data_points"))
        elif number == 2 and kind != "gauge":
            temporality = _int(wire_type, field, "aggregation_temporality")
        elif number == 3 and kind == "sum":
            monotonic = bool(_int(wire_type, field, "is_monotonic"))
    for span in spans:
        attributes, value, count = _point(buf, *span, layout)
        out.append(
            MetricPoint(name, kind, resource + attributes, value, count, temporality, monotonic)
        )


def decode_metrics_data(data: bytes) -> list[MetricPoint]:
    """Every gauge, sum and histogram point of a MetricsData message."""
    buf = bytes(data)
    out: list[MetricPoint] = []
    for number, wire_type, resource_metrics in _fields(buf, 0, len(buf)):
        if number != 1:
            continue
        what = "MetricsData.resource_metrics"
        resource: Attributes = ()
        scopes: list[Span] = []
        for field_number, field_type, field in _fields(
            buf, *_span(wire_type, resource_metrics, what)
        ):
            if field_number == 1:
                spans: list[Span] = []
                for n, t, attribute in _fields(
                    buf, *_span(field_type, field, "ResourceMetrics.resource")
                ):
                    if n == 1:
                        spans.append(_span(t, attribute, "Resource.attributes"))
                resource = _attributes(buf, spans)
            elif field_number == 2:
                scopes.append(_span(field_type, field, "ResourceMetrics.scope_metrics"))
        for scope in scopes:
            for n, t, metric in _fields(buf, *scope):
                if n == 2:
                    _metric(buf, *_span(t, metric, "ScopeMetrics.metrics"), resource, out)
    return out
