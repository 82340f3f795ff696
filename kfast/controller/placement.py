"""Replica placement: which brokers host the replicas of new partitions.

Kafka's classic assignment (AdminUtils.assignReplicasToBrokers), which
spreads leaders evenly and keeps followers off the leader's broker:

* Rack-unaware: brokers sorted by id. Partition p's first replica (its
  preferred leader) is broker ``(p + start) % n``; the followers are the next
  brokers at a distance ``1 + (shift + j) % (n - 1)`` for j = 0..rf-2. The
  shift grows by one after every n partitions, so the followers of a leader
  rotate and one broker's failure does not load a single other broker.
* Rack-aware (every broker has a rack): the same walk over a broker list
  that alternates racks (rack a's first broker, rack b's first, ..., rack a's
  second, ...); a follower is taken only if its rack holds no replica of the
  partition yet (unless every rack does) and the broker holds none.

``start`` and ``shift`` are random in Kafka so that topics do not all put
partition 0 on the same broker; callers that need determinism (tests) pass
them. The placement is recorded in PartitionRecords, so replaying the
metadata log never re-runs it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from kfast.protocol import errors


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack: the first broker of each rack (racks
    sorted by name), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        for queue in queues:
            if depth < len(queue):
                out.append(queue[depth])
        depth += 1
    return out


def place_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    racks: Mapping[int, str | None] | None = None,
    *,
    start_partition: int = 0,
    start: int | None = None,
    shift: int | None = None,
) -> list[list[int]]:
    """Replica lists (leader first) for partitions start_partition ..
    start_partition + num_partitions - 1.

    Raises InvalidReplicationFactorException when the factor is not positive
    or exceeds the number of brokers, InvalidPartitionsException for a
    non-positive partition count."""
    if num_partitions <= 0:
        raise errors.InvalidPartitionsException("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise errors.InvalidReplicationFactorException("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise errors.InvalidReplicationFactorException(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )
    known = {b: rack for b in brokers if (rack := (racks or {}).get(b)) is not None}
    # Rack-aware when every broker has a rack.
    rack_aware = bool(brokers) and all(b in known for b in brokers)
    if rack_aware:
        ordered = rack_alternated_brokers(known)
        num_racks = len(set(known.values()))
    else:
        ordered = sorted(brokers)
        num_racks = 1
    n = len(ordered)
    if start is None or shift is None:
        rng = random.Random()
        start = rng.randrange(n) if start is None else start
        shift = rng.randrange(n) if shift is None else shift
    out: list[list[int]] = []
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ordered[first]]
        if not rack_aware:
            replicas += [
                ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            used_racks = {known[ordered[first]]}
            k = 0
            while len(replicas) < replication_factor:
                candidate = ordered[_follower_index(first, shift * num_racks, k, n)]
                k += 1
                rack = known[candidate]
                if (rack not in used_racks or len(used_racks) == num_racks) and (
                    candidate not in replicas or len(replicas) == n
                ):
                    replicas.append(candidate)
                    used_racks.add(rack)
        out.append(replicas)
    return out
