"""Reference rules the database's foreign keys cannot express for soft-delete tables.

A composite foreign key keeps references inside the org, and blocks hard deletes of a
referenced row. A soft-deleted row still exists for PostgreSQL, so two rules are checked
here: a new reference must name a live row, and a referenced row cannot be soft-deleted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, exists, literal, select

from authoric.catalog.types import column_type
from authoric.errors import Conflict
from authoric.plan.access import Access
from authoric.plan.runner import Executor


async def _any(ex: Executor, condition: Any) -> bool:
    rows = await ex.fetch(select(exists().where(condition).label("found")))
    return bool(rows and rows[0]["found"])


async def require_live_targets(ex: Executor, access: Access, values: dict[str, Any]) -> None:
    """409 when a reference names a soft-deleted row (the key alone would accept it)."""
    for column in access.table.definition.columns:
        value = values.get(column.name)
        if not column_type(column.type).is_reference or value is None:
            continue
        target = access.snapshot.table(str(column.references))
        if not target.soft_delete:
            continue  # the foreign key already refuses a missing row
        t = target.table
        live = await _any(ex, and_(t.c.uid == literal(value, t.c.uid.type),
                                   t.c.org_uid == literal(access.principal.org_uid, t.c.uid.type),
                                   t.c.deleted_at.is_(None)))
        if not live:
            raise Conflict(f"{column.name} references a row that does not exist",
                           {"column": column.name, "reason": "foreign_key_violation"})


async def refuse_if_referenced(ex: Executor, access: Access, doomed: Any) -> None:
    """409 when a live row of any table references one of the rows `doomed` selects."""
    name = access.table.name
    for other in access.snapshot.tables.values():
        for column in other.definition.columns:
            if column.references != name:  # set on reference columns, and only there
                continue
            ref = other.table.c[column.name]
            if await _any(ex, and_(ref.in_(doomed), other.live())):
                raise Conflict(f"the row is referenced by {other.name}.{column.name}",
                               {"referencedBy": f"{other.name}.{column.name}",
                                "reason": "foreign_key_violation"})
