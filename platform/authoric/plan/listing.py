"""Ordering, limits and keyset cursors for list requests."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.types import BadValue, parse_json, parse_text, render
from authoric.errors import BadRequest
from authoric.plan.binds import named
from authoric.query.fields import FieldRef

DEFAULT_LIMIT, MAX_LIMIT = 50, 1000


@dataclass(frozen=True)
class Ordering:
    field: FieldRef
    descending: bool

    @property
    def spec(self) -> str:
        return ("-" if self.descending else "") + self.field.name

    def order_by(self, uid: Any) -> list[Any]:
        col = self.field.column
        if self.descending:
            return [col.desc().nulls_last(), uid.desc()]
        return [col.asc().nulls_last(), uid.asc()]


def parse_limit(raw: str | None, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """A page size from the query string: ASCII digits only (`"²".isdigit()` is true, and
    `int()` refuses it), from 1 to `maximum`; every list of rows or admin records reads it here."""
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and 1 <= int(raw) <= maximum):
        raise BadRequest(f"limit must be an integer from 1 to {maximum}", {"limit": raw})
    return int(raw)


def parse_id_cursor(raw: str | None) -> int | None:
    """The `after` cursor of a list ordered by a bigint id (the id of the previous page's
    last entry): ASCII digits only; 400 for anything else."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BadRequest("bad cursor", {"after": raw})
    return int(raw)


async def newest_first(conn: AsyncConnection, table: Table, where: list[ColumnElement[bool]],
                       size: int, before: int | None,
                       shape: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """A page of `table`'s rows matching `where`, newest (highest bigint `id`) first, each
    shaped by `shape`, and the cursor of the next page (None on the last): the admin lists
    ordered by id (audit log, mailbox, webhook deliveries). `size` and `before` come from
    parse_limit() and parse_id_cursor(); one row more than the page says whether one follows."""
    if before is not None:
        where = [*where, table.c.id < before]
    rows = (await conn.execute(select(table).where(and_(*where)).order_by(table.c.id.desc())
                               .limit(size + 1))).mappings().all()
    page = rows[:size]
    return {"items": [shape(r) for r in page],
            "next": str(page[-1]["id"]) if len(rows) > size else None}


def parse_order(raw: str | None, fields: dict[str, FieldRef], hidden: frozenset[str]) -> Ordering:
    spec = raw or "uid"
    descending = spec.startswith("-")
    name = spec[1:] if descending else spec
    ref = fields.get(name)
    if ref is None:
        raise BadRequest(f"cannot order by unknown column {name!r}", {"order": spec})
    if ref.owner_column in hidden:
        raise BadRequest(f"column {name!r} is redacted for you and cannot be ordered by",
                         {"order": spec})
    return Ordering(ref, descending)


def encode_cursor(ordering: Ordering, row: Any) -> str:
    value = row[ordering.field.column.name]
    doc = {"o": ordering.spec, "v": render(ordering.field.type, value), "u": str(row["uid"])}
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def decode_cursor(ordering: Ordering, cursor: str) -> tuple[Any, Any]:
    """The (value, uid) a cursor of this ordering stands at; 400 for anything else."""
    try:
        doc = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if doc["o"] != ordering.spec:
            raise ValueError("cursor made for another order")
        after_uid = parse_text("uuid", doc["u"])
        # `v` is the rendered JSON value, so the JSON parser reads it back (and refuses a
        # value of another type, which would otherwise reach SQL).
        value = parse_json(ordering.field.type, doc["v"])
    except (ValueError, KeyError, TypeError, BadValue) as exc:
        raise BadRequest("bad cursor", {"after": cursor}) from exc
    return value, after_uid


def cursor_params(after: tuple[Any, Any]) -> dict[str, Any]:
    """The values `cursor_clause` binds (plan.binds)."""
    value, after_uid = after
    params = {"B_after_uid": after_uid}
    if value is not None:
        params["B_after_value"] = value
    return params


def cursor_clause(ordering: Ordering, after: tuple[Any, Any], uid: Any) -> ColumnElement[bool]:
    """Rows strictly after the cursor's (value, uid) in this ordering (NULLs sort last)."""
    value, after_uid = after
    bound_uid = named("B_after_uid", after_uid, uid.type)
    beyond_uid = uid < bound_uid if ordering.descending else uid > bound_uid
    col = ordering.field.column
    if value is None:
        return and_(col.is_(None), beyond_uid)
    bound = named("B_after_value", value, col.type)  # typed: booleans compare with < and >
    beyond = col < bound if ordering.descending else col > bound
    return or_(beyond, and_(col == bound, beyond_uid), col.is_(None))
