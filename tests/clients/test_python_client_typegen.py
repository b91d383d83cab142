"""`authoric typegen` against a running server: an app developer generates row types for
TypeScript and Python, and uses the Python ones with the client."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from authoric_client import Client
from tests.clients.python_client_world import shop
from tests.scenario import AppWorld
from tests.servers import ServerProcess

from authoric.cli import main


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def typegen(server: ServerProcess, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """`authoric typegen --url <server> ARGS` as the command line runs it (in this process)."""

    def run(*args: str, token: str | None = None) -> Ran:
        monkeypatch.setenv("AUTHORIC_ADMIN_TOKEN", token or server.admin_token)
        code = main(["typegen", "--url", server.url, *args])
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def test_typegen_prints_typescript_row_types_of_the_apps_tables(
        typegen: Callable[..., Ran], world: AppWorld) -> None:
    shop(world)
    world.table("tasks", [{"name": "state", "type": "select", "options": ["todo", "done"],
                           "required": True}])
    done = typegen("--app", world.name, "--lang", "ts")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "export interface VendorsRow { uid: string; name: string; createdAt: string; " \
           "updatedAt: string }" in lines
    assert 'export interface TasksRow { uid: string; state: "todo" | "done"; createdAt: string; ' \
           "updatedAt: string }" in lines
    assert ("export interface InvoicesRow { uid: string; number: string; vendor_uid: string | null; "
            "status: string | null; amount: string | null; seq: number | null; due: string | null; "
            "createdAt: string; updatedAt: string }") in lines
    app_type = "".join(part.capitalize() for part in world.name.split("_"))
    assert lines[-1] == (f"export interface {app_type}Tables {{ invoices: InvoicesRow; "
                         "tasks: TasksRow; vendors: VendorsRow }")


def test_typegen_writes_python_types_a_client_uses_at_run_time(
        typegen: Callable[..., Ran], server: ServerProcess, world: AppWorld, tmp_path: Path) -> None:
    acme = shop(world)
    out = tmp_path / "acme_types.py"
    done = typegen("--app", world.name, "--lang", "py", "--out", str(out))
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("acme_types", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tables: Any = getattr(module, "".join(p.capitalize() for p in world.name.split("_")) + "Tables")
    with Client[tables](server.url, world.name) as db:
        db.auth.sign_in(acme.email, acme.password)
        row = db.table("invoices").create(module.InvoicesNew(number="T-1", seq=3))
        assert row["seq"] == 3 and set(row) == set(module.InvoicesRow.__annotations__) - {"expand"}


def test_typegen_says_why_when_the_app_is_unknown_or_the_token_wrong(
        typegen: Callable[..., Ran], world: AppWorld) -> None:
    unknown = typegen("--app", "no_such_app", "--lang", "ts")
    assert unknown.returncode == 1 and "404" in unknown.stderr and not unknown.stdout
    refused = typegen("--app", world.name, "--lang", "py", token="x" * 32)
    assert refused.returncode == 1 and "401" in refused.stderr and "UNAUTHENTICATED" in refused.stderr
