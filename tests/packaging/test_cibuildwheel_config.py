"""pyproject.toml's [tool.cibuildwheel] builds what a user of a compiled
Python package expects to find on PyPI. cibuildwheel needs Docker (Linux) or
a Mac to run, so its selectors are evaluated here the way it evaluates them:
fnmatch of `build` and `skip` patterns against build identifiers."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
PYTHONS = ("cp310", "cp311", "cp312", "cp313")
PLATFORMS = {
    "linux": ["manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64", "musllinux_aarch64"],
    "macos": ["macosx_x86_64", "macosx_arm64"],
}
ARCHS = {"linux": {"x86_64", "aarch64"}, "macos": {"x86_64", "arm64"}}


@pytest.fixture(scope="module")
def config():
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["cibuildwheel"]


def patterns(value) -> list[str]:
    return value.split() if isinstance(value, str) else [p for item in value for p in item.split()]


def selected(config, identifier: str) -> bool:
    build = patterns(config.get("build", "*"))
    skip = patterns(config.get("skip", ""))
    return any(fnmatch.fnmatch(identifier, p) for p in build) and not any(
        fnmatch.fnmatch(identifier, p) for p in skip
    )


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_every_expected_cpython_and_platform_is_built(config, platform):
    expected = [f"{python}-{tag}" for python in PYTHONS for tag in PLATFORMS[platform]]
    assert [identifier for identifier in expected if not selected(config, identifier)] == []
    # cibuildwheel builds only the archs listed (its default is the runner's own).
    assert ARCHS[platform] <= set(config[platform]["archs"])


def test_old_pythons_and_pypy_are_not_built(config):
    # requires-python is >=3.10; PyPy is not a target of the Cython kernels.
    for identifier in ("cp39-manylinux_x86_64", "pp310-manylinux_x86_64"):
        assert not selected(config, identifier)


def test_every_wheel_is_smoke_tested_from_files_that_exist(config):
    sources = config["test-sources"]
    assert sources and all((REPO / path).is_file() for path in sources)
    # The test command runs in a temporary directory holding only test-sources.
    assert any(source in config["test-command"] for source in sources)
    assert "{project}" not in config["test-command"]
