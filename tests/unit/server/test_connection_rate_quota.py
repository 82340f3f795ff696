"""max.connection.creation.rate broker-wide and per listener (KIP-612,
Kafka's ConnectionQuotas.recordConnectionAndGetThrottleTimeMs): which rates
a connection counts in, the throttle time, and the limits from the
broker's (dynamic) configuration."""

from __future__ import annotations

import pytest

from kfast.config import ConfigException, KafkaConfig
from kfast.server.connection_rate_quota import ConnectionRateQuotas


def rates(config: dict, listeners=("PLAINTEXT", "INTERNAL"), inter_broker="INTERNAL"):
    q = ConnectionRateQuotas(2, 1, inter_broker, listeners, clock_ms=lambda: 0)
    q.configure(KafkaConfig(config))
    return q


def test_no_limit_records_nothing():
    q = rates({})
    assert not q.enabled
    assert all(q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 0 for _ in range(1000))


def test_broker_wide_rate_throttles_by_the_excess_over_the_window():
    q = rates({"max.connection.creation.rate": "2"})
    # Two 1 s samples: the rate divides by at least one whole window, so the
    # third connection at t=0 is 3/s: held (3 - 2) / 2 x 1000 ms. Unlike the
    # per-IP quota, it still counts (it is served after the wait).
    assert [q.record_and_get_throttle_time_ms("PLAINTEXT", 0) for _ in range(4)] == [
        0,
        0,
        500,
        1000,
    ]
    # Capped at one window.
    assert q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 1000


def test_the_inter_broker_listener_is_protected_from_the_broker_wide_rate():
    q = rates({"max.connection.creation.rate": "1"})
    assert [q.record_and_get_throttle_time_ms("INTERNAL", 0) for _ in range(5)] == [0] * 5
    # Its connections did not count against the others'.
    assert q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 0
    # With one listener there is nothing to protect it from.
    single = rates({"max.connection.creation.rate": "1"}, ("INTERNAL",))
    assert [single.record_and_get_throttle_time_ms("INTERNAL", 0) for _ in range(2)] == [0, 1000]


def test_listener_rate_and_the_larger_throttle_wins():
    q = rates(
        {
            "max.connection.creation.rate": "4",
            "listener.name.plaintext.max.connection.creation.rate": "2",
        }
    )
    assert q.listener_limits == {"PLAINTEXT": 2}
    throttles = [q.record_and_get_throttle_time_ms("PLAINTEXT", 0) for _ in range(5)]
    # Listener: 3/s over 2 -> 500 ms, 4/s -> 1000; broker: 5/s over 4 -> 250.
    assert throttles == [0, 0, 500, 1000, 1000]
    # The inter-broker listener has no limit of its own and is protected.
    assert q.record_and_get_throttle_time_ms("INTERNAL", 0) == 0


def test_a_connection_the_ip_quota_refuses_is_taken_back():
    q = rates({"listener.name.plaintext.max.connection.creation.rate": "2"})
    for _ in range(2):
        assert q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 0
        q.unrecord("PLAINTEXT", 0)
    assert q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 0


def test_new_limits_apply_to_the_rates_already_recorded():
    q = rates({})
    q.configure(KafkaConfig({"max.connection.creation.rate": "1"}))
    assert [q.record_and_get_throttle_time_ms("PLAINTEXT", 0) for _ in range(2)] == [0, 1000]
    q.configure(KafkaConfig({"max.connection.creation.rate": "100"}))
    assert q.record_and_get_throttle_time_ms("PLAINTEXT", 0) == 0
    q.configure(KafkaConfig({}))
    assert not q.enabled


def test_both_names_are_broker_properties():
    config = KafkaConfig(
        {
            "max.connection.creation.rate": "10",
            "listener.name.plaintext.max.connection.creation.rate": "3",
        }
    )
    assert config["max.connection.creation.rate"] == 10
    assert config.listener_override("PLAINTEXT", "max.connection.creation.rate") == 3
    assert config.listener_override("OTHER", "max.connection.creation.rate") is None
    with pytest.raises(ConfigException):
        KafkaConfig({"listener.name.plaintext.max.connection.creation.rate": "-1"})
