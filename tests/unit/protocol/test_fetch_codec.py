"""kfast._ext.fetch_codec (Fetch's fast path) against the generic,
schema-driven codec, which defines the wire format: the same values for
every request the fast decoder accepts, the same error for malformed ones,
and for every response the bytes the generic handler's builder and encoder
send (kfast.server.fetch_apis.sessionless_response)."""

from __future__ import annotations

import tempfile
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast._ext.fetch_codec import (
    decode_fetch_request,
    encode_fetch_response,
    partition_requests,
)
from kfast.metrics.broker_stats import BrokerTopicStats
from kfast.protocol import (
    FetchRequest,
    api_keys,
    decode_request_body,
    decode_request_header,
    encode_request,
    encode_response_parts,
    errors,
)
from kfast.protocol.file_region import FileRegion
from kfast.server.fetch_apis import sessionless_response
from kfast.server.replica_manager import FetchPartitionData, PartitionFetchRequest
from tests.unit.hypothesis_budget import examples
from tests.unit.protocol.fast_decoder_oracle import assert_agrees_on
from tests.unit.protocol.protocol_strategies import mutated_requests

VERSIONS = st.integers(min_value=4, max_value=18)
INT8 = st.integers(min_value=-(2**7), max_value=2**7 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
UUIDS = st.integers(0, 2**128 - 1).map(lambda n: uuid.UUID(int=n))
NAMES = st.text(max_size=8)


@st.composite
def tagged_requests(draw: st.DrawFn) -> tuple[int, bytes, bool]:
    """(version, frame without the size prefix, whether it has a tagged
    field) of a random Fetch request; sometimes with a tagged field
    (cluster_id, replica_state, or a partition's replica_directory_id), which
    the fast decoder leaves to the generic one."""
    version = draw(VERSIONS)
    tagged = False
    body = FetchRequest(
        max_wait_ms=draw(INT32),
        min_bytes=draw(INT32),
        max_bytes=draw(INT32),
        isolation_level=draw(INT8),
        session_id=draw(INT32),
        session_epoch=draw(INT32),
        rack_id=draw(NAMES),
    )
    if version < 15:
        body.replica_id = draw(INT32)
    elif draw(st.integers(0, 9)) == 0:
        body.replica_state = FetchRequest.ReplicaState(replica_id=draw(INT32), replica_epoch=1)
        tagged = True
    if version >= 12 and draw(st.integers(0, 9)) == 0:
        body.cluster_id = draw(NAMES)
        tagged = True
    for _ in range(draw(st.integers(0, 3))):
        topic = FetchRequest.FetchTopic()
        if version >= 13:
            topic.topic_id = draw(UUIDS)
        else:
            topic.topic = draw(NAMES)
        for _ in range(draw(st.integers(0, 3))):
            partition = FetchRequest.FetchPartition(
                partition=draw(INT32),
                current_leader_epoch=draw(INT32),
                fetch_offset=draw(INT64),
                last_fetched_epoch=draw(INT32) if version >= 12 else -1,
                log_start_offset=draw(INT64),
                partition_max_bytes=draw(INT32),
            )
            if version >= 17 and draw(st.integers(0, 9)) == 0:
                # The zero UUID is the field's default: no tag is written.
                partition.replica_directory_id = draw(UUIDS.filter(lambda u: u.int != 0))
                tagged = True
            topic.partitions.append(partition)
        body.topics.append(topic)
    for _ in range(draw(st.integers(0, 2 if version >= 7 else 0))):
        forgotten = FetchRequest.ForgottenTopic(partitions=draw(st.lists(INT32, max_size=3)))
        if version >= 13:
            forgotten.topic_id = draw(UUIDS)
        else:
            forgotten.topic = draw(NAMES)
        body.forgotten_topics_data.append(forgotten)
    return version, bytes(encode_request(api_keys.FETCH, version, 7, "c", body)[4:]), tagged


def requests() -> st.SearchStrategy[tuple[int, bytes]]:
    return tagged_requests().map(lambda r: (r[0], r[1]))


def _generic(frame: bytes) -> tuple[object, ...]:
    header = decode_request_header(frame)
    version = header.api_version
    request = decode_request_body(header, frame)
    by_id = version >= 13
    return (
        request.replica_id if version < 15 else -1,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        request.session_id,
        request.session_epoch,
        [
            (
                topic.topic_id if by_id else topic.topic,
                [
                    (
                        p.partition,
                        p.current_leader_epoch,
                        p.fetch_offset,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
        [
            (forgotten.topic_id if by_id else forgotten.topic, list(forgotten.partitions))
            for forgotten in request.forgotten_topics_data
        ],
        request.rack_id,
    )


def _fast(frame: bytes, version: int) -> tuple[object, ...] | None:
    header = decode_request_header(frame)
    decoded = decode_fetch_request(frame, header.header_length, version)
    return None if decoded is None else tuple(decoded)


@settings(max_examples=examples(300), deadline=None)
@given(tagged_requests())
def test_decodes_what_the_generic_codec_decodes(request: tuple[int, bytes, bool]) -> None:
    version, frame, tagged = request
    fast = _fast(frame, version)
    # Only a body with a tagged field goes to the generic decoder.
    assert (fast is None) == tagged
    if fast is not None:
        assert fast == _generic(frame)


@settings(max_examples=examples(600), deadline=None)
@given(mutated_requests(requests()))
def test_malformed_input_gives_the_generic_codecs_error(request: tuple[int, bytes]) -> None:
    """The same values or the same error, or None: the generic codec
    decides (a body with tagged fields or a null topic name)."""
    version, frame = request
    assert_agrees_on(lambda: _generic(frame), lambda: _fast(frame, version))


def test_a_count_field_never_allocates() -> None:
    # A topic count and a partition count of 2**31-1 with a few bytes behind
    # them: INVALID_REQUEST at once, nothing allocated.
    header = bytes(encode_request(api_keys.FETCH, 11, 1, "c", FetchRequest())[4:])
    header_length = decode_request_header(header).header_length
    huge = b"\x7f\xff\xff\xff"
    fixed = b"\xff\xff\xff\xff" + b"\x00\x00\x01\xf4" * 3 + b"\x00" + b"\x00" * 8
    for body in (fixed + huge + b"\x00" * 8, fixed + b"\x00\x00\x00\x01\x00\x01t" + huge):
        frame = header[:header_length] + body
        with pytest.raises(errors.MalformedRequestException):
            decode_fetch_request(frame, header_length, 11)
        with pytest.raises(errors.MalformedRequestException):
            _generic(frame)


@settings(max_examples=examples(100), deadline=None)
@given(NAMES, st.lists(st.tuples(INT32, INT32, INT64, INT32, INT64, INT32), max_size=4))
def test_partition_requests_are_the_named_tuples(
    name: str, partitions: list[tuple[int, int, int, int, int, int]]
) -> None:
    built = partition_requests(PartitionFetchRequest, name, partitions, -1, -1)
    assert all(type(request) is PartitionFetchRequest for request in built)
    assert built == [
        PartitionFetchRequest((name, p[0]), p[2], p[5], p[1], -1, -1) for p in partitions
    ]


_REGION_FILE = tempfile.TemporaryFile()
_REGION_FILE.write(bytes(range(256)) * 160)  # 40 KiB: regions above and below 32 KiB
_REGION_FILE.flush()

RECORDS = (
    st.none()
    | st.binary(max_size=20)
    | st.integers(0, 40_000).map(lambda n: b"r" * n)
    | st.tuples(st.integers(0, 1000), st.integers(0, 40_000)).map(
        lambda pl: FileRegion(_REGION_FILE, pl[0], pl[1])
    )
)


@st.composite
def partition_data(draw: st.DrawFn) -> FetchPartitionData:
    aborted = draw(st.none() | st.lists(st.tuples(INT64, INT64), max_size=2))
    data = FetchPartitionData(
        draw(st.sampled_from([0, 1, 3, 6, 74, 75])),  # none, out of range, unknown, moved
        draw(INT64),
        draw(INT64),
        draw(INT64),
        draw(RECORDS),
        aborted,
    )
    data.preferred_read_replica = draw(st.sampled_from([-1, 0, 3]))
    return data


def _bytes(parts: list[Any]) -> bytes:
    return b"".join(part.read() if isinstance(part, FileRegion) else bytes(part) for part in parts)


@settings(max_examples=examples(300), deadline=None)
@given(
    VERSIONS,
    INT32,
    st.lists(
        st.tuples(st.sampled_from(["a", "bb", "é"]), INT32, partition_data()),
        max_size=6,
    ),
)
def test_encodes_what_the_generic_handler_sends(
    version: int, correlation_id: int, partitions: list[tuple[str, int, FetchPartitionData]]
) -> None:
    results = [
        (PartitionFetchRequest((topic, index), 0, 1 << 20), data)
        for topic, index, data in partitions
    ]
    topic_ids = {
        topic: (uuid.uuid5(uuid.NAMESPACE_DNS, topic) if version >= 13 else None)
        for topic, _, _ in partitions
    }
    # The generic builder's context: a consumer's fetch, no quota; and no
    # moved leader from v16 (that answer's KIP-951 hint is the generic
    # encoder's, the fast path hands it over).
    for _, data in results:
        if version >= 16 and data.error_code in (6, 74):
            data.error_code = 0
        if version < 11:
            data.preferred_read_replica = -1  # KIP-392: a v11+ rack-aware consumer's
    ctx = SimpleNamespace(
        api_version=version,
        broker=SimpleNamespace(
            quotas=SimpleNamespace(fetch=SimpleNamespace(enabled=False)),
            replica_manager=SimpleNamespace(topic_stats=BrokerTopicStats()),
        ),
    )
    body = sessionless_response(ctx, results, topic_ids)  # type: ignore[arg-type]
    expected = encode_response_parts(api_keys.FETCH, version, correlation_id, body)[1:]
    fast = encode_fetch_response(version, correlation_id, 0, 0, results, topic_ids)
    assert _bytes(fast) == _bytes(expected)
    # Record regions go out as parts of their own, for sendfile.
    assert [p for p in fast if isinstance(p, FileRegion)] == [
        p for p in expected if isinstance(p, FileRegion)
    ]
