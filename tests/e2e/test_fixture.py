"""The pytest plugin's ``kfast_broker`` fixture and ``KfastBroker`` itself,
from sync and async code."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def test_fixture_from_sync_code(kfast_broker):
    assert kfast_broker.running and kfast_broker.port > 0
    producer = KafkaProducer(bootstrap_servers=kfast_broker.bootstrap_servers)
    assert producer.send("sync", b"hello").get(timeout=10).offset == 0
    producer.close()


@pytest.mark.kfast_broker_config({"num.partitions": 3})
def test_fixture_config_marker(kfast_broker):
    producer = KafkaProducer(bootstrap_servers=kfast_broker.bootstrap_servers)
    try:
        assert producer.partitions_for("three") == {0, 1, 2}
    finally:
        producer.close()


def test_fixture_from_async_code(kfast_broker):
    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=kfast_broker.bootstrap_servers)
        await producer.start()
        try:
            return (await producer.send_and_wait("async", b"x")).offset
        finally:
            await producer.stop()

    assert asyncio.run(main()) == 0


def test_context_manager_restart_keeps_data(tmp_path):
    with KfastBroker(data_dir=str(tmp_path / "d")) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        for i in range(10):
            producer.send("kept", b"%d" % i)
        producer.flush(10)
        producer.close()
        port = broker.port
        broker.restart()
        assert broker.port == port
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=10000,
        )
        consumer.assign([TopicPartition("kept", 0)])
        values = [m.value for _, m in zip(range(10), consumer)]
        consumer.close()
    assert values == [b"%d" % i for i in range(10)]


def test_async_context_manager(tmp_path):
    async def main():
        async with KfastBroker(data_dir=str(tmp_path / "a")) as broker:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            await producer.start()
            try:
                return (await producer.send_and_wait("ctx", b"x")).offset
            finally:
                await producer.stop()

    assert asyncio.run(main()) == 0


def test_topics_of_every_session_survive_restarts(tmp_path):
    """Metadata committed in the second and later runs is kept (the metadata
    log belongs to the controller alone, not also to the LogManager)."""
    data_dir = str(tmp_path / "sessions")
    for session in range(3):
        with KfastBroker(data_dir=data_dir) as broker:
            topics = broker.call_soon(lambda: sorted(broker.broker.metadata_image.topics_by_name))
            assert topics == [f"s{i}" for i in range(session)]
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            producer.send(f"s{session}", b"x").get(timeout=10)
            producer.close()


_PRELOAD_PROBE = """
import sys

def test_runs_first():
    assert ("kfast.controller.quorum_controller" in sys.modules) is {expected}
"""
_FIXTURE_USER = """

def test_uses_the_fixture(kfast_broker):
    assert kfast_broker.running
"""


# With the fixture, the pytest subprocess starts a broker too: ~10 s.
@pytest.mark.parametrize("uses_fixture", [pytest.param(True, marks=pytest.mark.slow), False])
def test_plugin_preloads_the_broker_only_for_sessions_using_the_fixture(tmp_path, uses_fixture):
    """The plugin imports the broker's modules after collection when a test
    uses kfast_broker (so its first start is the broker's own start-up), and
    leaves sessions that do not use it alone. The probe runs before any
    broker starts."""
    import subprocess
    import sys

    probe = _PRELOAD_PROBE.format(expected=uses_fixture)
    (tmp_path / "test_probe.py").write_text(probe + (_FIXTURE_USER if uses_fixture else ""))
    # A basetemp of its own: a default one makes the inner pytest sweep the
    # older numbered dirs under /tmp/pytest-of-<user> -- whole suites' temp
    # files from earlier runs, which took it past a minute in CI.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "inner"),
            str(tmp_path / "test_probe.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("2 passed" if uses_fixture else "1 passed") in result.stdout
