"""kfast metadata-quorum add-controller / remove-controller read what
kafka-metadata-quorum.sh reads and print its lines; describe --status prints
directory ids and endpoints as Kafka 4.x does (the wire exchange is covered
by tests/e2e/test_dynamic_quorum.py)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from kfast.cli import main
from kfast.storage.meta_properties import MetaProperties, uuid_base64, write_meta_properties
from kfast.tools.metadata_quorum import _status

DIRECTORY = uuid.UUID("32f0f1cd-599c-46c6-93cf-7ddb52e454e8")


def controller_config(tmp_path, extra=""):
    data = tmp_path / "data"
    data.mkdir()
    write_meta_properties(
        str(data), MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 4, uuid_base64(DIRECTORY))
    )
    config = tmp_path / "controller.properties"
    config.write_text(
        f"process.roles=controller\nnode.id=4\nlog.dirs={data}\n"
        f"listeners=CONTROLLER://:9096\ncontroller.listener.names=CONTROLLER\n"
        f"{extra}"
    )
    return config


def test_add_controller_dry_run_reads_the_joining_controller(tmp_path, capsys):
    config = controller_config(tmp_path, "advertised.listeners=CONTROLLER://[::1]:9196\n")
    status = main(
        [
            "metadata-quorum",
            "--bootstrap-controller",
            "127.0.0.1:1",
            "--command-config",
            str(config),
            "add-controller",
            "--dry-run",
        ]
    )
    assert status == 0
    assert capsys.readouterr().out.strip() == (
        f"DRY RUN of adding controller 4 with directory id {uuid_base64(DIRECTORY)} and "
        f"endpoints: CONTROLLER://[::1]:9196"
    )


def test_add_controller_refuses_what_is_not_a_controller(tmp_path, capsys):
    config = tmp_path / "broker.properties"
    config.write_text("process.roles=broker\nnode.id=7\nlog.dirs=/nowhere\n")
    status = main(
        [
            "metadata-quorum",
            "--bootstrap-controller",
            "127.0.0.1:1",
            "--command-config",
            str(config),
            "add-controller",
        ]
    )
    assert status == 1 and "did not contain 'controller'" in capsys.readouterr().err
    status = main(["metadata-quorum", "--bootstrap-controller", "127.0.0.1:1", "add-controller"])
    assert status == 1 and "You must supply the configuration file" in capsys.readouterr().err


def test_remove_controller_dry_run_and_a_bad_directory_id(capsys):
    base = [
        "metadata-quorum",
        "--bootstrap-controller",
        "127.0.0.1:1",
        "remove-controller",
        "--controller-id",
        "2",
    ]
    assert main(base + ["--controller-directory-id", uuid_base64(DIRECTORY), "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"DRY RUN of removing  KRaft controller 2 with directory id {uuid_base64(DIRECTORY)}"
    )
    assert main(base + ["--controller-directory-id", "nope"]) == 1
    assert "Failed to parse --controller-directory-id" in capsys.readouterr().err


def test_status_lists_directory_ids_and_endpoints_as_kafka_4():
    def replica(node_id, directory, end):
        return SimpleNamespace(
            replica_id=node_id,
            replica_directory_id=directory,
            log_end_offset=end,
            last_caught_up_timestamp=5,
        )

    quorum = SimpleNamespace(
        leader_id=1,
        leader_epoch=3,
        high_watermark=10,
        current_voters=[replica(1, DIRECTORY, 10), replica(2, uuid.UUID(int=0), 9)],
        observers=[replica(7, DIRECTORY, 8)],
    )
    text = _status("cid", quorum, {1: ["CONTROLLER://h:9093"]})
    lines = dict(line.split(":", 1) for line in text.splitlines())
    assert lines["CurrentVoters"].strip() == (
        f'[{{"id": 1, "directoryId": "{uuid_base64(DIRECTORY)}", "endpoints": '
        f'["CONTROLLER://h:9093"]}}, {{"id": 2, "directoryId": null}}]'
    )
    assert (
        lines["CurrentObservers"].strip()
        == f'[{{"id": 7, "directoryId": "{uuid_base64(DIRECTORY)}"}}]'
    )
    assert lines["MaxFollowerLag"].strip() == "1"
