"""The platform's layers, read from its source: which packages may import which. A reader who
follows a request downwards never has to climb back up, and no two modules import each other.

Imports are read with `ast` (every `import` in a module, at any depth, `TYPE_CHECKING` ones
included), so a layer broken inside a function body is caught too."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PLATFORM = Path(__file__).resolve().parents[2] / "platform"

# package → the packages of authoric it must never import (directly, from any of its modules)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # compiles filters and fields for a table: knows tables and types, no policy, no plans
    "query": ("policy", "plan", "records", "realtime", "http", "openapi", "console"),
    # decides on tables: uses the query compiler, never the plans built on top of it
    "policy": ("plan", "records", "realtime", "http", "openapi", "console"),
    # the tables themselves: nothing that serves them
    "catalog": ("query", "plan", "records", "realtime", "http", "openapi", "console"),
    # the live feed's transport: served over http, described by openapi
    "realtime": ("http", "openapi", "console"),
    # describes the catalog and the feed; served by http
    "openapi": ("plan", "records", "http", "console"),
    "plan": ("records", "realtime", "http", "openapi", "console"),
}


@cache
def imports() -> dict[str, frozenset[str]]:
    """Every module of authoric → the authoric modules (and names) it imports."""
    found: dict[str, frozenset[str]] = {}
    for path in (PLATFORM / "authoric").rglob("*.py"):
        name = ".".join(path.relative_to(PLATFORM).with_suffix("").parts).removesuffix(".__init__")
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        found[name] = frozenset(t for t in targets if t.startswith("authoric"))
    return found


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_from_the_layers_above_it(layer: str) -> None:
    climbs = sorted(f"{module} imports {target}"
                    for module, targets in imports().items() if package(module) == layer
                    for target in targets if package(target) in FORBIDDEN[layer])
    assert climbs == []


def test_no_two_modules_of_the_platform_import_each_other_even_through_others() -> None:
    graph = imports()
    modules = set(graph)
    edges = {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module)
    assert cycles == []


def test_the_layer_reader_sees_the_platform_it_checks() -> None:
    # a reader that found nothing would pass every rule above
    graph = imports()
    assert "authoric.query.filters" in graph["authoric.policy.decision"]
    assert "authoric.catalog.schema" in graph["authoric.query.fields"]
