"""The operator's view of a table: every org, no row policy, no redaction, operation switches
ignored. Rows carry `org`.

Reads are plain selects over live rows. Every write goes through the one write service
(`records.writes`, `records.csv_import`) as the app itself acting in the row's org, so it is
validated the same way and records the same change-log entries (hence the same events) as a
REST write. Each write also records an audit entry, in the same transaction, naming the row
and the columns given, never their values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import NotFound, ValidationFailed
from authoric.plan.listing import (
    cursor_clause,
    decode_cursor,
    encode_cursor,
    parse_limit,
    parse_order,
)
from authoric.plan.runner import ConnectionExecutor
from authoric.policy.principal import Principal
from authoric.query.fields import table_fields
from authoric.query.filters import FilterScope, Node, compile_filter
from authoric.records import csv_import, writes
from authoric.records.csv_fast import Spool
from authoric.records.gate import Access, admit
from authoric.records.values import column_values

ORG = "org"  # the key a row of the operator's view carries its org under


@dataclass(frozen=True)
class AdminTable:
    """One table of one app, as the operator reaches it."""

    snapshot: AppSnapshot
    table: CompiledTable

    @property
    def app_uid(self) -> uuid.UUID:
        return self.snapshot.uid

    def row_json(self, row: Any) -> dict[str, Any]:
        return {**self.table.row_json(row), ORG: str(row["org_uid"])}

    def target(self, uid: uuid.UUID | None = None) -> str:
        base = f"tables/{self.table.name}/rows"
        return base if uid is None else f"{base}/{uid}"


@dataclass(frozen=True)
class AdminListQuery:
    filter: Node  # parsed at the edge (query.filters)
    order: str | None
    limit: str | None
    after: str | None
    org: uuid.UUID | None
    count: str | None = None  # `exact`, `estimate` (the planner's row estimate), or None


async def find_org(conn: AsyncConnection, app_uid: uuid.UUID, ref: str) -> uuid.UUID | None:
    """The uid of the app's org `ref`, or None when the app has no such org."""
    try:
        uid = uuid.UUID(ref)
    except ValueError:
        return None
    found = await conn.scalar(select(t.orgs.c.uid).where(and_(
        t.orgs.c.app_uid == app_uid, t.orgs.c.uid == uid)))
    return None if found is None else uid


async def org_filter(conn: AsyncConnection, app_uid: uuid.UUID, ref: str | None) -> uuid.UUID | None:
    """`?org=` of a listing: None when absent, 404 when it names no org of the app."""
    return None if ref is None else await import_org(conn, app_uid, ref)


async def import_org(conn: AsyncConnection, app_uid: uuid.UUID, ref: str | None) -> uuid.UUID:
    """`?org=` of an import: 422 when absent, 404 when it names no org of the app."""
    if ref is None:
        raise ValidationFailed("`?org=<orgUid>` is required", {"field": "org"})
    uid = await find_org(conn, app_uid, ref)
    if uid is None:
        raise NotFound("no such org", {"org": ref})
    return uid


def _as_app(target: AdminTable, org_uid: uuid.UUID, action: str) -> Access:
    """The write service's access for the app itself acting in `org_uid`."""
    principal = Principal(target.app_uid, None, org_uid, None, (), None, acting_as_app=True)
    return admit(target.snapshot, principal, target.table.name, action)


async def list_rows(conn: AsyncConnection, target: AdminTable,
                    query: AdminListQuery) -> dict[str, Any]:
    table = target.table
    fields = table_fields(table)
    limit = parse_limit(query.limit)
    ordering = parse_order(query.order, fields, frozenset())
    where = [table.live(), compile_filter(query.filter, FilterScope(fields))]
    if query.org is not None:
        where.append(table.table.c.org_uid == query.org)
    counted = select(func.count().label("total")).select_from(table.table).where(and_(*where))
    if query.after:
        where.append(cursor_clause(ordering, decode_cursor(ordering, query.after),
                                   table.table.c.uid))
    stmt = (select(table.table).where(and_(*where))
            .order_by(*ordering.order_by(table.table.c.uid)).limit(limit + 1))
    rows = (await conn.execute(stmt)).mappings().all()
    page = rows[:limit]
    found: dict[str, Any] = {
        "items": [target.row_json(r) for r in page],
        "next": encode_cursor(ordering, page[-1]) if len(rows) > limit else None}
    if query.count == "exact":
        found["total"] = int((await conn.execute(counted)).scalar_one())
    elif query.count == "estimate":
        found["total"], found["estimated"] = await estimated_rows(conn, counted), True
    return found


async def estimated_rows(conn: AsyncConnection, counted: Any) -> int:
    """The planner's estimate of the rows a count would count (what PostgREST's
    `count=estimated` and Supabase Studio show): no row is read, so it costs the same at 1M
    rows as at 10, and may be off by the statistics' error. Only the operator gets it: the
    statistics describe the whole table, every org together."""
    inner = counted.get_final_froms()[0]
    rows = select(inner.c.uid).where(counted.whereclause)
    compiled = rows.compile(dialect=conn.dialect)
    args = tuple(compiled.construct_params()[name] for name in compiled.positiontup or ())
    result = await conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled.string}", args)
    plan = result.scalar_one()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


async def _live_row(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID) -> Any:
    table = target.table
    row = (await conn.execute(select(table.table).where(and_(
        table.table.c.uid == uid, table.live())))).mappings().first()
    if row is None:
        raise NotFound("no such row", {"uid": str(uid)})
    return row


async def read_row(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID) -> dict[str, Any]:
    return target.row_json(await _live_row(conn, target, uid))


async def _body_org(conn: AsyncConnection, target: AdminTable,
                    body: Any) -> tuple[uuid.UUID, dict[str, Any]]:
    """The org a new row goes to, and the row's own fields."""
    if not isinstance(body, dict):
        raise ValidationFailed("the row must be a JSON object")
    fields = dict(body)
    ref = fields.pop(ORG, None)
    if not isinstance(ref, str):
        raise ValidationFailed("`org` (the uid of the row's org) is required",
                               {"errors": [{"column": ORG, "message": "required"}]})
    org_uid = await find_org(conn, target.app_uid, ref)
    if org_uid is None:
        raise ValidationFailed("`org` names no org of this app",
                               {"errors": [{"column": ORG, "message": "no such org"}]})
    return org_uid, fields


async def create_row(conn: AsyncConnection, target: AdminTable, body: Any) -> dict[str, Any]:
    org_uid, fields = await _body_org(conn, target, body)
    access = _as_app(target, org_uid, "create")
    written = await writes.create_row(ConnectionExecutor(conn), access,
                                      column_values(access.table, fields, creating=True))
    uid = uuid.UUID(written["uid"])
    await audit.record(conn, target.app_uid, "row.create", target.target(uid),
                       {"org": str(org_uid), "columns": sorted(fields)})
    return await read_row(conn, target, uid)


async def update_row(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID,
                     body: Any) -> dict[str, Any]:
    org_uid = (await _live_row(conn, target, uid))["org_uid"]
    access = _as_app(target, org_uid, "update")
    await writes.update_row(ConnectionExecutor(conn), access, uid,
                            column_values(access.table, body, creating=False))
    await audit.record(conn, target.app_uid, "row.update", target.target(uid),
                       {"org": str(org_uid), "columns": sorted(body)})
    return await read_row(conn, target, uid)


async def delete_row(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID) -> None:
    org_uid = (await _live_row(conn, target, uid))["org_uid"]
    await writes.delete_row(ConnectionExecutor(conn), _as_app(target, org_uid, "delete"), uid)
    await audit.record(conn, target.app_uid, "row.delete", target.target(uid),
                       {"org": str(org_uid)})


async def import_rows(conn: AsyncConnection, target: AdminTable, org_uid: uuid.UUID,
                      chunks: AsyncIterator[bytes] | Spool) -> int:
    inserted = await csv_import.import_csv(conn, _as_app(target, org_uid, "create"), chunks)
    await audit.record(conn, target.app_uid, "row.import", target.target(),
                       {"org": str(org_uid), "inserted": inserted})
    return inserted
