"""Log compaction: last value per key, offsets kept, tombstones, crash safety."""

import os

from kafka.record.default_records import DefaultRecordBatchBuilder

from kfast.config import KafkaConfig, LogConfig
from kfast.storage.cleaner import clean_log
from kfast.storage.log import Log
from kfast.storage.manager import LogManager

from .batches import now_ms, record_values

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "1048576",
    "file.delete.delay.ms": "0",
    "min.cleanable.dirty.ratio": "0.01",
}


def keyed_batch(items, timestamp=None, producer_id=-1, epoch=-1, seq=-1):
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    ts = now_ms() if timestamp is None else timestamp
    for i, (key, value) in enumerate(items):
        b.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def read_records(log):
    from kfast.storage.records_access import iter_records

    out = []
    for segment in log.segments:
        for _, _header, view in segment.log.batches_from(0, full=True):
            out.extend((r.offset, r.key, r.value) for r in iter_records(view))
    return out


def fill(log, rounds, keys=20, value_size=3000):
    for r in range(rounds):
        for k in range(keys):
            log.append_as_leader(keyed_batch([(b"key-%d" % k, b"%d:" % r + b"v" * value_size)]))


def test_compaction_keeps_last_value_per_key_and_offsets(tmp_path):
    log = Log(str(tmp_path / "c-0"), LogConfig(COMPACT))
    fill(log, 30)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = read_records(log)
    latest = {}
    for offset, key, value in before:
        latest[key] = (offset, value)
    result = clean_log(log, 0, now_ms())
    assert result is not None and result.records_removed == len(before) - 20
    after = read_records(log)
    assert sorted(after) == sorted((o, k, v) for k, (o, v) in latest.items())
    # Offsets are unchanged, reads by offset still work, the log end is unchanged.
    assert log.log_end_offset == 600
    for offset, value in latest.values():
        got = record_values(log.read(offset, 1).records.read())
        assert (offset, value) in got
    assert os.path.getsize(log.segments[0].log.path) < result.bytes_before
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    log.close()
    reopened = Log(log.dir, LogConfig(COMPACT), had_clean_shutdown=True)
    assert sorted(read_records(reopened)) == sorted(after)
    reopened.close()


def test_tombstones_removed_after_delete_retention(tmp_path):
    config = LogConfig({**COMPACT, "delete.retention.ms": "1000"})
    log = Log(str(tmp_path / "c-0"), config)
    old = now_ms() - 10_000
    for _ in range(300):
        log.append_as_leader(keyed_batch([(b"a", b"x" * 3000)], timestamp=old), now=old)
    log.append_as_leader(keyed_batch([(b"a", None), (b"b", b"keep")], timestamp=old), now=old)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    first = clean_log(log, 0, now_ms())
    # First pass: the tombstone shadows every older "a" but stays itself.
    assert [(k, v) for _, k, v in read_records(log)] == [(b"a", None), (b"b", b"keep")]
    assert clean_log(log, first.end_offset, now_ms()) is None  # nothing dirty
    # A later pass, with the tombstone now in the clean part and older than
    # delete.retention.ms, removes it.
    log.append_as_leader(keyed_batch([(b"c", b"1")]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean_log(log, first.end_offset, now_ms())
    assert [(k, v) for _, k, v in read_records(log)] == [(b"b", b"keep"), (b"c", b"1")]
    log.close()


def test_idempotent_batches_keep_sequence_state(tmp_path):
    log = Log(str(tmp_path / "c-0"), LogConfig(COMPACT))
    for seq in range(200):
        log.append_as_leader(keyed_batch([(b"k", b"v" * 3000)], producer_id=3, epoch=0, seq=seq))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean_log(log, 0, now_ms())
    headers = [h for s in log.segments for _, h, _ in s.log.batches_from(0)]
    # The last batch of the producer survives (with its record); older ones are gone.
    assert headers[-1].producer_id == 3 and headers[-1].last_sequence == 199
    assert len(headers) == 1
    log.close()
    reopened = Log(log.dir, LogConfig(COMPACT), had_clean_shutdown=False)
    assert reopened.producer_state.last_entry(3).last_seq == 199
    reopened.close()


def test_crash_during_swap_is_completed_on_load(tmp_path):
    log = Log(str(tmp_path / "c-0"), LogConfig(COMPACT))
    fill(log, 30)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    expected_end = log.log_end_offset
    before = read_records(log)
    import kfast.storage.cleaner as cleaner

    original = cleaner._swap_in

    def crash_after_swap_files(log_, group, cleaned):
        cleaned.change_file_suffixes(cleaner.CLEANED_FILE_SUFFIX, cleaner.SWAP_FILE_SUFFIX)
        raise KeyboardInterrupt  # the process dies here

    cleaner._swap_in = crash_after_swap_files
    try:
        clean_log(log, 0, now_ms())
    except KeyboardInterrupt:
        pass
    finally:
        cleaner._swap_in = original
    log.close_handlers()
    assert [n for n in os.listdir(log.dir) if n.endswith(".swap")]
    reopened = Log(log.dir, LogConfig(COMPACT), had_clean_shutdown=False)
    assert reopened.log_end_offset == expected_end
    after = read_records(reopened)
    offsets = [o for o, _, _ in after]
    # The swapped-in segment replaced the old one(s) it covers: no offset twice.
    assert offsets == sorted(set(offsets))
    assert set(after) <= set(before) and len(after) < len(before)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned", ".deleted"))]
    reopened.close()


def test_manager_clean_logs_and_checkpoint(tmp_path):
    config = KafkaConfig({"log.dirs": str(tmp_path / "d"), "node.id": "1"})
    manager = LogManager(config, cluster_id="abcdefghijklmnopqrstuv")
    manager.startup()
    log = manager.get_or_create_log("__consumer_offsets", 0, overrides=COMPACT)
    plain = manager.get_or_create_log("plain", 0, overrides={"segment.bytes": "1048576"})
    fill(log, 30)
    fill(plain, 30)
    for lg in (log, plain):
        lg.roll()
        lg.update_high_watermark(lg.log_end_offset)
    assert manager.clean_logs() == 1
    assert (
        tmp_path / "d" / "cleaner-offset-checkpoint"
    ).read_text() == f"0\n1\n__consumer_offsets 0 {log.active_segment.base_offset}\n"
    assert manager.clean_logs() == 0  # nothing dirty any more
    manager.shutdown()
