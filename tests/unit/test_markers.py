"""The suite's marks say what a test is (pyproject.toml registers them):
every module under tests/e2e runs a real broker or client and carries
``pytest.mark.e2e`` in a module-level ``pytestmark``; every module under
tests/spark carries ``pytest.mark.spark``; unit tests carry no e2e mark, so
``pytest tests/unit -m "not e2e and not slow"`` is the whole fast suite.
(That every mark is registered, --strict-markers in pyproject.toml checks.)

The modules are read with ast, not imported: a module that forgot its mark
is found without starting a broker or a JVM.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def _module_marks(path: Path) -> set[str]:
    """Names of the ``pytest.mark.<name>`` in the module's ``pytestmark``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    marks: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            for sub in ast.walk(node.value):
                name = _mark_name(sub)
                if name:
                    marks.add(name)
    return marks


def _mark_name(node: ast.AST) -> str | None:
    # pytest.mark.<name>, also when called: pytest.mark.<name>(...)
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "pytest"
    ):
        return node.attr
    return None


def _test_modules(folder: str) -> list[Path]:
    return sorted((TESTS / folder).rglob("test_*.py"))


def test_the_marks_are_read_from_pytestmark(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text(
        "import pytest\n"
        "pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]\n"
        "@pytest.mark.slow\n"
        "def test_x():\n    pass\n"
    )
    assert _module_marks(module) == {"e2e", "timeout"}
    module.write_text("import pytest\n\ndef test_x():\n    pass\n")
    assert _module_marks(module) == set()


@pytest.mark.parametrize("folder, mark", [("e2e", "e2e"), ("spark", "spark")])
def test_every_module_carries_its_folder_mark(folder, mark):
    modules = _test_modules(folder)
    assert modules, f"no test modules under tests/{folder}"
    unmarked = [str(p.relative_to(TESTS)) for p in modules if mark not in _module_marks(p)]
    assert not unmarked, f"add pytestmark = pytest.mark.{mark} to: {unmarked}"


def test_unit_tests_carry_no_e2e_mark():
    marked = [
        str(p.relative_to(TESTS))
        for p in _test_modules("unit")
        if any(
            _mark_name(node) == "e2e" for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        )
    ]
    assert not marked, f"unit tests marked e2e (move them to tests/e2e): {marked}"


def test_test_folders_are_packages_exactly_under_unit():
    # tests/unit is a package tree: its modules import their helpers
    # relatively and share base names (raft/test_log.py, storage/test_log.py).
    # tests/e2e, tests/spark and tests/packaging are flat folders whose
    # helpers are imported by top-level name, and some of whose files run as
    # scripts of their own (e2e/eos_worker.py, packaging/smoke.py).
    unit_folders = [TESTS / "unit"] + [
        p for p in (TESTS / "unit").rglob("*") if p.is_dir() and any(p.glob("*.py"))
    ]
    not_packages = [
        str(p.relative_to(TESTS)) for p in unit_folders if not (p / "__init__.py").exists()
    ]
    assert not not_packages, f"add an __init__.py to: {not_packages}"
    flat = [
        name for name in ("e2e", "spark", "packaging") if (TESTS / name / "__init__.py").exists()
    ]
    assert not flat, f"these folders are flat, not packages: {flat}"
