"""Bulk update and delete: one statement over the rows a filter selects within the caller's
org and row policy, one change-log entry (`bulk`), which subscribers see as one `resync`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.changes.log import BULK, record_change
from authoric.errors import BadRequest, Forbidden, ValidationFailed
from authoric.query.filters import compile_filter
from authoric.records.gate import Access
from authoric.records.reads import filter_scope
from authoric.records.references import refuse_if_referenced, require_live_targets
from authoric.records.values import column_values


def _where(access: Access, filter_doc: dict[str, Any]) -> Any:
    if not filter_doc:
        raise BadRequest("a bulk write needs a filter", {"reason": "filter_required"})
    return and_(access.decision.rows(access.table, access.principal),
                compile_filter(filter_doc, filter_scope(access)))


async def bulk_update(conn: AsyncConnection, access: Access, filter_doc: dict[str, Any],
                      body: Any) -> int:
    where = _where(access, filter_doc)
    if not isinstance(body, dict) or set(body) != {"set"}:
        raise ValidationFailed("a bulk update body is {\"set\": {...}}")
    values = column_values(access.table, body["set"], creating=False)
    await require_live_targets(conn, access, values)
    if not values:
        raise ValidationFailed("`set` names no column")
    table = access.table.table
    updated = (await conn.execute(
        table.update().where(where).values(**values, updated_at=func.clock_timestamp())
        .returning(table.c.uid))).scalars().all()
    if updated and access.decision.policy is not None:
        still = await conn.scalar(select(func.count()).select_from(table).where(and_(
            table.c.uid.in_(updated), access.decision.policy)))
        if still != len(updated):
            raise Forbidden("the change would move rows outside your row policy",
                            {"rows": len(updated) - int(still or 0)})
    await _record(conn, access, len(updated))
    return len(updated)


async def bulk_delete(conn: AsyncConnection, access: Access, filter_doc: dict[str, Any]) -> int:
    where = _where(access, filter_doc)
    table = access.table.table
    if access.table.soft_delete:
        await refuse_if_referenced(conn, access, select(table.c.uid).where(where))
        stmt: Any = table.update().where(where).values(deleted_at=func.clock_timestamp())
    else:
        stmt = table.delete().where(where)
    count = (await conn.execute(stmt)).rowcount or 0
    await _record(conn, access, count)
    return int(count)


async def _record(conn: AsyncConnection, access: Access, count: int) -> None:
    if count:
        p = access.principal
        await record_change(conn, app_uid=p.app_uid, table=access.table.name, op=BULK,
                            org_uid=p.org_uid, row_uid=None, actor_uid=p.user_uid)
