"""No module of conveyor imports itself back, not even lazily (an import inside a
function) or for type checking only (under ``if TYPE_CHECKING:``): the module graph is
read from the source with ``ast``, every import counted, and must have no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import conveyor

SOURCE = Path(conveyor.__file__).parent


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module under ``root`` (the directory of ``package``) by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules that module ``name`` imports anywhere in its source: at the
    top, inside functions and under ``if TYPE_CHECKING:`` alike. ``from p import m``
    counts as importing ``p.m`` when that is a module, else ``p``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                child = f"{source}.{alias.name}"
                targets.add(child if child in known else source)
    return {t for t in targets if t in known and t != name}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = module_names(root, package)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as ``[a, b, …, a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_conveyor_has_no_import_cycle() -> None:
    graph = import_graph(SOURCE, "conveyor")
    assert "conveyor.app" in graph and "conveyor.errors" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("b_source", "kind"),
    [
        ("import pkg.a\n", "top-level"),
        ("def f():\n    from pkg import a\n", "lazy, from the package"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import X\n", "typing"),
        ("from .. import a\n", "relative, a module"),
    ],
)
def test_the_graph_sees_every_kind_of_import(tmp_path: Path, b_source: str, kind: str) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "", "a.py": "from pkg.sub.b import thing\nX = 1\n",
         "sub/__init__.py": "", "sub/b.py": b_source + "thing = 1\n"},
    )  # fmt: skip
    graph = import_graph(root, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.a"}, kind
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_relative_imports_resolve_from_a_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "", "sub/__init__.py": "from ..c import y\n",
         "c.py": "from .sub import z\n", "d.py": "from .sub import e\n", "sub/e.py": ""},
    )  # fmt: skip
    graph = import_graph(root, "pkg")
    assert graph["pkg.sub"] == {"pkg.c"}
    assert graph["pkg.c"] == {"pkg.sub"}
    assert graph["pkg.d"] == {"pkg.sub.e"}
    assert find_cycle(graph) == ["pkg.c", "pkg.sub", "pkg.c"]


def test_a_graph_without_cycles_passes(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"__init__.py": "from pkg import a, b\n", "a.py": "import pkg.b\n",
         "b.py": "import json\n"},
    )  # fmt: skip
    graph = import_graph(root, "pkg")
    assert graph == {"pkg": {"pkg.a", "pkg.b"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert find_cycle(graph) is None
