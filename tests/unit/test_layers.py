"""The layer rule of docs/architecture.md on kfast's import graph: no layer imports one
above it.

Every module under kfast/ is parsed (Python with ast; the Cython kernels'
.pyx/.pxd/.pxi by their import lines) and each kfast import it makes,
at module level or inside a function, is checked against LAYERS.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import kfast

PACKAGE_DIR = Path(kfast.__file__).parent

# Lowest first. A module may import its own layer and the layers below it.
# A module belongs to the longest name listed that is it or a package above
# it; the name "kfast" stands for the package's own __init__ only.
LAYERS: tuple[tuple[str, ...], ...] = (
    # Leaves: the version, the configuration (with Kafka's broker config
    # catalogue), the Kafka error codes (which every layer raises, the
    # Cython kernels included).
    ("kfast", "kfast.config", "kfast.kafka_broker_configs", "kfast.protocol.errors"),
    # The compression codecs (they raise CorruptRecordException & co).
    ("kfast.compression",),
    # Cython kernels: they decompress record batches and raise the errors.
    ("kfast._ext",),
    # Wire schemas and the public record-batch API, both over the kernels.
    ("kfast.protocol", "kfast.records"),
    # Principals, authentication and the authorizer's ACL store: fed by the
    # metadata publishers above (as Kafka's StandardAuthorizer), importing none.
    # With them, the counters and histograms hot paths update in place and
    # the OTLP decoder of pushed client telemetry (kfast.metrics): leaves too.
    ("kfast.security", "kfast.metrics"),
    # Kafka's server-common: the timer and the purgatory of delayed operations.
    ("kfast.server_common",),
    ("kfast.storage",),
    ("kfast.client",),
    # Kafka's raft module: below the metadata it replicates.
    ("kfast.raft",),
    ("kfast.controller",),
    ("kfast.coordinator",),
    ("kfast.server",),
    # Entry points.
    ("kfast.tools", "kfast.testing", "kfast.cli", "kfast.__main__"),
)

# Imports allowed despite the rule: (importer, imported) -> why. None today:
# the one back arrow found (coordinator -> server purgatory) was removed.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Cython's import lines: `from kfast.x cimport a, b`, `from kfast.x import (a,
# b)` over several lines, `cimport kfast.x`, `import kfast.x`.
_CYTHON_FROM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+(kfast[\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n#]+)", re.MULTILINE
)
_CYTHON_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+(kfast[\w.]*)", re.MULTILINE)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _is_module(name: str) -> bool:
    path = PACKAGE_DIR.parent.joinpath(*name.split("."))
    return path.is_dir() or any(path.with_suffix(s).exists() for s in (".py", ".pyx", ".pxd"))


def _targets(base: str, names: list[str]) -> set[str]:
    """``from base import a, b``: the submodules named, and base itself if
    some name is not a submodule (a class, a function, a constant)."""
    found = {f"{base}.{n}" for n in names if _is_module(f"{base}.{n}")}
    return found if names and len(found) == len(names) else found | {base}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _python_imports(path: Path, module: str) -> set[str]:
    tree = _tree(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    imported: set[str] = set()
    for node in ast.walk(tree):  # every level: function-local imports count too
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            imported |= _targets(base, [alias.name for alias in node.names])
    return imported


def _cython_imports(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    imported = {match.group(1) for match in _CYTHON_IMPORT.finditer(text)}
    for base, names in _CYTHON_FROM_IMPORT.findall(text):
        names = [n.split(" as ")[0].strip() for n in names.strip("()").split(",")]
        imported |= _targets(base, [n for n in names if n])
    return imported


@functools.cache  # built once per worker: the tests below only read it
def import_graph() -> dict[str, set[str]]:
    """{module: the kfast modules it imports}, for every module under kfast/."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.suffix == ".py":
            imported = _python_imports(path, _module_name(path))
        elif path.suffix in (".pyx", ".pxd", ".pxi"):
            imported = _cython_imports(path)
        else:
            continue
        graph.setdefault(_module_name(path), set()).update(
            name for name in imported if name == "kfast" or name.startswith("kfast.")
        )
    return graph


def layer_of(module: str) -> int | None:
    best, rank = "", None
    for index, names in enumerate(LAYERS):
        for name in names:
            matches = module == name or (name != "kfast" and module.startswith(name + "."))
            if matches and len(name) > len(best):
                best, rank = name, index
    return rank


def violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) of every import of a higher layer. Modules in
    no layer are left to test_every_module_is_placed_in_a_layer."""
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            below, above = layer_of(module), layer_of(target)
            if (
                below is not None
                and above is not None
                and above > below
                and (module, target) not in KNOWN_EXCEPTIONS
            ):
                found.append((module, target))
    return found


def test_every_module_is_placed_in_a_layer():
    graph = import_graph()
    names = set(graph) | {target for imported in graph.values() for target in imported}
    unplaced = sorted(name for name in names if layer_of(name) is None)
    assert unplaced == [], "add these to LAYERS in tests/unit/test_layers.py"


def test_no_layer_imports_a_layer_above_it():
    found = violations(import_graph())
    assert found == [], "\n".join(
        f"{module} ({LAYERS[layer_of(module)][0]} layer) imports {target} "
        f"({LAYERS[layer_of(target)][0]} layer)"
        for module, target in found
    )


def test_known_exceptions_are_still_needed():
    graph = import_graph()
    stale = [pair for pair in KNOWN_EXCEPTIONS if pair[1] not in graph.get(pair[0], ())]
    assert stale == []


def test_the_graph_sees_module_level_function_level_and_cython_imports():
    graph = import_graph()
    # module level, and `from package import submodule`
    assert "kfast.coordinator.group.runtime" in graph["kfast.server.broker"]
    assert "kfast.protocol.errors" in graph["kfast.server.group_apis"]
    # inside a function (KafkaBroker._new_controller)
    assert "kfast.server.embedded_controller" in graph["kfast.server.broker"]
    # a Cython kernel: cimport and import
    assert {"kfast._ext.crc32c", "kfast.protocol.errors", "kfast.compression"} <= graph[
        "kfast._ext.batch"
    ]


def test_an_upward_import_is_reported_and_a_downward_one_is_not():
    graph = {
        "kfast.coordinator.group.delayed": {
            "kfast.server.purgatory",
            "kfast.server_common.purgatory",
        },
        "kfast.server.broker": {"kfast.coordinator.group.runtime"},
        "kfast.storage.log": {"kfast._ext.log_append", "kfast.client.admin"},
    }
    assert violations(graph) == [
        ("kfast.coordinator.group.delayed", "kfast.server.purgatory"),
        ("kfast.storage.log", "kfast.client.admin"),
    ]


def test_kfast_never_imports_the_spark_data_source():
    importers = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "kfast_spark" for name in names):
                importers.append(_module_name(path))
    assert importers == []
