"""Webhooks as stored: the admin services of contract section 8 (create, list, get, change,
delete, rotate the secret, the deliveries log, replay, resume) in the caller's transaction.

The secret is returned only by `create_webhook` and `rotate_secret`; every other answer, the
audit (which drops keys naming secrets) and the deliveries log leave it out.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.catalog.apps import find_app
from authoric.catalog.model import TableDef
from authoric.catalog.types import rfc3339
from authoric.changes import reader
from authoric.db import tables as t
from authoric.errors import BadRequest, NotFound, ValidationFailed
from authoric.plan.expand import unreached_paths
from authoric.plan.listing import newest_first, parse_id_cursor, parse_limit
from authoric.plan.request import parse_expand
from authoric.webhooks.model import NewWebhook, Replay, WebhookChange
from authoric.webhooks.signing import new_secret

CheckUrl = Callable[[str], Awaitable[None]]
DEFAULT_LIMIT, MAX_LIMIT = 50, 1000
W = t.webhooks


def public(row: Any, secret: bool = False) -> dict[str, Any]:
    view = {
        "uid": str(row["uid"]), "url": row["url"], "tables": list(row["tables"]),
        "ops": list(row["ops"]), "org": None if row["org_uid"] is None else str(row["org_uid"]),
        "role": row["role"], "expand": list(row["expand"]), "status": row["status"],
        "position": str(row["cursor"]), "attempt": row["attempt"],
        "failingSince": _when(row["failing_since"]), "nextAttemptAt": _when(row["next_attempt_at"]),
        "createdAt": rfc3339(row["created_at"]),
    }
    if secret:
        view["secret"] = row["secret"]
    return view


def _when(value: Any) -> str | None:
    return None if value is None else rfc3339(value)


async def _head_and_horizon(conn: AsyncConnection) -> tuple[int, int]:
    raw = (await conn.get_raw_connection()).driver_connection
    return await reader.bounds(raw)


async def _checked_names(conn: AsyncConnection, app_uid: uuid.UUID, tables: list[str] | None,
                         role: str | None, expand: list[str] | None,
                         over: list[str]) -> None:
    """422 for a table or role the app does not have, or an expand path of a bad shape or
    that none of the webhook's tables (`over`) follows through reference columns."""
    if tables is not None:
        known = set((await conn.execute(select(t.app_tables.c.name).where(
            t.app_tables.c.app_uid == app_uid, t.app_tables.c.name.in_(tables)))).scalars())
        missing = [name for name in tables if name not in known]
        if missing:
            raise ValidationFailed("no such table", {"tables": missing})
    if role is not None:
        found = (await conn.execute(select(t.roles.c.name).where(
            t.roles.c.app_uid == app_uid, t.roles.c.name == role))).first()
        if found is None:
            raise ValidationFailed("no such role", {"role": role})
    if expand:
        try:
            paths = parse_expand(",".join(expand))
        except BadRequest as exc:
            raise ValidationFailed(exc.message, {"expand": expand}) from exc
        unreached = unreached_paths(await _definitions(conn, app_uid), over, paths)
        if unreached:
            raise ValidationFailed("expand names reference columns of the webhook's tables",
                                   {"expand": unreached})


async def _definitions(conn: AsyncConnection, app_uid: uuid.UUID) -> dict[str, TableDef]:
    rows = await conn.execute(select(t.app_tables.c.name, t.app_tables.c.definition).where(
        t.app_tables.c.app_uid == app_uid))
    return {name: TableDef.model_validate(doc) for name, doc in rows}


async def _org_uid(conn: AsyncConnection, app_uid: uuid.UUID, ref: str | None) -> uuid.UUID | None:
    if ref is None:
        return None
    try:
        uid = uuid.UUID(ref)
    except ValueError as exc:
        raise ValidationFailed("org is not a uid", {"org": ref}) from exc
    found = (await conn.execute(select(t.orgs.c.uid).where(
        t.orgs.c.app_uid == app_uid, t.orgs.c.uid == uid))).first()
    if found is None:
        raise ValidationFailed("no such org", {"org": ref})
    return uid


async def create_webhook(conn: AsyncConnection, app_ref: str, new: NewWebhook,
                         check_url: CheckUrl) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    await check_url(new.url)
    await _checked_names(conn, app["uid"], new.tables, new.role, new.expand, new.tables)
    org = await _org_uid(conn, app["uid"], new.org)
    head, _ = await _head_and_horizon(conn)
    uid = uuid7()
    await conn.execute(W.insert().values(
        uid=uid, app_uid=app["uid"], url=new.url, tables=list(dict.fromkeys(new.tables)),
        ops=list(dict.fromkeys(new.ops)), org_uid=org, role=new.role, expand=new.expand,
        secret=new_secret(), cursor=head))
    return public(await _webhook(conn, app["uid"], str(uid)), secret=True)


async def _webhook(conn: AsyncConnection, app_uid: uuid.UUID, ref: str,
                   lock: bool = False) -> Any:
    try:
        uid = uuid.UUID(ref)
    except ValueError as exc:
        raise NotFound("no such webhook", {"webhook": ref}) from exc
    query = select(W).where(W.c.app_uid == app_uid, W.c.uid == uid)
    row = (await conn.execute(query.with_for_update() if lock else query)).mappings().first()
    if row is None:
        raise NotFound("no such webhook", {"webhook": ref})
    return row


async def list_webhooks(conn: AsyncConnection, app_ref: str) -> list[dict[str, Any]]:
    app = await find_app(conn, app_ref)
    rows = await conn.execute(select(W).where(W.c.app_uid == app["uid"]).order_by(W.c.uid))
    return [public(r) for r in rows.mappings()]


async def get_webhook(conn: AsyncConnection, app_ref: str, ref: str) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    return public(await _webhook(conn, app["uid"], ref))


async def patch_webhook(conn: AsyncConnection, app_ref: str, ref: str, change: WebhookChange,
                        check_url: CheckUrl) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref, lock=True)
    given = change.model_dump(exclude_unset=True)
    for name in ("url", "tables", "ops", "expand", "status"):
        if name in given and given[name] is None:
            raise ValidationFailed(f"{name} may not be null", {name: None})
    if change.url is not None:
        await check_url(change.url)
    # The expand paths are checked against the tables the webhook will have, whichever changed.
    over = change.tables if change.tables is not None else list(row["tables"])
    expand = change.expand if change.expand is not None else (
        list(row["expand"]) if change.tables is not None else None)
    await _checked_names(conn, app["uid"], change.tables, change.role, expand, over)
    values: dict[str, Any] = {k: v for k, v in given.items() if k != "status"}
    if change.status is not None and change.status != row["status"]:
        values["status"] = change.status
        if change.status == "active":
            values.update(await _resumed(conn, row["cursor"]))
    if values:
        await conn.execute(update(W).where(W.c.uid == row["uid"]).values(**values))
    return public(await _webhook(conn, app["uid"], ref))


async def _resumed(conn: AsyncConnection, cursor: int) -> dict[str, Any]:
    """A resumed webhook goes on from its cursor, at once, with a `backfill_expired` first
    when retention removed entries after it."""
    _, horizon = await _head_and_horizon(conn)
    return {"attempt": 0, "failing_since": None, "next_attempt_at": None,
            "resync_first": cursor < horizon}


async def target_of(conn: AsyncConnection, app_ref: str, ref: str) -> tuple[str, str, str]:
    """(url, secret, app name) of a webhook, for a test delivery."""
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref)
    return row["url"], row["secret"], app["name"]


async def delete_webhook(conn: AsyncConnection, app_ref: str, ref: str) -> None:
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref)
    await conn.execute(W.delete().where(W.c.uid == row["uid"]))


async def rotate_secret(conn: AsyncConnection, app_ref: str, ref: str) -> dict[str, Any]:
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref, lock=True)
    await conn.execute(update(W).where(W.c.uid == row["uid"]).values(secret=new_secret()))
    return public(await _webhook(conn, app["uid"], ref), secret=True)


async def replay(conn: AsyncConnection, app_ref: str, ref: str, body: Replay) -> dict[str, Any]:
    """Send again from `from` (included), at most the webhook's next position (replay never
    skips): the cursor moves to just before it, and a failing webhook is resumed (a paused
    one stays paused)."""
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref, lock=True)
    start = int(body.from_)
    if start < 1 or start > row["cursor"] + 1:
        # Ahead of the webhook's next position, the changes in between would never be sent.
        raise ValidationFailed("from must be a position the webhook has reached",
                               {"from": body.from_, "position": str(row["cursor"])})
    values = await _resumed(conn, start - 1)
    if row["status"] == "failing":
        values["status"] = "active"
    # The lease goes too: a delivery in flight now cannot move the cursor past `from`; the
    # next claim (any process) starts again from it.
    values.update(lease_owner=None, lease_until=None)
    await conn.execute(update(W).where(W.c.uid == row["uid"]).values(cursor=start - 1, **values))
    return public(await _webhook(conn, app["uid"], ref))


async def list_deliveries(conn: AsyncConnection, app_ref: str, ref: str, limit: str | None,
                          after: str | None) -> dict[str, Any]:
    """A page of the webhook's delivery attempts, newest first."""
    app = await find_app(conn, app_ref)
    row = await _webhook(conn, app["uid"], ref)
    size, before = parse_limit(limit, DEFAULT_LIMIT, MAX_LIMIT), parse_id_cursor(after)
    d = t.webhook_deliveries
    return await newest_first(conn, d, [d.c.webhook_uid == row["uid"]], size, before, _delivery)


def _delivery(r: Any) -> dict[str, Any]:
    return {"position": str(r["position"]), "attempt": r["attempt"], "at": rfc3339(r["at"]),
            "status": r["status"], "error": r["error"],
            "durationMs": round(r["duration_ms"], 3)}
