"""Batches that keep their bytes (Batch.raw): what a FileReplicatedLog
reads and a Fetch response carries leaves again byte for byte, and each
record is decoded only when something reads it -- once."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.raft.file_log import METADATA_PARTITION_DIR, FileReplicatedLog
from kfast.raft.log import Batch, LeaderChangeMessage
from kfast.raft.record_batches import RecordBatchCodec

from .conftest import JsonSerde


class CountingSerde(JsonSerde):
    def __init__(self):
        self.decoded = 0

    def decode(self, value: bytes):
        self.decoded += 1
        return json.loads(value)


def segment_bytes(directory: str) -> bytes:
    with open(
        os.path.join(directory, METADATA_PARTITION_DIR, "00000000000000000000.log"), "rb"
    ) as f:
        return f.read()


records = st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=5), min_size=1, max_size=8)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(records)
def test_read_batches_leave_as_they_were_written_without_a_decode(tmp_path_factory, appends):
    directory = str(tmp_path_factory.mktemp("raft"))
    serde = CountingSerde()
    log = FileReplicatedLog(directory, serde)
    log.open()
    log.append_as_leader((LeaderChangeMessage(1, (1,)),), 1, is_control=True)
    for values in appends:
        log.append_as_leader(tuple(values), 1)
    log.flush()
    read = log.read(0, 1 << 20)
    codec = RecordBatchCodec(serde)
    # A leader's fetch answer: the stored bytes, nothing decoded or rebuilt.
    assert codec.encode(read) == segment_bytes(directory)
    assert serde.decoded == 0
    assert [b.next_offset for b in read][-1] == log.end_offset
    # A follower appending them writes the same bytes, still decoding nothing.
    other = str(tmp_path_factory.mktemp("follower"))
    follower = FileReplicatedLog(other, serde)
    follower.open()
    follower.append_as_follower(codec.decode(codec.encode(read)))
    follower.flush()
    assert segment_bytes(other) == segment_bytes(directory) and serde.decoded == 0
    # The state machine reads the records: each decoded once.
    assert [list(b.records) for b in read[1:]] == appends
    assert [list(b.records) for b in read[1:]] == appends
    assert serde.decoded == sum(map(len, appends))
    log.close()
    follower.close()


def test_a_lazy_batch_equals_the_batch_it_was_written_from(tmp_path):
    log = FileReplicatedLog(str(tmp_path), JsonSerde())
    log.open()
    written = log.append_as_leader(("a", "b"), 3)
    [read] = log.read(0, 1)
    assert read.raw is not None and written.raw is None
    assert read == written and hash(read) == hash(written)
    assert repr(read) == "Batch(0, 3, ('a', 'b'))"
    assert read != Batch(0, 3, ("a", "c"))
    log.close()
