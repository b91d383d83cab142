"""The write service: every change to a user table goes through here, and each one records
its change-log entry in the same transaction.

Callers pass an open transaction (`AsyncConnection` inside `begin()`); an exception anywhere
rolls back both the write and its log entry.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import and_, exists, false, func, literal_column, select, true
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.changes.log import DELETE, INSERT, UPDATE, record_change
from authoric.errors import Forbidden, NotFound
from authoric.policy.decision import Decision
from authoric.records.gate import Access, reader
from authoric.records.references import refuse_if_referenced, require_live_targets
from authoric.records.values import column_values


async def create_row(conn: AsyncConnection, access: Access, body: Any) -> dict[str, Any]:
    table, principal = access.table, access.principal
    values = column_values(table, body, creating=True)
    await require_live_targets(conn, access, values)
    uid = uuid7()
    read = reader(access.snapshot, principal, table)
    stmt = (table.table.insert().values(uid=uid, org_uid=principal.org_uid, **values)
            .returning(*_verdicts(access, read)))
    row = (await conn.execute(stmt)).mappings().one()
    _still_allowed(row, uid)
    await record_change(conn, app_uid=principal.app_uid, table=table.name, op=INSERT,
                        org_uid=principal.org_uid, row_uid=uid, actor_uid=principal.user_uid)
    return _as_writer(access, read, row)


async def update_row(conn: AsyncConnection, access: Access, uid: uuid.UUID,
                     body: Any) -> dict[str, Any]:
    table, principal = access.table, access.principal
    values = column_values(table, body, creating=False)
    await require_live_targets(conn, access, values)
    read = reader(access.snapshot, principal, table)
    stmt = (table.table.update()
            .where(and_(table.table.c.uid == uid, access.decision.rows(table, principal)))
            .values(**values, updated_at=func.clock_timestamp())
            .returning(*_verdicts(access, read)))
    row = (await conn.execute(stmt)).mappings().first()
    if row is None:
        await _explain_miss(conn, access, uid)
        raise NotFound("no such row", {"uid": str(uid)})
    _still_allowed(row, uid)
    await record_change(conn, app_uid=principal.app_uid, table=table.name, op=UPDATE,
                        org_uid=principal.org_uid, row_uid=uid, actor_uid=principal.user_uid)
    return _as_writer(access, read, row)


async def delete_row(conn: AsyncConnection, access: Access, uid: uuid.UUID) -> None:
    table, principal = access.table, access.principal
    where = and_(table.table.c.uid == uid, access.decision.rows(table, principal))
    # The old image keeps the row as it stood, so subscribers can be judged on it later.
    image: Any = literal_column(f'to_jsonb("{table.name}".*)')
    if table.soft_delete:
        await refuse_if_referenced(conn, access, select(table.table.c.uid).where(where))
        stmt: Any = (table.table.update().where(where)
                     .values(deleted_at=func.clock_timestamp()).returning(image))
    else:
        stmt = table.table.delete().where(where).returning(image)
    old = (await conn.execute(stmt)).scalar()
    if old is None:
        await _explain_miss(conn, access, uid)
        return
    old.pop("deleted_at", None)
    await record_change(conn, app_uid=principal.app_uid, table=table.name, op=DELETE,
                        org_uid=principal.org_uid, row_uid=uid, actor_uid=principal.user_uid,
                        old_row=old)


def _verdicts(access: Access, read: Decision | None) -> list[Any]:
    """What a write returns in the same statement: the row, whether it still matches the
    writer's policy for the action, and whether the writer may read it (so no re-reads)."""
    table, principal = access.table, access.principal
    policy = access.decision.policy
    allowed = true() if policy is None else func.coalesce(policy, false())
    readable = false() if read is None else func.coalesce(read.rows(table, principal), false())
    return [*table.table.c, allowed.label("_allowed"), readable.label("_readable")]


def _still_allowed(row: Any, uid: uuid.UUID) -> None:
    """A written row must still match the writer's policy for the action; raising here rolls
    the write back, so nothing is written."""
    if not row["_allowed"]:
        raise Forbidden("the row would fall outside your row policy", {"uid": str(uid)})


def _as_writer(access: Access, read: Decision | None, row: Any) -> dict[str, Any]:
    """The row as its writer may read it now, or `{"uid"}` alone when it may not."""
    if read is None or not row["_readable"]:
        return {"uid": str(row["uid"])}
    return access.table.row_json(row, read.redacted)


async def _explain_miss(conn: AsyncConnection, access: Access, uid: uuid.UUID) -> None:
    """404 when the principal cannot see the row; 403 when it can read but not change it."""
    visible: Decision | None = reader(access.snapshot, access.principal, access.table)
    if visible is not None:
        table = access.table
        found = await conn.scalar(select(exists().where(and_(
            table.table.c.uid == uid, visible.rows(table, access.principal)))))
        if found:
            raise Forbidden(f"your row policy does not allow {access.decision.action} on this row",
                            {"uid": str(uid)})
    raise NotFound("no such row", {"uid": str(uid)})
