"""Kafka's ControllerStats meters of one controller: leader elections it
performed (LeaderElectionRateAndTimeMs, UncleanLeaderElectionsPerSec).

Only elections this controller decides while active are counted: the
operation that wrote the PartitionChangeRecords times them. Records
replayed from the metadata log (at startup, or by a standby controller
following the active one) are never counted, so a restart does not count
history again and standby controllers report only what they did while
they were active.
"""

from __future__ import annotations

from kfast.metrics.histogram import Histogram


class ControllerStats:
    """``record(elections, unclean, ms)`` per committed controller
    operation, on the controller's event loop."""

    __slots__ = ("leader_elections", "elected_partitions", "unclean_leader_elections")

    def __init__(self) -> None:
        # One sample per operation that moved at least one leadership (a
        # broker fenced, a preferred or unclean ElectLeaders, an ISR change
        # without its leader, a reassignment): the ZooKeeper controller
        # timed its BrokerChange events the same way.
        self.leader_elections = Histogram()
        self.elected_partitions = 0
        self.unclean_leader_elections = 0

    def record(self, elections: int, unclean: int, duration_ms: float) -> None:
        if elections:
            self.leader_elections.record(duration_ms)
            self.elected_partitions += elections
            self.unclean_leader_elections += unclean

    def snapshot(self) -> ControllerStatsSnapshot:
        return ControllerStatsSnapshot(
            self.leader_elections.snapshot(), self.elected_partitions, self.unclean_leader_elections
        )


class ControllerStatsSnapshot:
    __slots__ = ("leader_elections", "elected_partitions", "unclean_leader_elections")

    def __init__(self, leader_elections, elected_partitions: int, unclean: int):
        self.leader_elections = leader_elections
        self.elected_partitions = elected_partitions
        self.unclean_leader_elections = unclean
