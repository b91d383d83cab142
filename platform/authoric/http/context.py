"""The services a request handler reaches: built once in the lifespan, kept on app.state."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.auth.ratelimit import RateLimiter
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes.sequencer import Sequencer
from authoric.errors import BadRequest, UnsupportedMediaType
from authoric.realtime.hub import Hub
from authoric.settings import Settings


@dataclass
class Services:
    settings: Settings
    engine: AsyncEngine
    jwt_secret: str
    admin_token: str
    snapshots: SnapshotCache
    token_limiter: RateLimiter
    hub: Hub
    sequencer: Sequencer

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[AsyncConnection]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        async with self.engine.begin() as conn:
            yield conn
        # The transaction may have written change-log rows: stamp them without waiting.
        self.sequencer.nudge()

    async def snapshot(self, conn: AsyncConnection, app_uid: Any, version: int) -> AppSnapshot:
        return await self.snapshots.get(conn, app_uid, version)


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


async def json_body(request: Request) -> Any:
    """The parsed JSON body: 415 for another content type, 400 for malformed JSON."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise UnsupportedMediaType("send the body as application/json",
                                   {"contentType": content_type})
    raw = await request.body()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("the body is not valid JSON") from exc
    except RecursionError as exc:  # nesting deeper than the parser goes
        raise BadRequest("the body is nested too deeply") from exc
