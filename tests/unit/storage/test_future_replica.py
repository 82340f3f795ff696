"""Future replicas (JBOD moves): a copy of a partition built in another log
dir by follower appends, swapped in for the current log (Kafka's
LogManager.replaceCurrentWithFutureLog); DescribeLogDirs lists it with
is_future_key and its lag."""

import os
import shutil
from types import SimpleNamespace

from kfast.protocol import DescribeLogDirsRequest
from kfast.server.log_apis import handle_describe_log_dirs
from kfast.storage.log import parse_topic_partition
from kfast.storage.manager import CLEAN_SHUTDOWN_FILE

from .batches import make_batch
from .test_manager import manager


def _copy(source, future):
    while future.log_end_offset < source.log_end_offset:
        info = source.read(future.log_end_offset, 1 << 20)
        future.append_as_follower(info.records.read())


def test_a_future_replica_is_built_and_swapped_in(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    source = m.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAw")
    for epoch in (0, 0, 3):
        source.append_as_leader(make_batch(4), leader_epoch=epoch)
    source.update_high_watermark(8)
    future = m.create_future_log("t", 0, d2)
    name = os.path.basename(future.dir)
    assert name.startswith("t-0.") and name.endswith("-future")
    assert parse_topic_partition(future.dir) == ("t", 0)
    _copy(source, future)
    swapped = m.replace_current_with_future_log("t", 0)
    assert swapped is future and m.get_log("t", 0) is future
    assert m.log_dir_of("t", 0) == d2 and future.dir == os.path.join(d2, "t-0")
    assert (future.log_end_offset, future.high_watermark) == (12, 8)
    assert [(e.epoch, e.start_offset) for e in future.leader_epoch_cache.entries] == [
        (0, 0),
        (3, 8),
    ]
    assert future.topic_id == source.topic_id
    assert m.get_future_log("t", 0) is None
    # The old copy is renamed for deletion in its dir, and removed later.
    assert not os.path.exists(os.path.join(d1, "t-0"))
    assert [n for n in os.listdir(d1) if n.startswith("t-0.") and n.endswith("-delete")]
    assert m.delete_pending_dirs(now=1 << 62) == 1
    # It serves: appends continue at its offsets, and a restart finds it in d2.
    future.append_as_leader(make_batch(1), leader_epoch=3)
    m.shutdown()
    m = manager(tmp_path, dirs=("d1", "d2"))
    assert m.log_dir_of("t", 0) == d2 and m.get_log("t", 0).log_end_offset == 13
    m.shutdown()


def test_an_unfinished_future_replica_is_loaded_at_the_next_start(tmp_path):
    """Kafka keeps a move's future replica across a restart (the broker
    resumes the copy); its recovery point is checkpointed in its own dir."""
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    source = m.get_or_create_log("t", 0)
    source.append_as_leader(make_batch(3), leader_epoch=0)
    future = m.create_future_log("t", 0, d2)
    _copy(source, future)
    future_dir = future.dir
    m.shutdown()
    assert os.path.exists(os.path.join(d2, CLEAN_SHUTDOWN_FILE))
    m = manager(tmp_path, dirs=("d1", "d2"))
    loaded = m.get_future_log("t", 0)
    assert loaded is not None and loaded.dir == future_dir
    assert (loaded.log_end_offset, loaded.recovery_point) == (3, 3)
    assert m.log_dir_of("t", 0) == d1
    m.shutdown()


def test_a_future_replica_without_a_current_log_is_removed_at_the_next_start(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d2 = str(tmp_path / "d2")
    m.get_or_create_log("t", 0).append_as_leader(make_batch(2), leader_epoch=0)
    future_dir = m.create_future_log("t", 0, d2).dir
    m.shutdown()
    shutil.rmtree(os.path.join(tmp_path, "d1", "t-0"))
    m = manager(tmp_path, dirs=("d1", "d2"))
    assert m.get_future_log("t", 0) is None and m.get_log("t", 0) is None
    m.delete_pending_dirs()
    assert not os.path.exists(future_dir)
    m.shutdown()


def test_describe_log_dirs_lists_a_future_replica_with_its_lag(tmp_path):
    m = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    source = m.get_or_create_log("t", 0)
    source.append_as_leader(make_batch(5), leader_epoch=0)
    source.update_high_watermark(5)
    future = m.create_future_log("t", 0, d2)
    future.append_as_follower(source.read(0, 1 << 20).records.read())
    source.append_as_leader(make_batch(2), leader_epoch=0)
    ctx = SimpleNamespace(broker=SimpleNamespace(log_manager=m), authorize=lambda *_: True)
    response = handle_describe_log_dirs(ctx, DescribeLogDirsRequest(topics=None))
    by_dir = {r.log_dir: r for r in response.results}
    [current] = by_dir[d1].topics[0].partitions
    [moving] = by_dir[d2].topics[0].partitions
    assert (current.is_future_key, moving.is_future_key) == (False, True)
    assert moving.offset_lag == 2 and moving.partition_size == future.size > 0
    assert current.offset_lag == 0  # its high watermark is behind its end
    assert by_dir[d2].total_bytes > 0
    m.shutdown()
