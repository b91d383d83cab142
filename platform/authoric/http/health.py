"""`GET /healthz` (liveness) and `GET /readyz` (readiness), for load balancers and
orchestrators. Neither needs a token; neither says anything about tenants.

- /healthz answers 200 while the process serves HTTP at all: no database access, so a
  database outage does not get every replica restarted.
- /readyz answers 200 when this process can do its work: the database answers (through the
  pool, within a few seconds), its migrations are at this build's head, and the relay's
  LISTEN connection is up (without it, live feeds on this replica fall silent). Otherwise
  503 `UNAVAILABLE`, naming each check's state in `details.checks`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic.script import ScriptDirectory
from fastapi import APIRouter, Request
from sqlalchemy import text

from authoric.db.migrate import alembic_config
from authoric.errors import ServiceUnavailable
from authoric.http.context import services
from authoric.realtime.source import Source

router = APIRouter(tags=["health"])
DB_TIMEOUT = 3.0  # seconds: a database slower than this is not ready
VERSION = "SELECT version_num FROM authoric.alembic_version"


def head_revision() -> str | None:
    """The newest migration this build ships (read from migrations/, once at startup)."""
    return ScriptDirectory.from_config(alembic_config("postgresql://")).get_current_head()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def _database_revision(request: Request) -> str | None:
    async with asyncio.timeout(DB_TIMEOUT), services(request).engine.connect() as conn:
        return (await conn.execute(text(VERSION))).scalar()


@router.get("/readyz")
async def readyz(request: Request) -> dict[str, Any]:
    checks = {"database": "ok", "migrations": "ok", "relay": "ok"}
    try:
        revision = await _database_revision(request)
        if revision != request.app.state.head_revision:
            checks["migrations"] = f"at {revision}, expected {request.app.state.head_revision}"
    except Exception as exc:  # any failure to answer: not ready, say which
        checks["database"] = f"unreachable: {type(exc).__name__}"
        checks["migrations"] = "unknown"
    source: Source = request.app.state.source
    if not source.listening():
        checks["relay"] = "not listening"
    failing = [name for name, state in checks.items() if state != "ok"]
    if failing:
        raise ServiceUnavailable(f"not ready: {', '.join(failing)}", {"checks": checks})
    return {"status": "ready", "checks": checks}
