"""kcat (Debian's, librdkafka 2.0.2) against kfast."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
    pytest.mark.timeout(60),
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def kcat(broker, *args, input_text=None, timeout=30):
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(broker, topic, acks, codec):
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    kcat(broker, "-P", "-t", topic, "-K", ":", "-z", codec, "-X", f"acks={acks}", input_text=lines)
    out = kcat(
        broker,
        "-C",
        "-t",
        topic,
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-c",
        "20",
        "-f",
        "%o %k %s\n",
    )
    assert out.splitlines() == [f"{i} k{i} v{i}" for i in range(20)]


def test_offsets_metadata_and_tail(broker, topic):
    kcat(broker, "-P", "-t", topic, input_text="a\nb\nc\n")
    # From an offset relative to the end, and from a timestamp.
    assert kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "-1", "-e").splitlines() == ["c"]
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "s@0", "-e", "-f", "%o\n")
    assert out.splitlines() == ["0", "1", "2"]
    metadata = json.loads(kcat(broker, "-L", "-t", topic, "-J"))
    (entry,) = metadata["topics"]
    assert entry["topic"] == topic and [p["partition"] for p in entry["partitions"]] == [0]
    assert metadata["brokers"][0]["id"] == broker.broker.node_id
    # List offsets: kcat -Q by timestamp (-1 = end).
    out = kcat(broker, "-Q", "-t", f"{topic}:0:-1")
    assert f"{topic} [0] offset 3" in out


def test_idempotent_produce(broker, topic):
    lines = "".join(f"m{i}\n" for i in range(50))
    kcat(broker, "-P", "-t", topic, "-X", "enable.idempotence=true", "-z", "zstd", input_text=lines)
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n")
    assert out.splitlines() == [f"{i} m{i}" for i in range(50)]
