"""`authoric typegen`'s generator, in-process: the app's OpenAPI document (built by the server's
own code) in, TypeScript and Python row types out; the Python types checked by mypy, where
a wrong column name or value type must fail and correct use must pass."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.schema import compile_table
from authoric.catalog.snapshot import AppSnapshot
from authoric.openapi.document import app_openapi
from authoric.typegen import pascal, render_py, render_ts

APP = uuid.UUID(int=1)
FIXTURE = Path(__file__).parent / "typegen_fixture"
TABLES: list[dict[str, Any]] = [
    {"name": "invoices", "columns": [
        {"name": "number", "type": "text", "required": True, "unique": True},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "amount", "type": "numeric"},
        {"name": "status", "type": "select", "options": ["draft", "paid"]},
    ]},
    {"name": "vendors", "columns": [
        {"name": "name", "type": "text", "required": True},
        {"name": "rating", "type": "integer"},
        {"name": "active", "type": "boolean", "required": True, "default": True},
        {"name": "meta", "type": "json"},
        {"name": "since", "type": "date"},
        {"name": "seen_at", "type": "timestamp"},
        {"name": "ref", "type": "uuid"},
    ]},
]


def acme_openapi() -> dict[str, Any]:
    metadata = MetaData()
    compiled = {d["name"]: compile_table(APP, TableDef.model_validate(d), metadata) for d in TABLES}
    return app_openapi(AppSnapshot(APP, "acme", 1, {}, compiled, {}, build_enforcer({})))


def test_typescript_types_are_the_shape_agreed_with_the_typescript_client() -> None:
    lines = render_ts(acme_openapi(), "acme").splitlines()
    assert lines[-3:] == [
        'export interface InvoicesRow { uid: string; number: string; vendor_uid: string | null; '
        'amount: string | null; status: "draft" | "paid" | null; createdAt: string; '
        'updatedAt: string }',
        "export interface VendorsRow { uid: string; name: string; rating: number | null; "
        "active: boolean | null; meta: unknown; since: string | null; seen_at: string | null; "
        "ref: string | null; createdAt: string; updatedAt: string }",
        "export interface AcmeTables { invoices: InvoicesRow; vendors: VendorsRow }",
    ]
    assert all(line.startswith("//") for line in lines[:-3])


def test_an_app_without_tables_gets_an_empty_tables_interface() -> None:
    doc = app_openapi(AppSnapshot(APP, "bare", 1, {}, {}, {}, build_enforcer({})))
    assert render_ts(doc, "bare").splitlines()[-1] == "export interface BareTables {}"
    assert "class BareTables(Protocol):" in render_py(doc, "bare")


@pytest.mark.parametrize(("name", "pascal_name"), [
    ("invoices", "Invoices"), ("line_items", "LineItems"), ("app_0a1b", "App0a1b"), ("x", "X"),
])
def test_names_become_pascal_case_type_names(name: str, pascal_name: str) -> None:
    assert pascal(name) == pascal_name


def test_python_types_are_typed_dicts_and_protocols_typing_each_table() -> None:
    text = render_py(acme_openapi(), "acme")
    compile(text, "acme_types.py", "exec")
    assert '"status": Literal["draft", "paid"] | None,' in text
    assert '"number": Required[str],' in text  # a create must carry it
    assert '"vendor_uid": str | None,' in text
    assert '"meta": Any,' in text
    assert "class AcmeTables(Protocol):" in text and "class AsyncAcmeTables(Protocol):" in text
    assert ('def __call__(self, name: Literal["invoices"], /) -> '
            "Table[InvoicesRow, InvoicesNew, InvoicesPatch, InvoicesFilter, InvoicesOrder]: ...") in text
    assert '"amount": str | int | float | None | NumberOps,' in text  # a filter on a numeric
    assert 'InvoicesOrder = Literal["uid", "-uid", "number", "-number",' in text


def test_mypy_passes_correct_use_and_fails_each_deliberate_error(tmp_path: Path) -> None:
    (tmp_path / "acme_types.py").write_text(render_py(acme_openapi(), "acme"))
    for name in ("correct.py", "wrong.py"):
        (tmp_path / name).write_text((FIXTURE / name).read_text())
    checked = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                              "--config-file", "/dev/null", "correct.py", "wrong.py",
                              "acme_types.py"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    wrong = (FIXTURE / "wrong.py").read_text().splitlines()
    marked = [n for n, line in enumerate(wrong, 1) if "# deliberate error" in line]
    errors = [line.split(":") for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1 and {file for file, *_ in errors} == {"wrong.py"}, checked.stdout
    assert sorted({int(line) for _, line, *_ in errors}) == marked, checked.stdout
    assert len(marked) == 7, "each wrong call is its own line"
