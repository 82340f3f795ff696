"""The caught-up read in C (fetch_codec.read_caught_up) and the last stable
offset in C (LogState.last_stable_offset) against the full Python read, over
random sequences of what moves them: appends, transactions opened, committed
and aborted, high watermark moves, DeleteRecords, truncations, leader and
epoch changes, a log going offline.

After every operation, for fetch offsets around every offset the log has
and both isolation levels and four leader epochs a consumer might send:
- the LSO is the rule's (min(first unstable offset, HW), at least the log
  start), computed here from the producer state;
- read_caught_up answers exactly when the partition is caught up (the
  offset is the HW, or the LSO for read_committed; a leader at the epoch
  sent or none; an online log), and its answer is what the full read
  (Partition.read_records) gives there: no records, the same offsets, an
  empty aborted list for read_committed;
- ReplicaManager.read_from_local_log (the C loop, which answers caught-up
  partitions itself) gives what _read_partition gives for each partition.
"""

from __future__ import annotations

import tempfile
import uuid

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kfast._ext.fetch_codec import read_caught_up
from kfast.config import KafkaConfig, LogConfig
from kfast.protocol.errors import KafkaError
from kfast.server.partition import NO_EPOCH, READ_COMMITTED, Partition
from kfast.server.replica_manager import FetchParams, PartitionFetchRequest, ReplicaManager
from kfast.storage.log import Log
from kfast.storage.producer_state import ORIGIN_COORDINATOR

from ..hypothesis_budget import examples
from ..storage.batches import make_batch, make_control_batch

NODE = 1
OTHER = 2
EPOCH = 3


def reference_last_stable(log: Log) -> int:
    """The LSO as the Python read defined it before it moved to C (from
    the producer state's maps, not the copy LogState keeps of them)."""
    first_unstable = log.producer_state.first_unstable_offset()
    if first_unstable is not None and first_unstable < log.high_watermark:
        return max(first_unstable, log.log_start_offset)
    return log.high_watermark


def reference_caught_up(partition: Partition, offset: int, epoch: int, isolation: int) -> bool:
    """_read_partition's caught-up rule as it was written in Python."""
    log = partition.log
    bound = reference_last_stable(log) if isolation == READ_COMMITTED else log.high_watermark
    return (
        not log.offline
        and offset == bound
        and offset >= log.log_start_offset
        and partition.leader_id == partition.node_id
        and (epoch == NO_EPOCH or epoch == partition.leader_epoch)
    )


def full_read(partition: Partition, offset: int, epoch: int, isolation: int):
    """(error code, records size, aborted) of Partition.read_records."""
    try:
        info = partition.read_records(offset, 1 << 20, isolation, True, epoch)
    except KafkaError as error:
        return error.code, 0, None
    aborted = info.aborted_transactions
    if isolation == READ_COMMITTED and aborted is None:
        aborted = []
    size = 0 if info.records is None else len(info.records)
    return 0, size, None if aborted is None else [(t.producer_id, t.first_offset) for t in aborted]


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("txn"), st.integers(1, 3), st.integers(1, 2)),
        st.tuples(st.just("marker"), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("hw"), st.integers(0, 40)),
        st.tuples(st.just("delete_records"), st.integers(0, 40)),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("leader"), st.sampled_from([NODE, OTHER]), st.integers(0, 1)),
        st.tuples(st.just("offline")),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    max_size=25,
)


def apply(operation: tuple, partition: Partition, sequences: dict[int, int]) -> None:
    log = partition.log
    kind = operation[0]
    try:
        if kind == "append":
            log.append_as_leader(make_batch(operation[1]), partition.leader_epoch)
        elif kind == "txn":
            producer_id, count = operation[1], operation[2]
            sequence = sequences.get(producer_id, 0)
            log.append_as_leader(
                make_batch(
                    count,
                    producer_id=producer_id,
                    producer_epoch=0,
                    base_sequence=sequence,
                    transactional=True,
                ),
                partition.leader_epoch,
            )
            sequences[producer_id] = sequence + count
        elif kind == "marker":
            log.append_as_leader(
                make_control_batch(operation[1], 0, commit=operation[2]),
                partition.leader_epoch,
                ORIGIN_COORDINATOR,
            )
        elif kind == "hw":
            log.update_high_watermark(operation[1])
        elif kind == "delete_records":
            log.delete_records_before(min(operation[1], log.high_watermark))
        elif kind == "truncate":
            log.truncate_to(operation[1])
        elif kind == "leader":
            partition.leader_id = operation[1]
            partition.leader_epoch += operation[2]
        elif kind == "offline":
            log.offline = True
        elif kind == "reopen":
            # A restart: the producer state recovered from snapshots and the
            # log (clean or not), the HW from where it was.
            high_watermark = log.high_watermark
            log.close()
            partition.log = Log(log.dir, log.config, had_clean_shutdown=operation[1])
            partition.log.update_high_watermark(high_watermark)
    except KafkaError:
        pass  # refused (a sequence after a truncation, an offline log): nothing moved


@settings(max_examples=examples(60))
@given(OPERATIONS)
# DeleteRecords past an open transaction: the LSO is the new log start.
@example([("txn", 1, 2), ("append", 2), ("hw", 40), ("delete_records", 3)])
# Restarts with a transaction open.
@example([("txn", 1, 2), ("hw", 40), ("reopen", False), ("marker", 1, False), ("hw", 40)])
@example([("txn", 1, 2), ("hw", 40), ("reopen", True), ("append", 1), ("hw", 40)])
# A truncation below an open transaction, then the HW past where it was.
@example([("txn", 1, 2), ("hw", 40), ("truncate", 1), ("append", 3), ("hw", 40)])
# A commit the HW passes: no longer unstable.
@example([("txn", 1, 1), ("marker", 1, True), ("hw", 40)])
# DeleteRecords past a decided transaction the HW has not passed.
@example([("txn", 1, 1), ("marker", 1, False), ("hw", 3), ("delete_records", 3), ("hw", 40)])
# A commit below the HW and one still above it (unreplicated).
@example([("txn", 1, 1), ("txn", 2, 1), ("marker", 1, True), ("hw", 3), ("marker", 2, False)])
def test_the_c_caught_up_read_is_the_full_reads_answer(operations):
    with tempfile.TemporaryDirectory() as base:
        log = Log(f"{base}/t-0", LogConfig({"segment.bytes": 1 << 20}))
        partition = Partition("t", 0, uuid.uuid4(), log, NODE)
        partition.leader_id, partition.leader_epoch = NODE, EPOCH
        config = KafkaConfig({"node.id": str(NODE), "log.dirs": base})
        manager = ReplicaManager(NODE, None, None, config)  # type: ignore[arg-type]
        manager._partitions[partition.key] = partition
        sequences: dict[int, int] = {}
        try:
            for operation in [("append", 2), *operations]:
                apply(operation, partition, sequences)
                check(manager, partition)
        finally:
            partition.log.close_handlers()


def check(manager: ReplicaManager, partition: Partition) -> None:
    log = partition.log
    last_stable = reference_last_stable(log)
    assert log.last_stable_offset == last_stable
    offsets = {
        log.log_start_offset - 1,
        log.log_start_offset,
        last_stable,
        log.high_watermark,
        log.high_watermark + 1,
        log.log_end_offset,
        log.log_end_offset + 1,
    }
    epochs = (
        NO_EPOCH,
        partition.leader_epoch,
        partition.leader_epoch - 1,
        partition.leader_epoch + 1,
    )
    for isolation in (0, READ_COMMITTED):
        requests = [
            PartitionFetchRequest(partition.key, offset, 1 << 20, epoch)
            for offset in sorted(offsets)
            for epoch in epochs
        ]
        for request in requests:
            offset, epoch = request.fetch_offset, request.current_leader_epoch
            answer = read_caught_up(partition, offset, epoch, isolation)
            assert (answer is not None) == reference_caught_up(partition, offset, epoch, isolation)
            if answer is None:
                continue
            assert full_read(partition, offset, epoch, isolation) == (
                0,
                0,
                answer.aborted_transactions,
            )
            assert (answer.error_code, answer.size, answer.records) == (0, 0, None)
            assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (
                log.high_watermark,
                last_stable,
                log.log_start_offset,
            )
            assert answer.aborted_transactions == ([] if isolation == READ_COMMITTED else None)
        # The C loop against _read_partition, a partition at a time (the
        # whole budget for each).
        params = FetchParams(0, 1, 1 << 20, isolation)
        for request in requests:
            ((_, data),), _, _ = manager.read_from_local_log(params, [request])
            alone = manager._read_partition(params, request, 1 << 20, True)
            assert _fields(data) == _fields(alone), request


def _fields(data) -> tuple:
    records = data.records
    return (
        data.error_code,
        data.high_watermark,
        data.last_stable_offset,
        data.log_start_offset,
        None if records is None else (records.position, records.length),
        data.aborted_transactions,
        data.size,
        data.diverging_epoch,
        data.preferred_read_replica,
    )
