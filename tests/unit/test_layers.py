"""The platform's one order of packages, read from its source and from docs/architecture.md.

Every package under platform/authoric, and every module at its top, stands on one floor of
the order that docs/architecture.md writes down ("The layers"). A module imports only from
floors below its own: never from one above (an import that climbs), never from a neighbour
on its own floor. So the packages form no loop, directly or through others, and a reader
who follows a request downwards never has to climb back up.

Imports are read with `ast`: every `import` of a module at any depth (inside functions, under
`TYPE_CHECKING`), relative ones resolved, and `"authoric.x:name"` strings (an import uvicorn
makes for us) included."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "platform"
PACKAGE = PLATFORM / "authoric"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP = "authoric"  # the package's own __init__ (its version): the lowest floor, with the base
IMPORT_STRING = re.compile(r"(authoric(?:\.\w+)+):\w+")


def floors() -> list[tuple[str, ...]]:
    """The order as docs/architecture.md writes it, lowest floor first: the fenced block after
    "The layers", one floor a line, `unit, unit   what they hold` (a list that ends in a comma
    goes on in the next line's first column)."""
    text = ARCHITECTURE.read_text()
    block = text.split("## The layers", 1)[1].split("```", 2)[1]
    found: list[str] = []
    for line in block.splitlines():
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        if found and found[-1].endswith(","):
            found[-1] += " " + names
        elif names and not line.startswith("   "):  # deeper: a description's next line
            found.append(names)
    return [tuple(n.strip() for n in names.split(",")) for names in found][::-1]


def floor_of() -> dict[str, int]:
    return {unit: level for level, units in enumerate(floors()) for unit in units}


def units() -> set[str]:
    """Every package of authoric and every module at its top (the root package as `authoric`)."""
    found = {TOP}
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            found.add(path.name)
        elif path.suffix == ".py" and path.stem != "__init__":
            found.add(path.stem)
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PLATFORM).with_suffix("").parts).removesuffix(".__init__")


def imports_of(source: str, module: str, is_package: bool = False) -> frozenset[str]:
    """The authoric names (modules, or names in them) that `source`, the text of `module`,
    imports anywhere: at its top, in a function, under `TYPE_CHECKING`, relatively, or as a
    `"authoric.x:name"` string."""
    targets: set[str] = set()
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here[:len(here) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            targets.update(m.group(1) for m in IMPORT_STRING.finditer(node.value))
    return frozenset(t for t in targets if t == TOP or t.startswith(TOP + "."))


@cache
def imports() -> dict[str, frozenset[str]]:
    """Every module of authoric → the authoric modules (and names) it imports."""
    return {module_name(path): imports_of(path.read_text(), module_name(path),
                                          path.name == "__init__.py")
            for path in PACKAGE.rglob("*.py")}


def unit_of(name: str) -> str:
    """The package or top module a dotted name belongs to (`authoric.x` where x is neither, as
    `from authoric import __version__`, is the root package's)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in units() else TOP


def test_every_package_and_top_module_stands_on_exactly_one_floor_of_the_written_order() -> None:
    written = [unit for floor in floors() for unit in floor]
    assert sorted(u for u in set(written) if written.count(u) > 1) == []
    assert sorted(units() - set(written)) == [], "a package with no place in docs/architecture.md"
    assert sorted(set(written) - units()) == [], "docs/architecture.md names a package that is gone"


def test_no_module_imports_from_its_own_floor_s_neighbours_or_from_a_floor_above() -> None:
    level = floor_of()
    climbs = sorted(f"{module} imports {target}"
                    for module, targets in imports().items()
                    for target in targets
                    if unit_of(target) != unit_of(module)
                    and level[unit_of(target)] >= level[unit_of(module)])
    assert climbs == []


def cycles_of(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return cycles


def test_no_two_packages_import_each_other_even_through_others() -> None:
    edges: dict[str, set[str]] = {unit: set() for unit in units()}
    for module, targets in imports().items():
        edges[unit_of(module)].update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    assert cycles_of(edges) == []


def test_no_two_modules_of_the_platform_import_each_other_even_through_others() -> None:
    graph = imports()
    modules = set(graph)
    edges = {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}
    assert cycles_of(edges) == []


def callers_by_module() -> dict[str, set[str]]:
    """Every class of the platform that `execute` (records.pipeline) can be handed as its
    caller, by module: a class that says whether it runs `at_once` or gives a `transaction`,
    or that derives from one."""
    classes: dict[str, tuple[str, ast.ClassDef]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (module_name(path), node)

    def declares_a_caller(node: ast.ClassDef) -> bool:
        for item in node.body:
            if isinstance(item, ast.Assign | ast.AnnAssign):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                if any(isinstance(t, ast.Name) and t.id == "at_once" for t in targets):
                    return True
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) \
                    and item.name == "transaction":
                return True
        return False

    callers = {name for name, (_, node) in classes.items() if declares_a_caller(node)}
    while True:
        more = {name for name, (_, node) in classes.items() if name not in callers
                and any(isinstance(b, ast.Name) and b.id in callers for b in node.bases)}
        if not more:
            break
        callers |= more
    found: dict[str, set[str]] = {}
    for name in callers:
        found.setdefault(classes[name][0], set()).add(name)
    return found


def test_every_caller_execute_runs_stands_below_the_routes_so_it_never_calls_up_into_http() -> None:
    # `execute` asks its caller for a transaction: a caller defined in http/ would be a call
    # back up into the routes that no import shows.
    level = floor_of()
    found = callers_by_module()
    above = sorted(f"{module}: {sorted(names)}" for module, names in found.items()
                   if level[unit_of(module)] >= level["http"])
    assert above == []
    every = {name for names in found.values() for name in names}
    assert {"Caller", "InTransaction", "Fresh", "Guarded", "Operator"} <= every


def test_the_import_reader_sees_deferred_type_checking_relative_and_string_imports() -> None:
    source = '''
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from authoric.plan.plan import Plan
def later():
    import authoric.http.edge
    from . import sibling
    return "authoric.app:app_from_env"
'''
    assert imports_of(source, "authoric.catalog.schema") == {
        "authoric.plan.plan", "authoric.plan.plan.Plan", "authoric.http.edge",
        "authoric.catalog", "authoric.catalog.sibling", "authoric.app"}


def test_the_layer_reader_sees_the_platform_it_checks() -> None:
    # a reader that found nothing would pass every rule above
    graph = imports()
    assert "authoric.query.filters" in graph["authoric.policy.decision"]
    assert "authoric.catalog.schema" in graph["authoric.query.fields"]
    assert "authoric.catalog.origins" in graph["authoric.http.cors"]  # inside a function
    assert "authoric.app" in graph["authoric.cli"]  # uvicorn's factory string
    assert len(floors()) > 5 and "http" in floor_of() and "db" in floor_of()


def test_a_climbing_import_is_seen_as_one() -> None:
    # the rule above would pass an order that put everything on one floor: it does not
    level = floor_of()
    assert level["db"] < level["catalog"] < level["plan"] < level["records"] < level["http"]
    assert unit_of("authoric.db.tables") == "db" and unit_of("authoric.__version__") == TOP
