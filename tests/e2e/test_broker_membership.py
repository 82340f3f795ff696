"""Broker membership (KIP-631) against a quorum of three real controllers,
through Kafka's own RPCs: BrokerRegistration and BrokerHeartbeat, as a broker
process sends them, with CreateTopics placement showing whether the
controller counts the broker as in service (fenced brokers get no replicas)."""

from __future__ import annotations

import time
import uuid

import pytest
from test_controller_quorum import create_topic, write_on_leader

from kfast.protocol import BrokerHeartbeatRequest, BrokerRegistrationRequest, errors
from kfast.server.controller_channel import registration_features
from kfast.testing.cluster import KfastCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

SESSION_TIMEOUT_MS = 1500
BROKER = 10
NOT_CONTROLLER = errors.NotControllerException.code
INVALID_REPLICATION_FACTOR = errors.InvalidReplicationFactorException.code


@pytest.fixture
def cluster(tmp_path):
    overrides = {
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "broker.heartbeat.interval.ms": 100,
    }
    with KfastCluster(controllers=3, overrides=overrides, base_dir=str(tmp_path)) as cluster:
        yield cluster


def register(cluster, node_id, cluster_id=None, incarnation=None):
    request = BrokerRegistrationRequest(
        broker_id=BROKER,
        cluster_id=cluster_id or cluster.cluster_id,
        incarnation_id=incarnation or uuid.uuid4(),
        listeners=[
            BrokerRegistrationRequest.Listener(
                name="PLAINTEXT", host="127.0.0.1", port=19092, security_protocol=0
            )
        ],
        features=registration_features(),
        rack="rack-a",
    )
    with cluster.connect(node_id, request_timeout=15) as connection:
        return connection.send(request)


def heartbeat(cluster, node_id, epoch, offset, want_shut_down=False):
    request = BrokerHeartbeatRequest(
        broker_id=BROKER,
        broker_epoch=epoch,
        current_metadata_offset=offset,
        want_fence=False,
        want_shut_down=want_shut_down,
    )
    with cluster.connect(node_id, request_timeout=15) as connection:
        return connection.send(request)


def test_a_broker_is_fenced_until_caught_up_and_again_when_its_session_lapses(cluster):
    leader = write_on_leader(cluster, "log.retention.ms", "1")
    follower = next(n for n in cluster.nodes if n != leader)
    assert register(cluster, follower).error_code == NOT_CONTROLLER
    assert (
        register(cluster, leader, cluster_id="another-cluster").error_code
        == errors.InconsistentClusterIdException.code
    )
    response = register(cluster, leader)
    assert response.error_code == 0
    epoch = response.broker_epoch
    assert epoch > 0
    # Not caught up with the metadata log: fenced, so it gets no replicas.
    beat = heartbeat(cluster, leader, epoch, offset=-1)
    assert (beat.error_code, beat.is_caught_up, beat.is_fenced) == (0, False, True)
    assert create_topic(cluster, leader, "fenced") == INVALID_REPLICATION_FACTOR
    # Caught up: in service, and a topic is placed on it. Its session runs
    # from this heartbeat, the last one the controller accepts.
    last_accepted_sent = time.monotonic()
    beat = heartbeat(cluster, leader, epoch, offset=epoch)
    assert (beat.error_code, beat.is_caught_up, beat.is_fenced) == (0, True, False)
    assert create_topic(cluster, leader, "placed") == 0
    assert (
        heartbeat(cluster, leader, epoch - 1, epoch).error_code
        == errors.StaleBrokerEpochException.code
    )
    # No accepted heartbeat for broker.session.timeout.ms: the controller
    # fences it, and not before the session has lapsed.
    cluster.wait_until(
        lambda: (
            create_topic(cluster, leader, f"t{time.monotonic_ns()}") == INVALID_REPLICATION_FACTOR
        ),
        10,
        "the silent broker fenced",
    )
    assert time.monotonic() - last_accepted_sent >= SESSION_TIMEOUT_MS / 1000
    # Its next heartbeat (still caught up) brings it back.
    beat = heartbeat(cluster, leader, epoch, offset=epoch + 100)
    assert (beat.error_code, beat.is_fenced) == (0, False)


def test_registrations_survive_the_active_controller_and_sessions_restart(cluster):
    leader = write_on_leader(cluster, "log.retention.ms", "1")
    epoch = register(cluster, leader).broker_epoch
    assert heartbeat(cluster, leader, epoch, epoch).is_fenced is False
    cluster.kill(leader)
    new_leader = write_on_leader(cluster, "log.retention.ms", "2", exclude=(leader,))
    # The standby replayed the registration: same epoch, unfenced, placeable.
    beat = heartbeat(cluster, new_leader, epoch, epoch)
    assert (beat.error_code, beat.is_fenced) == (0, False)
    assert create_topic(cluster, new_leader, "after-failover") == 0


def test_a_broker_that_wants_to_shut_down_is_fenced_and_told_to_go(cluster):
    """Kafka's controlled shutdown: a broker that leads partitions first
    enters controlled shutdown (not fenced, no longer placed, its
    leaderships moved), and is fenced and told to go at the next heartbeat
    that finds it leading nothing."""
    leader = write_on_leader(cluster, "log.retention.ms", "1")
    epoch = register(cluster, leader).broker_epoch
    heartbeat(cluster, leader, epoch, epoch)
    assert create_topic(cluster, leader, "led-by-10") == 0
    beat = heartbeat(cluster, leader, epoch, epoch, want_shut_down=True)
    assert (beat.error_code, beat.is_fenced, beat.should_shut_down) == (0, False, False)
    assert create_topic(cluster, leader, "no-broker-left") == INVALID_REPLICATION_FACTOR
    beat = heartbeat(cluster, leader, epoch, epoch, want_shut_down=True)
    assert (beat.error_code, beat.is_fenced, beat.should_shut_down) == (0, True, True)


def test_brokers_stay_in_service_while_the_active_controller_is_cut_off(tmp_path):
    """Three combined nodes at Kafka's session defaults (9 s, heartbeats
    every 2 s). The active controller is partitioned away, its links
    dropping every byte: the heartbeats the other two brokers send it go
    unanswered, give way after half a session (Kafka's KAFKA-14392), and
    the next ones reach the controller the majority elects, which keeps
    both brokers in service. (Waiting on the silent controller for the
    connection's whole 30 s request timeout, they missed their sessions and
    the new controller fenced them: the cluster had no broker to lead.)"""
    session_s = 9.0
    with KfastCluster(controllers=3, combined=True, base_dir=str(tmp_path)) as cluster:
        old = cluster.wait_for_leader()
        others = set(cluster.nodes) - {old}
        cluster.wait_until(lambda: others <= cluster.brokers(), 30, "every broker in service")
        cluster.isolate(old)
        new = cluster.wait_for_leader(timeout=30, exclude=(old,))
        # A session and a half after the new controller took over: a broker
        # it had not heard from would have been fenced (and left Metadata).
        until = time.monotonic() + 1.5 * session_s
        while time.monotonic() < until:
            listed = cluster.brokers(via=new)
            assert others <= listed, f"brokers {others - listed} fenced"
            time.sleep(0.5)  # an observation window: nothing to await
        cluster.heal()
        cluster.wait_until(lambda: set(cluster.nodes) <= cluster.brokers(via=new), 30, "all back")
