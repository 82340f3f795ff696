"""connection_creation_rate per IP (KIP-612): which IP quota applies, the
sampled rate of accepted connections and the throttle time after which a
connection over the quota is closed (Kafka's ConnectionQuotas)."""

from __future__ import annotations

from kfast.config import KafkaConfig
from kfast.server.quota import DEFAULT_ENTITY, ClientQuotas, ConnectionCreationQuotas


def quotas(overrides, num=2, seconds=1) -> ConnectionCreationQuotas:
    q = ConnectionCreationQuotas(num, seconds, clock_ms=lambda: 0)
    q.update(overrides)
    return q


def test_disabled_without_an_ip_quota():
    q = quotas({})
    assert not q.enabled
    assert all(q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=0) == 0 for _ in range(100))


def test_an_ip_over_its_rate_is_throttled_by_the_excess_over_the_window():
    q = quotas({"10.0.0.1": 2})
    # num=2, 1 s windows: the rate divides by at least one whole window, so
    # two connections at t=0 are 2/s; the third would be 3/s, throttled for
    # (3 - 2) / 2 x 1000 ms and not counted.
    assert [q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=0) for _ in range(3)] == [
        0,
        0,
        500,
    ]
    assert q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=0) == 500
    # Others have no quota.
    assert q.record_and_get_throttle_time_ms("10.0.0.2", now_ms=0) == 0
    # Half a window later: 3 / 1.5 s = 2/s, within the quota.
    assert q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=500) == 0


def test_throttle_is_at_most_one_window():
    q = quotas({"10.0.0.1": 1}, num=11, seconds=1)
    throttles = [q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=0) for _ in range(12)]
    # 10 windows' burst, then (11 - 1) / 1 x 10 s, bounded by one window.
    assert throttles == [0] * 10 + [1000, 1000]


def test_the_ip_quota_takes_precedence_over_the_default():
    q = quotas({DEFAULT_ENTITY: 1, "10.0.0.1": 100})
    assert q.record_and_get_throttle_time_ms("10.0.0.9", now_ms=0) == 0
    assert q.record_and_get_throttle_time_ms("10.0.0.9", now_ms=0) > 0
    assert all(q.record_and_get_throttle_time_ms("10.0.0.1", now_ms=0) == 0 for _ in range(50))


def test_client_quotas_take_ip_entities_from_the_image():
    cq = ClientQuotas(KafkaConfig({}))
    cq.update(
        {
            (("ip", "127.0.0.1"),): {"connection_creation_rate": 2.0},
            (("ip", None),): {"connection_creation_rate": 5.0},
            (("user", "alice"),): {"producer_byte_rate": 1000.0},
        }
    )
    assert cq.connection_creation.overrides == {"127.0.0.1": 2, DEFAULT_ENTITY: 5}
    assert not cq.fetch.enabled and cq.produce.enabled
    cq.update({})
    assert not cq.connection_creation.enabled
