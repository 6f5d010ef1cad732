"""Imports between frazil's modules point one way too, but for the format registry's circle:
each format module registers itself with :mod:`frazil.decode.registry`, which imports them
all once to fill itself. Imports inside functions count; type-only imports do not."""

from __future__ import annotations

import ast
from pathlib import Path

import frazil

_ROOT = Path(frazil.__file__).parent
#: The one circle allowed: the registry and the formats it loads (and their helpers).
_REGISTRY = "frazil.decode.registry"


def _module(path: Path) -> str:
    return "frazil." + ".".join(path.relative_to(_ROOT).with_suffix("").parts).removesuffix(
        ".__init__"
    )


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """The module's nodes outside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def _module_imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in _ROOT.rglob("*.py"):
        found = edges.setdefault(_module(path), set())
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith("frazil"):
                    continue
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    as_file = _ROOT / (full.removeprefix("frazil.").replace(".", "/") + ".py")
                    found.add(full if as_file.exists() else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("frazil."))
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back_but_the_format_registry() -> None:
    edges = _module_imports()
    # Without the registry's own import of the formats, nothing in decode goes round.
    edges[_REGISTRY] = set()
    assert _circles(edges) == []


def test_a_circle_is_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
