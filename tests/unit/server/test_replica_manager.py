"""ReplicaManager and Partition on a real LogManager and SystemTimer: the
high watermark rule, DelayedProduce completed by a high watermark advance,
DelayedFetch completed by appends or by its timeout, read_committed bounds."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import PartitionRegistration
from kfast.protocol import ProduceResponse, errors
from kfast.records import RecordBatchBuilder
from kfast.server.partition import READ_COMMITTED
from kfast.server.replica_manager import FetchParams, PartitionFetchRequest, ReplicaManager
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

NODE = 1
FOLLOWER = 2


def batch(*values, **kwargs) -> bytes:
    builder = RecordBatchBuilder(0, **kwargs)
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


@pytest.fixture
def setup(tmp_path):
    config = KafkaConfig({"node.id": "1", "log.dirs": str(tmp_path)})
    log_manager = LogManager(config, cluster_id="c1")
    log_manager.startup()

    def make(loop, isr=(NODE,)):
        manager = ReplicaManager(NODE, log_manager, SystemTimer(loop), config)
        log = log_manager.get_or_create_log("t", 0)
        registration = PartitionRegistration(
            replicas=tuple(sorted(set(isr))),
            isr=isr,
            leader=NODE,
            leader_epoch=3,
            partition_epoch=0,
        )
        manager.apply_partition("t", uuid.uuid4(), 0, registration, log)
        return manager

    yield make
    log_manager.shutdown()


def response():
    return ProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=-1)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_single_replica_acks_all_completes_at_once(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        out = response()
        waiting = manager.append_records(1000, -1, [("t", 0, batch(b"a", b"b"), out)])
        assert waiting is None  # the HW covered the append on the first try
        assert (out.error_code, out.base_offset) == (0, 0)
        partition = manager.get_partition("t", 0)
        assert partition.log.high_watermark == 2
        assert partition.log.leader_epoch_cache.latest_epoch() == 3

    run(main())


def test_delayed_produce_waits_for_the_high_watermark(setup):
    async def main():
        manager = setup(asyncio.get_running_loop(), isr=(NODE, FOLLOWER))
        partition = manager.get_partition("t", 0)
        out = response()
        waiting = manager.append_records(5000, -1, [("t", 0, batch(b"a", b"b"), out)])
        assert waiting is not None and not waiting.done()
        assert partition.log.high_watermark == 0
        assert manager.produce_purgatory.delayed() == 1
        # The follower catches up: the HW moves, the purgatory completes the produce.
        assert partition.update_follower_fetch_state(FOLLOWER, 2, 0, 1)
        manager.produce_purgatory.check_and_complete(partition.key)
        await waiting
        assert out.error_code == 0 and partition.log.high_watermark == 2
        # acks=1 does not wait.
        assert manager.append_records(5000, 1, [("t", 0, batch(b"c"), response())]) is None

    run(main())


def test_delayed_produce_times_out(setup):
    async def main():
        manager = setup(asyncio.get_running_loop(), isr=(NODE, FOLLOWER))
        out = response()
        waiting = manager.append_records(20, -1, [("t", 0, batch(b"a"), out)])
        await waiting
        assert out.error_code == errors.TimeoutException.code

    run(main())


def test_min_insync_replicas_and_unknown_partition(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        partition = manager.get_partition("t", 0)
        partition.log.update_config(partition.log.config.with_overrides({"min.insync.replicas": 2}))
        out = response()
        assert manager.append_records(100, -1, [("t", 0, batch(b"a"), out)]) is None
        assert out.error_code == errors.NotEnoughReplicasException.code
        out = response()
        manager.append_records(100, 1, [("t", 0, batch(b"a"), out)])
        assert out.error_code == 0  # acks=1 ignores min.insync.replicas
        out = response()
        manager.append_records(100, 1, [("t", 5, batch(b"a"), out)])
        assert out.error_code == errors.UnknownTopicOrPartitionException.code

    run(main())


def test_an_offline_or_followed_partition_refuses_the_append(setup):
    """append_records finds a hosted partition with one dict lookup; a log
    in a failed dir and a partition this broker only follows still get
    their errors, and nothing is written."""

    async def main():
        manager = setup(asyncio.get_running_loop())
        partition = manager.get_partition("t", 0)
        out = response()
        assert manager.append_records(100, 1, [("t", 0, batch(b"a"), out)]) is None
        assert (out.error_code, out.base_offset) == (0, 0)
        partition.log.offline = True
        out = response()
        manager.append_records(100, 1, [("t", 0, batch(b"b"), out)])
        assert out.error_code == errors.KafkaStorageException.code
        partition.log.offline = False
        partition.leader_id = FOLLOWER
        out = response()
        manager.append_records(100, -1, [("t", 0, batch(b"c"), out)])
        assert out.error_code == errors.NotLeaderOrFollowerException.code
        assert partition.log.log_end_offset == 1

    run(main())


def test_delayed_fetch_completes_on_append_and_on_timeout(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        params = FetchParams(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        request = PartitionFetchRequest(("t", 0), 0, 1 << 20)
        fetch = manager.fetch_messages(params, [request])
        assert isinstance(fetch, asyncio.Future)  # nothing to read yet: it waits
        assert manager.fetch_purgatory.delayed() == 1 and not fetch.done()
        manager.append_records(1000, 1, [("t", 0, batch(b"x"), response())])
        ((_, data),) = await fetch
        assert data.error_code == 0 and data.size > 0 and data.high_watermark == 1
        # min_bytes never reached: the timeout answers with what there is.
        params = params._replace(max_wait_ms=30, min_bytes=1 << 20)
        ((_, data),) = await manager.fetch_messages(params, [request])
        assert data.size > 0

    run(main())


def test_fetch_byte_budget_first_batch_rule(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        big = batch(b"x" * 1000)
        manager.append_records(1000, 1, [("t", 0, big, response())])
        manager.append_records(1000, 1, [("t", 0, batch(b"y"), response())])
        request = PartitionFetchRequest(("t", 0), 0, 10)
        # KIP-74: the first batch comes back whole even over the limits.
        params = FetchParams(0, 1, 10, 0)
        ((_, data),), total, _ = manager.read_from_local_log(params, [request])
        assert data.size == len(big) == total
        # Fetch v0-v2 (hard limit): never more than max_bytes.
        params = params._replace(hard_max_bytes_limit=True)
        ((_, data),), total, _ = manager.read_from_local_log(params, [request])
        assert data.size <= 10

    run(main())


def test_read_committed_stops_at_the_last_stable_offset(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        manager.append_records(1000, 1, [("t", 0, batch(b"plain"), response())])
        txn = batch(
            b"open", producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
        )
        out = response()
        manager.append_records(1000, 1, [("t", 0, txn, out)])
        assert out.error_code == 0
        log = manager.get_partition("t", 0).log
        assert (log.high_watermark, log.last_stable_offset) == (2, 1)
        request = PartitionFetchRequest(("t", 0), 1, 1 << 20)
        committed = FetchParams(0, 1, 1 << 20, READ_COMMITTED)
        ((_, data),), _, _ = manager.read_from_local_log(committed, [request])
        assert data.size == 0 and data.last_stable_offset == 1
        uncommitted = committed._replace(isolation_level=0)
        ((_, data),), _, _ = manager.read_from_local_log(uncommitted, [request])
        assert data.size > 0

    run(main())


def test_fenced_and_unknown_leader_epochs(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        params = FetchParams(0, 1, 1 << 20, 0)
        for epoch, code in (
            (2, errors.FencedLeaderEpochException.code),
            (4, errors.UnknownLeaderEpochException.code),
            (3, 0),
            (-1, 0),
        ):
            request = PartitionFetchRequest(("t", 0), 0, 1 << 20, epoch)
            ((_, data),), _, _ = manager.read_from_local_log(params, [request])
            assert data.error_code == code

    run(main())


def _counting_reads(manager: ReplicaManager) -> list[tuple[str, int]]:
    """The keys of every partition read from now on (a caught-up one's read
    is C, fetch_codec.read_caught_up: counted where the reads start)."""
    keys: list[tuple[str, int]] = []
    read = manager.read_from_local_log

    def counting(params, requests):
        keys.extend(request.key for request in requests)
        return read(params, requests)

    manager.read_from_local_log = counting  # type: ignore[method-assign]
    return keys


def _delete_records_result():
    from kfast.protocol import DeleteRecordsResponse

    return DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=0)


def test_an_idle_fetch_expires_without_reading_again(setup):
    """Nothing woke it, so its expiry answers with the read that parked it
    (every change to what it reads wakes it: issue 21 item 5)."""

    async def main():
        manager = setup(asyncio.get_running_loop())
        manager.append_records(1000, 1, [("t", 0, batch(b"a", b"b"), response())])
        reads = _counting_reads(manager)
        params = FetchParams(max_wait_ms=30, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        fetch = manager.fetch_messages(params, [PartitionFetchRequest(("t", 0), 2, 1 << 20)])
        assert isinstance(fetch, asyncio.Future)
        ((_, data),) = await fetch
        assert (data.error_code, data.size, data.high_watermark) == (0, 0, 2)
        assert reads == [("t", 0)]  # the first read only

        # Record bytes below min_bytes: the expiry reads again (the segments
        # under them may have been cleaned meanwhile).
        params = params._replace(min_bytes=1 << 20)
        del reads[:]
        ((_, data),) = await manager.fetch_messages(
            params, [PartitionFetchRequest(("t", 0), 0, 1 << 20)]
        )
        assert data.size > 0 and reads == [("t", 0), ("t", 0)]

    run(main())


def test_a_log_start_move_refreshes_what_a_waiting_fetch_answers(setup):
    """DeleteRecords up to the high watermark leaves a caught-up fetch
    waiting, but its answer (log_start_offset) changed: the wake-up re-read
    is what the expiry answers, not the read that parked it."""

    async def main():
        manager = setup(asyncio.get_running_loop())
        manager.append_records(1000, 1, [("t", 0, batch(b"a", b"b"), response())])
        params = FetchParams(max_wait_ms=200, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        fetch = manager.fetch_messages(params, [PartitionFetchRequest(("t", 0), 2, 1 << 20)])
        assert isinstance(fetch, asyncio.Future)
        result = _delete_records_result()
        assert manager.delete_records(1000, [("t", 0, 2, result)]) is None
        assert result.low_watermark == 2
        assert not fetch.done()  # still caught up: nothing to answer early
        ((_, data),) = await fetch
        assert (data.error_code, data.size, data.log_start_offset) == (0, 0, 2)

    run(main())


def test_leadership_change_and_deletion_complete_a_waiting_fetch(setup):
    async def main():
        manager = setup(asyncio.get_running_loop())
        params = FetchParams(max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        request = PartitionFetchRequest(("t", 0), 0, 1 << 20, 3)
        fetch = manager.fetch_messages(params, [request])
        assert isinstance(fetch, asyncio.Future)
        partition = manager.get_partition("t", 0)
        # A new leader epoch (still this broker): the fetch's epoch 3 is fenced.
        manager.apply_partition(
            "t",
            partition.topic_id,
            0,
            PartitionRegistration(
                replicas=(NODE,), isr=(NODE,), leader=NODE, leader_epoch=4, partition_epoch=1
            ),
            partition.log,
        )
        ((_, data),) = await asyncio.wait_for(fetch, 5)
        assert data.error_code == errors.FencedLeaderEpochException.code

        fetch = manager.fetch_messages(params, [request._replace(current_leader_epoch=-1)])
        assert isinstance(fetch, asyncio.Future)
        manager.remove_partition("t", 0)
        ((_, data),) = await asyncio.wait_for(fetch, 5)
        assert data.error_code == errors.UnknownTopicOrPartitionException.code

    run(main())


def test_an_isr_change_this_leader_proposed_counts_once_whichever_path_commits_it(setup):
    """IsrShrinksPerSec / IsrExpandsPerSec: the metadata log may apply this
    leader's committed AlterPartition before the response arrives (the
    response then changes nothing); the change is counted on the path that
    applies it, once."""

    async def main():
        manager = setup(asyncio.get_running_loop(), isr=(NODE, FOLLOWER))
        partition = manager.get_partition("t", 0)
        log, topic_id = partition.log, partition.topic_id
        stats = manager.replica_stats

        def registration(isr, partition_epoch):
            return PartitionRegistration(
                replicas=(NODE, FOLLOWER),
                isr=isr,
                leader=NODE,
                leader_epoch=3,
                partition_epoch=partition_epoch,
            )

        # Shrink proposed; the metadata log brings it first.
        partition.begin_isr_change((NODE,))
        manager.apply_partition("t", topic_id, 0, registration((NODE,), 1), log)
        assert (stats.isr_shrinks, stats.isr_expands) == (1, 0)
        # The AlterPartition response for the same change: nothing more.
        before = len(partition.isr)
        assert not partition.on_isr_committed(3, (NODE,), 1)
        stats.count_isr_change(before, len(partition.isr))
        assert (stats.isr_shrinks, stats.isr_expands) == (1, 0)
        # Expansion proposed; the response brings it first (counted by
        # AlterPartitionManager), then the metadata: nothing more.
        partition.begin_isr_change((NODE, FOLLOWER))
        before = len(partition.isr)
        partition.on_isr_committed(3, (NODE, FOLLOWER), 2)
        stats.count_isr_change(before, len(partition.isr))
        manager.apply_partition("t", topic_id, 0, registration((NODE, FOLLOWER), 2), log)
        assert (stats.isr_shrinks, stats.isr_expands) == (1, 1)
        # A change this leader did not propose (the controller fenced the
        # follower) is not this leader's to count.
        manager.apply_partition("t", topic_id, 0, registration((NODE,), 3), log)
        assert (stats.isr_shrinks, stats.isr_expands) == (1, 1)

    run(main())
