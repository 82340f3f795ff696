"""``kfast features`` (kafka-features.sh) against a broker: describe prints
Kafka's line per feature; upgrade / downgrade / disable send UpdateFeatures
with Kafka's upgrade types, print the tool's line per feature and exit 1
when one fails; a new producer then runs the transaction version set."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kfast.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture
def features(capsys):
    """Run ``kfast features -b BROKER ARGS`` in this process (the command's
    own code; a subprocess per call would only add interpreter starts)."""

    def run(broker, *args):
        capsys.readouterr()
        status = main(["features", "-b", broker.bootstrap_servers, *args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=status, stdout=out, stderr=err)

    return run


def described(features, broker) -> dict[str, str]:
    result = features(broker, "describe")
    assert result.returncode == 0, result.stderr
    lines = {}
    for line in result.stdout.splitlines():
        fields = dict(field.split(": ", 1) for field in line.split("\t"))
        lines[fields.pop("Feature")] = fields
    return lines


def test_describe_upgrade_downgrade_and_disable(kfast_broker, features):
    found = described(features, kfast_broker)
    # Sorted by name, as kafka-features.sh prints them; kraft.version 0: the
    # embedded node is a static quorum of one voter.
    assert list(found) == ["kraft.version", "metadata.version", "transaction.version"]
    kraft = found["kraft.version"]
    assert (
        kraft["SupportedMinVersion"],
        kraft["SupportedMaxVersion"],
        kraft["FinalizedVersionLevel"],
    ) == ("0", "1", "0")
    assert {k: v for k, v in found["metadata.version"].items() if k != "Epoch"} == {
        "SupportedMinVersion": "3.9-IV0",
        "SupportedMaxVersion": "3.9-IV0",
        "FinalizedVersionLevel": "3.9-IV0",
    }
    transaction = found["transaction.version"]
    assert (
        transaction["SupportedMinVersion"],
        transaction["SupportedMaxVersion"],
        transaction["FinalizedVersionLevel"],
    ) == ("0", "2", "2")
    epoch = int(transaction["Epoch"])

    too_high = features(kfast_broker, "upgrade", "--feature", "transaction.version=3")
    assert too_high.returncode == 1
    assert too_high.stdout.startswith("Could not upgrade transaction.version to 3. ")
    assert too_high.stderr.strip() == "1 out of 1 operation(s) failed."
    dry = features(kfast_broker, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "transaction.version can be downgraded to 1.\n")
    assert described(features, kfast_broker)["transaction.version"]["FinalizedVersionLevel"] == "2"
    # Lowering with the upgrade type is refused by the controller.
    assert features(kfast_broker, "upgrade", "--feature", "transaction.version=1").returncode == 1

    disabled = features(kfast_broker, "disable", "--feature", "transaction.version")
    assert (disabled.returncode, disabled.stdout) == (0, "transaction.version was disabled.\n")
    after = described(features, kfast_broker)["transaction.version"]
    assert after["FinalizedVersionLevel"] == "0" and int(after["Epoch"]) > epoch
    raised = features(kfast_broker, "upgrade", "--feature", "transaction.version=2")
    assert (raised.returncode, raised.stdout) == (0, "transaction.version was upgraded to 2.\n")
    assert described(features, kfast_broker)["transaction.version"]["FinalizedVersionLevel"] == "2"
