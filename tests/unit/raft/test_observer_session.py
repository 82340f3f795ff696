"""The leader forgets observers that stopped fetching (Kafka's
LeaderState.clearInactiveObservers, OBSERVER_SESSION_TIMEOUT_MS): a broker
that went away, or a removed voter that never came back, leaves
DescribeQuorum after five minutes; voters stay listed however long they are
silent."""

from __future__ import annotations

from kfast.raft.quorum_state import OBSERVER_SESSION_TIMEOUT_MS

from .simulation import Simulation
from .test_simulation_dynamic import answer


def listed(sim: Simulation) -> set[int]:
    leader = sim.leader()
    assert leader is not None
    return set(leader.client.leader_replica_states(sim.now))


def test_an_observer_that_stops_fetching_is_forgotten_after_the_session_timeout():
    sim = Simulation(7, voters=3, observers=1)
    assert sim.run_until(5_000, lambda: sim.leader() is not None and 4 in listed(sim))
    leader_id = sim.leader().node_id
    sim.crash(4)
    last_fetch = sim.leader().client.leader_replica_states()[4].last_fetch_ms
    sim.run_until(last_fetch + OBSERVER_SESSION_TIMEOUT_MS - 1_000)
    assert sim.leader().node_id == leader_id
    assert 4 in listed(sim), "still within the observer session"
    sim.run_until(last_fetch + OBSERVER_SESSION_TIMEOUT_MS + 1_000)
    assert sim.leader().node_id == leader_id
    assert listed(sim) == {1, 2, 3}
    # It fetches again: listed again.
    sim.restart(4)
    assert sim.run_until(sim.now + 5_000, lambda: 4 in listed(sim))


def test_a_silent_voter_stays_listed_and_a_removed_one_is_forgotten():
    sim = Simulation(11, voters=3, dynamic=True)
    assert sim.run_until(5_000, lambda: sim.leader() is not None)
    leader_id = sim.leader().node_id
    victim = next(n for n in (1, 2, 3) if n != leader_id)
    sim.crash(victim)
    sim.run_for(OBSERVER_SESSION_TIMEOUT_MS + 1_000)
    # A voter is never dropped, however long it has been silent.
    assert victim in listed(sim)
    assert answer(sim, sim.remove_voter(victim)) == 0
    # Removed, it is an observer from then on -- and a silent one is forgotten.
    assert victim not in sim.current_voters()
    assert victim not in listed(sim)
