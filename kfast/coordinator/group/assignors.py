"""Server-side assignors of KIP-848 consumer groups (Kafka's
UniformAssignor and RangeAssignor in group-coordinator/.../assignor).

An assignor maps members to partitions:

    assign(members, topics, previous) -> {member_id: {topic_id: set(partitions)}}

``members``: {member_id: set of subscribed topic ids}; ``topics``:
{topic_id: partition count}; ``previous``: the last target assignment, which
the uniform assignor keeps as far as balance allows (sticky), so a member
joining or leaving moves as few partitions as possible.
"""

from __future__ import annotations

import uuid

Assignment = dict[str, dict[uuid.UUID, set[int]]]


def _topic_order(topic_id: uuid.UUID) -> str:
    return str(topic_id)


def uniform(
    members: dict[str, set[uuid.UUID]], topics: dict[uuid.UUID, int], previous: Assignment
) -> Assignment:
    """Every partition of a subscribed topic goes to exactly one member
    subscribed to it; with identical subscriptions counts differ by at most
    one. Previous owners keep their partitions up to their fair share."""
    result: Assignment = {m: {} for m in members}
    if not members:
        return result
    partitions = [
        (t, p)
        for t in sorted(topics, key=_topic_order)
        if any(t in subs for subs in members.values())
        for p in range(topics[t])
    ]
    total, count = len(partitions), len(members)
    base, extra = divmod(total, count)
    counts = {m: 0 for m in members}
    taken: set[tuple[uuid.UUID, int]] = set()
    # Members with the most previous partitions claim the "+1" slots first,
    # which keeps the most partitions in place.
    by_previous = sorted(
        members, key=lambda m: (-sum(len(v) for v in previous.get(m, {}).values()), m)
    )
    for member in by_previous:
        quota = base + 1 if extra > 0 else base
        kept = 0
        for topic_id, owned in sorted(
            previous.get(member, {}).items(), key=lambda item: _topic_order(item[0])
        ):
            if topic_id not in members[member] or topic_id not in topics:
                continue
            for partition in sorted(owned):
                if kept >= quota:
                    break
                if partition < topics[topic_id] and (topic_id, partition) not in taken:
                    taken.add((topic_id, partition))
                    result[member].setdefault(topic_id, set()).add(partition)
                    kept += 1
        counts[member] = kept
        if kept > base:
            extra -= 1
    for topic_id, partition in partitions:
        if (topic_id, partition) in taken:
            continue
        eligible = [m for m in members if topic_id in members[m]]
        member = min(eligible, key=lambda m: (counts[m], m))
        result[member].setdefault(topic_id, set()).add(partition)
        counts[member] += 1
    return result


def range_(
    members: dict[str, set[uuid.UUID]], topics: dict[uuid.UUID, int], previous: Assignment
) -> Assignment:
    """Per topic, the subscribed members in member id order get contiguous
    ranges; the first (count % members) get one partition more."""
    result: Assignment = {m: {} for m in members}
    for topic_id in sorted(topics, key=_topic_order):
        subscribed = sorted(m for m, subs in members.items() if topic_id in subs)
        if not subscribed:
            continue
        base, extra = divmod(topics[topic_id], len(subscribed))
        start = 0
        for i, member in enumerate(subscribed):
            size = base + (1 if i < extra else 0)
            if size:
                result[member][topic_id] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}
