"""kfast._ext.log_append: the append path's batch scan and index rule.

Batches come from kafka-python (an independent codec); CRCs are checked with
the ``crc32c`` package, index entries against the pure-Python rule.
"""

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfast._ext import log_append as status
from kfast._ext.log_append import BatchScan
from kfast.config import LogConfig
from kfast.storage.log import Log

from .batches import make_batch

FAR = 1 << 62


def _scan(
    scan,
    data,
    *,
    assign=True,
    next_offset=0,
    epoch=0,
    log_append_time=-1,
    from_client=True,
    max_bytes=1 << 30,
    check_time=False,
    earliest=0,
    latest=FAR,
):
    return scan.scan(
        data,
        assign,
        next_offset,
        epoch,
        log_append_time,
        from_client,
        max_bytes,
        check_time,
        earliest,
        latest,
    )


def _headers(data):
    """(base_offset, epoch, last_offset_delta, max_timestamp, crc_ok) per batch."""
    out, pos = [], 0
    while pos < len(data):
        base, length, epoch = struct.unpack_from(">qii", data, pos)
        crc = struct.unpack_from(">I", data, pos + 17)[0]
        delta = struct.unpack_from(">i", data, pos + 23)[0]
        max_ts = struct.unpack_from(">q", data, pos + 35)[0]
        ok = crc == crc32c(bytes(data[pos + 21 : pos + 12 + length]))
        out.append((base, epoch, delta, max_ts, ok))
        pos += 12 + length
    return out


batch_specs = st.lists(
    st.tuples(st.integers(1, 20), st.integers(0, 3000), st.integers(0, 2_000_000_000_000)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(
    specs=batch_specs,
    start=st.integers(0, 1 << 40),
    epoch=st.integers(0, 1000),
    log_append_time=st.one_of(st.just(-1), st.integers(0, 2_000_000_000_000)),
)
def test_scan_assigns_offsets_and_summarises(specs, start, epoch, log_append_time):
    data = bytearray(b"".join(make_batch(count, size, timestamp=ts) for count, size, ts in specs))
    scan = BatchScan()
    assert (
        _scan(scan, data, next_offset=start, epoch=epoch, log_append_time=log_append_time)
        == status.OK
    )
    headers = _headers(data)
    offset = start
    max_ts, offset_of_max_ts = -1, -1
    for (count, _, ts), (base, batch_epoch, delta, batch_max_ts, crc_ok) in zip(specs, headers):
        assert (base, batch_epoch, delta) == (offset, epoch, count - 1)
        assert crc_ok
        expected_ts = ts if log_append_time < 0 else log_append_time
        assert batch_max_ts == expected_ts
        if expected_ts > max_ts:
            max_ts, offset_of_max_ts = expected_ts, offset + count - 1
        offset += count
    assert scan.batch_count == len(specs)
    assert scan.first_offset == start
    assert scan.next_offset == offset
    assert (scan.max_timestamp, scan.offset_of_max_timestamp) == (max_ts, offset_of_max_ts)
    assert scan.records_count == sum(count for count, _, _ in specs)
    assert scan.valid_bytes == len(data)
    assert not scan.has_producer_id
    assert scan.batch_infos() == [
        (size, last, ts)
        for size, last, ts in zip(
            [12 + struct.unpack_from(">i", data, p + 8)[0] for p in scan.positions()],
            [base + delta for base, _, delta, _, _ in headers],
            [h[3] for h in headers],
        )
    ]


def _corrupt(data, position, fmt, value, fix_crc=True):
    struct.pack_into(fmt, data, position, value)
    if fix_crc:
        length = struct.unpack_from(">i", data, 8)[0]
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21 : 12 + length])))
    return data


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d[:40], status.TRUNCATED),
        (lambda d: _corrupt(d, 16, ">b", 1, False), status.LEGACY_MAGIC),
        (lambda d: _corrupt(d, 16, ">b", 7, False), status.UNKNOWN_MAGIC),
        (lambda d: _corrupt(d, 8, ">i", 10, False), status.BATCH_TOO_SMALL),
        (lambda d: _corrupt(d, 8, ">i", 100000, False), status.BATCH_TRUNCATED),
        (lambda d: _corrupt(d, 30, ">b", 3, False), status.BAD_CRC),
        (lambda d: _corrupt(d, 21, ">h", 0x20), status.CONTROL_FROM_CLIENT),
        (lambda d: _corrupt(d, 57, ">i", 9), status.BAD_RECORDS_COUNT),
        (lambda d: _corrupt(d, 21, ">h", 0x10), status.TRANSACTIONAL_WITHOUT_PRODUCER_ID),
    ],
)
def test_scan_rejects_bad_batches_without_patching(mutate, expected):
    good = make_batch(3, 50, timestamp=1000)
    bad = bytearray(mutate(bytearray(make_batch(2, 50, timestamp=1000))))
    data = bytearray(good) + bad
    before = bytes(data)
    scan = BatchScan()
    assert _scan(scan, data, next_offset=500, epoch=9) == expected
    assert scan.error_position == len(good)
    assert bytes(data) == before  # the good first batch was not patched either


def test_scan_error_details():
    scan = BatchScan()
    data = bytearray(make_batch(2, 50, timestamp=1000))
    size = len(data)
    assert _scan(scan, data, max_bytes=size - 1) == status.TOO_LARGE
    assert scan.error_value == size
    assert _scan(scan, data, check_time=True, earliest=1001, latest=FAR) == status.BAD_TIMESTAMP
    assert scan.error_value == 1000
    stored = struct.unpack_from(">I", data, 17)[0]
    data[-1] ^= 0xFF
    assert _scan(scan, data) == status.BAD_CRC
    assert scan.error_value == stored
    assert scan.error_other == crc32c(bytes(data[21:]))


def test_follower_scan_keeps_offsets_and_checks_their_order():
    first = bytearray(make_batch(2, 10, timestamp=5))
    second = bytearray(make_batch(3, 10, timestamp=6))
    struct.pack_into(">qii", first, 0, 100, len(first) - 12, 4)
    struct.pack_into(">qii", second, 0, 102, len(second) - 12, 5)
    data = bytes(first + second)
    scan = BatchScan()
    assert _scan(scan, data, assign=False, next_offset=100, from_client=False) == status.OK
    assert (scan.first_offset, scan.next_offset) == (100, 105)
    assert scan.leader_epochs() == [(4, 100), (5, 102)]
    assert (
        _scan(scan, data, assign=False, next_offset=101, from_client=False) == status.OUT_OF_ORDER
    )
    assert (scan.error_base_offset, scan.error_other) == (100, 101)


def _python_index_rule(batch_infos, interval):
    """Kafka's LogSegment.append rule over a fresh segment: offset entries."""
    entries, since, position = [], 0, 0
    for size, last_offset, _ in batch_infos:
        if since > interval:
            entries.append((last_offset, position))
            since = 0
        position += size
        since += size
    return entries


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    requests=st.lists(
        st.lists(st.tuples(st.integers(1, 5), st.integers(0, 2000)), min_size=1, max_size=4),
        min_size=1,
        max_size=12,
    ),
    interval=st.sampled_from([0, 100, 4096]),
)
def test_appended_indexes_match_kafkas_rule_and_recovery(tmp_path_factory, requests, interval):
    directory = tmp_path_factory.mktemp("log") / "t-0"
    log = Log(str(directory), LogConfig({"index.interval.bytes": interval}))
    infos = []
    offset = 0
    for request in requests:
        data = b"".join(
            make_batch(count, size, timestamp=1_000 + offset) for count, size in request
        )
        log.append_as_leader(data, leader_epoch=0)
        for count, _ in request:
            offset += count
        infos.extend(log._scan.batch_infos())
    segment = log.active_segment
    index = segment.offset_index
    entries = [tuple(index.entry(i)) for i in range(index.entries)]
    assert entries == _python_index_rule(infos, interval)
    if entries:  # the last entry is read back from what the kernel wrote
        assert tuple(index.last_entry()) == entries[-1]
    time_entries = [tuple(segment.time_index.entry(i)) for i in range(segment.time_index.entries)]
    segment.recover()  # rebuilds both indexes from the .log by the same rule
    assert [tuple(index.entry(i)) for i in range(index.entries)] == entries
    rebuilt = [tuple(segment.time_index.entry(i)) for i in range(segment.time_index.entries)]
    # recover() adds the roll-time entry for the max timestamp at the end.
    assert rebuilt[: len(time_entries)] == time_entries
    log.close()


def test_request_filling_the_index_skips_entries(tmp_path):
    # Room for 3 offset entries (2 time entries + the roll slot): a request of
    # 6 batches fills it mid-append; later batches simply get no entry.
    log = Log(
        str(tmp_path / "t-0"), LogConfig({"index.interval.bytes": 0, "segment.index.bytes": 36})
    )
    log.append_as_leader(b"".join(make_batch(1, 100, timestamp=10 + i) for i in range(6)))
    segment = log.active_segment
    assert segment.offset_index.entries == 2
    assert segment.time_index.entries == 2
    assert log.log_end_offset == 6
    log.append_as_leader(make_batch(1, 100, timestamp=100))  # rolls: the index is full
    assert log.num_segments == 2
    log.close()


def test_index_batches_refuses_out_of_order_entries_without_writing():
    scan = BatchScan()
    data = bytearray(make_batch(1, 10, timestamp=5) * 2)
    assert _scan(scan, data, next_offset=10) == status.OK
    offsets = bytearray(struct.pack(">ii", 50, 0)) + bytearray(80)
    times = bytearray(120)
    before = bytes(offsets)
    # The last entry (offset 50) is above the batches' last offsets (10, 11).
    assert scan.index_batches(100, 5000, 0, -1, 0, 0, offsets, 1, 10, times, 0, 10) is None
    assert bytes(offsets) == before
    # A buffer too short for the entries: None, so the caller grows it.
    assert scan.index_batches(100, 5000, 0, -1, 0, 0, bytearray(8), 0, 10, times, 0, 10) is None
    done = scan.index_batches(100, 5000, 0, -1, 0, 0, bytearray(80), 0, 10, times, 0, 10)
    assert done == (len(data) // 2, 5, 10, 2, 1)
    assert struct.unpack_from(">qi", times, 0) == (5, 10)
