"""free_port: below the ephemeral range, and disjoint between xdist workers."""

from kfast.testing import ports


def test_outside_xdist_the_whole_range_is_used(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert ports._worker_slice(10000, 29999) == (10000, 29999)


def test_xdist_workers_get_disjoint_slices(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    slices = []
    for index in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        slices.append(ports._worker_slice(10000, 29999))
    assert slices == [(10000, 16665), (16666, 23331), (23332, 29997)]


def test_free_port_comes_from_this_workers_slice(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    low = max(1024, min(ports._ephemeral_low(), 65536) - 20000)
    high = max(low + 1000, min(ports._ephemeral_low(), 65536) - 1)
    middle = low + (high - low + 1) // 2
    assert all(middle <= ports.free_port() <= high for _ in range(20))
