"""Group coordinator benchmark: heartbeats handled by the state machine
alone (no sockets), 1000 members of one Stable group.

    kfast    GroupCoordinator.heartbeat: validate, complete the member's
             DelayedHeartbeat in the purgatory, schedule the next one on the
             timing wheel (SystemTimer on uvloop)
    uvloop   the session bookkeeping a coordinator without purgatory would
             do: cancel the member's loop.call_later handle, arm a new one

Run: python3 -m pytest bench/test_groups.py --benchmark-only
Each round is 100 000 heartbeats (100 per member); rates in extra_info and
in bench/README.md.
"""

import asyncio

import uvloop

from kfast.config import KafkaConfig
from kfast.coordinator.group.consumer_protocol import encode_subscription
from kfast.coordinator.group.coordinator import GroupCoordinator
from kfast.server_common.timer import SystemTimer

MEMBERS = 1000
HEARTBEATS = 100_000
SESSION_MS = 10_000
ROUNDS = 5


def _stable_group(loop):
    timer = SystemTimer(loop)
    coordinator = GroupCoordinator(
        KafkaConfig({"group.initial.rebalance.delay.ms": 0}),
        timer,
        lambda group_id, records, done: done(0),
        lambda: int(loop.time() * 1000),
    )
    sub = encode_subscription(["t"])
    joined = []
    for _ in range(MEMBERS):
        coordinator.join_group(
            "g",
            "",
            None,
            "c",
            "/h",
            SESSION_MS,
            60_000,
            "consumer",
            [("range", sub)],
            False,
            joined.append,
        )
    # Everyone rejoins once so one generation holds all members.
    members = list(coordinator.groups["g"].members)
    for member_id in members:
        coordinator.join_group(
            "g",
            member_id,
            None,
            "c",
            "/h",
            SESSION_MS,
            60_000,
            "consumer",
            [("range", sub)],
            False,
            joined.append,
        )
    group = coordinator.groups["g"]
    for member_id in members:
        coordinator.sync_group(
            "g",
            group.generation_id,
            member_id,
            None,
            None,
            None,
            {m: b"" for m in members},
            lambda result: None,
        )
    assert group.is_("Stable"), group
    return coordinator, members, group.generation_id


def test_heartbeats_kfast(benchmark):
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    coordinator, members, generation = _stable_group(loop)
    heartbeat = coordinator.heartbeat
    rounds = HEARTBEATS // MEMBERS

    def run():
        for _ in range(rounds):
            for member_id in members:
                heartbeat("g", member_id, None, generation)

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert heartbeat("g", members[0], None, generation) == 0
    benchmark.extra_info["heartbeats_per_s"] = round(HEARTBEATS / benchmark.stats.stats.min)
    loop.close()


def test_heartbeats_uvloop_call_later(benchmark):
    loop = uvloop.new_event_loop()
    handles = {}

    def expire():
        pass

    members = [f"m{i}" for i in range(MEMBERS)]
    for member_id in members:
        handles[member_id] = loop.call_later(SESSION_MS / 1000, expire)
    rounds = HEARTBEATS // MEMBERS

    def run():
        for _ in range(rounds):
            for member_id in members:
                handles[member_id].cancel()
                handles[member_id] = loop.call_later(SESSION_MS / 1000, expire)

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    benchmark.extra_info["heartbeats_per_s"] = round(HEARTBEATS / benchmark.stats.stats.min)
    loop.close()
