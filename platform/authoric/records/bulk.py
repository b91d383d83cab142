"""Bulk update and delete: one statement over the rows a filter selects within the caller's
org and row policy, one change-log entry (`bulk`), which subscribers see as one `resync`.
Runs inside the caller's transaction: a change that would move rows outside the writer's row
policy is refused and rolled back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, any_, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY

from authoric.db.changelog import BULK, record_change
from authoric.errors import BadRequest, Forbidden, ValidationFailed
from authoric.plan.access import Access
from authoric.plan.plan import Plan
from authoric.plan.runner import ConnectionExecutor
from authoric.query.filters import EVERYTHING, Node
from authoric.records.conflicts import fetch_or_explain
from authoric.records.references import refuse_if_referenced, require_live_targets


def checked_plan(access: Access, filter_tree: Node) -> Plan:
    """The plan of a bulk write; 400 without a filter or with one that does not compile."""
    if filter_tree == EVERYTHING:
        raise BadRequest("a bulk write needs a filter", {"reason": "filter_required"})
    plan = Plan(access, filter_tree)
    plan.where()
    return plan


async def bulk_update(ex: ConnectionExecutor, access: Access, plan: Plan,
                      values: dict[str, Any]) -> int:
    """Set `values` on the rows of `plan` (from `checked_plan`, which the caller runs first so
    that a bad filter is refused before a bad body)."""
    await require_live_targets(ex, access, values)
    if not values:
        raise ValidationFailed("`set` names no column")
    table = access.table.table
    updated = [r["uid"] for r in await fetch_or_explain(
        ex, access, plan.update(values).returning(table.c.uid), values)]
    if updated and access.decision.policy is not None:
        still = (await ex.fetch(select(func.count().label("n")).select_from(table).where(and_(
            table.c.uid == any_(literal(updated, ARRAY(table.c.uid.type))), access.decision.policy))))[0]["n"]
        if still != len(updated):
            raise Forbidden("the change would move rows outside your row policy",
                            {"rows": len(updated) - int(still or 0)})
    await _record(ex, access, len(updated))
    return len(updated)


async def bulk_delete(ex: ConnectionExecutor, access: Access, filter_tree: Node) -> int:
    plan = checked_plan(access, filter_tree)
    table = access.table.table
    if access.table.soft_delete:
        await refuse_if_referenced(ex, access, select(table.c.uid).where(plan.where()))
    count = len(await ex.fetch(plan.delete().returning(table.c.uid)))
    await _record(ex, access, count)
    return count


async def _record(ex: ConnectionExecutor, access: Access, count: int) -> None:
    if count:
        p = access.principal
        await record_change(ex.conn, app_uid=p.app_uid, table=access.table.name, op=BULK,
                            org_uid=p.org_uid, row_uid=None, actor_uid=p.user_uid)
