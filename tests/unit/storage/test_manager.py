"""LogManager: dirs, identity, checkpoints, clean shutdown, deletion, retention."""

import json
import os

import pytest

from kfast.config import KafkaConfig
from kfast.protocol.errors import InconsistentClusterIdException
from kfast.storage.checkpoint import (
    LeaderEpochFileCache,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from kfast.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from kfast.storage.meta_properties import InconsistentBrokerIdException, read_meta_properties

from .batches import make_batch, now_ms


def manager(tmp_path, dirs=("d1",), start=True, cluster_id="abcdefghijklmnopqrstuv", **props):
    config = KafkaConfig(
        {"log.dirs": ",".join(str(tmp_path / d) for d in dirs), "node.id": "1", **props}
    )
    m = LogManager(config, cluster_id=cluster_id)
    if start:
        m.startup()
    return m


def test_meta_properties_written_and_checked(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    meta = read_meta_properties(str(tmp_path / "d1"))
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, "abcdefghijklmnopqrstuv", 1)
    text = (tmp_path / "d1" / "meta.properties").read_text()
    assert "version=1" in text and "node.id=1" in text and "cluster.id=" in text
    m.shutdown()
    with pytest.raises(InconsistentBrokerIdException, match="meta.properties"):
        manager(tmp_path, dirs=("d1", "d2"), **{"node.id": "2"})
    with pytest.raises(InconsistentClusterIdException, match="meta.properties"):
        manager(tmp_path, dirs=("d1",), cluster_id="another-cluster-id-000")
    # Two dirs that disagree with each other.
    (tmp_path / "d2" / "meta.properties").write_text(
        "version=1\ncluster.id=abcdefghijklmnopqrstuv\nnode.id=5\n"
    )
    with pytest.raises(InconsistentBrokerIdException, match="d2"):
        manager(tmp_path, dirs=("d1", "d2"))


def test_new_partitions_go_to_the_emptiest_dir(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2", "d3"))
    m.get_or_create_log("a", 0)
    m.get_or_create_log("a", 1)
    m.get_or_create_log("a", 2)
    dirs = [m.log_dir_of("a", p) for p in range(3)]
    assert sorted(dirs) == sorted(str(tmp_path / d) for d in ("d1", "d2", "d3"))
    m.delete_log("a", 1)
    m.get_or_create_log("b", 0)
    assert m.log_dir_of("b", 0) == dirs[1]
    m.shutdown()


def test_checkpoints_and_clean_shutdown(tmp_path):
    m = manager(tmp_path)
    log = m.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    for _ in range(5):
        log.append_as_leader(make_batch(2), leader_epoch=3)
    log.update_high_watermark(8)
    m.shutdown(broker_epoch=42)
    d = tmp_path / "d1"
    marker = json.loads((d / CLEAN_SHUTDOWN_FILE).read_text())
    assert marker == {"version": 0, "brokerEpoch": 42}
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 10\n"
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 0\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 8\n"
    assert (d / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    assert (
        d / "t-0" / "partition.metadata"
    ).read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    assert not any(n.endswith(".tmp") for n in os.listdir(d))

    again = manager(tmp_path)
    assert again.had_clean_shutdown[str(d)] is True
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    log = again.get_log("t", 0)
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (10, 8, 10)
    assert log.topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    again.shutdown()


def test_unclean_start_recovers(tmp_path):
    m = manager(tmp_path)
    log = m.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(make_batch(2))
    # Crash: no shutdown, no marker. Tail garbage from a torn write.
    with open(log.active_segment.log.path, "ab") as f:
        f.write(b"\x00" * 7)
    m.abandon()
    again = manager(tmp_path)
    d = str(tmp_path / "d1")
    assert again.had_clean_shutdown[d] is False
    assert again.get_log("t", 0).log_end_offset == 10
    again.shutdown()


def test_delete_log_renames_then_removes(tmp_path):
    m = manager(tmp_path, **{"log.segment.delete.delay.ms": "1000"})
    m.get_or_create_log("gone", 0).append_as_leader(make_batch(1))
    renamed = m.delete_log("gone", 0)
    assert renamed.endswith("-delete") and os.path.isdir(renamed)
    assert os.path.basename(renamed).startswith("gone-0.")
    assert not (tmp_path / "d1" / "gone-0").exists()
    assert m.get_log("gone", 0) is None
    assert m.delete_pending_dirs(now_ms()) == 0
    assert m.delete_pending_dirs(now_ms() + 2000) == 1
    assert not os.path.exists(renamed)
    m.shutdown()


def test_pending_delete_dirs_removed_after_restart(tmp_path):
    m = manager(tmp_path)
    m.get_or_create_log("x", 0)
    renamed = m.delete_log("x", 0)
    m.shutdown()
    again = manager(tmp_path)
    assert again.get_log("x", 0) is None
    again.cleanup_logs()
    assert not os.path.exists(renamed)
    again.shutdown()


def test_retention_by_time_size_and_live_overrides(tmp_path):
    m = manager(tmp_path, **{"log.segment.delete.delay.ms": "0"})
    log = m.get_or_create_log("r", 0, overrides={"segment.bytes": "1048576"})
    old = now_ms() - 10 * 24 * 3600 * 1000
    for i in range(600):
        log.append_as_leader(make_batch(2, 2000, timestamp=old + i), now=old + i)
    for _ in range(600):
        log.append_as_leader(make_batch(2, 2000))
    log.update_high_watermark(log.log_end_offset)
    segments = log.num_segments
    assert segments >= 4
    deleted = m.cleanup_logs()
    # Only the segments whose newest record is older than 7 days went.
    assert deleted >= 1
    assert log.num_segments == segments - deleted
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.largest_timestamp() > now_ms() - 7 * 24 * 3600 * 1000 for s in log.segments[1:])
    # A live override of retention.bytes shrinks the log to whole segments.
    m.update_topic_config("r", {"segment.bytes": "1048576", "retention.bytes": "1048576"})
    m.cleanup_logs()
    assert log.size >= 1048576 - log.active_segment.size or log.num_segments == 1
    assert log.size - log.segments[0].size < 1048576
    # Deleting everything leaves an empty active segment at the log end.
    m.update_topic_config("r", {"retention.ms": "0"})
    m.cleanup_logs(now_ms() + 1000)
    assert log.num_segments == 1 and log.size == 0
    assert log.log_start_offset == log.log_end_offset == 2400
    m.shutdown()


def test_retention_respects_high_watermark(tmp_path):
    m = manager(tmp_path, **{"log.segment.delete.delay.ms": "0", "log.retention.ms": "0"})
    log = m.get_or_create_log("h", 0, overrides={"segment.bytes": "1048576"})
    for _ in range(1200):
        log.append_as_leader(make_batch(2, 2000))
    assert m.cleanup_logs(now_ms() + 1000) == 0  # HW is 0: nothing is committed
    log.update_high_watermark(log.segments[1].base_offset)
    assert m.cleanup_logs(now_ms() + 1000) == 1
    m.shutdown()


def test_segment_files_deleted_after_delay(tmp_path):
    m = manager(tmp_path, **{"log.segment.delete.delay.ms": "60000"})
    log = m.get_or_create_log("s", 0, overrides={"segment.bytes": "1048576"})
    for _ in range(800):
        log.append_as_leader(make_batch(2, 2000))
    log.update_high_watermark(log.log_end_offset)
    first = log.segments[0].log.path
    log.delete_records_before(log.segments[1].base_offset)
    assert not os.path.exists(first) and os.path.exists(first + ".deleted")
    m.cleanup_logs(now_ms() + 61000)
    assert not os.path.exists(first + ".deleted")
    m.shutdown()


def test_leader_epoch_cache(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    cache.assign(1, 0)
    cache.assign(1, 5)
    cache.assign(3, 10)
    cache.assign(4, 20)
    assert cache.entries == [(1, 0), (3, 10), (4, 20)]
    assert cache.end_offset_for(1, 30) == (1, 10)
    assert cache.end_offset_for(2, 30) == (1, 10)
    assert cache.end_offset_for(4, 30) == (4, 30)
    # Older than every known epoch (deleted by retention): where the log
    # begins, so a follower truncates there (Kafka's endOffsetFor).
    assert cache.end_offset_for(0, 30) == (0, 0)
    assert cache.end_offset_for(-1, 30) == (-1, -1)
    assert cache.end_offset_for(9, 30) == (-1, -1)
    cache.truncate_from_end(15)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    assert LeaderEpochFileCache(cache.path).entries == [(3, 12)]


def test_offset_checkpoint_round_trip(tmp_path):
    f = OffsetCheckpointFile(str(tmp_path / "cp"))
    f.write({("a-b", 3): 17, ("x", 0): 0})
    assert (tmp_path / "cp").read_text() == "0\n2\na-b 3 17\nx 0 0\n"
    assert f.read() == {("a-b", 3): 17, ("x", 0): 0}
    meta = PartitionMetadataFile(str(tmp_path))
    assert meta.read() is None


def test_a_log_dir_is_used_by_one_node_at_a_time(tmp_path):
    from kfast.protocol.errors import KafkaStorageException

    first = manager(tmp_path, dirs=("d1", "d2"))
    with pytest.raises(KafkaStorageException, match="lock"):
        manager(tmp_path, dirs=("d3", "d2"))
    first.shutdown()
    second = manager(tmp_path, dirs=("d1", "d2"))  # free again after shutdown
    second.shutdown()


def test_concurrent_checkpoints_keep_the_dir_online(tmp_path):
    """The periodic checkpoint jobs and a deleted log's checkpoints run on
    different executor threads and write the same files: one writer at a
    time, or the second rename finds the shared temp file gone and takes a
    healthy dir offline."""
    import threading

    lm = manager(tmp_path)
    for p in range(4):
        lm.get_or_create_log("t", p).append_as_leader(make_batch(1))
    start = threading.Barrier(3)

    def checkpoints():
        start.wait()
        for _ in range(150):
            lm.checkpoint_high_watermarks()
            lm.checkpoint_recovery_offsets()

    def deletes():
        start.wait()
        for p in range(4):
            lm.delete_log("t", p)  # checkpoints its dir again
            lm.get_or_create_log("t", p)

    threads = [threading.Thread(target=f) for f in (checkpoints, checkpoints, deletes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert lm.live_log_dirs == lm.log_dirs, lm.failure_channel.offline_log_dirs
    lm.shutdown()
