"""Secrets and logs (issue 10, item 6): the server refuses weak secrets from the environment,
and a failed SQL statement is logged without the values it carried.

Callers: an operator starting `authoric serve` with a short secret, and a member whose write
fails inside PostgreSQL in a way the server does not expect.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scenario import AppWorld, expect
from tests.servers import ADMIN_TOKEN, ServerProcess, free_port
from tests.sse import db_fetch


def _serve(database_url: str, data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`authoric serve` with `env`; it is expected to exit by itself."""
    full = {**os.environ, "DATABASE_URL": database_url, "AUTHORIC_DATA_DIR": str(data_dir),
            "AUTHORIC_ADMIN_TOKEN": ADMIN_TOKEN, **env}
    return subprocess.run(
        [sys.executable, "-m", "authoric.cli", "serve", "--port", str(free_port())],
        env=full, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("AUTHORIC_JWT_SECRET", "x" * 31, "at least 32 bytes"),
    ("AUTHORIC_JWT_SECRET", "changeme", "at least 32 bytes"),
    ("AUTHORIC_ADMIN_TOKEN", "y" * 23, "at least 24 characters"),
    ("AUTHORIC_ADMIN_TOKEN", "admin", "at least 24 characters"),
])
def test_operator_starting_with_a_short_secret_gets_a_clear_refusal_and_a_failed_exit(
        database_url: str, tmp_path: Path, variable: str, value: str, says: str) -> None:
    done = _serve(database_url, tmp_path, **{variable: value})
    assert done.returncode != 0
    assert variable in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert value not in done.stdout + done.stderr  # the refused secret is not echoed


def test_failed_statement_is_logged_without_the_row_values(
        world: AppWorld, server: ServerProcess, database_url: str) -> None:
    # A trigger an operator added by hand raises an error the server does not translate
    # (SQLSTATE P0001), so the server answers 500 and logs the failed statement.
    created = world.table("notes", [{"name": "body", "type": "text"}])
    db_fetch(database_url, "CREATE OR REPLACE FUNCTION public.refuse_notes() RETURNS trigger "
             "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the operator trigger'; "
             "END $$")
    db_fetch(database_url, f"CREATE TRIGGER refuse BEFORE INSERT ON {created['sqlName']} "
             "FOR EACH ROW EXECUTE FUNCTION public.refuse_notes()")
    org = world.org("North")
    world.role("writer", ["notes:*"])
    member = world.caller(org, ["writer"])
    marker = "SECRET" + secrets.token_urlsafe(60)
    before = len(server.log())
    response = member.post(world.rows("notes"), json={"body": marker})
    expect(response, 500, "INTERNAL")
    logged = server.log()[before:]
    assert "refused by the operator trigger" in logged, logged[:2000]  # the failure is logged...
    assert marker[:40] not in logged  # ...without the value that caused it
    assert "SECRET" not in logged
