"""Governed reads: single rows and pages, planned (org, policy, redaction, filter, order, page)
and run as one statement on the executor the request path hands in."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.errors import NotFound
from authoric.plan.access import Access
from authoric.plan.listing import encode_cursor
from authoric.plan.plan import Page, Plan
from authoric.plan.runner import Executor
from authoric.query.filters import EVERYTHING, Node


async def read_one(ex: Executor, access: Access, uid: uuid.UUID) -> dict[str, Any]:
    rows = await ex.fetch(Plan(access).read_one(uid, ex.guard), retry=True)
    if ex.guard is not None:
        rows = ex.guard.check(rows)
    if not rows:
        raise NotFound("no such row", {"uid": str(uid)})
    return access.row_json(rows[0], access.decision.redacted)


async def list_page(ex: Executor, access: Access, filter_tree: Node = EVERYTHING,
                    page: Page | None = None) -> dict[str, Any]:
    page = page or Page()
    statement, ordering = Plan(access, filter_tree).read_page(page, ex.guard)
    rows = await ex.fetch(statement, retry=True)
    if ex.guard is not None:
        rows = ex.guard.check(rows)
    shown = rows[:page.limit]
    return {
        "items": [access.row_json(r, access.decision.redacted) for r in shown],
        "next": encode_cursor(ordering, shown[-1]) if len(rows) > page.limit else None,
    }


async def count_rows(ex: Executor, access: Access, filter_tree: Node = EVERYTHING) -> int:
    """`?count=exact`: how many rows the caller may see that match the filter (page aside),
    on the same governed clause as the page."""
    rows = await ex.fetch(Plan(access, filter_tree).count_rows(ex.guard), retry=True)
    if ex.guard is not None:
        rows = ex.guard.check(rows)
    return int(rows[0]["total"])


async def estimate_rows(conn: AsyncConnection, access: Access, filter_tree: Node = EVERYTHING) -> int:
    """`?count=estimate`: the planner's estimate of the rows `count_rows` would count (what
    PostgREST's `count=estimated` and Supabase Studio show). No row is read, so it costs the
    same at 1M rows as at 10, and may be off by the statistics' error. Only the operator gets
    it (records.pipeline): the statistics describe the whole table, every org together."""
    rows = select(access.table.table.c.uid).where(Plan(access, filter_tree).where())
    compiled = rows.compile(dialect=conn.dialect)
    args = tuple(compiled.construct_params()[name] for name in compiled.positiontup or ())
    result = await conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled.string}", args)
    plan = result.scalar_one()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
