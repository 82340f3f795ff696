"""The classes a stub or a TYPE_CHECKING block declares, read from its AST:
what the stub tests compare with the classes built at run time."""

from __future__ import annotations

import ast


def declared_attributes(body: list[ast.stmt]) -> dict[str, list[str]]:
    """qualified class name (nested classes as ``Outer.Inner``) -> its
    annotated attributes, in order, for every class in ``body``."""
    found: dict[str, list[str]] = {}

    def walk(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                name = prefix + node.name
                found[name] = [
                    n.target.id
                    for n in node.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                ]
                walk(node.body, name + ".")

    walk(body, "")
    return found
