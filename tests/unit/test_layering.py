"""Imports between frazil's packages point one way: no package imports one that imports it
back, however indirectly (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import frazil

_ROOT = Path(frazil.__file__).parent


def _package_imports() -> dict[str, set[str]]:
    """Package (or top-level module) → the frazil packages and modules it imports."""
    edges: dict[str, set[str]] = {}
    for path in _ROOT.rglob("*.py"):
        parts = path.relative_to(_ROOT).parts
        package = parts[0] if len(parts) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "frazil":
                    names = [alias.name for alias in node.names]
                elif node.module.startswith("frazil."):
                    names = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[1] for a in node.names if a.name.startswith("frazil.")]
            edges.setdefault(package, set()).update(n for n in names if n != package)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found = []

    def walk(path: list[str]) -> None:
        for target in sorted(edges.get(path[-1], ())):
            if target == path[0]:
                found.append([*path, target])
            elif target not in path and target > path[0]:
                walk([*path, target])

    for start in sorted(edges):
        walk([start])
    return found


def test_no_package_imports_one_that_imports_it_back() -> None:
    assert _cycles(_package_imports()) == []


def test_the_stages_and_progress_never_import_the_engine_or_the_command() -> None:
    edges = _package_imports()
    for package in ("config", "source", "decode", "transform", "route", "sink", "progress"):
        assert not edges.get(package, set()) & {"engine", "cli", "observe", "maintenance"}, package
    for package in ("observe", "maintenance", "jvm"):
        assert "engine" not in edges.get(package, set()), package


def test_a_cycle_is_found() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
