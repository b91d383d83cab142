"""Liveness and readiness as a load balancer or an orchestrator probes them, and the request
id an operator follows from a client's error to the server's log."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import _admin
from tests.servers import ServerProcess, start_server

WIDE = 60.0  # seconds: a condition, polled; never a bet on timing


def _wait_for(probe: Any, timeout: float = WIDE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def _sql(url: str, statement: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture
def own_database(database_url: str) -> Iterator[tuple[str, str]]:
    """A migrated database of this test's own (url, name): the test may break it."""
    from authoric.db import migrate

    name = f"authoric_health_{uuid.uuid4().hex[:10]}"
    _admin(database_url, f'CREATE DATABASE "{name}"')
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    yield url, name
    _admin(database_url, f"ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS true",
           f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
           f'DROP DATABASE IF EXISTS "{name}"')


@pytest.fixture
def own_server(own_database: tuple[str, str], tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(own_database[0], tmp_path)
    yield proc
    proc.stop()


def test_anyone_gets_200_from_healthz_without_a_token(server: ServerProcess) -> None:
    response = httpx.get(f"{server.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_a_probe_of_a_healthy_server_gets_200_from_readyz_with_every_check_ok(
        server: ServerProcess) -> None:
    response = httpx.get(f"{server.url}/readyz", timeout=30)
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {
        "database": "ok", "migrations": "ok", "relay": "ok"}}


def test_a_probe_gets_503_naming_the_database_and_the_relay_when_the_database_refuses_connections(
        own_server: ServerProcess, own_database: tuple[str, str], database_url: str) -> None:
    name = own_database[1]
    assert httpx.get(f"{own_server.url}/readyz", timeout=30).status_code == 200
    # The database stops taking connections and drops the server's: pool and relay are gone.
    _admin(database_url, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false',
           f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")

    def not_ready() -> httpx.Response | None:
        response = httpx.get(f"{own_server.url}/readyz", timeout=30)
        failing = response.json().get("error", {}).get("details", {}).get("checks", {})
        return response if failing.get("relay") != "ok" else None

    refused = _wait_for(not_ready)
    assert refused is not None, "readyz kept answering 200 without a database"
    error = refused.json()["error"]
    assert error["code"] == "UNAVAILABLE"
    assert error["details"]["checks"]["database"].startswith("unreachable")
    assert error["details"]["checks"]["relay"] == "not listening"
    # Liveness does not depend on the database: restarting this process would not help.
    assert httpx.get(f"{own_server.url}/healthz").status_code == 200

    _admin(database_url, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    ready = _wait_for(lambda: httpx.get(f"{own_server.url}/readyz", timeout=30).status_code == 200)
    assert ready, "readyz did not recover once the database took connections again"


def test_a_probe_gets_503_naming_migrations_when_the_database_is_behind_this_build(
        own_server: ServerProcess, own_database: tuple[str, str]) -> None:
    url, _ = own_database
    _sql(url, "UPDATE authoric.alembic_version SET version_num = '0001'")
    response = httpx.get(f"{own_server.url}/readyz", timeout=30)
    assert response.status_code == 503
    checks = response.json()["error"]["details"]["checks"]
    assert checks["database"] == "ok" and checks["relay"] == "ok"
    assert checks["migrations"].startswith("at 0001, expected ")


def test_a_client_sending_x_request_id_finds_it_echoed_in_the_header_and_the_error_body(
        server: ServerProcess) -> None:
    response = httpx.get(f"{server.url}/admin/apps", headers={"X-Request-ID": "trace-42.a"})
    assert response.status_code == 401
    assert response.headers["x-request-id"] == "trace-42.a"
    assert response.json()["error"]["details"]["requestId"] == "trace-42.a"


def test_a_client_without_a_request_id_gets_a_fresh_one_per_request_in_header_and_body(
        server: ServerProcess) -> None:
    first = httpx.get(f"{server.url}/no/such/route")
    second = httpx.get(f"{server.url}/no/such/route")
    assert first.status_code == second.status_code == 404
    ids = [r.headers["x-request-id"] for r in (first, second)]
    assert ids[0] != ids[1] and all(len(i) >= 16 for i in ids)
    assert first.json()["error"]["details"]["requestId"] == ids[0]


def test_a_client_sending_a_request_id_with_unsafe_characters_gets_a_fresh_one_instead(
        server: ServerProcess) -> None:
    response = httpx.get(f"{server.url}/admin/apps", headers={"X-Request-ID": "a b\"<script>"})
    assert response.headers["x-request-id"] not in ("a b\"<script>", "")
    assert response.json()["error"]["details"]["requestId"] == response.headers["x-request-id"]


def test_an_oversized_body_refused_before_routing_still_carries_the_request_id(
        server: ServerProcess) -> None:
    response = httpx.post(f"{server.url}/admin/apps", content=b"x" * (2 * 1024 * 1024),
                          headers={"X-Request-ID": "big-1", "Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["details"]["requestId"] == "big-1"
