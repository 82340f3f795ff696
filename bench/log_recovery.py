"""Log recovery time: reopen a partition after a crash vs after a clean shutdown.

    python3 bench/log_recovery.py [--size-mib 1024] [--batch-kib 64] [--dir DIR]

Writes --size-mib of 64 KiB record batches to one partition (1 GiB segments'
worth by default, split into log.segment.bytes = 256 MiB segments), then:
  unclean  the files are left as kill -9 leaves them (indexes untrimmed, no
           producer snapshot, no clean-shutdown marker) and the log is opened
           with recovery from offset 0: every batch is re-read and its CRC
           checked, indexes rebuilt;
  clean    the log is closed normally and reopened with the clean-shutdown
           flag: only the tail of the active segment is read.
Prints the wall-clock time of each open and the recovery rate. The data is
deleted at the end. Bounded: at most --size-mib of disk, no network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from kfast.config import LogConfig
from kfast.storage.log import Log


def build_batch(batch_bytes: int) -> bytearray:
    value = os.urandom(1000)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(max(batch_bytes // 1030, 1)):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytearray(builder.build())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--batch-kib", type=int, default=64)
    parser.add_argument("--dir", default=None, help="parent directory for the test log")
    args = parser.parse_args()
    config = LogConfig({"segment.bytes": str(256 * 1024 * 1024)})
    root = tempfile.mkdtemp(prefix="kfast-recovery-", dir=args.dir)
    path = os.path.join(root, "recovery-0")
    try:
        batch = build_batch(args.batch_kib * 1024)
        log = Log(path, config)
        target = args.size_mib * 1024 * 1024
        start = time.perf_counter()
        while log.size < target:
            log.append_as_leader(batch)
        write_s = time.perf_counter() - start
        end_offset, size, segments = log.log_end_offset, log.size, log.num_segments
        log.close_handlers()  # a crash: nothing trimmed, no snapshot
        start = time.perf_counter()
        recovered = Log(path, config, recovery_point=0, had_clean_shutdown=False)
        unclean_s = time.perf_counter() - start
        assert recovered.log_end_offset == end_offset, (recovered.log_end_offset, end_offset)
        recovered.close()
        start = time.perf_counter()
        reopened = Log(path, config, recovery_point=end_offset, had_clean_shutdown=True)
        clean_s = time.perf_counter() - start
        assert reopened.log_end_offset == end_offset
        reopened.close()
        mib = size / 2**20
        print(
            f"log: {mib:.0f} MiB in {segments} segments, {end_offset} records, "
            f"{args.batch_kib} KiB batches (written in {write_s:.2f} s)"
        )
        print(f"unclean open (full recovery): {unclean_s:.3f} s  ({mib / unclean_s:.0f} MiB/s)")
        print(f"clean open:                   {clean_s * 1000:.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
