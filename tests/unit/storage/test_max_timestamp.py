"""Log.fetch_offset_by_timestamp(MAX_TIMESTAMP): the record with the largest
timestamp, not the last offset of its batch (KAFKA-16310)."""

from kfast.config import LogConfig
from kfast.protocol.constants import MAX_TIMESTAMP
from kfast.storage.log import Log

from .batches import make_batch, now_ms

MiB = 1024 * 1024


def open_log(tmp_path, clean=True, **overrides):
    config = LogConfig({"segment.bytes": MiB, **overrides})
    return Log(str(tmp_path / "topic-0"), config, had_clean_shutdown=clean)


def test_empty_log_has_no_max_timestamp(tmp_path):
    log = open_log(tmp_path)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    log.close()


def test_record_in_the_middle_of_a_batch(tmp_path):
    t = now_ms() - 60_000
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2, timestamps=[t - 10, t - 5]), leader_epoch=0)  # 0-1
    log.append_as_leader(make_batch(4, timestamps=[t - 3, t, t - 2, t - 1]), leader_epoch=0)
    log.append_as_leader(make_batch(2, timestamps=[t - 7, t - 8]), leader_epoch=0)  # 6-7
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (t, 3)
    log.close()
    # From the indexes on disk, after a clean shutdown and after a crash.
    for clean in (True, False):
        reopened = open_log(tmp_path, clean=clean)
        assert reopened.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (t, 3)
        reopened.close()


def test_compressed_batch(tmp_path):
    t = now_ms() - 60_000
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3, timestamps=[t - 1, t, t - 2], compression=1), leader_epoch=0)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (t, 1)
    log.close()


def test_first_of_equal_timestamps_in_an_earlier_segment(tmp_path):
    t = now_ms() - 60_000
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3, timestamps=[t - 1, t, t]), leader_epoch=0)  # 0-2
    log.roll()
    log.append_as_leader(make_batch(2, timestamps=[t, t - 3]), leader_epoch=0)  # 3-4
    assert len(log.segments) == 2
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (t, 1)
    log.close()


def test_log_append_time_is_the_first_record_of_the_latest_batch(tmp_path):
    now = now_ms()
    log = open_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    log.append_as_leader(make_batch(2), leader_epoch=0, now=now)  # 0-1
    log.append_as_leader(make_batch(3), leader_epoch=0, now=now + 5)  # 2-4
    log.append_as_leader(make_batch(2), leader_epoch=0, now=now + 2)  # 5-6
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (now + 5, 2)
    log.close()
