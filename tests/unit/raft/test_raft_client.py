"""RaftClient's rules one message at a time: votes, pre-votes, fencing,
fetch validation, the high watermark (the simulation tests run them together)."""

from __future__ import annotations

import random

import pytest

from kfast.raft.election_state import ElectionState, MemoryQuorumStateStore
from kfast.raft.log import Batch, MemoryReplicatedLog, OffsetAndEpoch
from kfast.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    RaftRequest,
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from kfast.raft.quorum_state import LeaderState, QuorumConfig
from kfast.raft.raft_client import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    NotLeaderException,
    RaftClient,
)


def client(node_id=1, voters=(1, 2, 3), state=None, log=None, now=0):
    store = MemoryQuorumStateStore()
    if state is not None:
        store.write(state)
    c = RaftClient(
        node_id, voters, log or MemoryReplicatedLog(), store, QuorumConfig(), random.Random(0)
    )
    c.start(now)
    return c


def request(body, source=2, destination=1, correlation_id=100):
    return RaftRequest(correlation_id, source, destination, body)


def bodies(out, kind):
    return [m.body for m in out if isinstance(m.body, kind)]


def test_a_quorum_of_one_elects_itself_at_start():
    c = client(voters=(1,))
    assert c.is_leader and c.epoch == 1
    offset = c.propose(0, ["a"])
    c.on_flushed(0, c.begin_flush())
    assert c.high_watermark == offset + 1


def test_the_leader_commits_only_what_it_has_flushed():
    """Its own end offset toward the high watermark is its flushed one
    (Kafka's raft thread fsyncs it before handing on a commit): a quorum of
    one commits a record only once the driver's fsync of it is done, and
    records appended while that fsync runs wait for the next one."""
    c = client(voters=(1,))
    first = c.propose(0, ["a"])
    target = c.begin_flush()
    assert target == first + 1 and c.begin_flush() is None  # one at a time
    second = c.propose(1, ["b"])
    assert c.high_watermark == -1
    c.on_flushed(2, target)
    assert c.flushed_offset == c.high_watermark == first + 1
    assert c.begin_flush() == second + 1
    c.on_flushed(3, second + 1)
    assert c.high_watermark == second + 1
    assert c.begin_flush() is None


def test_a_follower_fetches_past_its_appends_only_once_they_are_flushed():
    log = MemoryReplicatedLog()
    c = client(log=log)
    out = c.handle(0, request(BeginQuorumEpochRequest(2, 2)))  # epoch 2, leader 2
    (fetch,) = [m for m in out if isinstance(m.body, FetchRequest)]
    batch = Batch(0, 2, ("a",))
    response = FetchResponse(0, 2, 2, high_watermark=0, log_start_offset=0, batches=(batch,))
    out = c.handle(1, RaftResponse(fetch.correlation_id, 2, 1, response))
    assert log.end_offset == 1 and not bodies(out, FetchRequest)
    assert not bodies(c.poll(1_000), FetchRequest)
    out = c.on_flushed(2, c.begin_flush())
    assert [f.fetch_offset for f in bodies(out, FetchRequest)] == [1]


@pytest.mark.parametrize("always_flush", [True, False])
def test_a_broker_only_observer_fetches_on_without_flushing(always_flush):
    """Kafka's appendAsFollower fsyncs for voters and, with
    followersAlwaysFlush, for a controller's observer (it may become a
    voter); a broker-only node's observer never counts toward a high
    watermark, so it neither flushes nor waits before its next Fetch."""
    log = MemoryReplicatedLog()
    c = RaftClient(
        4,
        (1, 2, 3),
        log,
        MemoryQuorumStateStore(),
        QuorumConfig(),
        random.Random(0),
        followers_always_flush=always_flush,
    )
    c.start(0)
    (fetch,) = [m for m in c.poll(0) if isinstance(m.body, FetchRequest)]
    # The voter it asked names the leader, 2 in epoch 2: it follows it.
    told = FetchResponse(0, 2, 2, high_watermark=0, log_start_offset=0)
    out = c.handle(1, RaftResponse(fetch.correlation_id, fetch.destination, 4, told))
    (fetch,) = [m for m in out + c.poll(1) if isinstance(m.body, FetchRequest)]
    assert fetch.destination == 2
    batch = Batch(0, 2, ("a",))
    response = FetchResponse(0, 2, 2, high_watermark=0, log_start_offset=0, batches=(batch,))
    out = c.handle(2, RaftResponse(fetch.correlation_id, 2, 4, response)) + c.poll(2)
    assert log.end_offset == 1
    offsets = [f.fetch_offset for f in bodies(out, FetchRequest)]
    if always_flush:
        assert offsets == []
        out = c.on_flushed(3, c.begin_flush())
        assert [f.fetch_offset for f in bodies(out, FetchRequest)] == [1]
    else:
        assert offsets == [1] and c.begin_flush() is None


def test_one_vote_per_epoch_and_it_is_persisted():
    c = client()
    out = c.handle(0, request(VoteRequest(5, 2, 0, 0, pre_vote=False)))
    assert bodies(out, VoteResponse)[0].vote_granted
    assert c.quorum.store.read() == ElectionState(5, -1, 2)
    out = c.handle(1, request(VoteRequest(5, 3, 0, 0, pre_vote=False), source=3))
    assert not bodies(out, VoteResponse)[0].vote_granted
    # The same candidate asking again gets the same answer (a lost response).
    out = c.handle(2, request(VoteRequest(5, 2, 0, 0, pre_vote=False)))
    assert bodies(out, VoteResponse)[0].vote_granted
    # After a restart the vote is remembered.
    again = RaftClient(1, (1, 2, 3), c.log, c.quorum.store, QuorumConfig(), random.Random(1))
    again.start(3)
    out = again.handle(3, request(VoteRequest(5, 3, 0, 0, pre_vote=False), source=3))
    assert not bodies(out, VoteResponse)[0].vote_granted


def test_no_vote_for_a_less_up_to_date_log():
    log = MemoryReplicatedLog()
    log.append_as_leader(["a", "b"], 2)
    c = client(log=log)
    for last_epoch, end in ((1, 10), (2, 1)):
        out = c.handle(0, request(VoteRequest(5, 2, last_epoch, end, pre_vote=False)))
        assert not bodies(out, VoteResponse)[0].vote_granted
    out = c.handle(0, request(VoteRequest(5, 2, 2, 2, pre_vote=False)))
    assert bodies(out, VoteResponse)[0].vote_granted


def test_a_pre_vote_changes_nothing_and_a_follower_of_a_live_leader_refuses_it():
    c = client(state=ElectionState(4, leader_id=3))
    assert c.state_name == "Follower"
    # Not yet fetched from the leader: grants (KIP-996's ping-pong guard).
    out = c.handle(0, request(VoteRequest(4, 2, 0, 0, pre_vote=True)))
    assert bodies(out, VoteResponse)[0].vote_granted
    assert c.quorum.store.read() == ElectionState(4, 3, -1)
    c.quorum.state.has_fetched = True
    out = c.handle(1, request(VoteRequest(4, 2, 0, 0, pre_vote=True)))
    assert not bodies(out, VoteResponse)[0].vote_granted
    assert c.state_name == "Follower" and c.epoch == 4


def test_requests_from_an_older_epoch_are_fenced():
    c = client(state=ElectionState(6, leader_id=2))
    out = c.handle(0, request(VoteRequest(5, 3, 9, 99, pre_vote=False), source=3))
    response = bodies(out, VoteResponse)[0]
    assert response.error_code == FENCED_LEADER_EPOCH and response.leader_epoch == 6
    assert response.leader_id == 2 and not response.vote_granted
    out = c.handle(0, request(FetchRequest(3, 5, 0, 0, 500), source=3))
    assert bodies(out, FetchResponse)[0].error_code == FENCED_LEADER_EPOCH


def test_a_fetch_to_a_non_leader_names_the_leader():
    c = client(state=ElectionState(6, leader_id=2))
    out = c.handle(0, request(FetchRequest(4, 6, 0, 0, 500), source=4))
    response = bodies(out, FetchResponse)[0]
    assert (response.error_code, response.leader_id, response.leader_epoch) == (
        NOT_LEADER_OR_FOLLOWER,
        2,
        6,
    )


def elect(c: RaftClient, now=0) -> None:
    """Drive ``c`` (voter 1 of 3) through pre-vote and vote to leadership."""
    c.quorum.state.election_deadline_ms = now
    out = c.poll(now)
    pre_votes = [m for m in out if isinstance(m.body, VoteRequest)]
    assert pre_votes and all(m.body.pre_vote for m in pre_votes)
    out = c.handle(
        now,
        RaftResponse(
            pre_votes[0].correlation_id,
            pre_votes[0].destination,
            1,
            VoteResponse(0, -1, c.epoch, True),
        ),
    )
    votes = [m for m in out if isinstance(m.body, VoteRequest)]
    assert votes and not any(m.body.pre_vote for m in votes)
    c.handle(
        now,
        RaftResponse(
            votes[0].correlation_id, votes[0].destination, 1, VoteResponse(0, -1, c.epoch, True)
        ),
    )
    assert c.is_leader
    c.on_flushed(now, c.begin_flush())  # the driver's fsync of its LeaderChange


def test_the_leader_commits_only_through_a_batch_of_its_own_epoch():
    """Raft's rule (the paper's figure 8): records of earlier epochs that a
    majority holds are not committed by counting replicas; they commit when
    the new leader's own first batch (LeaderChange) reaches a majority."""
    log = MemoryReplicatedLog()
    log.append_as_leader(["old"], 1)
    c = client(log=log, state=ElectionState(1, leader_id=-1))
    elect(c)
    state = c.quorum.state
    assert isinstance(state, LeaderState) and state.epoch_start_offset == 1
    # Follower 2 has the epoch-1 record only: a majority (1 and 2) holds
    # offset 0, but nothing commits yet.
    out = c.handle(1, request(FetchRequest(2, c.epoch, 1, 1, 0)))
    assert c.high_watermark == -1
    assert bodies(out, FetchResponse)[0].batches[0].is_control
    c.handle(2, request(FetchRequest(2, c.epoch, 2, c.epoch, 0), correlation_id=101))
    assert c.high_watermark == 2


def test_a_diverging_follower_is_told_where_to_truncate():
    log = MemoryReplicatedLog()
    log.append_as_leader(["a"], 1)
    c = client(log=log, state=ElectionState(1))
    elect(c)
    out = c.handle(1, request(FetchRequest(2, c.epoch, 3, 1, 0)))
    response = bodies(out, FetchResponse)[0]
    assert response.diverging_epoch == OffsetAndEpoch(1, 1) and not response.batches


def test_a_follower_never_truncates_below_its_high_watermark():
    c = client(state=ElectionState(2, leader_id=2))
    fetch = bodies_and_ids(c.poll(0))
    c.handle(
        1,
        RaftResponse(
            fetch,
            2,
            1,
            FetchResponse(0, 2, 2, high_watermark=2, batches=(Batch(0, 2, ("a", "b")),)),
        ),
    )
    assert c.high_watermark == 2
    c.on_flushed(1, c.begin_flush())
    fetch = c.requests._in_flight[2].correlation_id  # the next fetch, sent once flushed
    with pytest.raises(AssertionError, match="below the high watermark"):
        c.handle(
            2,
            RaftResponse(
                fetch,
                2,
                1,
                FetchResponse(0, 2, 2, high_watermark=2, diverging_epoch=OffsetAndEpoch(0, 1)),
            ),
        )


def bodies_and_ids(out) -> int:
    """The correlation id of the one Fetch in ``out``."""
    (fetch,) = [m for m in out if isinstance(m.body, FetchRequest)]
    return fetch.correlation_id


def test_end_quorum_epoch_sends_the_first_successor_to_an_election_at_once():
    c = client(state=ElectionState(3, leader_id=2))
    c.quorum.state.has_fetched = True
    out = c.handle(10, request(EndQuorumEpochRequest(2, 3, (1, 3))))
    assert c.state_name == "Prospective"
    assert sorted(
        m.destination for m in out if isinstance(m.body, VoteRequest) and m.body.pre_vote
    ) == [2, 3]


def test_end_quorum_epoch_makes_a_later_successor_wait_its_turn():
    c = client(state=ElectionState(3, leader_id=2))
    c.quorum.state.has_fetched = True
    c.handle(10, request(EndQuorumEpochRequest(2, 3, (3, 1))))
    assert c.state_name == "Follower" and not c.quorum.state.has_fetched
    assert c.quorum.state.fetch_deadline_ms == 10 + c.config.retry_backoff_ms


def test_propose_on_a_follower_is_refused():
    c = client(state=ElectionState(3, leader_id=2))
    with pytest.raises(NotLeaderException):
        c.propose(0, ["x"])


def test_a_leader_resigns_one_check_quorum_timeout_after_the_majority_last_fetched():
    """The timer runs from the fetch that completed the majority, not from
    fixed windows: a leader cut off just after a check does not lead on for
    a second window."""
    c = client(log=MemoryReplicatedLog(), state=ElectionState(1))
    elect(c, now=0)
    timeout = c.quorum.check_quorum_timeout()
    c.handle(timeout - 10, request(FetchRequest(2, c.epoch, 0, 0, 0), correlation_id=201))
    c.poll(2 * timeout - 11)
    assert c.is_leader
    c.poll(2 * timeout - 10)
    assert c.state_name == "Resigned"


class RecordingListener:
    def __init__(self):
        self.committed: list = []

    def handle_commit(self, batch) -> None:
        if not batch.is_control:
            self.committed.extend(batch.records)

    def handle_load_snapshot(self, snapshot_id, data) -> None:
        raise AssertionError("no snapshot here")

    def handle_leader_change(self, leader_id, epoch) -> None:
        pass


def test_committed_records_reach_the_listener_in_slices_between_polls():
    """A long catch-up is handed over max_records_per_delivery at a time
    (whole batches), next_poll_ms asking to be polled at once until it is
    all delivered, so the driver's loop runs between slices."""
    listener = RecordingListener()
    log = MemoryReplicatedLog()
    c = RaftClient(
        1,
        (1,),
        log,
        MemoryQuorumStateStore(),
        QuorumConfig(max_records_per_delivery=3),
        random.Random(0),
        listener,
    )
    c.start(0)
    for i in range(4):
        c.propose(0, [f"r{i}a", f"r{i}b"])
    c.on_flushed(0, c.begin_flush())  # delivers, as poll does
    # The LeaderChange batch (1 record) and one two-record batch: 3.
    assert listener.committed == ["r0a", "r0b"] and c.next_poll_ms() == 0
    c.poll(1)
    assert listener.committed[2:] == ["r1a", "r1b", "r2a", "r2b"]
    c.poll(2)
    assert listener.committed[-2:] == ["r3a", "r3b"]
    assert c.next_poll_ms() > 2
