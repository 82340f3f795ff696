"""Client quota resolution (KIP-55's precedence), Kafka's Rate and throttle
time, against Kafka's numbers and a brute-force oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.config import KafkaConfig
from kfast.protocol import errors
from kfast.server.quota import (
    DEFAULT_ENTITY,
    PRODUCE,
    ClientQuotaManager,
    ClientQuotas,
    QuotaRate,
    quota_entity,
)

USERS = ("alice", "bob")
CLIENTS = ("app", "tool")


def kip55_order(user: str, client_id: str) -> list[tuple]:
    """KIP-55: the quota entities that can apply to (user, client-id), most
    specific first."""
    return [
        (user, client_id),
        (user, DEFAULT_ENTITY),
        (user, None),
        (DEFAULT_ENTITY, client_id),
        (DEFAULT_ENTITY, DEFAULT_ENTITY),
        (DEFAULT_ENTITY, None),
        (None, client_id),
        (None, DEFAULT_ENTITY),
    ]


def oracle(overrides: dict, user: str, client_id: str):
    return next((overrides[e] for e in kip55_order(user, client_id) if e in overrides), None)


_ENTITIES = st.sampled_from(
    sorted({e for u in USERS for c in CLIENTS for e in kip55_order(u, c)}, key=repr)
)


@given(
    st.dictionaries(_ENTITIES, st.integers(1, 10**6).map(float), max_size=12),
    st.sampled_from(USERS),
    st.sampled_from(CLIENTS),
)
def test_the_limit_is_the_first_entity_in_kip55_order(overrides, user, client_id):
    manager = ClientQuotaManager(PRODUCE, 11, 1)
    manager.update(overrides)
    assert manager.resolve(user, client_id)[1] == oracle(overrides, user, client_id)


def test_sensor_sharing_follows_the_entity_that_applies():
    manager = ClientQuotaManager(PRODUCE, 11, 1)
    # A user quota: all the user's clients share one rate.
    manager.update({("alice", None): 100.0})
    assert manager.resolve("alice", "app") == (("alice", ""), 100.0)
    assert manager.resolve("alice", "tool") == (("alice", ""), 100.0)
    # A default client-id quota: each client id has its own rate.
    manager.update({(None, DEFAULT_ENTITY): 50.0})
    assert manager.resolve("alice", "app") == (("", "app"), 50.0)
    assert manager.resolve("bob", "tool") == (("", "tool"), 50.0)


def test_image_entities_become_callback_keys():
    assert quota_entity((("client-id", None), ("user", "alice"))) == ("alice", DEFAULT_ENTITY)
    assert quota_entity((("user", None),)) == (DEFAULT_ENTITY, None)
    assert quota_entity((("ip", "1.2.3.4"),)) is None
    quotas = ClientQuotas(KafkaConfig({}))
    quotas.update(
        {(("client-id", "app"),): {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}}
    )
    assert quotas.produce.enabled and quotas.fetch.enabled and not quotas.request.enabled
    assert quotas.fetch.resolve("ANONYMOUS", "app")[1] == 20.0


def test_kafka_rate_counts_at_least_num_minus_one_windows():
    rate = QuotaRate(11, 1000)
    rate.record(5000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(500) == 5000 / 10.5
    assert rate.window_size_ms(12_000) == 10_000  # the sample was purged


def test_throttle_time_is_kafkas():
    # ClientQuotaManagerTest.testQuotaViolation: a 500 B/s quota, ten
    # seconds at 400 B/s, then a spike: 6300 bytes over 10.5 s is 600 B/s,
    # (600 - 500) / 500 x 10.5 s = 2100 ms.
    clock = [0]
    manager = ClientQuotaManager(PRODUCE, 11, 1, clock_ms=lambda: clock[0])
    manager.update({(None, DEFAULT_ENTITY): 500.0})
    for _ in range(10):
        assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400) == 0
        clock[0] += 1000
    clock[0] += 500
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300) == 2100
    # Another client id has its own rate.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "other", 400) == 0


def test_a_throttled_fetch_is_taken_back_and_fetches_are_capped_to_the_window():
    clock = [0]
    manager = ClientQuotaManager("consumer_byte_rate", 11, 1, clock_ms=lambda: clock[0])
    manager.update({(None, "c"): 100.0})
    assert manager.max_value_in_quota_window("u", "c") == 100.0 * 10
    assert manager.max_value_in_quota_window("u", "other") == float("inf")
    assert manager.record_and_get_throttle_time_ms("u", "c", 2000) == 10_000
    manager.unrecord("u", "c", 2000)
    assert manager.record_and_get_throttle_time_ms("u", "c", 500) == 0


def test_request_percentage_throttle_is_capped_at_one_window():
    quotas = ClientQuotas(KafkaConfig({}), clock_ms=lambda: 0)
    quotas.update({(("user", None),): {"request_percentage": 1.0}})
    assert quotas.request.record_and_get_throttle_time_ms("ANONYMOUS", "c", 500.0) == 1000


def test_no_quota_no_recording():
    manager = ClientQuotaManager(PRODUCE, 11, 1)
    assert not manager.enabled
    assert manager.record_and_get_throttle_time_ms("u", "c", 10**9) == 0
    assert manager.max_value_in_quota_window("u", "c") == float("inf")


def test_replication_and_inter_broker_requests_are_exempt_from_request_quotas():
    from kfast.protocol import FetchRequest, MetadataRequest, api_keys
    from kfast.server.quota import request_quota_exempt

    fetch = api_keys.BY_NAME["Fetch"].key
    assert request_quota_exempt(fetch, 12, FetchRequest(replica_id=2))
    assert not request_quota_exempt(fetch, 12, FetchRequest(replica_id=-1))
    follower_v15 = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=3))
    assert request_quota_exempt(fetch, 15, follower_v15)
    assert not request_quota_exempt(fetch, 15, FetchRequest())
    assert request_quota_exempt(api_keys.BY_NAME["ApiVersions"].key, 3, None)
    assert not request_quota_exempt(api_keys.BY_NAME["Metadata"].key, 12, MetadataRequest())


def test_controller_mutation_quota_is_a_token_bucket():
    # KIP-599: a 2 partitions/s rate over 11 one-second samples allows a
    # burst of 20 partitions, then refuses (strict) until the bucket refills.
    clock = [0]
    quotas = ClientQuotas(KafkaConfig({}), clock_ms=lambda: clock[0])
    quotas.update({(("client-id", "admin"),): {"controller_mutation_rate": 2.0}})
    strict = quotas.controller_mutation.new_quota("ANONYMOUS", "admin", strict=True)
    strict.record(15)
    strict.record(10)  # allowed: the bucket was not empty yet
    assert strict.throttle_time_ms == 0
    with pytest.raises(errors.ThrottlingQuotaExceededException):
        strict.record(1)  # 20 - 25 = -5 tokens
    assert strict.throttle_time_ms == 2500  # 5 tokens at 2/s
    clock[0] += 2500
    later = quotas.controller_mutation.new_quota("ANONYMOUS", "admin", strict=True)
    later.record(1)  # refilled to 0: allowed again
    # Permissive (old versions): never refused, throttled by the deficit.
    permissive = quotas.controller_mutation.new_quota("ANONYMOUS", "admin", strict=False)
    permissive.record(3)
    assert permissive.throttle_time_ms == 2000
    assert quotas.controller_mutation.new_quota("ANONYMOUS", "other", strict=True) is None


def test_sensors_of_inactive_clients_expire():
    from kfast.server.quota import SENSOR_EXPIRATION_MS

    clock = [0]
    manager = ClientQuotaManager(PRODUCE, 11, 1, clock_ms=lambda: clock[0])
    manager.update({(None, DEFAULT_ENTITY): 100.0})
    manager.record_and_get_throttle_time_ms("u", "old", 10)
    clock[0] += SENSOR_EXPIRATION_MS
    manager.record_and_get_throttle_time_ms("u", "new", 10)
    assert set(manager._sensors) == {("", "new")}


def test_idle_controller_mutation_buckets_expire():
    # Kafka keeps each client's controller_mutation_rate token bucket in a
    # quota sensor, dropped after an hour unused like the other quota types'.
    from kfast.server.quota import SENSOR_EXPIRATION_MS

    clock = [0]
    quotas = ClientQuotas(KafkaConfig({}), clock_ms=lambda: clock[0])
    quotas.update({(("client-id", None),): {"controller_mutation_rate": 2.0}})
    manager = quotas.controller_mutation
    manager.new_quota("ANONYMOUS", "old", strict=True).record(25)
    manager.new_quota("ANONYMOUS", "busy", strict=True).record(1)
    assert set(manager._buckets) == {("", "old"), ("", "busy")}
    clock[0] += SENSOR_EXPIRATION_MS - 1
    manager.new_quota("ANONYMOUS", "busy", strict=True)  # used again: stays
    clock[0] += 1
    manager.new_quota("ANONYMOUS", "new", strict=True)
    assert set(manager._buckets) == {("", "busy"), ("", "new")}
    # A bucket made again after expiry starts full, as a new client's does.
    fresh = manager.new_quota("ANONYMOUS", "old", strict=True)
    fresh.record(20)
    assert fresh.throttle_time_ms == 0


def test_throttles_feed_the_quota_throttle_time_sensors():
    # Kafka's throttle-time sensor per quota type and entity tags
    # (kafka.server:type=Produce,user=,client-id=app): the exporter's source.
    from kfast.metrics.broker_stats import QuotaStats

    manager = ClientQuotaManager(PRODUCE, 11, 1, clock_ms=lambda: 0)
    manager.throttle_stats = stats = QuotaStats()
    manager.update({(None, "app"): 100.0})
    assert manager.record_and_get_throttle_time_ms("u", "app", 100) == 0
    throttle = manager.record_and_get_throttle_time_ms("u", "app", 1000)
    assert throttle > 0
    assert stats.snapshot() == {("Produce", "", "app"): (1, float(throttle))}
