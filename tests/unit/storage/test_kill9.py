"""kill -9 while appending: every acknowledged record survives reopening."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from kfast.config import KafkaConfig
from kfast.storage.manager import LogManager

from .batches import record_values

CHILD = textwrap.dedent("""
    import sys, time
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kfast.config import KafkaConfig
    from kfast.storage.manager import LogManager

    manager = LogManager(KafkaConfig({"log.dirs": sys.argv[1], "node.id": "1",
                                      "log.segment.bytes": "1048576"}))
    manager.startup()
    log = manager.get_or_create_log("k", 0)
    i = 0
    while True:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)
        for j in range(3):
            b.append(j, timestamp=int(time.time() * 1000), key=None,
                     value=b"record-%d" % (i * 3 + j) + b"x" * 300, headers=[])
        info = log.append_as_leader(bytes(b.build()))
        # Acknowledge only after the append returned, as a produce response would.
        sys.stdout.write(f"{info.last_offset}\\n")
        sys.stdout.flush()
        i += 1
""")


@pytest.mark.slow
def test_kill9_loses_no_acknowledged_record(tmp_path):
    data_dir = str(tmp_path / "data")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, data_dir],
        stdout=subprocess.PIPE,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    acknowledged = -1
    try:
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged >= 3 * 4000:  # several segments' worth
                break
        os.kill(child.pid, signal.SIGKILL)
        # Drain what the child wrote before it died: those were acknowledged too.
        for line in child.stdout:
            acknowledged = int(line)
    finally:
        child.kill()
        child.wait()
    assert acknowledged > 0
    manager = LogManager(
        KafkaConfig({"log.dirs": data_dir, "node.id": "1", "log.segment.bytes": "1048576"})
    )
    manager.startup()
    assert manager.had_clean_shutdown[os.path.abspath(data_dir)] is False
    log = manager.get_log("k", 0)
    assert log.num_segments > 1
    assert log.log_end_offset >= acknowledged + 1
    offset = 0
    seen = 0
    while offset <= acknowledged:
        records = record_values(log.read(offset, 1 << 20).records.read())
        for o, value in records:
            assert value.startswith(b"record-%d" % o)
        seen += len(records)
        offset = records[-1][0] + 1
    assert seen >= acknowledged + 1
    manager.shutdown()
