"""Descriptors a log holds, and what an unclean open reads."""

import os

from kfast.config import LogConfig
from kfast.storage.log import Log

from .batches import make_batch, record_values

MiB = 1024 * 1024
CONFIG = LogConfig({"segment.bytes": MiB, "index.interval.bytes": 500})


def open_descriptors_under(path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(path)):
                count += 1
        except OSError:
            pass  # closed meanwhile (the listdir's own descriptor)
    return count


def test_one_descriptor_per_segment_indexes_mapped_and_closed(tmp_path):
    log = Log(str(tmp_path / "t-0"), CONFIG)
    for _ in range(1200):
        log.append_as_leader(make_batch(3, 1000))
    assert log.num_segments >= 3
    # The .log of each segment; the indexes are mapped (rolled) or buffered
    # (active) with their files closed.
    assert open_descriptors_under(tmp_path) == log.num_segments
    log.flush()
    assert open_descriptors_under(tmp_path) == log.num_segments
    # Lookups through the mapped indexes of rolled segments still work.
    first = log.segments[1].base_offset
    assert record_values(log.read(first + 1, 1 << 20).records.read())[0][0] <= first + 1
    log.close()
    assert open_descriptors_under(tmp_path) == 0
    reopened = Log(str(tmp_path / "t-0"), CONFIG, had_clean_shutdown=True)
    assert open_descriptors_under(tmp_path) == reopened.num_segments
    reopened.close()


def test_unclean_open_rebuilds_the_active_index_without_reading_it(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log(path, CONFIG)
    for _ in range(20):
        log.append_as_leader(make_batch(3, 100))
    end = log.log_end_offset
    index_file = log.active_segment.offset_index.path
    log.close_handlers()  # kill -9: the index is still preallocated, unflushed
    # Garbage where the crash left unflushed index bytes: never read, since
    # the segment is rebuilt from its .log.
    with open(index_file, "r+b") as f:
        f.write(b"\xff" * 4096)
    size_before = os.path.getsize(index_file)
    recovered = Log(path, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert recovered.log_end_offset == end
    index = recovered.active_segment.offset_index
    assert 0 < index.entries < 20
    assert all(index.entry(i).offset < end for i in range(index.entries))
    assert recovered.read(0, 1 << 20).records is not None
    recovered.close()
    assert os.path.getsize(index_file) == index.entries * 8 < size_before
