"""The text formats of `kfast produce` and `kfast consume`, no broker needed:
line parsing as Kafka's LineMessageReader (parse.key, parse.headers,
separators, null.marker, ignore.error), printing as its DefaultMessageFormatter."""

from __future__ import annotations

import pytest

from kfast.tools.console import LineReader, UsageError

BOTH = {"parse.key": "true", "parse.headers": "true"}


def read_all(properties, text):
    reader = LineReader(properties)
    return [reader.read(line, number) for number, line in enumerate(text.split("\n"), 1)]


def test_key_and_value():
    assert read_all({"parse.key": "true"}, "key0\tvalue0\nkey1\tvalue1") == [
        (b"key0", b"value0", []),
        (b"key1", b"value1", []),
    ]
    assert read_all({"parse.key": "true"}, "key\t") == [(b"key", b"", [])]
    assert read_all({}, "value") == [(None, b"value", [])]


def test_headers_key_and_value():
    assert read_all(BOTH, "headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0") == [
        (b"key0", b"value0", [("headerKey0", b"headerValue0"), ("headerKey1", b"headerValue1")])
    ]
    assert read_all(BOTH, ":\t\t") == [(b"", b"", [("", b"")])]
    assert read_all({"parse.headers": "true"}, "headerKey:headerValue\tvalue") == [
        (None, b"value", [("headerKey", b"headerValue")])
    ]


def test_separators_longer_than_one_character():
    properties = dict(
        BOTH,
        **{
            "key.separator": "\t\t",
            "headers.delimiter": "\t\t",
            "headers.separator": "---",
            "headers.key.separator": "::::",
        },
    )
    assert read_all(
        properties, "headerKey0.0::::headerValue0.0---headerKey1.0::::\t\tkey\t\tvalue"
    ) == [(b"key", b"value", [("headerKey0.0", b"headerValue0.0"), ("headerKey1.0", b"")])]


def test_missing_separators_are_errors():
    with pytest.raises(
        UsageError,
        match="No key separator found on line number 2: 'headerKey1.0:headerValue1.0\tkey1-value1'",
    ):
        read_all(BOTH, "h:v\tkey0\tvalue0\nheaderKey1.0:headerValue1.0\tkey1-value1")
    with pytest.raises(
        UsageError, match="No header key separator found in pair 'key-val' on line number 1"
    ):
        read_all(BOTH, "key-val\tkey0\tvalue0")
    with pytest.raises(UsageError, match="No headers delimiter found on line number 1"):
        read_all({"parse.headers": "true"}, "no delimiter")


def test_ignore_error_keeps_what_it_can():
    properties = dict(BOTH, **{"ignore.error": "true"})
    lines = "h0:v0,h1:v1-key1\tvalue1\nh2:v2\tkey2-value2\nnothing-at-all\nkey-val\tk\tv"
    assert read_all(properties, lines) == [
        (None, b"value1", [("h0", b"v0"), ("h1", b"v1-key1")]),
        (None, b"key2-value2", [("h2", b"v2")]),
        (None, b"nothing-at-all", []),
        (b"k", b"v", [("key-val", None)]),
    ]


def test_null_marker():
    properties = {"parse.key": "true", "null.marker": "<NULL>"}
    assert read_all(
        properties, "key\t\nkey\t<NULL>\nkey\t<NULL>value\n<NULL>\tvalue\n<NULL>\t<NULL>"
    ) == [
        (b"key", b"", []),
        (b"key", None, []),
        (b"key", b"<NULL>value", []),
        (None, b"value", []),
        (None, None, []),
    ]
    with_headers = dict(BOTH, **{"null.marker": "<NULL>"})
    lines = "h0:v0,h1:v1\t<NULL>\tvalue\n<NULL>\tkey\t<NULL>\nh0:<NULL>,h1:v1\tkey\t<NULL>"
    assert read_all(with_headers, lines) == [
        (None, b"value", [("h0", b"v0"), ("h1", b"v1")]),
        (b"key", None, []),
        (b"key", None, [("h0", None), ("h1", b"v1")]),
    ]
    with pytest.raises(
        UsageError, match="Header keys should not be equal to the null marker '<NULL>'"
    ):
        read_all(with_headers, "<NULL>:v0\tkey\tvalue")
    # Without a null marker the same text is just text.
    assert read_all({"parse.key": "true"}, "<NULL>\t<NULL>") == [(b"<NULL>", b"<NULL>", [])]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"headers.separator": "\t", "headers.key.separator": "\t"},
            "headers.delimiter and headers.separator may not be equal",
        ),
        (
            {"headers.key.separator": "\t"},
            "headers.delimiter and headers.key.separator may not be equal",
        ),
        (
            {"headers.separator": ":"},
            "headers.separator and headers.key.separator may not be equal",
        ),
        ({"null.marker": "\\t"}, "null.marker and headers.delimiter may not be equal"),
        ({"null.marker": ","}, "null.marker and headers.separator may not be equal"),
    ],
)
def test_ambiguous_separators_are_refused(overrides, message):
    with pytest.raises(UsageError, match=message):
        LineReader(dict(BOTH, **overrides))


def test_message_formatter_fields_and_separators():
    from kfast.client.fetcher import ConsumerRecord
    from kfast.tools.console import MessageFormatter

    record = ConsumerRecord("t", 3, 42, 1000, 0, None, b"value", [("a", b"1"), ("b", None)], 0)
    everything = {
        f"print.{name}": "true" for name in ("timestamp", "partition", "offset", "headers", "key")
    }
    assert (
        MessageFormatter(everything).format(record)
        == b"CreateTime:1000\tPartition:3\tOffset:42\ta:1,b:null\tnull\tvalue\n"
    )
    custom = dict(
        everything,
        **{
            "print.value": "false",
            "key.separator": "|",
            "line.separator": ";",
            "headers.separator": "&",
            "null.literal": "NIL",
        },
    )
    assert (
        MessageFormatter(custom).format(record)
        == b"CreateTime:1000|Partition:3|Offset:42|a:1&b:NIL|NIL;"
    )
    assert MessageFormatter({"print.value": "yes"}).format(record) == b""  # only "true" is true
    assert MessageFormatter({}).format(record) == b"value\n"
