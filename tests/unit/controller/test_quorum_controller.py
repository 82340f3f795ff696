"""QuorumController's operations over an in-memory metadata log: commit,
publish, restart = replay (the Raft log's durability: tests/unit/raft)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfast.controller.feature_control import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE
from kfast.controller.metadata.image import Endpoint, MetadataImage
from kfast.controller.replication_control import TopicSpec
from kfast.protocol import errors

from .memory_controller import ENDPOINTS, make_controller, started


def run(coro):
    return asyncio.run(coro)


def test_bootstrap_formats_the_log(tmp_path):
    async def main():
        controller = await started(tmp_path)
        await controller.shutdown()
        return controller

    controller = run(main())
    image = controller.image
    assert image.features == {"metadata.version": 21, "transaction.version": 2}
    assert image.cluster_id == "test-cluster-id-000000" and image.controller_id == 1
    assert image.offset == 1  # the two FeatureLevelRecords: offsets 0 and 1
    assert len(controller.log) == 2


def test_restart_replays_to_an_identical_image(tmp_path):
    async def first():
        controller = await started(tmp_path, **{"num.partitions": 3})
        epoch = await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, "rack-a")
        await controller.auto_create_topics(["orders", "payments"])
        await controller.create_topics(
            [TopicSpec("compacted", 2, 1, None, {"cleanup.policy": "compact"})]
        )
        await controller.delete_topics(["payments"], [uuid.UUID(int=0)])
        await controller.incremental_alter_configs([(2, "orders", [("retention.ms", 0, "1000")])])
        await controller.create_partitions([("orders", 5, None)])
        ids = await controller.allocate_producer_ids(1)
        image = controller.image
        await controller.shutdown()
        return epoch, ids, image, controller.log

    async def second(log):
        controller = await started(tmp_path, log)
        image = controller.image
        ids = await controller.allocate_producer_ids(1)
        await controller.shutdown()
        return image, ids

    epoch, ids, before, log = run(first())
    after, next_ids = run(second(log))
    assert after == before
    assert set(after.topics_by_name) == {"orders", "compacted"}
    assert len(after.topics_by_name["orders"].partitions) == 5
    assert after.topic_configs == {
        "orders": {"retention.ms": "1000"},
        "compacted": {"cleanup.policy": "compact"},
    }
    assert after.brokers[1].epoch == epoch and after.brokers[1].rack == "rack-a"
    assert not after.brokers[1].fenced
    assert ids == (0, 1000) and next_ids == (1000, 1000)


def test_subscribers_see_each_commit_with_its_delta(tmp_path):
    seen = []

    async def main():
        controller = make_controller(tmp_path)
        controller.subscribe(lambda delta, image: seen.append((delta, image)))
        await controller.start()
        await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        await controller.auto_create_topics(["t"], configs={"retention.ms": "5"})
        topic_id = controller.image.topics_by_name["t"].topic_id
        await controller.delete_topics([None], [topic_id])
        await controller.shutdown()

    run(main())
    start, registered, created, deleted = seen
    assert start[0].changed_topics == {} and isinstance(start[1], MetadataImage)
    assert registered[0].changed_brokers == {1}
    assert set(created[0].changed_topics) == {"t"}
    assert created[0].changed_topic_configs == {"t"}
    assert created[1].topic_configs["t"] == {"retention.ms": "5"}
    assert set(deleted[0].deleted_topics) == {"t"} and "t" not in deleted[1].topics_by_name
    assert deleted[1].topic_configs == {}
    assert [image.offset for _, image in seen] == sorted(image.offset for _, image in seen)


def test_validate_only_writes_nothing(tmp_path):
    async def main():
        controller = await started(tmp_path)
        await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        offset = controller.image.offset
        [result] = await controller.create_topics([TopicSpec("t", 2)], validate_only=True)
        assert result.error is None and result.num_partitions == 2
        [error] = await controller.create_partitions([("nope", 2, None)], validate_only=True)
        assert isinstance(error, errors.UnknownTopicOrPartitionException)
        end = len(controller.log)
        await controller.shutdown()
        return offset, controller.image, end

    offset, image, end = run(main())
    assert image.offset == offset and image.topics_by_name == {}
    assert end == offset + 1


def test_auto_create_reports_error_codes(tmp_path):
    async def main():
        controller = await started(tmp_path)
        await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        first = await controller.auto_create_topics(["a", "bad name"])
        second = await controller.auto_create_topics(["a", "b"], replication_factor=3)
        await controller.shutdown()
        return first, second

    first, second = run(main())
    assert first == {"a": 0, "bad name": errors.InvalidTopicException.code}
    assert second == {
        "a": errors.TopicExistsException.code,
        "b": errors.InvalidReplicationFactorException.code,
    }


def test_reregistration_gets_a_new_epoch_and_listeners(tmp_path):
    async def main():
        controller = await started(tmp_path)
        first = await controller.register_broker(1, uuid.uuid4(), ENDPOINTS, None)
        moved = [Endpoint("PLAINTEXT", "localhost", 9999, "PLAINTEXT")]
        second = await controller.register_broker(1, uuid.uuid4(), moved, None)
        image = controller.image
        await controller.shutdown()
        return first, second, image

    first, second, image = run(main())
    assert second > first
    assert image.brokers[1].epoch == second
    assert image.brokers[1].listeners["PLAINTEXT"].port == 9999


def test_operations_before_start_are_refused(tmp_path):
    async def main():
        controller = make_controller(tmp_path)
        with pytest.raises(errors.NotControllerException):
            await controller.auto_create_topics(["t"])

    run(main())


def test_fence_and_reregister_a_broker(tmp_path):
    async def main():
        controller = await started(tmp_path)
        for broker_id in (1, 2):
            await controller.register_broker(broker_id, uuid.uuid4(), ENDPOINTS, None)
        await controller.create_topics([TopicSpec("t", -1, -1, {0: [2, 1]})])
        await controller.fence_broker(2)
        fenced = controller.image
        await controller.fence_broker(2)  # already fenced: no change
        assert controller.image is fenced
        await controller.register_broker(2, uuid.uuid4(), ENDPOINTS, None)
        back = controller.image
        await controller.shutdown()
        return fenced, back

    fenced, back = run(main())
    assert fenced.brokers[2].fenced
    partition = fenced.topics_by_name["t"].partitions[0]
    assert (partition.leader, partition.isr) == (1, (1,))
    # Broker 2 is back but out of sync: broker 1 keeps leading.
    assert not back.brokers[2].fenced
    assert back.topics_by_name["t"].partitions[0].leader == 1


def test_update_features(tmp_path):
    async def main():
        controller = await started(tmp_path)
        formatted = dict(controller.image.features)
        results = await controller.update_features(
            [("metadata.version", 21, UPGRADE), ("transaction.version", 3, UPGRADE)]
        )
        unchanged = dict(controller.image.features)
        disable = await controller.update_features([("metadata.version", 0, SAFE_DOWNGRADE)])
        refused = await controller.update_features([("transaction.version", 1, UPGRADE)])
        checked = await controller.update_features(
            [("transaction.version", 0, SAFE_DOWNGRADE)], validate_only=True
        )
        after_check = dict(controller.image.features)
        lowered = await controller.update_features([("transaction.version", 0, SAFE_DOWNGRADE)])
        at_zero = dict(controller.image.features)
        raised = await controller.update_features([("transaction.version", 1, UPGRADE)])
        image = controller.image
        await controller.shutdown()
        return (
            formatted,
            results,
            unchanged,
            disable,
            refused,
            checked,
            after_check,
            lowered,
            at_zero,
            raised,
            image,
        )

    (
        formatted,
        results,
        unchanged,
        disable,
        refused,
        checked,
        after_check,
        lowered,
        at_zero,
        raised,
        image,
    ) = run(main())
    # A new cluster runs transaction version 2, as kafka-storage format gives 4.x.
    assert formatted == {"metadata.version": 21, "transaction.version": 2}
    assert results["metadata.version"] is None
    assert isinstance(results["transaction.version"], errors.InvalidUpdateVersionException)
    assert unchanged == formatted  # one invalid update: nothing written
    assert isinstance(disable["metadata.version"], errors.InvalidUpdateVersionException)
    # Lowering needs a downgrade upgrade type.
    assert "downgrade" in str(refused["transaction.version"])
    assert checked == {"transaction.version": None} and after_check == formatted
    assert lowered == {"transaction.version": None}
    assert at_zero == {"metadata.version": 21}  # level 0 removes the feature
    assert raised == {"transaction.version": None}
    assert image.features == {"metadata.version": 21, "transaction.version": 1}


def test_supported_features_are_the_levels_update_features_accepts(tmp_path):
    controller = make_controller(tmp_path)
    supported = controller.feature_control.supported_features()
    assert supported == {
        "metadata.version": (21, 21),
        "transaction.version": (0, 2),
        "kraft.version": (0, 1),
    }
    # kraft.version: the Raft log's level only (tests/unit/controller/test_kraft_version.py).
    for name, (low, high) in supported.items() - {("kraft.version", (0, 1))}:
        assert controller.feature_control.update_features([(name, high, UPGRADE)], 1).response == {
            name: None
        }
        assert (
            controller.feature_control.update_features(
                [(name, low - 1, UNSAFE_DOWNGRADE)], 1
            ).response[name]
            is not None
        )
