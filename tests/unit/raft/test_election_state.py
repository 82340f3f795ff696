"""The quorum-state file in Kafka's format (QuorumStateData as one JSON line)."""

from __future__ import annotations

import json

import pytest

from kfast.raft.election_state import (
    QUORUM_STATE_FILE,
    ElectionState,
    FileQuorumStateStore,
    QuorumStateCorruptException,
)


def test_static_quorum_writes_data_version_0(tmp_path):
    store = FileQuorumStateStore(str(tmp_path), voters=(3, 1, 2))
    assert store.read() is None
    store.write(ElectionState(epoch=7, leader_id=2, voted_id=2))
    text = (tmp_path / QUORUM_STATE_FILE).read_text()
    assert "\n" not in text
    assert json.loads(text) == {
        "clusterId": "",
        "leaderId": 2,
        "leaderEpoch": 7,
        "votedId": 2,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert store.read() == ElectionState(7, 2, 2)


def test_dynamic_quorum_writes_data_version_1(tmp_path):
    store = FileQuorumStateStore(str(tmp_path))
    store.write(ElectionState(epoch=3, voted_id=5))
    data = json.loads((tmp_path / QUORUM_STATE_FILE).read_text())
    assert data == {
        "leaderId": -1,
        "leaderEpoch": 3,
        "votedId": 5,
        "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
        "data_version": 1,
    }
    assert store.read() == ElectionState(3, -1, 5)


def test_reads_a_file_kafka_wrote(tmp_path):
    # As Kafka 3.x's FileQuorumStateStore writes it for a static quorum.
    (tmp_path / QUORUM_STATE_FILE).write_text(
        '{"clusterId":"","leaderId":1,"leaderEpoch":12,"votedId":-1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert FileQuorumStateStore(str(tmp_path)).read() == ElectionState(12, 1, -1)


@pytest.mark.parametrize("text", ["", "{", '{"leaderEpoch": 1}', '{"data_version": 9}'])
def test_a_damaged_file_stops_the_node(tmp_path, text):
    (tmp_path / QUORUM_STATE_FILE).write_text(text)
    with pytest.raises(QuorumStateCorruptException, match="quorum-state"):
        FileQuorumStateStore(str(tmp_path)).read()


def test_the_file_lives_in_the_metadata_partition_dir_and_an_old_one_moves_in(tmp_path):
    """Kafka keeps quorum-state in __cluster_metadata-0; kfast's older file
    beside that directory is moved in with the vote it holds."""
    partition_dir = tmp_path / "__cluster_metadata-0"
    partition_dir.mkdir()
    FileQuorumStateStore(str(tmp_path), voters=(1,)).write(ElectionState(7, 1, 1))
    store = FileQuorumStateStore.in_partition_dir(str(tmp_path), str(partition_dir), voters=(1,))
    assert store.path == str(partition_dir / QUORUM_STATE_FILE)
    assert not (tmp_path / QUORUM_STATE_FILE).exists()
    assert store.read() == ElectionState(7, 1, 1)
    # A file already in place wins over a stray old one.
    FileQuorumStateStore(str(tmp_path), voters=(1,)).write(ElectionState(3, -1, -1))
    again = FileQuorumStateStore.in_partition_dir(str(tmp_path), str(partition_dir), voters=(1,))
    assert again.read() == ElectionState(7, 1, 1)
