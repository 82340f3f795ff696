"""Cluster metadata survives a restart: a new broker over the same data dir
replays __cluster_metadata and serves the same topics, ids and configs
(checked with kafka-python and kcat -L)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kfast.storage import loader
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def _kcat_metadata(broker) -> dict:
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, "-L", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return json.loads(out)


def _snapshot(broker) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        topics = {
            t["name"]: (t["topic_id"], len(t["partitions"]))
            for t in admin.describe_topics(["kept", "compacted"])
        }
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in ("kept", "compacted")]
        )["topic"]
        return {
            "topics": topics,
            "configs": {
                name: {k: v["value"] for k, v in entries.items()}
                for name, entries in configs.items()
            },
            "all": sorted(admin.list_topics()),
        }
    finally:
        admin.close()


def test_topics_ids_and_configs_survive_restart(tmp_path):
    instance = KfastBroker({"num.partitions": 2}, data_dir=str(tmp_path))
    instance.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=instance.bootstrap_servers)
        admin.create_topics(
            [
                NewTopic("kept", 3, 1, topic_configs={"retention.ms": "3600000"}),
                NewTopic("compacted", 1, 1, topic_configs={"cleanup.policy": "compact"}),
                NewTopic("dropped", 1, 1),
            ]
        )
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    "kept",
                    configs={"retention.ms": "7200000", "segment.bytes": "2000000"},
                )
            ]
        )
        admin.delete_topics(["dropped"])
        admin.close()
        before = _snapshot(instance)
        image_before = instance.broker.metadata_image
        port = instance.port

        instance.restart()
        assert instance.port == port
        after = _snapshot(instance)
        assert after == before
        assert after["all"] == ["compacted", "kept"]
        assert after["configs"]["kept"] == {"retention.ms": "7200000", "segment.bytes": "2000000"}
        image_after = instance.broker.metadata_image

        # The same topics, ids, replicas and leaders; the leader epochs moved
        # on, as Kafka's do: the broker was fenced at shutdown and its
        # partitions elected it again once it was back in service.
        def placement(image):
            return {
                name: (
                    topic.topic_id,
                    {index: (p.replicas, p.isr, p.leader) for index, p in topic.partitions.items()},
                )
                for name, topic in image.topics_by_name.items()
            }

        assert placement(image_after) == placement(image_before)
        assert image_after.topic_configs == image_before.topic_configs
        log = instance.call_soon(instance.broker.log_manager.get_log, "kept", 0)
        assert log.config.retention_ms == 7200000 and log.config.segment_bytes == 2000000

        if shutil.which("kcat"):
            metadata = _kcat_metadata(instance)
            topics = {t["topic"]: len(t["partitions"]) for t in metadata["topics"]}
            assert topics == {"kept": 3, "compacted": 1}
            assert [b["id"] for b in metadata["brokers"]] == [1]
    finally:
        instance.close()


def test_the_metadata_log_is_the_controllers_alone(tmp_path, monkeypatch):
    """The LogManager never loads __cluster_metadata-0 (as Kafka's skips
    KafkaRaftServer.MetadataTopic): no second Log over the controller's
    files, no retention on them; and after a clean shutdown the controller
    reopens its log without recovering a single segment."""
    recovered = []
    real_recover = loader._recover_segment
    monkeypatch.setattr(
        loader,
        "_recover_segment",
        lambda log, segment: (
            recovered.append(os.path.basename(log.dir)),
            real_recover(log, segment),
        )[1],
    )
    instance = KfastBroker(data_dir=str(tmp_path))
    instance.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=instance.bootstrap_servers)
        admin.create_topics([NewTopic("kept", 1, 1)])
        admin.close()
        for _ in range(2):
            recovered.clear()
            instance.restart()
            assert "__cluster_metadata-0" not in recovered
            broker = instance.broker
            logs = instance.call_soon(
                lambda: [(log.topic, log.partition) for log in broker.log_manager.all_logs()]
            )
            assert ("kept", 0) in logs and all(t != "__cluster_metadata" for t, _ in logs)
            assert broker.controller.raft.client.log.had_clean_shutdown
            assert "kept" in broker.metadata_image.topics_by_name
    finally:
        instance.close()
