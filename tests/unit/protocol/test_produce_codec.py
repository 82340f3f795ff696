"""kfast._ext.produce_codec (Produce's fast path) against the generic,
schema-driven codec, which defines the wire format: the same values for
every request the fast decoder accepts, the same error for malformed ones,
the same response bytes for every version it encodes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast._ext.produce_codec import (
    PartitionResult,
    decode_produce_request,
    encode_produce_response,
)
from kfast.protocol import (
    ProduceRequest,
    ProduceResponse,
    api_keys,
    decode_request_body,
    decode_request_header,
    encode_request,
    encode_response_parts,
    errors,
)
from tests.unit.hypothesis_budget import examples
from tests.unit.protocol.fast_decoder_oracle import assert_agrees_on
from tests.unit.protocol.protocol_strategies import mutated_requests

VERSIONS = st.integers(min_value=3, max_value=13)
INT16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NAMES = st.text(max_size=12)
RECORDS = st.none() | st.binary(max_size=40)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, bytes]:
    """(version, frame without the size prefix) of a random Produce request."""
    version = draw(VERSIONS)
    body = ProduceRequest(
        transactional_id=draw(st.none() | NAMES),
        acks=draw(INT16),
        timeout_ms=draw(INT32),
    )
    for _ in range(draw(st.integers(0, 3))):
        topic = ProduceRequest.TopicProduceData()
        if version >= 13:
            topic.topic_id = uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))
        else:
            topic.name = draw(NAMES)
        for _ in range(draw(st.integers(0, 3))):
            topic.partition_data.append(
                ProduceRequest.PartitionProduceData(index=draw(INT32), records=draw(RECORDS))
            )
        body.topic_data.append(topic)
    return version, bytes(encode_request(api_keys.PRODUCE, version, 7, "c", body)[4:])


def _generic(frame: bytes) -> tuple[object, ...]:
    header = decode_request_header(frame)
    request = decode_request_body(header, frame)
    return (
        request.transactional_id,
        request.acks,
        request.timeout_ms,
        [
            (
                topic.topic_id if header.api_version >= 13 else topic.name,
                [
                    (p.index, None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ],
    )


def _fast(frame: bytes, version: int) -> tuple[object, ...] | None:
    header = decode_request_header(frame)
    decoded = decode_produce_request(frame, header.header_length, version)
    if decoded is None:
        return None
    transactional_id, acks, timeout_ms, topics = decoded
    return (
        transactional_id,
        acks,
        timeout_ms,
        [
            (name, [(index, None if r is None else bytes(r)) for index, r in parts])
            for name, parts in topics
        ],
    )


@settings(max_examples=examples(300), deadline=None)
@given(requests())
def test_decodes_what_the_generic_codec_decodes(request: tuple[int, bytes]) -> None:
    version, frame = request
    assert _fast(frame, version) == _generic(frame)


def test_records_are_views_of_the_frame() -> None:
    body = ProduceRequest(acks=1, timeout_ms=1000)
    body.topic_data.append(
        ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"xyz")]
        )
    )
    frame = bytearray(encode_request(api_keys.PRODUCE, 9, 1, "c", body)[4:])
    decoded = decode_produce_request(frame, decode_request_header(frame).header_length, 9)
    assert decoded is not None
    records = decoded[3][0][1][0][1]
    assert isinstance(records, memoryview) and records.obj is frame


@settings(max_examples=examples(600), deadline=None)
@given(mutated_requests(requests()))
def test_malformed_input_gives_the_generic_codecs_error(request: tuple[int, bytes]) -> None:
    """The same values or the same error, or None: the generic codec
    decides (a body with tagged fields or a null topic name)."""
    version, frame = request
    assert_agrees_on(lambda: _generic(frame), lambda: _fast(frame, version))


def test_a_length_field_never_allocates() -> None:
    # A records length of 2**31-1 and an array count of 2**31-1 with a few
    # bytes behind them: INVALID_REQUEST at once, nothing allocated.
    header = bytes(encode_request(api_keys.PRODUCE, 8, 1, "c", ProduceRequest())[4:])
    header_length = decode_request_header(header).header_length
    huge = b"\x7f\xff\xff\xff"
    for body in (
        b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x01" + huge,
        b"\xff\xff\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01t" + huge,
        b"\xff\xff\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
        + b"\x00\x00\x00\x00"
        + huge,
    ):
        frame = header[:header_length] + body
        with pytest.raises(errors.MalformedRequestException):
            decode_produce_request(frame, header_length, 8)
        with pytest.raises(errors.MalformedRequestException):
            _generic(frame)


RESULTS = st.builds(
    lambda index, code, base, append_time, start, record_errors, message: (
        index,
        code,
        base,
        append_time,
        start,
        record_errors,
        message,
    ),
    INT32,
    INT16,
    INT64,
    INT64,
    INT64,
    st.lists(st.tuples(INT32, st.none() | NAMES), max_size=2),
    st.none() | NAMES,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    VERSIONS,
    INT32,
    INT32,
    st.lists(st.tuples(NAMES, st.lists(RESULTS, max_size=3)), max_size=3),
)
def test_encodes_what_the_generic_codec_encodes(
    version: int, correlation_id: int, throttle: int, topics: list[tuple[str, list[tuple]]]
) -> None:
    by_id = version >= 13
    fast_topics = []
    body = ProduceResponse(throttle_time_ms=throttle)
    for name, partitions in topics:
        topic_key: str | uuid.UUID = uuid.uuid5(uuid.NAMESPACE_DNS, name) if by_id else name
        results = []
        generic = []
        for index, code, base, append_time, start, record_errors, message in partitions:
            result = PartitionResult(index)
            result.error_code = code
            result.base_offset = base
            result.log_append_time_ms = append_time
            result.log_start_offset = start
            result.error_message = message
            result.record_errors = [
                ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=batch_index, batch_index_error_message=text
                )
                for batch_index, text in record_errors
            ]
            results.append(result)
            generic.append(
                ProduceResponse.PartitionProduceResponse(
                    index=index,
                    error_code=code,
                    base_offset=base,
                    log_append_time_ms=append_time,
                    log_start_offset=start,
                    record_errors=result.record_errors,
                    error_message=message,
                )
            )
        fast_topics.append((topic_key, results))
        topic = ProduceResponse.TopicProduceResponse(partition_responses=generic)
        if by_id:
            topic.topic_id = topic_key
        else:
            topic.name = name
        body.responses.append(topic)
    expected = b"".join(
        bytes(part)  # type: ignore[arg-type]
        for part in encode_response_parts(api_keys.PRODUCE, version, correlation_id, body)[1:]
    )
    assert encode_produce_response(version, correlation_id, throttle, fast_topics) == expected


def test_topic_ids_are_one_object_per_id_and_the_cache_is_bounded() -> None:
    """Produce v13 names topics by id: one UUID object serves every request
    naming a topic (building one is ~1 us per topic of every request), and
    made-up ids cannot grow the cache past wire.pxd's TOPIC_ID_CACHE_MAX."""

    def decoded_id(topic_id: uuid.UUID) -> object:
        body = ProduceRequest(acks=1, timeout_ms=1000)
        body.topic_data.append(
            ProduceRequest.TopicProduceData(
                topic_id=topic_id,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x")],
            )
        )
        frame = bytes(encode_request(api_keys.PRODUCE, 13, 1, "c", body)[4:])
        decoded = decode_produce_request(frame, decode_request_header(frame).header_length, 13)
        assert decoded is not None
        return decoded[3][0][0]

    topic_id = uuid.uuid4()
    first = decoded_id(topic_id)
    assert first == topic_id and decoded_id(topic_id) is first
    for n in range(5000):
        assert decoded_id(uuid.UUID(int=n)) == uuid.UUID(int=n)
    again = decoded_id(topic_id)
    assert again == topic_id and again is not first  # the cache started over
