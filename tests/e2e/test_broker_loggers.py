"""Logger levels from the server config (log4j.properties lines) and JSON log
lines, seen through `kfast serve`, kafka-python's admin client
(DescribeConfigs on BROKER_LOGGER) and `kfast configs`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from configs_support import kfast_configs
from e2e_support import REPO
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def logger_levels(admin) -> dict[str, str]:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1")])
    return {name: entry["value"] for name, entry in described["broker_logger"]["1"].items()}


def test_configured_levels_json_lines_and_runtime_changes(serve):
    broker = serve(
        "log4j.rootLogger=WARN, stdout",
        "log4j.logger.kfast.server=INFO",
        "log4j.logger.kfast.server.fetch_apis=DEBUG",
        "kfast.log.format=json",
    ).start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        levels = logger_levels(admin)
        assert (levels["root"], levels["kfast.server"], levels["kfast.server.fetch_apis"]) == (
            "WARN",
            "INFO",
            "DEBUG",
        )
        assert levels["kfast.controller.quorum_controller"] == "WARN"  # the root's

        # Every stderr line is one JSON object; INFO lines come from below
        # kfast.server only (the root is at WARN).
        lines = [json.loads(line) for line in broker.output]
        assert lines and all(set(line) >= {"time", "level", "logger", "message"} for line in lines)
        assert any(" ready in " in line["message"] for line in lines)
        assert {line["logger"].split(".")[1] for line in lines if line["level"] == "INFO"} == {
            "server"
        }

        # At runtime: SET, then DELETE back to the root's level.
        assert (
            kfast_configs(
                broker, "--broker-logger", "1", "--alter", "--add-config", "kfast.controller=TRACE"
            )[0]
            == 0
        )
        assert logger_levels(admin)["kfast.controller.quorum_controller"] == "TRACE"
        assert (
            kfast_configs(
                broker, "--broker-logger", "1", "--alter", "--delete-config", "kfast.controller"
            )[0]
            == 0
        )
        assert logger_levels(admin)["kfast.controller"] == "WARN"
    finally:
        admin.close()
        broker.terminate()


def test_an_unknown_level_stops_the_start(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "serve",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "log4j.logger.kfast=LOUD",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(REPO),
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert result.returncode != 0
    assert "log4j.logger.kfast" in result.stderr and "LOUD" in result.stderr
