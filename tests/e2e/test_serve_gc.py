"""``kfast serve`` takes its start-up heap out of the garbage collector's
walks once the broker has started (kfast.server.gc_tuning): a generation-2
collection over that heap stalled the event loop 30-45 ms with 1,000
client connections (bench/README.md, "Latency (issue 21 item 3)").

The broker runs in a child process (freezing is process-wide: pytest's own
heap stays out of it), started by kfast.tools.serve.serve as the command
does, and stopped with SIGTERM."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from e2e_support import REPO, free_port

from kfast.server.gc_tuning import GEN0_THRESHOLD

pytestmark = pytest.mark.e2e

CHILD = textwrap.dedent(
    """
    import asyncio, gc, json, os, signal, sys, time
    from kfast.tools.serve import build_config, serve

    before = (gc.get_freeze_count(), gc.get_threshold())

    async def main():
        config = build_config(None, sys.argv[1:])
        broker = asyncio.ensure_future(serve(config))
        deadline = time.monotonic() + 30
        # Nothing announces the freeze: poll it, bounded, while serve runs.
        while not gc.get_freeze_count() and not broker.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = (gc.get_freeze_count(), gc.get_threshold())
        # A collection now walks only what was allocated since the freeze.
        started = time.perf_counter()
        gc.collect()
        full_ms = (time.perf_counter() - started) * 1000
        os.kill(os.getpid(), signal.SIGTERM)
        status = await asyncio.wait_for(broker, 60)
        print(json.dumps({"before": before, "after": after, "status": status,
                          "objects": len(gc.get_objects()), "full_ms": full_ms}))

    asyncio.run(main())
    """
)


def test_serve_freezes_the_startup_heap_and_raises_the_young_threshold(tmp_path):
    port = free_port()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            f"log.dirs={tmp_path}/data",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["before"][0] == 0  # nothing frozen until the broker started
    assert result["before"][1][0] < GEN0_THRESHOLD
    frozen, threshold = result["after"]
    # The broker's modules, schemas and metadata image: tens of thousands of
    # objects, none of them walked by a collection again.
    assert frozen > 20_000, result
    assert frozen > result["objects"], result
    assert threshold[0] == GEN0_THRESHOLD
    assert result["status"] == 0
