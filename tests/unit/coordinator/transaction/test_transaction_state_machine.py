"""Random InitProducerId / AddPartitionsToTxn / EndTxn / timeouts / marker
completions / failed appends / reloads from the log against the
TransactionCoordinator, checking after every step that:

* the state rebuilt by replaying the records written equals the live state;
* epochs never go backwards for a producer id (in the log, in answers);
* a fenced epoch is never accepted again;
* every ongoing transaction completes or aborts (teardown drives the
  coordinator the way a broker would: markers written, timeouts, reloads).
"""

import logging

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kfast.coordinator.transaction.metadata import TransactionState as S
from kfast.coordinator.transaction.records import decode_key, decode_value
from kfast.protocol import errors as E

from .support import PARTITIONS, Harness

IDS = ("a", "b", "c")
TOPIC_PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
TIMEOUT_MS = 60000
APPEND_ERRORS = [
    E.NotEnoughReplicasException.code,
    E.NotLeaderOrFollowerException.code,
    E.TimeoutException.code,
]


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


class TransactionCoordinatorMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.errors = _Errors()
        logging.getLogger("kfast.coordinator.transaction").addHandler(self.errors)
        self.h = Harness()
        self.now = 0
        self.coordinator_epoch = 0
        # What each client holds: transactional id -> (producer id, epoch, version).
        self.clients: dict[str, tuple[int, int, int]] = {}
        # Every (producer id, epoch) a client was ever given, and the highest
        # epoch answered per producer id.
        self.handed_out: set[tuple[int, int]] = set()
        self.highest_answered: dict[int, int] = {}

    def _tick(self, ms=1):
        self.now += ms
        return self.now

    def _answered(self, producer_id, epoch):
        assert epoch >= self.highest_answered.get(producer_id, -1), "epoch went backwards"
        self.highest_answered[producer_id] = epoch
        self.handed_out.add((producer_id, epoch))

    # -- client requests -------------------------------------------------------------------
    @rule(tid=st.sampled_from(IDS), version=st.sampled_from([0, 2]), kip360=st.booleans())
    def init_producer_id(self, tid, version, kip360):
        held = self.clients.get(tid)
        pid, epoch = (held[0], held[1]) if kip360 and held else (-1, -1)
        result = self.h.init(tid, self._tick(), TIMEOUT_MS, pid, epoch)
        if result.error_code == 0:
            self._answered(result.producer_id, result.producer_epoch)
            self.clients[tid] = (result.producer_id, result.producer_epoch, version)

    @rule(
        tid=st.sampled_from(IDS),
        partitions=st.sets(st.sampled_from(TOPIC_PARTITIONS), min_size=1, max_size=2),
    )
    def add_partitions(self, tid, partitions):
        if tid in self.clients:
            pid, epoch, version = self.clients[tid]
            self.h.add(tid, pid, epoch, partitions, self._tick(), version)

    @rule(tid=st.sampled_from(IDS), committed=st.booleans())
    def end_transaction(self, tid, committed):
        if tid in self.clients:
            pid, epoch, version = self.clients[tid]
            result = self.h.end(tid, pid, epoch, committed, version, self._tick())
            if result.error_code == 0 and version == 2:
                self._answered(result.producer_id, result.producer_epoch)
                self.clients[tid] = (result.producer_id, result.producer_epoch, version)

    @rule(tid=st.sampled_from(IDS), data=st.data())
    def stale_producer(self, tid, data):
        """A zombie with an epoch older than the current one is refused."""
        md = self.h.metadata(tid)
        stale = sorted(
            (p, e)
            for p, e in self.handed_out
            if md is not None and p == md.producer_id and e < md.producer_epoch
        )
        if not stale:
            return
        pid, epoch = data.draw(st.sampled_from(stale))
        before = {p: list(r) for p, r in self.h.log.items()}
        code = self.h.add(tid, pid, epoch, [("zombie", 0)], self._tick(), 0)
        assert code != 0, "a fenced epoch added a partition"
        for version in (0, 2):
            self.h.end(tid, pid, epoch, True, version, self._tick())
        assert self.h.log == before, "a fenced epoch wrote to the log"

    # -- the broker's side -----------------------------------------------------------------
    @rule(partial=st.booleans())
    def write_markers(self, partial):
        self.h.write_markers(self._tick(), only=TOPIC_PARTITIONS[:1] if partial else None)

    @rule(error=st.sampled_from(APPEND_ERRORS))
    def fail_next_append(self, error):
        self.h.append_errors.append(error)

    @rule(ms=st.integers(1, 2 * TIMEOUT_MS))
    def time_passes_and_timeouts_abort(self, ms):
        self.h.run(self.h.coordinator.abort_timed_out_transactions(self._tick(ms)), self.now)

    @rule()
    def expire_ids(self):
        # Far in the future for the ids, not for the machine's clock.
        self.h.run(self.h.coordinator.expire_transactional_ids(self.now + 10**10), self.now)
        for tid in IDS:
            if self.h.metadata(tid) is None:
                self.clients.pop(tid, None)

    @rule(index=st.integers(0, PARTITIONS - 1))
    def reload_partition(self, index):
        """Leadership moves and comes back: the partition is replayed."""
        self.coordinator_epoch += 1
        coordinator = self.h.coordinator
        coordinator.unload_partition(index)
        coordinator.load_partition(index, self.coordinator_epoch)
        for key, value in self.h.log[index]:
            coordinator.replay(key, value)
        self.h.run(coordinator.complete_load(index, self.coordinator_epoch, self._tick()), self.now)

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def replay_equals_live_state(self):
        replayed = self.h.replayed()
        for tid in IDS:
            live = self.h.metadata(tid)
            loaded = replayed.state.loading[replayed.state.partition_for(tid)].transactions.get(tid)
            if loaded is None:
                # Never written: created by an InitProducerId whose append failed.
                assert live is None or live.producer_epoch == -1, live
                continue
            assert live is not None, f"{tid} in the log but not in memory"
            live_view, loaded_view = list(live.persisted_view()), list(loaded.persisted_view())
            if live.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                # Markers written shrink the live set, not the record.
                live_view[7] = loaded_view[7]
            if live.has_failed_epoch_fence:
                # A fence whose write failed bumped the epoch in memory only.
                assert live_view[4] == loaded_view[4] + 1
                live_view[4] = loaded_view[4]
            assert live_view == loaded_view, (live, loaded)

    @invariant()
    def log_epochs_never_go_backwards(self):
        for records in self.h.log.values():
            highest: dict[tuple[str, int], int] = {}
            for key, value in records:
                decoded = decode_value(value)
                if decoded is None:
                    highest = {k: v for k, v in highest.items() if k[0] != decode_key(key)}
                    continue
                slot = (decode_key(key), decoded.producer_id)
                assert decoded.producer_epoch >= highest.get(slot, -1), "epoch went backwards"
                highest[slot] = decoded.producer_epoch

    @invariant()
    def nothing_illegal_happened(self):
        assert not self.errors.records, [r.getMessage() for r in self.errors.records]

    def teardown(self):
        try:
            self._drain()
        finally:
            logging.getLogger("kfast.coordinator.transaction").removeHandler(self.errors)

    def _drain(self):
        """Every transaction ends: the broker writes markers, reloads
        partitions whose completion write was lost, aborts timeouts."""
        h = self.h
        h.append_errors.clear()
        for _ in range(3):
            for index in range(PARTITIONS):
                self.reload_partition(index)
            h.write_markers(self._tick())
            h.run(h.coordinator.abort_timed_out_transactions(self._tick(TIMEOUT_MS + 1)), self.now)
            h.write_markers(self._tick())
        for tid in IDS:
            md = h.metadata(tid)
            if md is not None:
                assert md.state not in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT), md
                assert md.pending_state is None, md
        assert not self.errors.records, [r.getMessage() for r in self.errors.records]


TestTransactionCoordinatorMachine = pytest.mark.slow(TransactionCoordinatorMachine.TestCase)
