"""The browser origins an app lets call it cross-origin (`settings.allowedOrigins`).

Read fresh for every cross-origin request (one indexed lookup), so a change made on any
replica applies to the next request everywhere; requests without `Origin` never ask.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.apps import app_where
from authoric.db import tables as t


async def allowed_origins(conn: AsyncConnection, ref: str) -> list[str]:
    """The app's allowed origins (its name or uid); none for an unknown app."""
    settings = await conn.scalar(select(t.apps.c.settings).where(app_where(ref)))
    origins = (settings or {}).get("allowedOrigins") or []
    return [str(o) for o in origins if isinstance(o, str)]
