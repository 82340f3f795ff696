"""FileReplicatedLog: MemoryReplicatedLog's semantics on disk, in Kafka's format.

Behaviour shared by both implementations runs against each (``make_log``,
conftest.py; test_log.py holds the offset/epoch rules), and a model test
drives both with the same random operations and compares everything they
answer. The rest is the file log's own: restart, crash recovery, the files
being Kafka's (segments, leader-epoch-checkpoint, snapshot files), and the
Raft simulation with every node on a file log.
"""

from __future__ import annotations

import io
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfast.cli import build_parser
from kfast.raft.control_records import (
    LEADER_CHANGE,
    control_type_of,
    decode_leader_change,
    encode_leader_change,
)
from kfast.raft.file_log import METADATA_PARTITION_DIR, FileReplicatedLog
from kfast.raft.log import (
    Batch,
    LeaderChangeMessage,
    MemoryReplicatedLog,
    OffsetAndEpoch,
)
from kfast.raft.snapshots import snapshot_bytes, snapshot_name, write_snapshot_file
from kfast.records import iter_batches
from kfast.tools.dump_log import run as dump_log

from .conftest import FileLogs, JsonSerde
from .simulation import Simulation

SEGMENT = "00000000000000000000.log"


def snapshot_data(records, epoch: int) -> bytes:
    return snapshot_bytes(records, epoch, JsonSerde.encode)


def all_batches(log) -> tuple[Batch, ...]:
    return log.read(log.start_offset, 1 << 30)


def state_of(log) -> dict:
    """Everything a ReplicatedLog answers, for comparing two of them."""
    top = max([e for e, _ in log.epochs] + [log.last_fetched_epoch], default=0)
    latest = log.latest_snapshot_id()
    return {
        "offsets": (log.start_offset, log.end_offset, log.last_fetched_epoch),
        "epochs": [tuple(e) for e in log.epochs],
        "batches": all_batches(log),
        "end_offsets": [log.end_offset_for_epoch(e) for e in range(top + 2)],
        "snapshot": (latest, latest and log.read_snapshot(latest)),
    }


def reopen(logs: FileLogs, log: FileReplicatedLog, clean: bool) -> FileReplicatedLog:
    """A restart: a clean close, or kill -9 (file handles dropped, nothing
    written, no clean-shutdown marker)."""
    if clean:
        log.close()
    else:
        log.log.close_handlers()
        log.log = None
    return logs.open(os.path.dirname(log.dir))


# -- behaviour, on both implementations -------------------------------------------------------
def test_read_whole_batches_up_to_max_batches(make_log):
    log = make_log()
    log.append_as_leader([LeaderChangeMessage(1, (1, 2, 3))], 1, is_control=True)
    for i in range(5):
        log.append_as_leader([f"a{i}", f"b{i}"], 1)
    assert [b.base_offset for b in log.read(1, 2)] == [1, 3]
    assert [b.base_offset for b in log.read(3, 100)] == [3, 5, 7, 9]
    assert log.read(0, 1) == (Batch(0, 1, (LeaderChangeMessage(1, (1, 2, 3)),), True),)
    assert log.read(11, 10) == ()
    with pytest.raises(ValueError):
        log.read(4, 1)


def test_snapshot_moves_the_start_and_drops_older_snapshots(make_log):
    log = make_log()
    for epoch in (1, 1, 2, 2, 3):
        log.append_as_leader(["x", "y"], epoch)
    first, second = OffsetAndEpoch(4, 1), OffsetAndEpoch(8, 2)
    log.create_snapshot(first, snapshot_data(["s1"], 1))
    log.delete_before_snapshot(first)
    second_data = snapshot_data(["s2"], 2)
    log.create_snapshot(second, second_data)
    assert log.start_offset == 4  # until the delete
    log.delete_before_snapshot(second)
    assert (log.start_offset, log.end_offset, log.latest_snapshot_id()) == (8, 10, second)
    assert log.read_snapshot(first) is None
    assert log.read_snapshot(second) == second_data
    assert log.read(4, 10) == ()  # below the start
    assert log.epochs == [(2, 8), (3, 8)]
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(8, 0)
    log.truncate_to(8)
    assert (log.end_offset, log.last_fetched_epoch, log.epochs) == (8, 2, [(2, 8)])
    with pytest.raises(ValueError):
        log.truncate_to(7)
    with pytest.raises(ValueError):
        log.create_snapshot(OffsetAndEpoch(9, 2), snapshot_data([], 2))  # past the end


def test_install_snapshot_replaces_the_log(make_log):
    log = make_log()
    log.append_as_leader(["a", "b", "c"], 1)
    snapshot_id = OffsetAndEpoch(20, 4)
    log.install_snapshot(snapshot_id, snapshot_data(["state"], 4))
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (20, 20, 4)
    assert log.latest_snapshot_id() == snapshot_id and all_batches(log) == ()
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(20, 4)
    log.append_as_follower([Batch(20, 5, (LeaderChangeMessage(2, (1, 2)),), True)])
    assert log.epochs == [(4, 20), (5, 20)]
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(20, 4)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(21, 5)


_operation = st.one_of(
    st.tuples(
        st.just("append"), st.integers(0, 2), st.integers(1, 3), st.booleans(), st.booleans()
    ),
    st.tuples(st.just("truncate"), st.integers(0, 20)),
    st.tuples(st.just("snapshot"), st.integers(0, 20)),
    st.tuples(st.just("install"), st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("reopen"), st.booleans()),
)


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=60
)
@given(st.lists(_operation, max_size=25))
def test_the_file_log_answers_as_the_memory_log(file_logs, operations):
    """The same operations on both logs (what RaftClient does: appends as
    leader and follower, truncations at batch boundaries, snapshots followed
    by delete_before_snapshot, installs) leave them answering the same, with
    the file log restarted (cleanly or by kill -9) at random points."""
    memory, disk = MemoryReplicatedLog(), file_logs()
    for operation in operations:
        kind = operation[0]
        boundaries = [b.base_offset for b in memory.batches] + [memory.end_offset]
        if kind == "append":
            _, bump, size, control, as_follower = operation
            epoch = memory.last_fetched_epoch + bump
            records = (
                (LeaderChangeMessage(epoch % 3 + 1, (1, 2, 3)),)
                if control
                else tuple(f"r{memory.end_offset + i}" for i in range(size))
            )
            if as_follower:
                for log in (memory, disk):
                    log.append_as_follower([Batch(log.end_offset, epoch, records, control)])
            else:
                assert memory.append_as_leader(records, epoch, control) == disk.append_as_leader(
                    records, epoch, control
                )
        elif kind == "truncate":
            offset = boundaries[operation[1] % len(boundaries)]
            for log in (memory, disk):
                log.truncate_to(offset)
        elif kind == "snapshot":
            if not memory.batches:
                continue
            # A snapshot ends after a batch, with that batch's epoch.
            last = memory.batches[operation[1] % len(memory.batches)]
            snapshot_id = OffsetAndEpoch(last.next_offset, last.epoch)
            data = snapshot_data([last.next_offset], snapshot_id.epoch)
            for log in (memory, disk):
                log.create_snapshot(snapshot_id, data)
                log.delete_before_snapshot(snapshot_id)
        elif kind == "install":
            _, gap, bump = operation
            snapshot_id = OffsetAndEpoch(memory.end_offset + gap, memory.last_fetched_epoch + bump)
            data = snapshot_data(["installed"], snapshot_id.epoch)
            for log in (memory, disk):
                log.install_snapshot(snapshot_id, data)
        else:
            disk = reopen(file_logs, disk, clean=operation[1])
        assert state_of(disk) == state_of(memory), operation


# -- the file log's own ---------------------------------------------------------------------
def test_restart_keeps_batches_epochs_and_snapshots(file_logs):
    log = file_logs()
    log.append_as_leader([LeaderChangeMessage(1, (1, 2, 3))], 1, is_control=True)
    log.append_as_leader(["a", "b"], 1)
    log.log.roll()
    log.append_as_follower([Batch(3, 3, ("c",)), Batch(4, 4, ("d", ["e", 5]))])
    snapshot_id = OffsetAndEpoch(3, 1)
    log.create_snapshot(snapshot_id, snapshot_data(["a", "b"], 1))
    log.delete_before_snapshot(snapshot_id)
    before = state_of(log)
    assert before["offsets"] == (3, 6, 4) and before["epochs"] == [(1, 3), (3, 3), (4, 4)]
    log = reopen(file_logs, log, clean=True)
    assert log.had_clean_shutdown
    assert state_of(log) == before
    assert log.snapshot_records(snapshot_id) == ["a", "b"]
    log = reopen(file_logs, log, clean=False)
    assert not log.had_clean_shutdown
    assert state_of(log) == before


def test_a_torn_tail_is_dropped_on_open(file_logs):
    log = file_logs()
    log.append_as_leader(["a"], 1)
    log.append_as_leader(["b", "c"], 2)
    log.flush()
    path = os.path.join(log.dir, SEGMENT)
    size = os.path.getsize(path)
    log.append_as_leader(["being written when the process died"], 3)
    log.log.close_handlers()  # kill -9
    log.log = None
    with open(path, "r+b") as f:
        f.truncate(size + 30)  # half of the last batch
    log = file_logs.open(os.path.dirname(log.dir))
    assert not log.had_clean_shutdown
    assert (log.end_offset, log.last_fetched_epoch, log.epochs) == (3, 2, [(1, 0), (2, 1)])
    assert [b.records for b in all_batches(log)] == [("a",), ("b", "c")]
    assert os.path.getsize(path) == size
    log.append_as_leader(["d"], 3)  # the log goes on from there
    assert log.read(3, 1) == (Batch(3, 3, ("d",)),)


def test_the_partition_is_in_kafkas_format(file_logs):
    log = file_logs()
    log.append_as_leader([LeaderChangeMessage(2, (1, 2, 3))], 5, is_control=True)
    log.append_as_leader(["a", "b"], 5)
    log.append_as_leader([LeaderChangeMessage(3, (1, 2, 3))], 7, is_control=True)
    log.close()
    assert os.path.basename(log.dir) == METADATA_PARTITION_DIR == "__cluster_metadata-0"
    with open(os.path.join(log.dir, SEGMENT), "rb") as f:
        batches = list(iter_batches(f.read()))
    assert [(b.base_offset, b.partition_leader_epoch, b.is_control) for b in batches] == [
        (0, 5, True),
        (1, 5, False),
        (3, 7, True),
    ]
    assert all(b.is_valid() for b in batches)
    control = next(iter(batches[2]))
    assert bytes(control.key) == b"\x00\x00\x00\x02"  # version 0, LEADER_CHANGE
    assert control_type_of(control.key) == LEADER_CHANGE
    assert decode_leader_change(control.value).leader_id == 3
    data = list(batches[1])
    assert [(r.key, bytes(r.value)) for r in data] == [(None, b'"a"'), (None, b'"b"')]
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n2\n5 0\n7 3\n"
    with open(os.path.join(log.dir, "partition.metadata")) as f:
        assert "topic_id: AAAAAAAAAAAAAAAAAAAAAQ" in f.read()  # Uuid.METADATA_TOPIC_ID
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(
        ["dump-log", "--deep-iteration", os.path.join(log.dir, SEGMENT)]
    )
    assert dump_log(args, out, err) == 0
    lines = out.getvalue().splitlines()
    assert (
        sum("isControl: true" in line and "partitionLeaderEpoch: 7" in line for line in lines) == 1
    )
    assert sum(line.startswith("baseOffset:") for line in lines) == 3


def test_leader_change_message_bytes():
    # Version 0, LeaderId 2, Voters [1, 3] (compact array: length + 1, each
    # voter's empty tagged fields), GrantingVoters [], no tagged fields.
    assert encode_leader_change(LeaderChangeMessage(2, (1, 3))) == bytes.fromhex(
        "00000000000203000000010000000003000100"
    )


@given(st.integers(-1, 2**31 - 1), st.lists(st.integers(0, 2**31 - 1), max_size=200))
def test_leader_change_message_round_trip(leader_id, voters):
    message = LeaderChangeMessage(leader_id, tuple(voters))
    assert decode_leader_change(encode_leader_change(message)) == message


def test_snapshot_files(file_logs):
    log = file_logs()
    log.append_as_leader(["a", "b"], 1)
    data = snapshot_data([{"topic": "t"}, "b"], 1)
    snapshot_id = OffsetAndEpoch(2, 1)
    log.create_snapshot(snapshot_id, data)
    path = os.path.join(log.dir, snapshot_name(2, 1))
    assert os.path.basename(path) == "00000000000000000002-0000000001.checkpoint"
    with open(path, "rb") as f:
        assert f.read() == data == log.read_snapshot(snapshot_id)
    assert log.snapshot_records(snapshot_id) == [{"topic": "t"}, "b"]
    with pytest.raises(ValueError):
        log.create_snapshot(OffsetAndEpoch(1, 1), data[:-5])  # torn: no footer
    assert log.latest_snapshot_id() == snapshot_id
    # A crash mid-write leaves a .part file: open() removes it.
    with open(path + ".part", "wb") as f:
        f.write(data[:10])
    log = reopen(file_logs, log, clean=False)
    assert not os.path.exists(path + ".part")
    assert log.latest_snapshot_id() == snapshot_id


def test_snapshot_deletes_the_segments_below_it(file_logs):
    log = file_logs()
    log.append_as_leader(["a", "b"], 1)
    log.log.roll()
    log.append_as_leader(["c"], 1)
    log.log.roll()
    log.append_as_leader(["d"], 2)
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == [
        SEGMENT,
        "00000000000000000002.log",
        "00000000000000000003.log",
    ]
    snapshot_id = OffsetAndEpoch(3, 1)
    log.create_snapshot(snapshot_id, snapshot_data(["a", "b", "c"], 1))
    log.delete_before_snapshot(snapshot_id)
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == [
        "00000000000000000003.log"
    ]
    assert log.read(3, 10) == (Batch(3, 2, ("d",)),)


def test_open_finishes_an_install_a_crash_interrupted(file_logs):
    """install_snapshot publishes the snapshot, then replaces the log; a
    crash between the two leaves a snapshot past the log end."""
    log = file_logs()
    log.append_as_leader(["a", "b"], 1)
    log.flush()
    snapshot_id = OffsetAndEpoch(10, 3)
    write_snapshot_file(os.path.join(log.dir, snapshot_name(10, 3)), [snapshot_data(["state"], 3)])
    log = reopen(file_logs, log, clean=False)
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (10, 10, 3)
    assert log.latest_snapshot_id() == snapshot_id and all_batches(log) == ()


def test_what_removes_data_waits_for_a_running_flush(file_logs):
    """flush runs on RaftManager's I/O thread; a truncation (or snapshot
    deletion, or close) on the loop waits until it is done, so the fsync
    never meets a segment being deleted."""
    log = file_logs()
    log.append_as_leader(["a"], 1)
    log.append_as_leader(["b"], 1)
    inside, release = threading.Event(), threading.Event()
    fsync = log.log.flush

    def slow_fsync(offset=None):
        inside.set()
        assert release.wait(10)
        fsync(offset)

    log.log.flush = slow_fsync
    flusher = threading.Thread(target=log.flush, args=(2,))
    flusher.start()
    assert inside.wait(10)
    truncated = threading.Event()
    truncator = threading.Thread(target=lambda: (log.truncate_to(1), truncated.set()))
    truncator.start()
    try:
        assert not truncated.wait(0.2)  # held while the fsync runs
    finally:
        release.set()
        flusher.join(10)
        truncator.join(10)
    assert truncated.is_set() and log.end_offset == 1


# -- the Raft simulation on file logs ---------------------------------------------------------
class SimulationFileLogs(FileLogs):
    """simulation.MemoryLogs' interface over FileReplicatedLogs: a crash drops
    what was not fsynced and the file handles, and the restarted node opens
    its directory again."""

    def create(self, node_id: int) -> FileReplicatedLog:
        return self.open(f"{self.root}/node-{node_id}")

    def after_crash(self, node_id: int, log: FileReplicatedLog) -> FileReplicatedLog:
        # The machine lost power: what was not fsynced is gone.
        log.truncate_to(self.durable_end(log))
        return reopen(self, log, clean=False)

    def durable_end(self, log: FileReplicatedLog) -> int:
        return max(log._log.recovery_point, log.start_offset)

    def snapshot_data(self, applied: list, epoch: int) -> bytes:
        return snapshot_data(applied, epoch)

    def snapshot_applied(self, data: bytes) -> list:
        from kfast.raft.snapshots import snapshot_records

        return snapshot_records(data, JsonSerde.decode)


@pytest.mark.parametrize("seed", range(1, 6))
def test_simulation_on_file_logs(seed):
    """Elections, replication, crashes of the leader and of a follower (each
    restarting from its files) and snapshots, with the simulation's safety
    invariants checked after every event; at the end every node's log, read
    back from disk, holds the committed sequence."""
    logs = SimulationFileLogs()
    try:
        sim = Simulation(seed=seed, voters=3, drop_rate=0.05, snapshot_every=5, logs=logs)
        assert sim.run_until(10_000, lambda: sim.leader() is not None)
        for round_ in range(5):
            for i in range(10):
                sim.propose(f"v{round_}-{i}")
                sim.run_for(20)
            # The leader on even rounds (if there is one), else a follower.
            victim = (sim.leader() if round_ % 2 == 0 else None) or next(
                n for n in sim.alive_voters() if not n.client.is_leader
            )
            sim.crash(victim.node_id)
            sim.run_for(1_000)
            sim.restart(victim.node_id)
        sim.drop_rate = 0.0
        sim.run_until(sim.now + 20_000, lambda: sim.leader() is not None)
        offset = sim.propose("last")
        assert offset is not None
        assert sim.run_until(sim.now + 20_000, lambda: sim.all_applied(offset))
        for node in sim.nodes.values():
            log = reopen(logs, node.log, clean=True)
            assert log.start_offset > 0  # snapshots trimmed it
            for batch in log.read(log.start_offset, 1 << 30):
                if batch.next_offset <= sim.committed_end:
                    assert sim.committed[batch.base_offset] == (
                        batch.epoch,
                        batch.records,
                        batch.is_control,
                    )
    finally:
        logs.cleanup()
