"""ListOffsets on a new leader whose high watermark has not yet reached the
start of its epoch (Kafka's Partition.fetchOffsetForTimestamp): clients get
OFFSET_NOT_AVAILABLE, which they retry, instead of offsets older than what
the previous leader already gave out; followers are answered as before."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import PartitionRegistration
from kfast.protocol import ListOffsetsRequest, ProduceResponse, errors
from kfast.protocol.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfast.records import RecordBatchBuilder
from kfast.server.log_apis import handle_list_offsets
from kfast.server.replica_manager import ReplicaManager
from kfast.server_common.timer import SystemTimer
from kfast.storage.manager import LogManager

NODE, FOLLOWER = 1, 2
TOPIC_ID = uuid.uuid4()


@pytest.fixture
def log_manager(tmp_path):
    manager = LogManager(
        KafkaConfig({"node.id": str(NODE), "log.dirs": str(tmp_path)}), cluster_id="c1"
    )
    manager.startup()
    yield manager
    manager.shutdown()


def list_offset(manager: ReplicaManager, timestamp: int, replica_id: int = -1):
    request = ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t",
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
                ],
            )
        ],
    )
    ctx = SimpleNamespace(
        api_version=7,
        broker=SimpleNamespace(replica_manager=manager),
        authorize=lambda *action: True,
    )  # no authorizer
    answer = handle_list_offsets(ctx, request).topics[0].partitions[0]
    return answer.error_code, answer.offset


def test_a_new_leader_answers_clients_once_its_high_watermark_reaches_its_epoch(log_manager):
    async def main():
        config = KafkaConfig({"node.id": str(NODE), "log.dirs": "unused"})
        manager = ReplicaManager(NODE, log_manager, SystemTimer(asyncio.get_running_loop()), config)
        log = log_manager.get_or_create_log("t", 0)

        def lead(epoch: int):
            manager.apply_partition(
                "t",
                TOPIC_ID,
                0,
                PartitionRegistration(
                    replicas=(NODE, FOLLOWER),
                    isr=(NODE, FOLLOWER),
                    leader=NODE,
                    leader_epoch=epoch,
                    partition_epoch=epoch,
                ),
                log,
            )

        lead(3)
        builder = RecordBatchBuilder(0)
        for value in (b"a", b"b"):
            builder.append(1_700_000_000_000, None, value)
        out = ProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=-1)
        assert manager.append_records(1000, 1, [("t", 0, builder.build(), out)]) is None
        partition = manager.get_partition("t", 0)
        assert (log.log_end_offset, log.high_watermark) == (2, 0)
        # Leadership in a new epoch, which starts at offset 2; the follower
        # has not fetched since, so the high watermark is still 0.
        lead(4)
        assert partition.leader_epoch_start_offset == 2
        not_available = errors.OffsetNotAvailableException.code
        assert list_offset(manager, LATEST_TIMESTAMP)[0] == not_available
        assert list_offset(manager, EARLIEST_TIMESTAMP)[0] == not_available
        # A follower asking for the log end offset is answered.
        assert list_offset(manager, LATEST_TIMESTAMP, replica_id=FOLLOWER) == (0, 2)
        # The follower fetches at 2: the high watermark reaches the epoch's start.
        assert partition.update_follower_fetch_state(FOLLOWER, 2, 0, 1)
        assert list_offset(manager, LATEST_TIMESTAMP) == (0, 2)
        assert list_offset(manager, EARLIEST_TIMESTAMP) == (0, 0)

    asyncio.run(asyncio.wait_for(main(), 10))
