"""Platform migrations on a fresh database: upgrade from empty, downgrade to base, and back.

Each test makes its own database on the test server (like `tests/conftest.py` does) so that a
downgrade never touches the database the rest of the suite runs on.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.db import migrate
from authoric.db.engine import async_url
from authoric.db.tables import SCHEMA, metadata
from tests.api.test_security_round_four import wait_ready
from tests.scenario import AppWorld, Caller, expect
from tests.servers import start_server


def _run(url: str, query: str, *args: Any) -> list[Any]:
    async def go() -> list[Any]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(go())


@pytest.fixture
def fresh_url(database_url: str) -> Iterator[str]:
    """A new, empty database on the same server as the suite's, dropped afterwards."""
    name = f"authoric_mig_{uuid.uuid4().hex[:12]}"
    _run(database_url, f'CREATE DATABASE "{name}"')
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    yield url
    _run(database_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
    _run(database_url, f'DROP DATABASE IF EXISTS "{name}"')


def _platform_tables(url: str) -> set[str]:
    rows = _run(url, "SELECT tablename FROM pg_tables WHERE schemaname = $1", SCHEMA)
    return {r["tablename"] for r in rows} - {"alembic_version"}


def _app_schemas(url: str) -> set[str]:
    rows = _run(url, r"SELECT nspname FROM pg_namespace WHERE nspname LIKE 'app\_%'")
    return {r["nspname"] for r in rows}


def _current_revision(url: str) -> str | None:
    if not _run(url, "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = "
                     "'alembic_version'", SCHEMA):
        return None
    rows = _run(url, f'SELECT version_num FROM "{SCHEMA}".alembic_version')
    return rows[0]["version_num"] if rows else None


def _head() -> str:
    head = ScriptDirectory.from_config(migrate.alembic_config("postgresql://unused")).get_current_head()
    assert head is not None
    return head


def _cli(url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "AUTHORIC_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "authoric.cli", "migrate", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_upgrade_from_empty_creates_every_platform_table_at_head(fresh_url: str) -> None:
    assert _platform_tables(fresh_url) == set() and _current_revision(fresh_url) is None
    migrate.upgrade(fresh_url)
    assert _platform_tables(fresh_url) == {t.name for t in metadata.tables.values()}
    assert _current_revision(fresh_url) == _head()
    # Upgrading an up-to-date database is a no-op, not an error.
    migrate.upgrade(fresh_url)
    assert _current_revision(fresh_url) == _head()


def test_the_migrated_schema_is_exactly_what_the_code_queries(fresh_url: str) -> None:
    migrate.upgrade(fresh_url)

    def diff(sync: Connection) -> list[Any]:
        context = MigrationContext.configure(sync, opts={
            "include_schemas": True,
            "include_name": lambda name, type_, _parent: (
                name == SCHEMA if type_ == "schema" else name != "alembic_version"),
        })
        return list(compare_metadata(context, metadata))

    async def go() -> list[Any]:
        engine = create_async_engine(async_url(fresh_url))
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(diff)
        finally:
            await engine.dispose()

    assert asyncio.run(go()) == []


def test_downgrade_to_base_removes_platform_tables_and_app_schemas_and_upgrade_works_again(
        fresh_url: str, tmp_path: Path) -> None:
    migrate.upgrade(fresh_url)
    server = start_server(fresh_url, tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            world = AppWorld.create(server, http)
            world.table("vendors", [{"name": "name", "type": "text"}])
            world.table("invoices", [{"name": "vendor", "type": "reference",
                                      "references": "vendors"}])
            world.role("writer", ["*:*"])
            member = world.caller(world.org("Northwind"), ["writer"])
            vendor = expect(member.post(world.rows("vendors"), json={"name": "Acme"}), 201)
            expect(member.post(world.rows("invoices"), json={"vendor_uid": vendor["uid"]}), 201)
    finally:
        server.stop()
    assert len(_app_schemas(fresh_url)) == 1

    migrate.downgrade(fresh_url, "base")
    assert _platform_tables(fresh_url) == set()
    assert _app_schemas(fresh_url) == set()
    assert _current_revision(fresh_url) is None
    assert not _run(fresh_url, "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = "
                               "c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'S'", SCHEMA)

    migrate.upgrade(fresh_url)
    assert _current_revision(fresh_url) == _head()
    (tmp_path / "again").mkdir()
    server = start_server(fresh_url, tmp_path / "again")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            admin_apps = http.get("/admin/apps", headers={"Authorization": f"Bearer {server.admin_token}"})
            assert expect(admin_apps, 200) == {"items": []}
            AppWorld.create(server, http).table("notes", [{"name": "body", "type": "text"}])
    finally:
        server.stop()


def test_the_migrate_command_upgrades_and_downgrades(fresh_url: str, tmp_path: Path) -> None:
    up = _cli(fresh_url, tmp_path)
    assert up.returncode == 0, up.stderr
    assert "Traceback" not in up.stdout + up.stderr
    assert _current_revision(fresh_url) == _head()
    down = _cli(fresh_url, tmp_path, "--downgrade", "base")
    assert down.returncode == 0, down.stderr
    assert _platform_tables(fresh_url) == set() and _current_revision(fresh_url) is None


SEARCH_INDEX_SHAPES = r"""
SELECT pg_get_indexdef(c.oid) AS definition, i.indisvalid AS valid
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index i ON i.indexrelid = c.oid
WHERE n.nspname LIKE 'app\_%' AND pg_get_indexdef(c.oid) LIKE '%search_vector(%'"""


def test_an_operator_upgrading_a_populated_database_gets_org_led_search_indexes_that_answer(
        fresh_url: str, tmp_path: Path) -> None:
    """0010_sec rebuilds the search indexes that a database of the release before holds:
    populated (two orgs' rows), downgraded to 0013_webhooks, then upgraded again. Members'
    searches answer the same rows before and after, within their org alone."""
    migrate.upgrade(fresh_url)
    server = start_server(fresh_url, tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            world = AppWorld.create(server, http)
            world.table("notes", [{"name": "body", "type": "text"}])
            assert wait_ready(world, "notes", "body_search",
                              {"columns": ["body"], "kind": "search"}) == "ready"
            world.role("clerk", ["notes:*"])
            north, south = world.caller(world.org("North"), ["clerk"]), \
                world.caller(world.org("South"), ["clerk"])
            ours = expect(north.post(world.rows("notes"), json={"body": "late invoice"}), 201)
            expect(north.post(world.rows("notes"), json={"body": "early bill"}), 201)
            expect(south.post(world.rows("notes"), json={"body": "late invoice too"}), 201)
    finally:
        server.stop()

    migrate.downgrade(fresh_url, "0013_webhooks")
    [before] = _run(fresh_url, SEARCH_INDEX_SHAPES)
    assert "ARRAY[org_uid]" not in before["definition"]  # the release before's shape

    migrate.upgrade(fresh_url)
    [after] = _run(fresh_url, SEARCH_INDEX_SHAPES)
    assert "USING gin ((ARRAY[org_uid]), " in after["definition"] and after["valid"]
    (tmp_path / "again").mkdir()
    server = start_server(fresh_url, tmp_path / "again")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            world = AppWorld(server, world.name, Caller(http, server.admin_token))
            user = world.user()
            north_uid = _org_uid(world, "North")
            world.member(north_uid, user["uid"], ["clerk"])
            reader = world.login(user, north_uid)
            for words in ("late", "late invoice"):
                search = json.dumps({"body": {"search": words}})
                page = expect(reader.get(world.rows("notes"), params={
                    "filter": search, "count": "exact"}), 200)
                assert [r["uid"] for r in page["items"]] == [ours["uid"]], words
                assert page["total"] == 1
    finally:
        server.stop()


def _org_uid(world: AppWorld, name: str) -> str:
    orgs = expect(world.admin.get(f"{world.base}/orgs"), 200)["items"]
    return str(next(o["uid"] for o in orgs if o["name"] == name))
