"""The Raft core under a simulated clock and network, driven by hypothesis.

Each example runs a quorum through random message loss and delay, network
partitions, crashes and restarts while a client keeps proposing, with the
safety invariants (simulation.py) checked after every event; then it heals
everything and checks liveness: a leader is elected and a new proposal
reaches every replica's state machine within a bound of simulated time.
A failing example prints its seed and fault schedule; it replays exactly.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .simulation import Simulation

# Liveness bound once the network is whole: a fetch timeout to notice a dead
# leader, elections with backoff, and a fetch round trip, with room for a
# few split votes. Kafka's own simulation allows similar multiples.
HEAL_BOUND_MS = 20_000

fault = st.one_of(
    st.tuples(st.just("crash"), st.integers(1, 5)),
    st.tuples(st.just("restart"), st.integers(1, 5)),
    st.tuples(st.just("partition"), st.sets(st.integers(1, 5), min_size=1, max_size=2)),
    st.tuples(st.just("heal"), st.just(None)),
)


def apply_fault(sim: Simulation, fault) -> None:
    kind, arg = fault
    if kind == "crash" and arg in sim.nodes:
        # Never more than a minority down at once, or nothing can commit
        # and liveness has nothing to say.
        down = [n for n in sim.nodes.values() if not n.alive and n.node_id in sim.voter_ids]
        if len(down) + 1 <= len(sim.voter_ids) - (len(sim.voter_ids) // 2 + 1):
            sim.crash(arg)
    elif kind == "restart" and arg in sim.nodes:
        sim.restart(arg)
    elif kind == "partition":
        sim.heal()
        sim.partition({n for n in arg if n in sim.nodes})
    elif kind == "heal":
        sim.heal()


def run_scenario(sim: Simulation, faults, step_ms: int, proposals_per_step: int) -> None:
    sim.run_until(10_000, lambda: sim.leader() is not None)
    value = 0
    for item in faults:
        apply_fault(sim, item)
        for _ in range(proposals_per_step):
            sim.propose(f"v{value}")
            value += 1
            sim.run_for(step_ms // proposals_per_step)
    # Heal: whole network, every node up, then the quorum must make progress.
    sim.heal()
    sim.drop_rate = 0.0
    for node_id in sim.nodes:
        sim.restart(node_id)
    deadline = sim.now + HEAL_BOUND_MS
    assert sim.run_until(deadline, lambda: sim.leader() is not None), (
        f"no leader {HEAL_BOUND_MS} ms after healing"
    )
    # A proposal can be lost to a leader change that happens right after
    # it (never a committed one): propose until one commits everywhere.
    attempt = 0
    while True:
        value = f"after-heal-{attempt}"
        attempt += 1
        sim.propose(value)
        if sim.run_until(min(deadline, sim.now + 3000), lambda: sim.all_applied_value(value)):
            break
        assert sim.now < deadline, "no proposal after healing reached every state machine"
    offset = sim.leader().client.high_watermark - 1
    # Every replica's log agrees with the leader's up to the commit point.
    leader_log = sim.leader().log
    for node in sim.nodes.values():
        assert node.machine.applied == sim.committed_records_below(node.machine.next_offset)
        batches = node.log.read(max(node.log.start_offset, leader_log.start_offset), 10**6)
        for batch in batches:
            if batch.next_offset <= offset:
                assert leader_log.read(batch.base_offset, 1)[0] == batch


@pytest.mark.slow
@settings(max_examples=150)
@given(
    seed=st.integers(0, 2**32),
    voters=st.sampled_from([1, 3, 5]),
    observers=st.integers(0, 1),
    drop_rate=st.sampled_from([0.0, 0.01, 0.1, 0.3]),
    max_delay_ms=st.sampled_from([5, 50, 400]),
    faults=st.lists(fault, max_size=25),
)
def test_safety_and_liveness_under_faults(seed, voters, observers, drop_rate, max_delay_ms, faults):
    sim = Simulation(
        seed, voters=voters, observers=observers, drop_rate=drop_rate, max_delay_ms=max_delay_ms
    )
    run_scenario(sim, faults, step_ms=1000, proposals_per_step=5)
    assert sim.committed_end > 0


@pytest.mark.slow
@settings(max_examples=60)
@given(seed=st.integers(0, 2**32), faults=st.lists(fault, min_size=2, max_size=20))
def test_snapshots_under_faults(seed, faults):
    """State machines snapshot every few batches and the log drops what the
    snapshot covers, so a replica that falls behind catches up from a
    snapshot (FetchSnapshot) and its state still matches the committed one."""
    sim = Simulation(seed, voters=3, observers=1, drop_rate=0.02, max_delay_ms=30, snapshot_every=5)
    run_scenario(sim, faults, step_ms=600, proposals_per_step=4)


def test_a_replica_far_behind_catches_up_from_a_snapshot():
    sim = Simulation(11, voters=3, snapshot_every=5)
    sim.run_until(10_000, lambda: sim.leader() is not None)
    leader = sim.leader()
    lagging = next(n for n in sim.nodes.values() if n is not leader)
    sim.crash(lagging.node_id)
    for i in range(40):
        sim.propose(f"v{i}")
        sim.run_for(20)
    assert leader.log.start_offset > lagging.log.end_offset
    sim.restart(lagging.node_id)
    target = leader.log.end_offset - 1
    assert sim.run_until(sim.now + 10_000, lambda: sim.all_applied(target))
    assert lagging.log.latest_snapshot_id() is not None
    assert [r for _, r in lagging.machine.applied] == [f"v{i}" for i in range(40)]


def test_failover_after_leader_crash_is_below_the_fetch_timeout():
    """Followers whose connection to a killed leader closes stand for
    election at once (pre-vote keeps that safe): a new leader commits well
    within controller.quorum.fetch.timeout.ms."""
    times = []
    for seed in range(20):
        sim = Simulation(seed, voters=3)
        sim.run_until(10_000, lambda: sim.leader() is not None)
        sim.run_for(1000)
        old = sim.leader()
        sim.crash(old.node_id)
        began = sim.now
        assert sim.run_until(began + 10_000, lambda: sim.leader() is not None)
        offset = sim.propose("x")
        assert sim.run_until(began + 10_000, lambda: sim.all_applied(offset))
        times.append(sim.now - began)
    times.sort()
    assert times[len(times) // 2] < sim.config.fetch_timeout_ms, times


def test_a_partitioned_minority_cannot_commit_and_rejoins_without_disruption():
    sim = Simulation(5, voters=5)
    sim.run_until(10_000, lambda: sim.leader() is not None)
    leader = sim.leader()
    minority = {leader.node_id, next(n for n in sim.nodes if n != leader.node_id)}
    sim.partition(minority)
    stale_offset = leader.client.propose(sim.now, ["lost?"])
    sim.run_for(5000)
    # The old leader resigned (check quorum) and its record never committed.
    assert not leader.client.is_leader
    assert all(n.client.high_watermark <= stale_offset for n in sim.nodes.values())
    majority_leader = sim.leader()
    assert majority_leader is not None and majority_leader.node_id not in minority
    epoch = majority_leader.client.epoch
    committed = sim.propose("kept")
    sim.heal()
    assert sim.run_until(sim.now + 10_000, lambda: sim.all_applied(committed))
    # Pre-vote: the minority's return did not force a new election.
    assert sim.leader() is majority_leader and majority_leader.client.epoch == epoch
    applied = [r for _, r in majority_leader.machine.applied]
    assert "kept" in applied and "lost?" not in applied


@settings(max_examples=100)
@given(
    seed=st.integers(0, 2**32),
    voters=st.sampled_from([1, 3]),
    max_flush_delay_ms=st.sampled_from([0, 20, 300]),
    crashes=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 300)), max_size=6),
)
def test_no_committed_record_is_lost_when_crashes_lose_unflushed_appends(
    seed, voters, max_flush_delay_ms, crashes
):
    """The log's fsync completes late (RaftManager's I/O thread) and a crash
    loses every append it had not finished -- of any voter, the leader of a
    quorum of one included. The simulation's invariants, after every event,
    fail at once if a leader counts records it has not flushed toward the
    high watermark (committed but durable on no majority) or a replica
    fetches past records it has not flushed; after the restarts every
    committed record is still there and reaches every state machine."""
    sim = Simulation(seed, voters=voters, max_delay_ms=20, max_flush_delay_ms=max_flush_delay_ms)
    assert sim.run_until(10_000, lambda: sim.leader() is not None)
    value = 0
    for node_id, after_ms in crashes:
        for _ in range(3):
            sim.propose(f"v{value}")
            value += 1
            sim.run_for(after_ms // 3)
        sim.crash(min(node_id, voters))
        sim.run_for(50)
        sim.restart(min(node_id, voters))
    deadline = sim.now + HEAL_BOUND_MS
    assert sim.run_until(deadline, lambda: sim.leader() is not None)
    while True:
        offset = sim.propose("last")
        if offset is not None and sim.run_until(
            min(deadline, sim.now + 3000), lambda: sim.all_applied(offset)
        ):
            break
        assert sim.now < deadline, "no proposal after the restarts committed"
    for node in sim.nodes.values():
        assert node.machine.applied == sim.committed_records_below(node.machine.next_offset)
