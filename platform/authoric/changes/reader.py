"""Reading the change log by position (stamped rows only)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from authoric.realtime.source import Change

COLUMNS = ("pos, app_uid, table_name, op, row_uid, org_uid, old_row, "
           "extract(epoch FROM created_at)::float8 AS at")
# The live read also carries each entry's app version, read in the same statement (so from
# the same snapshot) as the entries: the hub judges a batch on that version or a later one,
# without a round trip of its own to ask for it (realtime/hub.py).
LIVE_COLUMNS = COLUMNS + ", (SELECT a.version FROM authoric.apps a WHERE a.uid = c.app_uid) AS version"


def _change(r: Any, version: bool = False) -> Change:
    old = r["old_row"]
    if isinstance(old, str):
        old = json.loads(old)
    return Change(r["pos"], r["app_uid"], r["table_name"], r["op"], r["row_uid"], r["org_uid"], old,
                  r["at"], r["version"] if version else None)


async def changes_after(conn: asyncpg.Connection, pos: int, limit: int) -> list[Change]:
    """Entries after `pos`, with their app's version (None: the app is gone)."""
    rows = await conn.fetch(
        f"SELECT {LIVE_COLUMNS} FROM authoric.changes c WHERE pos > $1 ORDER BY pos LIMIT $2",
        pos, limit)
    return [_change(r, True) for r in rows]


async def changes_in(conn: asyncpg.Connection, app_uid: uuid.UUID, tables: Sequence[str],
                     org_uid: uuid.UUID | None, pos: int, upto: int, limit: int) -> list[Change]:
    """Entries of `tables` in (pos, upto], of one org (None: every org), at most `limit`.

    A member's replay counts only its own org's entries, so whether a replay is truncated,
    and where, says nothing about other orgs' write volume.
    """
    rows = await conn.fetch(
        f"SELECT {COLUMNS} FROM authoric.changes WHERE app_uid = $1 AND table_name = ANY($2) "
        "AND ($3::uuid IS NULL OR org_uid = $3) AND pos > $4 AND pos <= $5 ORDER BY pos LIMIT $6",
        app_uid, list(tables), org_uid, pos, upto, limit)
    return [_change(r) for r in rows]


async def head(conn: asyncpg.Connection) -> int:
    """The highest stamped position (0 for an empty log)."""
    return int(await conn.fetchval(
        "SELECT GREATEST((SELECT max(pos) FROM authoric.changes WHERE pos IS NOT NULL), "
        "(SELECT pos FROM authoric.log_horizon WHERE id = 1), 0)") or 0)


async def horizon(conn: asyncpg.Connection) -> int:
    """The highest position retention has deleted."""
    return int(await conn.fetchval("SELECT pos FROM authoric.log_horizon WHERE id = 1") or 0)


async def bounds(conn: asyncpg.Connection) -> tuple[int, int]:
    """(head, horizon) in one round trip."""
    row = await conn.fetchrow(
        "SELECT GREATEST((SELECT max(pos) FROM authoric.changes WHERE pos IS NOT NULL), h.pos, 0) "
        "AS head, h.pos AS horizon FROM authoric.log_horizon h WHERE h.id = 1")
    if row is None:
        return await head(conn), 0
    return int(row["head"]), int(row["horizon"] or 0)
