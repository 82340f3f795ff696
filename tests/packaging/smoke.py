"""Smoke check of an installed kfast (a wheel), run by the installed Python.

    python tests/packaging/smoke.py

It must run from outside the source checkout: it checks the kfast it
imports, and nothing in the checkout may stand in for the installed files.
cibuildwheel runs it as its test-command on every wheel it builds
(pyproject.toml [tool.cibuildwheel]); tests/packaging/test_wheel.py runs it
in a fresh venv with no C compiler. Standard library and kfast only
(pyarrow is used when installed).

Checks, each failing with an AssertionError naming what broke:
  1. every module in kfast._ext is a compiled extension and imports;
  2. the ``kfast`` console script runs ``kfast serve`` on a free port until
     it reports ready;
  3. ``kfast topics create``, ``kfast produce`` (zstd: the compression
     library came with the wheel's dependencies) and ``kfast consume``
     round-trip records through it;
  4. SIGTERM stops the broker with status 0;
  5. the columnar decoder (what the Spark segments source reads with)
     decodes the partition's segment file to the records produced, and to a
     pyarrow RecordBatch when pyarrow is installed.
On success the last line of stdout is a JSON report the pytest wrapper
asserts on.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import pkgutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

from kfast.testing.ports import free_port

TOPIC = "smoke"
RECORDS = [f"record-{i}" for i in range(50)]
# Every step has a deadline, so a hung broker or client fails the check
# instead of hanging the CI job.
READY_TIMEOUT = 60.0
COMMAND_TIMEOUT = 60.0


# layout.py is layout.pxd's Python twin (constants only): pure by design.
PURE_PYTHON_EXT_MODULES = {"layout"}


def compiled_kernels() -> dict[str, str]:
    """kfast._ext module name -> the file it was imported from."""
    import kfast._ext

    found = {}
    for info in pkgutil.iter_modules(kfast._ext.__path__):
        module = importlib.import_module(f"kfast._ext.{info.name}")
        if info.name not in PURE_PYTHON_EXT_MODULES:
            found[info.name] = module.__file__
    assert found, "kfast._ext has no modules"
    not_compiled = {
        name: path
        for name, path in found.items()
        if not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    }
    assert not not_compiled, f"kfast._ext modules that are not compiled extensions: {not_compiled}"
    return found


def kfast_script() -> str:
    """The console script the wheel's entry point installed, in the running
    interpreter's environment (so `kfast` means this install, whatever PATH
    says)."""
    name = "kfast.exe" if os.name == "nt" else "kfast"
    path = os.path.join(sysconfig.get_path("scripts"), name)
    assert os.path.isfile(path), f"the wheel installed no `kfast` console script at {path}"
    return path


def run(*argv: str, stdin: str = "") -> str:
    result = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )
    assert result.returncode == 0, (
        f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


class Serve:
    """``kfast serve`` as a subprocess, ready when it logs " ready in "."""

    def __init__(self, kfast: str, port: int, data_dir: str):
        self.output: list[str] = []
        self.proc = subprocess.Popen(
            [
                kfast,
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={data_dir}",
                "--override",
                "num.partitions=1",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.output.append(line)
            if " ready in " in line:
                self.ready.set()

    def wait_ready(self) -> float:
        started = time.monotonic()
        if not self.ready.wait(READY_TIMEOUT):
            raise AssertionError("kfast serve did not report ready:\n" + "".join(self.output))
        return time.monotonic() - started

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(COMMAND_TIMEOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def decode_segment(segment: str) -> dict:
    from kfast.records import decode_columnar

    with open(segment, "rb") as f:
        buffer = f.read()
    columns = decode_columnar(buffer)
    decoded = {
        "values": [columns.value(i).decode() for i in range(len(columns))],
        "offsets": columns.offsets.tolist(),
        "compression": sorted({batch.compression for batch in columns.batches}),
    }
    try:
        import pyarrow  # noqa: F401  (optional: the Spark path's output type)
    except ImportError:
        decoded["arrow_values"] = None
    else:
        batch = decode_columnar(buffer, arrow=True)
        decoded["arrow_values"] = [v.decode() for v in batch.column("value").to_pylist()]
    return decoded


def main() -> dict:
    import kfast

    report = {"kfast": kfast.__file__, "extensions": compiled_kernels()}
    kfast_cli = kfast_script()
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="kfast-smoke-") as tmp:
        data_dir = os.path.join(tmp, "data")
        serve = Serve(kfast_cli, port, data_dir)
        try:
            report["ready_seconds"] = round(serve.wait_ready(), 3)
            run(
                kfast_cli,
                "topics",
                "create",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--partitions",
                "1",
            )
            run(
                kfast_cli,
                "produce",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--compression",
                "zstd",
                stdin="".join(f"{r}\n" for r in RECORDS),
            )
            consumed = run(
                kfast_cli,
                "consume",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--from-beginning",
                "--max-messages",
                str(len(RECORDS)),
                "--timeout-ms",
                "20000",
            ).splitlines()
            assert consumed == RECORDS, f"kfast consume printed {consumed!r}"
            report["consumed"] = consumed
            report["serve_exit_status"] = status = serve.terminate()
            assert status == 0, "kfast serve exited %d on SIGTERM:\n%s" % (
                status,
                "".join(serve.output),
            )
        finally:
            serve.kill()
        segment = os.path.join(data_dir, f"{TOPIC}-0", "00000000000000000000.log")
        report["segment"] = decoded = decode_segment(segment)
        assert decoded["values"] == RECORDS, f"the columnar decoder read {decoded['values']!r}"
        assert decoded["arrow_values"] in (None, RECORDS), decoded["arrow_values"]
    return report


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    # `python tests/packaging/smoke.py` puts this folder first on sys.path; no
    # kfast lives here, but drop it so only the installed package can answer.
    if sys.path and os.path.abspath(sys.path[0]) == here:
        del sys.path[0]
    print(json.dumps(main()))
