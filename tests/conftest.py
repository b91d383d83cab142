"""Shared fixtures: a fresh PostgreSQL database per test session and real server processes.

The database is the embedded one (pgserver) unless AUTHORIC_TEST_DATABASE_URL names a
server; either way each session gets a new database of its own, migrated from empty.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.scenario import AppWorld
from tests.servers import ServerProcess, start_server


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-bound-only", action="store_true",
        help="run only the tests that reach the session's database (the database_url fixture); "
             "the rest do the same whichever server AUTHORIC_TEST_DATABASE_URL names")


# Tests of what runs outside the server (the console in a browser, the client libraries, the
# benchmark harnesses, the wheel's packaging): they reach the database only through a server
# whose every route the API and integration tests already run on both PostgreSQL servers.
ONCE = ("tests/e2e/", "tests/browser/", "tests/clients/", "tests/bench/",
        "tests/integration/test_wheel.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --database-bound-only, deselect the tests that never reach `database_url`, and
    those in ONCE: the database server is all that differs between CI's two passes (.ci/run),
    so those would only run again as they ran in the first (unit tests, tests that start an
    embedded PostgreSQL of their own such as the chaos minute, and the clients' tests)."""
    if not config.getoption("--database-bound-only"):
        return
    bound: list[pytest.Item] = []
    unbound: list[pytest.Item] = []
    for item in items:
        reaches = "database_url" in getattr(item, "fixturenames", ())
        once = item.nodeid.startswith(ONCE)
        (bound if reaches and not once else unbound).append(item)
    if unbound:
        config.hook.pytest_deselected(items=unbound)
        items[:] = bound


def under_ci() -> bool:
    """Whether this run is CI's (CI set to anything but empty, 0, false or no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Under CI a skip is a failure: a test that could not run (a missing tool, a missing
    package) must stop the run, not let it pass without it. Locally a skip stays a skip."""
    report: pytest.TestReport = yield
    if report.skipped and under_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI must run every test, and this one skipped: {reason}"
    return report


def _server_url(tmp_root: Path) -> str:
    url = os.environ.get("AUTHORIC_TEST_DATABASE_URL")
    if url:
        return url
    from authoric.db.embedded import embedded_database_url

    return embedded_database_url(tmp_root)


def _admin(url: str, *statements: str) -> None:
    """Run maintenance statements (CREATE/DROP DATABASE) outside any transaction."""

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh, migrated database for this test session."""
    root = Path(os.environ.get("AUTHORIC_TEST_DATA_DIR", ".authoric-test"))
    base = _server_url(root)
    name = f"authoric_test_{uuid.uuid4().hex[:12]}"
    _admin(base, f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    from authoric.db import migrate

    migrate.upgrade(url)
    yield url
    _admin(base, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
           f'DROP DATABASE IF EXISTS "{name}"')


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("authoric-data")


@pytest.fixture(scope="session")
def server(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    """One server process for the session (real HTTP over loopback)."""
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def world(server: ServerProcess, http: httpx.Client) -> AppWorld:
    """A fresh app on the shared server."""
    return AppWorld.create(server, http)
