"""Transactional offsets (TxnOffsetCommit): pending until the transaction's
marker reaches the __consumer_offsets partition, then committed (COMMIT) or
dropped (ABORT); OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT meanwhile. The runtime writes them in transactional
batches of the producer to a real partition log, and a coordinator loaded
from that log (markers included) has the same state as the live one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import LogConfig
from kfast.coordinator.group.classic_group import ClassicGroupState
from kfast.coordinator.group.offsets import UNSTABLE
from kfast.protocol import errors as E
from kfast.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, build_control_batch
from kfast.storage.log import Log
from kfast.storage.producer_state import ORIGIN_COORDINATOR

from .harness import Harness
from .test_runtime_load import FakeBroker

TP = ("t", 0)


class LogBroker(FakeBroker):
    """FakeBroker whose appends go to the partition's real log."""

    def append(self, index, batch, timeout_ms, on_committed):
        self.partition.log.append_as_leader(bytes(batch), 0, ORIGIN_COORDINATOR, now=1)
        self.partition.log.update_high_watermark(self.partition.log.log_end_offset)
        on_committed(0)

    def write_marker(self, runtime, producer_id: int, epoch: int, committed: bool) -> None:
        """What a WriteTxnMarkers handler does on a __consumer_offsets partition."""
        marker = build_control_batch(
            CONTROL_TYPE_COMMIT if committed else CONTROL_TYPE_ABORT, producer_id, epoch, 0, 1
        )
        log = self.partition.log
        log.append_as_leader(bytes(marker), 0, ORIGIN_COORDINATOR, now=1)
        log.update_high_watermark(log.log_end_offset)
        runtime.complete_transaction(0, producer_id, epoch, committed)


def txn_commit(coordinator, group, offsets, producer_id, epoch=0, generation=-1, member=""):
    results = []
    coordinator.commit_transactional_offsets(
        group,
        member,
        None,
        generation,
        producer_id,
        epoch,
        {tp: (offset, -1, "") for tp, offset in offsets.items()},
        results.append,
    )
    return results[0]


def committed(coordinator, group, stable=False):
    """{(topic, partition): offset, None, or "unstable" (the error code
    fetch_offsets gives instead of a value)}."""
    return {
        (t, p): (
            "unstable" if v == UNSTABLE and isinstance(v, int) else None if v is None else v.offset
        )
        for t, p, v in coordinator.fetch_offsets(group, [TP, ("t", 1)], stable)
    }


def test_pending_until_commit_marker_unstable_meanwhile():
    h = Harness()
    assert txn_commit(h.coordinator, "g", {TP: 5}, producer_id=7) == {TP: 0}
    assert committed(h.coordinator, "g") == {TP: None, ("t", 1): None}
    assert committed(h.coordinator, "g", stable=True)[TP] == "unstable"
    h.coordinator.complete_transaction(7, True, lambda group: True)
    assert committed(h.coordinator, "g", stable=True) == {TP: 5, ("t", 1): None}


def test_abort_drops_them_and_other_groups_wait_for_their_own_partition():
    h = Harness()
    txn_commit(h.coordinator, "a", {TP: 1}, producer_id=7)
    txn_commit(h.coordinator, "b", {TP: 2}, producer_id=7)
    h.coordinator.complete_transaction(7, False, lambda group: group == "a")
    assert committed(h.coordinator, "a", stable=True)[TP] is None  # aborted
    assert committed(h.coordinator, "b", stable=True)[TP] == "unstable"  # its marker to come
    h.coordinator.complete_transaction(7, True, lambda group: group == "b")
    assert committed(h.coordinator, "b")[TP] == 2


def test_the_commit_written_last_wins():
    """A plain commit after the transactional one (before its marker) is
    newer, and the marker does not take it back."""
    h = Harness()
    txn_commit(h.coordinator, "g", {TP: 5}, producer_id=7)
    assert h.commit("g", {TP: (9, "")}) == {TP: 0}
    h.coordinator.complete_transaction(7, True, lambda group: True)
    assert committed(h.coordinator, "g")[TP] == 9


def test_a_member_of_a_rebalancing_group_may_commit_transactionally():
    h = Harness()
    [joined] = h.join("g")
    generation, member = joined["generation_id"], joined["member_id"]
    assert h.coordinator.groups["g"].is_(ClassicGroupState.COMPLETING_REBALANCE)
    # Awaiting SyncGroup: a plain commit would be refused, not this one.
    assert h.commit("g", {TP: (3, "")}, member, generation) == {
        TP: E.RebalanceInProgressException.code
    }
    assert txn_commit(h.coordinator, "g", {TP: 3}, 7, generation=generation, member=member) == {
        TP: 0
    }
    assert txn_commit(h.coordinator, "g", {TP: 3}, 7, generation=generation + 1, member=member) == {
        TP: E.IllegalGenerationException.code
    }
    assert txn_commit(h.coordinator, "g", {TP: 3}, 7, generation=generation, member="stranger") == {
        TP: E.UnknownMemberIdException.code
    }
    assert txn_commit(h.coordinator, "new", {TP: 3}, 7, generation=2) == {
        TP: E.IllegalGenerationException.code
    }


def test_a_marker_appended_while_loading_is_applied_after_the_load(tmp_path):
    from kfast.coordinator.runtime import _PartitionLoad

    broker = LogBroker(Log(str(tmp_path / "__consumer_offsets-0"), LogConfig()))
    live = broker.runtime()
    assert live.check_coordinator("g") == 0
    txn_commit(live.coordinator, "g", {TP: 4}, producer_id=3)
    # A new coordinator starts loading; the marker lands past what it replays.
    again = broker.runtime()
    load = again.loading[0] = _PartitionLoad(0, broker.partition)
    again._begin_load(0, load.leader_epoch)
    broker.write_marker(again, 3, 0, True)
    assert again._markers_while_loading[0] == [(3, True)]
    assert again._load_slice(load)
    assert committed(again.coordinator, "g", stable=True)[TP] == 4


ops = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.sampled_from("ab"), st.integers(0, 1), st.integers(0, 99)),
        st.tuples(
            st.just("txn"),
            st.sampled_from("ab"),
            st.integers(0, 1),
            st.integers(0, 99),
            st.integers(1, 2),
        ),
        st.tuples(st.just("marker"), st.integers(1, 2), st.booleans()),
    ),
    max_size=25,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(ops)
def test_a_coordinator_loaded_from_the_log_has_the_live_state(tmp_path_factory, plan):
    """Against an oracle too: committed offsets are the last applied of
    plain commits and committed transactions; pending is what awaits a
    marker."""
    directory = tmp_path_factory.mktemp("offsets")
    broker = LogBroker(Log(str(directory / "__consumer_offsets-0"), LogConfig()))
    live = broker.runtime()
    assert live.check_coordinator("a") == 0
    oracle: dict = {}  # (group, partition) -> (order, offset) committed
    pending: dict = {}  # producer -> {(group, partition): (order, offset)}
    for order, op in enumerate(plan):
        if op[0] == "plain":
            _, group, partition, offset = op
            live.coordinator.commit_offsets(
                group, "", None, -1, {("t", partition): (offset, -1, "")}, -1, lambda r: None
            )
            oracle[(group, partition)] = (order, offset)
        elif op[0] == "txn":
            _, group, partition, offset, producer = op
            assert txn_commit(live.coordinator, group, {("t", partition): offset}, producer) == {
                ("t", partition): 0
            }
            pending.setdefault(producer, {})[(group, partition)] = (order, offset)
        else:
            _, producer, commit = op
            broker.write_marker(live, producer, 0, commit)
            for key, (at, offset) in pending.pop(producer, {}).items():
                if commit and at > oracle.get(key, (-1, None))[0]:
                    oracle[key] = (at, offset)
        for group in "ab":
            got = committed(live.coordinator, group)
            assert {p: got[("t", p)] for p in (0, 1)} == {
                p: oracle.get((group, p), (0, None))[1] for p in (0, 1)
            }
            stable = committed(live.coordinator, group, stable=True)
            waiting = {p for by_key in pending.values() for g, p in by_key if g == group}
            assert {p for p in (0, 1) if stable[("t", p)] == "unstable"} == waiting
        loaded = broker.runtime()
        assert loaded.check_coordinator("a") == 0
        assert loaded.coordinator.snapshot()["offsets"] == live.coordinator.snapshot()["offsets"]
        assert (
            loaded.coordinator.snapshot()["pending_transactional_offsets"]
            == live.coordinator.snapshot()["pending_transactional_offsets"]
        )
