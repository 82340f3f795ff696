"""Idempotent and transactional producer state on the log."""

import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from kfast.config import LogConfig
from kfast.protocol.errors import (
    InvalidProducerEpochException,
    InvalidTxnStateException,
    OutOfOrderSequenceException,
    TransactionCoordinatorFencedException,
)
from kfast.storage.log import Log
from kfast.storage.producer_state import (
    ORIGIN_COORDINATOR,
    BatchMetadata,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
)
from kfast.storage.txn_index import AbortedTxn, TransactionIndex

from .batches import make_batch, make_control_batch

CONFIG = LogConfig({"segment.bytes": 1048576})


def open_log(tmp_path, clean=True):
    return Log(str(tmp_path / "p-0"), CONFIG, had_clean_shutdown=clean)


def produce(log, pid, epoch, seq, count=2, transactional=False):
    return log.append_as_leader(
        make_batch(
            count,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=transactional,
        )
    )


def test_duplicate_returns_original_offsets(tmp_path):
    log = open_log(tmp_path)
    first = produce(log, 7, 0, 0)
    produce(log, 7, 0, 2)
    retry = produce(log, 7, 0, 0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 1)
    assert log.log_end_offset == 4
    # Only the last five batches are remembered.
    for seq in range(4, 14, 2):
        produce(log, 7, 0, seq)
    with pytest.raises(OutOfOrderSequenceException):
        produce(log, 7, 0, 0)
    assert first.first_offset == 0
    log.close()


def test_sequence_and_epoch_rules(tmp_path):
    log = open_log(tmp_path)
    produce(log, 1, 0, 0)
    with pytest.raises(OutOfOrderSequenceException):
        produce(log, 1, 0, 5)  # a gap
    produce(log, 1, 0, 2)
    with pytest.raises(OutOfOrderSequenceException):
        produce(log, 1, 1, 3)  # a new epoch must start at 0
    produce(log, 1, 1, 0)  # bumped epoch
    with pytest.raises(InvalidProducerEpochException):
        produce(log, 1, 0, 4)  # the old epoch is fenced
    # An unknown producer may start at any sequence (its state may have expired).
    produce(log, 2, 3, 1000)
    # Sequence wraps at int32 max.
    produce(log, 3, 0, 2**31 - 2, count=2)
    produce(log, 3, 0, 0)
    assert log.log_end_offset == 12
    log.close()


def test_transactions_lso_and_txn_index(tmp_path):
    log = open_log(tmp_path)
    produce(log, 5, 0, 0, transactional=True)  # offsets 0-1, txn opens at 0
    produce(log, 6, 0, 0)  # 2-3, not transactional
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    with pytest.raises(InvalidTxnStateException):
        produce(log, 5, 0, 2)  # non-transactional inside a txn
    produce(log, 5, 0, 2, transactional=True)  # 4-5
    abort = log.append_as_leader(
        make_control_batch(5, 0, commit=False, coordinator_epoch=3), origin=ORIGIN_COORDINATOR
    )
    assert abort.first_offset == 6
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset == 7
    aborted = log.collect_aborted_transactions(0, 7)
    assert aborted == [AbortedTxn(5, 0, 6, 7)]
    with pytest.raises(TransactionCoordinatorFencedException):
        log.append_as_leader(
            make_control_batch(5, 0, commit=True, coordinator_epoch=2), origin=ORIGIN_COORDINATOR
        )
    path = log.active_segment.txn_index.path
    log.close()
    # .txnindex on disk: version 0, pid, first, last, lso (34 bytes).
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">hqqqq", 0, 5, 0, 6, 7)


def test_snapshot_format_matches_kafka(tmp_path):
    entry = ProducerStateEntry(
        producer_id=99,
        producer_epoch=2,
        coordinator_epoch=4,
        last_timestamp=1234,
        current_txn_first_offset=50,
    )
    entry.batch_metadata.append(
        BatchMetadata(last_seq=9, last_offset=60, offset_delta=4, timestamp=1234)
    )
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 99, 2, 9, 60, 4, 1234, 4, 50)
    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    [decoded] = decode_snapshot(data)
    assert decoded.producer_epoch == 2 and decoded.last_seq == 9 and decoded.first_seq == 5
    assert decoded.current_txn_first_offset == 50 and decoded.coordinator_epoch == 4
    from kfast.protocol.errors import CorruptRecordException

    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordException):
        decode_snapshot(bytes(corrupt))


def test_state_survives_clean_and_unclean_restart(tmp_path):
    log = open_log(tmp_path)
    produce(log, 7, 0, 0)
    produce(log, 7, 0, 2)
    produce(log, 8, 1, 0, transactional=True)
    log.close()
    snapshots = [n for n in os.listdir(tmp_path / "p-0") if n.endswith(".snapshot")]
    assert snapshots == ["00000000000000000006.snapshot"]
    entries = {e.producer_id: e for e in read_snapshot(str(tmp_path / "p-0" / snapshots[0]))}
    assert entries[7].last_seq == 3 and entries[8].current_txn_first_offset == 4
    for clean in (True, False):
        if not clean:
            for name in os.listdir(tmp_path / "p-0"):
                if name.endswith(".snapshot"):
                    os.unlink(tmp_path / "p-0" / name)
        log = open_log(tmp_path, clean=clean)
        assert produce(log, 7, 0, 2).duplicate
        with pytest.raises(OutOfOrderSequenceException):
            produce(log, 7, 0, 7)
        assert log.producer_state.first_undecided_offset() == 4
        log.flush()
        log.close_handlers() if not clean else log.close()


def test_truncation_rebuilds_producer_state(tmp_path):
    log = open_log(tmp_path)
    produce(log, 7, 0, 0)
    produce(log, 7, 0, 2)
    log.roll()
    produce(log, 7, 0, 4)
    log.truncate_to(4)
    assert log.producer_state.last_entry(7).last_seq == 3
    produce(log, 7, 0, 4)
    log.close()


def test_txn_index_search(tmp_path):
    index = TransactionIndex(0, str(tmp_path / "0.txnindex"))
    index.append(AbortedTxn(1, 0, 10, 11))
    index.append(AbortedTxn(2, 5, 20, 21))
    index.append(AbortedTxn(3, 30, 40, 41))
    assert [t.producer_id for t in index.collect_aborted_txns(12, 25).aborted_transactions] == [2]
    result = index.collect_aborted_txns(0, 15)
    assert [t.producer_id for t in result.aborted_transactions] == [1, 2]
    assert result.is_complete
    assert not index.collect_aborted_txns(0, 100).is_complete
    index.truncate_to(20)
    assert TransactionIndex(0, index.path).entries == [AbortedTxn(1, 0, 10, 11)]


@pytest.mark.slow
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(-6, 3)), max_size=40))
def test_sequence_state_machine_against_model(tmp_path_factory, steps):
    """Random (producer, epoch, sequence) appends vs a model of Kafka's rules."""
    log = Log(str(tmp_path_factory.mktemp("ps") / "m-0"), CONFIG)
    model = {}  # pid -> (epoch, sequences of its retained single-record batches)
    for pid, epoch, delta in steps:
        known = model.get(pid)
        if known is None:
            seq = max(delta, 0)
            expected = "accept"
        else:
            seq = max(known[1][-1] + 1 + delta, 0) if epoch == known[0] else max(delta, 0)
            if epoch < known[0]:
                expected = "fenced"
            elif epoch == known[0]:
                if seq in known[1][-5:]:
                    expected = "duplicate"
                elif seq == known[1][-1] + 1:
                    expected = "accept"
                else:
                    expected = "out_of_order"
            else:
                expected = "accept" if seq == 0 else "out_of_order"
        try:
            info = produce(log, pid, epoch, seq, count=1)
            outcome = "duplicate" if info.duplicate else "accept"
        except InvalidProducerEpochException:
            outcome = "fenced"
        except OutOfOrderSequenceException:
            outcome = "out_of_order"
        assert outcome == expected, (pid, epoch, seq, known)
        if outcome == "accept":
            sequences = known[1] if known is not None and known[0] == epoch else []
            model[pid] = (epoch, sequences + [seq])
    log.close()


def test_unclean_recovery_rebuilds_txn_index_and_open_transactions(tmp_path):
    log = open_log(tmp_path)
    produce(log, 5, 0, 0, transactional=True)  # 0-1
    log.append_as_leader(
        make_control_batch(5, 0, commit=False, coordinator_epoch=1), origin=ORIGIN_COORDINATOR
    )  # 2: abort
    log.roll()  # snapshot at 3
    produce(log, 6, 0, 0, transactional=True)  # 3-4
    log.append_as_leader(
        make_control_batch(6, 0, commit=False, coordinator_epoch=1), origin=ORIGIN_COORDINATOR
    )  # 5: abort
    produce(log, 7, 0, 0, transactional=True)  # 6-7, still open
    expected = log.collect_aborted_transactions(0, 100)
    assert [t.producer_id for t in expected] == [5, 6]
    log.flush()
    log.close_handlers()  # crash: no snapshot at the end
    for name in os.listdir(tmp_path / "p-0"):
        if name.endswith(".txnindex"):
            os.unlink(tmp_path / "p-0" / name)
    recovered = Log(str(tmp_path / "p-0"), CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert recovered.collect_aborted_transactions(0, 100) == expected
    assert recovered.producer_state.first_undecided_offset() == 6
    recovered.update_high_watermark(recovered.log_end_offset)
    assert recovered.last_stable_offset == 6
    assert produce(recovered, 7, 0, 0, transactional=True).duplicate
    recovered.close()
