"""CI's closing summary (.ci/slowest.py): the N slowest tests across both passes' JUnit XML,
slowest first, each named with its pass; a pass that wrote no file is left out."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def slowest_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_slowest", ROOT / ".ci" / "slowest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def junit(path: Path, times: dict[str, float]) -> Path:
    cases = "".join(f'<testcase classname="tests.api.test_x" name="{name}" time="{t}"/>'
                    for name, t in times.items())
    path.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    return path


def test_ci_names_the_slowest_tests_of_both_passes_slowest_first(tmp_path: Path) -> None:
    first = junit(tmp_path / "first.xml", {"test_a": 1.5, "test_b": 30.0, "test_c": 0.1})
    second = junit(tmp_path / "second.xml", {"test_a": 12.0, "test_d": 2.0})

    found = slowest_module().slowest(3, [first, second, tmp_path / "missing.xml"])

    assert found == [(30.0, "first", "tests.api.test_x::test_b"),
                     (12.0, "second", "tests.api.test_x::test_a"),
                     (2.0, "second", "tests.api.test_x::test_d")]
