"""The wheel a user installs, end to end.

Once per session (the build is the expensive part: about 80 s of compiling on
two cores): the source tree is copied to a temporary directory, the sdist is
built from the copy, the wheel is built from the sdist unpacked into a clean
directory (a kernel source missing from MANIFEST.in fails here), and
auditwheel repairs it to a manylinux tag, as `make wheel` does. The wheel is
then installed into a fresh venv whose PATH has no C compiler (and CC=/bin/false),
with ``--only-binary :all:``, so nothing can be compiled during the install,
and exercised there from outside the source tree: tests/packaging/smoke.py
(`kfast serve`, `kfast produce`/`kfast consume`, the columnar decoder on the
segment file) and the ``kfast_broker`` pytest fixture.

Nothing is built in the working tree: its in-place kernels (`make build`) may
be loaded by other test runs.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = Path(__file__).with_name("smoke.py")

# Bounds, so a hung build or broker fails the session instead of stalling it:
# the build takes ~80 s alone on two cores; ten times that on a loaded machine
# is still a failure worth reporting rather than waiting for.
BUILD_TIMEOUT = 900
INSTALL_TIMEOUT = 300
RUN_TIMEOUT = 240

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.timeout(BUILD_TIMEOUT + INSTALL_TIMEOUT + RUN_TIMEOUT),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="auditwheel repairs Linux wheels only"
    ),
]

# Copied source trees leave these out: build outputs of the working tree
# (in-place kernels, generated C and Cython's annotated .html, egg-info) and
# caches. The console's .html page is a source, so .html goes only in _ext.
_IGNORED_ANYWHERE = shutil.ignore_patterns(
    ".git",
    "__pycache__",
    "*.so",
    "*.c",
    "build",
    "dist",
    "wheelhouse",
    "*.egg-info",
    ".eggs",
    ".pytest_cache",
    ".hypothesis",
    ".benchmarks",
    "kfast-data",
)


def IGNORED(directory: str, names: list[str]) -> set[str]:
    ignored = set(_IGNORED_ANYWHERE(directory, names))
    if Path(directory).name == "_ext":
        ignored |= {name for name in names if name.endswith(".html")}
    return ignored


KERNEL_SOURCE_SUFFIXES = (".pyx", ".pxd", ".pxi", ".h", ".pyi")
CONSOLE_ASSETS = tuple(
    f"kfast/tools/console_web/static/{name}" for name in ("index.html", "app.js", "style.css")
)
# PEP 561 (issue 15 item 7): kfast is typed, so the marker and every stub ship
# in the sdist and the wheel (a missing stub would make the types lie).
TYPING_FILES = ("kfast/py.typed",) + tuple(
    sorted(str(p.relative_to(REPO)) for p in (REPO / "kfast").rglob("*.pyi"))
)
COMPILERS = ("cc", "gcc", "clang", "c99", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")


def run_bounded(argv, *, timeout: float, log: Path, **kwargs) -> None:
    """Run ``argv`` with its output in ``log``; on timeout kill its whole
    process group (a build spawns pip and compilers, smoke.py a broker)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(a) for a in argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **kwargs,
        )
        try:
            status = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = None
    if status != 0:
        tail = log.read_text(errors="replace")[-4000:]
        what = "timed out" if status is None else f"exited {status}"
        raise AssertionError(f"{' '.join(map(str, argv))} {what}:\n{tail}")


def source_files() -> list[str]:
    """Files of the working tree a fresh clone plus local edits would have."""
    try:
        listed = (
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(REPO),
                    "ls-files",
                    "-z",
                    "--cached",
                    "--others",
                    "--exclude-standard",
                ],
                capture_output=True,
                check=True,
                timeout=60,
            )
            .stdout.decode()
            .split("\0")
        )
    except (OSError, subprocess.CalledProcessError):
        return []
    return [name for name in listed if name and (REPO / name).is_file()]


def copy_sources(dest: Path) -> None:
    files = source_files()
    if not files:  # not a git checkout: the tree minus build outputs and caches
        shutil.copytree(REPO, dest, ignore=IGNORED)
        return
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)


@dataclass
class Artifacts:
    sdist: Path
    wheel: Path
    build_seconds: float


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    missing = [m for m in ("build", "auditwheel") if importlib.util.find_spec(m) is None]
    assert not missing, f"{missing} not installed: pip install -e '.[test]'"
    root = tmp_path_factory.mktemp("kfast-wheel")
    try:
        source, dist, raw = root / "source", root / "dist", root / "raw"
        copy_sources(source)
        started = time.monotonic()
        run_bounded(
            [sys.executable, "-m", "build", "--sdist", "--outdir", dist, source],
            timeout=BUILD_TIMEOUT,
            log=root / "sdist.log",
        )
        (sdist,) = dist.glob("kfast-*.tar.gz")
        with tarfile.open(sdist) as archive:
            # filter="data" where this Python has it (3.10.12+): no links out.
            extract = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(root / "unpacked", **extract)
        (unpacked,) = (root / "unpacked").iterdir()
        run_bounded(
            [sys.executable, "-m", "build", "--wheel", "--outdir", raw, unpacked],
            timeout=BUILD_TIMEOUT,
            log=root / "wheel.log",
        )
        (raw_wheel,) = raw.glob("kfast-*.whl")
        run_bounded(
            [sys.executable, "-m", "auditwheel", "repair", "--strip", "-w", dist, raw_wheel],
            timeout=INSTALL_TIMEOUT,
            log=root / "auditwheel.log",
        )
        (wheel,) = dist.glob("kfast-*.whl")
        yield Artifacts(sdist, wheel, time.monotonic() - started)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def no_compiler_env(venv: Path) -> dict[str, str]:
    """The environment of everything run in the venv: its bin/ alone on PATH
    (no cc, gcc or clang reachable), CC/CXX that fail, and none of the
    variables that would point Python or pytest back at the source tree."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "PYTEST_", "PIP_REQUIRE_VIRTUALENV"))
        and key not in ("VIRTUAL_ENV", "CFLAGS", "LDSHARED", "LDFLAGS", "CPPFLAGS")
    }
    env.update(
        PATH=str(venv / "bin"),
        VIRTUAL_ENV=str(venv),
        CC="/bin/false",
        CXX="/bin/false",
        PYTHONNOUSERSITE="1",
    )
    return env


@dataclass
class WheelVenv:
    root: Path
    python: Path
    site_packages: str
    env: dict[str, str]
    install_seconds: float


@pytest.fixture(scope="session")
def wheel_venv(artifacts, tmp_path_factory):
    root = tmp_path_factory.mktemp("kfast-venv")
    try:
        venv = root / "venv"
        started = time.monotonic()
        run_bounded(
            [sys.executable, "-m", "venv", venv], timeout=INSTALL_TIMEOUT, log=root / "venv.log"
        )
        env = no_compiler_env(venv)
        python = venv / "bin" / "python"
        # pytest and confluent-kafka for the fixture test, pyarrow for the
        # decoder's Arrow output (what the Spark source hands to Spark); all
        # from the same index the project installs them from, as wheels only.
        run_bounded(
            [
                python,
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                "--only-binary",
                ":all:",
                artifacts.wheel,
                "pytest",
                "confluent-kafka",
                "pyarrow",
            ],
            timeout=INSTALL_TIMEOUT,
            log=root / "pip.log",
            env=env,
            cwd=root,
        )
        site_packages = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        yield WheelVenv(root, python, site_packages, env, time.monotonic() - started)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def expected_kernels() -> set[str]:
    return {path.stem for path in (REPO / "kfast" / "_ext").glob("*.pyx")}


def load_smoke():
    spec = importlib.util.spec_from_file_location("kfast_packaging_smoke", SMOKE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sdist_ships_every_kernel_source_and_no_generated_code(artifacts):
    with tarfile.open(artifacts.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    kernel_sources = {
        f"kfast/_ext/{path.name}"
        for path in (REPO / "kfast" / "_ext").iterdir()
        if path.suffix in KERNEL_SOURCE_SUFFIXES
    }
    assert {f"kfast/_ext/{name}.pyx" for name in expected_kernels()} <= kernel_sources
    assert kernel_sources - names == set()
    # Generated C and built kernels belong to one machine; the sdist rebuilds them.
    assert [n for n in names if n.endswith((".c", ".so"))] == []
    for needed in (
        "pyproject.toml",
        "setup.py",
        "MANIFEST.in",
        "README.md",
        "spark/kfast_spark/__init__.py",
        *CONSOLE_ASSETS,
        *TYPING_FILES,
    ):
        assert needed in names


def test_wheel_is_manylinux_and_ships_every_kernel_compiled(artifacts):
    python_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert re.fullmatch(
        rf"kfast-[^-]+-{python_tag}-{python_tag}-manylinux.*_{os.uname().machine}\.whl",
        artifacts.wheel.name,
    ), artifacts.wheel.name
    with zipfile.ZipFile(artifacts.wheel) as wheel:
        names = set(wheel.namelist())
        (entry_points_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser()
        entry_points.read_string(wheel.read(entry_points_name).decode())
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert {f"kfast/_ext/{name}{suffix}" for name in expected_kernels()} <= names
    # The Spark data sources and the pytest plugin are part of the wheel.
    assert {
        "kfast_spark/__init__.py",
        "kfast_spark/segments.py",
        "kfast/testing/plugin.py",
    } <= names
    assert set(CONSOLE_ASSETS) <= names  # kfast console's page, script and styles
    assert set(TYPING_FILES) <= names  # PEP 561: py.typed and every .pyi
    assert entry_points["console_scripts"]["kfast"] == "kfast.cli:main"
    assert entry_points["pytest11"]["kfast"] == "kfast.testing.plugin"
    assert [n for n in names if n.endswith((".c", ".pyx"))] == []
    print(
        f"\nbuild (sdist, wheel from sdist, auditwheel): {artifacts.build_seconds:.0f} s; "
        f"wheel {artifacts.wheel.name} {artifacts.wheel.stat().st_size / 1e6:.2f} MB"
    )


def test_venv_has_no_c_compiler(wheel_venv):
    path = wheel_venv.env["PATH"]
    assert {name: shutil.which(name, path=path) for name in COMPILERS} == dict.fromkeys(COMPILERS)
    assert wheel_venv.env["CC"] == "/bin/false"


def test_installed_wheel_serves_produces_consumes_and_decodes_segments(wheel_venv):
    smoke = load_smoke()
    started = time.monotonic()
    log = wheel_venv.root / "smoke.log"
    stdout = wheel_venv.root / "smoke.json"
    with open(stdout, "w") as out, open(log, "w") as err:
        # cwd outside the source tree: only the installed kfast can be imported.
        proc = subprocess.Popen(
            [wheel_venv.python, SMOKE],
            stdout=out,
            stderr=err,
            env=wheel_venv.env,
            cwd=wheel_venv.root,
            start_new_session=True,
        )
        try:
            status = proc.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = None
    assert status == 0, f"smoke.py {status}:\n{log.read_text()[-4000:]}"
    report = json.loads(stdout.read_text().splitlines()[-1])

    assert report["kfast"].startswith(wheel_venv.site_packages)
    assert set(report["extensions"]) == expected_kernels()
    assert all(path.startswith(wheel_venv.site_packages) for path in report["extensions"].values())
    assert report["consumed"] == smoke.RECORDS
    assert report["serve_exit_status"] == 0
    segment = report["segment"]
    assert segment["values"] == smoke.RECORDS
    assert segment["offsets"] == list(range(len(smoke.RECORDS)))
    assert segment["arrow_values"] == smoke.RECORDS  # pyarrow is installed in the venv
    from kfast.records import COMPRESSION_ZSTD

    assert segment["compression"] == [COMPRESSION_ZSTD]  # cramjam came with the wheel
    print(
        f"\nvenv + install: {wheel_venv.install_seconds:.0f} s; "
        f"smoke: {time.monotonic() - started:.1f} s (ready in {report['ready_seconds']} s)"
    )


FIXTURE_TEST = """
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import kfast


def test_roundtrip(kfast_broker):
    assert kfast.__file__.startswith({site_packages!r}), kfast.__file__
    producer = Producer({{"bootstrap.servers": kfast_broker.bootstrap_servers}})
    for i in range(10):
        producer.produce("fixture", value=b"%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({{"bootstrap.servers": kfast_broker.bootstrap_servers,
                         "group.id": "unused", "enable.auto.commit": False}})
    consumer.assign([TopicPartition("fixture", 0, OFFSET_BEGINNING)])
    values = []
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 10:
            break
    consumer.close()
    assert values == [b"%d" % i for i in range(10)]
"""


def test_kfast_broker_fixture_from_the_installed_wheel(wheel_venv):
    project = wheel_venv.root / "fixture-project"
    project.mkdir()
    # An ini file of its own pins pytest's rootdir here, away from the repo's.
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_from_wheel.py").write_text(
        FIXTURE_TEST.format(site_packages=wheel_venv.site_packages)
    )
    # Its own basetemp: the default one sweeps earlier runs' numbered dirs.
    result = subprocess.run(
        [
            wheel_venv.python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(wheel_venv.root / "fixture-tmp"),
        ],
        cwd=project,
        env=wheel_venv.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
