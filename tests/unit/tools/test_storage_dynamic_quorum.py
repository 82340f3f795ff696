"""kfast storage format for KIP-853 dynamic quorums (--standalone,
--initial-controllers, --no-initial-controllers) writes what kafka-storage.sh
writes, and kfast dump-log prints the bootstrap checkpoint as kafka-dump-log.sh."""

from __future__ import annotations

import io
import os
import re

from kfast.cli import build_parser, main
from kfast.raft.snapshots import read_snapshot_file, snapshot_kraft_records
from kfast.raft.voter_set import KRaftVersionRecord
from kfast.storage.meta_properties import read_meta_properties, uuid_base64
from kfast.tools.dump_log import run

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
CHECKPOINT = os.path.join("__cluster_metadata-0", "00000000000000000000-0000000000.checkpoint")


def write_config(tmp_path, node_id=1, port=9093, extra=""):
    data = tmp_path / f"node-{node_id}"
    config = tmp_path / f"server-{node_id}.properties"
    config.write_text(
        f"process.roles=controller\nnode.id={node_id}\n"
        f"listeners=CONTROLLER://:{port}\ncontroller.listener.names=CONTROLLER\n"
        f"controller.quorum.bootstrap.servers=localhost:9093\n"
        f"log.dirs={data}\n{extra}"
    )
    return config, data


def storage(capsys, *argv):
    status = main(["storage", "format", "--cluster-id", CLUSTER_ID, *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_standalone_writes_the_bootstrap_checkpoint_with_this_controller_alone(tmp_path, capsys):
    config, data = write_config(tmp_path, node_id=1, port=9093)
    status, out, _ = storage(capsys, "--config", str(config), "--standalone")
    assert status == 0 and f"Formatting {data}" in out
    meta = read_meta_properties(str(data))
    assert meta.node_id == 1 and meta.cluster_id == CLUSTER_ID
    with open(data / CHECKPOINT, "rb") as f:
        kraft = snapshot_kraft_records(f.read())
    assert kraft[0] == KRaftVersionRecord(1)
    [voter] = kraft[1].voters.nodes
    # The voter is this node, at its controller listener (an unnamed host is
    # published as localhost), with the directory id of its metadata dir.
    assert (voter.voter_id, uuid_base64(voter.directory_id)) == (1, meta.directory_id)
    assert voter.endpoints[0] == ("CONTROLLER", "localhost", 9093)
    assert (voter.min_kraft_version, voter.max_kraft_version) == (0, 1)
    assert read_snapshot_file(str(data / CHECKPOINT), bytes) == []

    args = build_parser().parse_args(["dump-log", "--deep-iteration", str(data / CHECKPOINT)])
    out = io.StringIO()
    assert run(args, out, io.StringIO()) == 0
    text = out.getvalue()
    assert "Snapshot end offset: 0, epoch: 0" in text
    assert ' KRaftVersion {"version":0,"kRaftVersion":1}' in text
    assert (
        ' KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"'
        f'{meta.directory_id}","endpoints":[{{"name":"CONTROLLER","host":"localhost",'
        f'"port":9093}}],"kRaftVersionFeature":{{"minSupportedVersion":0,'
        f'"maxSupportedVersion":1}}}}]}}'
    ) in text
    assert re.search(r"\| offset: 0 .* SnapshotHeader", text)
    assert re.search(r"\| offset: 3 .* SnapshotFooter", text)


def test_initial_controllers_give_each_voter_its_directory_id(tmp_path, capsys):
    ids = {1: "4znU-ou9Taa06bmEJxsjnw", 2: "b-DwmhtOheTqZzPoh52kfA", 3: "g42deArWBTRM5A1yuVpMCg"}
    voters = ",".join(f"{n}@localhost:{9092 + n}:{d}" for n, d in ids.items())
    datas = {}
    for node_id in ids:
        config, data = write_config(tmp_path, node_id, 9092 + node_id)
        assert storage(capsys, "--config", str(config), "--initial-controllers", voters)[0] == 0
        datas[node_id] = data
    for node_id, data in datas.items():
        assert read_meta_properties(str(data)).directory_id == ids[node_id]
        with open(data / CHECKPOINT, "rb") as f:
            kraft = snapshot_kraft_records(f.read())
        assert kraft[1].voters.ids == (1, 2, 3)
        assert [uuid_base64(n.directory_id) for n in kraft[1].voters.nodes] == list(ids.values())


def test_a_dynamic_controller_must_say_how_it_joins(tmp_path, capsys):
    config, data = write_config(tmp_path, node_id=4)
    status, _, err = storage(capsys, "--config", str(config))
    assert status == 1 and "--no-initial-controllers" in err
    assert not data.exists()
    status, _, _ = storage(capsys, "--config", str(config), "--no-initial-controllers")
    assert status == 0 and read_meta_properties(str(data)).node_id == 4
    assert not (data / CHECKPOINT).exists()


def test_standalone_refuses_a_broker_and_bad_voter_strings(tmp_path, capsys):
    broker = tmp_path / "broker.properties"
    broker.write_text(
        f"process.roles=broker\nnode.id=9\nlog.dirs={tmp_path}/b\n"
        f"controller.listener.names=CONTROLLER\n"
    )
    status, _, err = storage(capsys, "--config", str(broker), "--standalone")
    assert status == 1 and "only use --standalone on a controller" in err
    config, _ = write_config(tmp_path, node_id=1)
    status, _, err = storage(
        capsys, "--config", str(config), "--initial-controllers", "1@localhost:9093"
    )
    assert status == 1 and "No colon following port" in err
