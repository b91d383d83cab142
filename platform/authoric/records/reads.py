"""Governed reads: single rows and pages, always through a decision (org, policy, redaction)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.errors import NotFound
from authoric.policy.decision import Decision
from authoric.policy.principal import Principal
from authoric.query.fields import table_fields
from authoric.query.filters import FilterScope, compile_filter
from authoric.query.listing import cursor_clause, encode_cursor, parse_limit, parse_order
from authoric.records.gate import Access


def parse_uid(raw: str) -> uuid.UUID:
    """A row uid from a URL; anything else is a row that does not exist."""
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound("no such row") from exc


@dataclass(frozen=True)
class ListQuery:
    filter: dict[str, Any]
    order: str | None
    limit: str | None
    after: str | None


async def read_one(conn: AsyncConnection, access: Access, uid: uuid.UUID) -> dict[str, Any]:
    row = await _select_one(conn, access.table, access.decision, access.principal, uid)
    if row is None:
        raise NotFound("no such row", {"uid": str(uid)})
    return access.table.row_json(row, access.decision.redacted)


async def _select_one(conn: AsyncConnection, table: CompiledTable, decision: Decision,
                      principal: Principal, uid: uuid.UUID) -> Any:
    stmt = select(table.table).where(and_(table.table.c.uid == uid,
                                          decision.rows(table, principal)))
    return (await conn.execute(stmt)).mappings().first()


def filter_scope(access: Access) -> FilterScope:
    return FilterScope(table_fields(access.table), access.principal.attributes(),
                       access.decision.redacted)


async def list_page(conn: AsyncConnection, access: Access, query: ListQuery) -> dict[str, Any]:
    table = access.table
    fields = table_fields(table)
    limit = parse_limit(query.limit)
    ordering = parse_order(query.order, fields, access.decision.redacted)
    where = [access.decision.rows(table, access.principal),
             compile_filter(query.filter, filter_scope(access))]
    if query.after:
        where.append(cursor_clause(ordering, query.after, table.table.c.uid))
    stmt = (select(table.table).where(and_(*where))
            .order_by(*ordering.order_by(table.table.c.uid)).limit(limit + 1))
    rows = (await conn.execute(stmt)).mappings().all()
    page = rows[:limit]
    return {
        "items": [table.row_json(r, access.decision.redacted) for r in page],
        "next": encode_cursor(ordering, page[-1]) if len(rows) > limit else None,
    }
