"""pytest plugin: the ``kfast_broker`` and ``kfast_cluster`` fixtures.

    def test_roundtrip(kfast_broker):
        producer = KafkaProducer(bootstrap_servers=kfast_broker.bootstrap_servers)

A fresh single-node broker per test (start-to-ready is tens of
milliseconds; the broker's modules are imported once, after collection, when
a collected test uses the fixture) with a temporary data dir, usable from
sync and async tests.
Broker properties can be set per test with
``@pytest.mark.kfast_broker_config({"num.partitions": 3})``.

``kfast_cluster`` is a KRaft controller quorum of three ``kfast serve``
processes (kfast.testing.cluster.KfastCluster) with kill -9, restart and
network-fault controls between them; the number of controllers and their
properties come from ``@pytest.mark.kfast_cluster_config(controllers=5,
overrides={...})``.
"""

from __future__ import annotations

import pytest

from kfast.testing.broker import KfastBroker


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "kfast_broker_config(properties): broker properties for kfast_broker"
    )
    config.addinivalue_line(
        "markers",
        "kfast_cluster_config(controllers=3, overrides=None): the kfast_cluster "
        "quorum's size and properties",
    )


def pytest_collection_finish(session) -> None:
    # The first broker of a process would also pay ~100 ms of module imports
    # (server, controller, coordinator, message classes). Pay them once, after
    # collection, and only in sessions that use the fixture, so every
    # kfast_broker start is the broker's own start-up.
    if any("kfast_broker" in getattr(item, "fixturenames", ()) for item in session.items):
        from kfast.server.broker import preload

        preload()


@pytest.fixture
def kfast_broker(request, tmp_path):
    marker = request.node.get_closest_marker("kfast_broker_config")
    overrides = marker.args[0] if marker and marker.args else {}
    broker = KfastBroker(overrides, data_dir=str(tmp_path / "kfast-data"))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def kfast_cluster(request, tmp_path):
    from kfast.testing.cluster import KfastCluster

    marker = request.node.get_closest_marker("kfast_cluster_config")
    kwargs = dict(marker.kwargs) if marker else {}
    with KfastCluster(base_dir=str(tmp_path / "kfast-cluster"), **kwargs) as cluster:
        yield cluster
