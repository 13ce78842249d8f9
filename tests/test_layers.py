"""The house's shape: imports point down the layers, and no module imports its way into a circle.

Read from the source with `ast` alone. Every import counts: top-level, inside a function (a lazy
import still ties two modules) and under `TYPE_CHECKING`. A module may import modules of its own
layer or of a lower one; within a layer, the import graph must have no circle either.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "omp"

# Lowest first. A module belongs to the longest prefix listed here.
LAYERS: list[tuple[str, ...]] = [
    ("omp", "omp.errors", "omp.clock", "omp.ids", "omp.textsafe", "omp.invocation",
     "omp.procs", "omp.demo_shell", "omp.identity"),
    ("omp.store",),
    ("omp.tmux",),
    ("omp.agents", "omp.skills", "omp.workspace", "omp.usage", "omp.notify"),
    ("omp.record",),
    ("omp.stophook",),
    ("omp.modes",),
    ("omp.tasks",),
    ("omp.mail",),
    ("omp.conversations",),
    ("omp.backlog",),
    ("omp.monitor",),
    ("omp.team",),
    ("omp.views",),
    ("omp.api",),
    ("omp.doctor", "omp.demo_agent"),
    # the board is an entry point like the CLI: `omp team board` starts it (cli -> board), and
    # it renders events as `omp team events` does (board -> cli.events_cmd)
    ("omp.cli", "omp.__main__", "omp.board"),
]  # fmt: skip


def module_names() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_names()


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            hit = module == prefix or module.startswith(prefix + ".")
            if hit and len(prefix) > best_len and (prefix != "omp" or module == "omp"):
                best, best_len = index, len(prefix)
    return best


@functools.cache
def _parsed(path: Path) -> ast.Module:
    # Both checks below read every module: parse each once per process (~0.5 s of the suite).
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """(imported omp module, line) for every import in `module`, wherever it stands."""
    path = MODULES[module]
    tree = _parsed(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in MODULES:
                    yield child, node.lineno
                elif base in MODULES and base != module:
                    yield base, node.lineno


def graph() -> dict[str, set[str]]:
    return {m: {dep for dep, _ in imports_of(m) if dep != m} for m in MODULES}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_import_circle() -> None:
    assert circles(graph()) == []


def test_imports_point_down() -> None:
    upward = [
        f"{module}:{line} imports {dep} (layer {layer_of(dep)} > {layer_of(module)})"
        for module in sorted(MODULES)
        for dep, line in imports_of(module)
        if layer_of(dep) > layer_of(module)
    ]
    assert upward == []


def test_every_package_says_what_it_owns_and_imports() -> None:
    for init in ROOT.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if init.parent == ROOT:
            continue
        assert doc, f"{init} has no docstring"


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_circle_finder_finds_circles(
    edges: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert circles(edges) == expected


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("omp.store.fs") < layer_of("omp.mail.mailbox")
    assert layer_of("omp.cli.hook_stop") > layer_of("omp.modes") > layer_of("omp.stophook.memory")
