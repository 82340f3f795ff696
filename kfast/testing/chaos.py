"""Faults for chaos runs on a KfastCluster: one at a time, each undone.

    fault, victim = rng.choice(FAULTS), rng.choice(sorted(cluster.nodes))
    print(inflict(cluster, fault, victim, rng))   # "isolate node 2 (drop)"
    ...                                           # the load runs on
    undo(cluster, fault, victim)

The faults are the ones a cluster meets, each as its processes see it:

- kill: kill -9; undone by a restart on the same data directory.
- pause: SIGSTOP; undone by SIGCONT. A stalled disk or a long GC: the node
  wakes up still believing what it believed, e.g. that it leads.
- isolate: every FaultProxy link to and from the node (controller RPCs and
  replica fetches, both directions) drops its bytes or resets its
  connections; clients still reach the node. A leader cut off from its
  followers and from the quorum, while producers keep writing to it.
- replication: only the node's own replica fetches are cut (drop or reset).
  A live follower, still heartbeating, that falls out of the ISRs.
- slow: the node's replica fetches wait 50-500 ms a chunk each way.
- one-way: what the node opens to one other node (controller RPCs, replica
  fetches) drops, while that node still reaches it: asymmetric reachability.

isolate, replication, slow and one-way need
KfastCluster(replication_links=True).
Used by bench/replication_chaos.py and tests/e2e/test_replication_chaos.py.
"""

from __future__ import annotations

import random

from kfast.testing.cluster import KfastCluster
from kfast.testing.proxy import DROP, RESET

FAULTS = ("kill", "pause", "isolate", "replication", "slow", "one-way")
_LINK_FAULTS = frozenset({"isolate", "replication", "slow", "one-way"})


def needs_links(faults) -> bool:
    """Whether any of ``faults`` acts on FaultProxy replication links."""
    return not _LINK_FAULTS.isdisjoint(faults)


def chaos_overrides(links: bool) -> dict:
    """Broker properties for a chaos run.

    The controller fences a silent broker after 2 s, not Kafka's 9 s, so a
    fault's effects play out within the few seconds it lasts. With
    replication links, a leader also drops a follower that fetched nothing
    for 2 s from the ISR (Kafka: 30 s), so cut replication shrinks and
    regrows ISRs within one fault. A follower whose fetch vanished in a
    dropping link gives it up after 3 s and reconnects (Kafka: 30 s).
    """
    overrides = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200}
    if links:
        overrides.update({"replica.lag.time.max.ms": 2000, "replica.socket.timeout.ms": 3000})
    return overrides


def inflict(cluster: KfastCluster, fault: str, victim: int, rng: random.Random) -> str:
    """Start ``fault`` on node ``victim``; what was done, for the log."""
    if fault == "kill":
        cluster.kill(victim)
        return f"kill -9 node {victim}"
    if fault == "pause":
        cluster.pause(victim)
        return f"pause node {victim}"
    if fault == "isolate":
        mode = rng.choice((DROP, RESET))
        cluster.isolate(victim, mode)
        return f"isolate node {victim} ({mode})"
    if fault == "replication":
        mode = rng.choice((DROP, RESET))
        cluster.stop_replication(victim, mode)
        return f"cut node {victim}'s replication ({mode})"
    if fault == "slow":
        delay = round(rng.uniform(0.05, 0.5), 3)
        cluster.slow_replication(victim, delay)
        return f"slow node {victim}'s replication ({delay * 1000:.0f} ms)"
    if fault == "one-way":
        target = rng.choice(sorted(set(cluster.nodes) - {victim}))
        cluster.cut(victim, target)
        return f"cut node {victim}'s links to node {target} (drop, one way)"
    raise ValueError(f"unknown fault {fault!r}: one of {FAULTS}")


def undo(cluster: KfastCluster, fault: str, victim: int) -> None:
    """End ``fault`` on node ``victim``: the node is running and every link passes."""
    if fault == "kill":
        cluster.restart(victim)
    elif fault == "pause":
        cluster.resume(victim)
    elif fault in ("isolate", "one-way"):
        cluster.heal()
    elif fault in ("replication", "slow"):
        cluster.resume_replication(victim)
    else:
        raise ValueError(f"unknown fault {fault!r}: one of {FAULTS}")
