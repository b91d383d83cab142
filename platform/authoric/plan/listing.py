"""Ordering, limits and keyset cursors for list requests."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, literal, or_
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.types import BadValue, parse_json, parse_text, render
from authoric.errors import BadRequest
from authoric.plan.fields import FieldRef

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


def parse_limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError as exc:
        raise BadRequest("limit must be an integer from 1 to 1000", {"limit": raw}) from exc
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest("limit must be an integer from 1 to 1000", {"limit": raw})
    return limit


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


def cursor_clause(ordering: Ordering, cursor: str, uid: Any) -> ColumnElement[bool]:
    """Rows strictly after the cursor's (value, uid) in this ordering (NULLs sort last)."""
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
    col = ordering.field.column
    beyond_uid = uid < after_uid if ordering.descending else uid > after_uid
    if value is None:
        return and_(col.is_(None), beyond_uid)
    value = literal(value, type_=col.type)  # bound and typed: booleans compare with < and >
    beyond = col < value if ordering.descending else col > value
    return or_(beyond, and_(col == value, beyond_uid), col.is_(None))
