"""Unique conflicts with rows the writer may not read: what a writer learns, and what it costs.

A unique value is unique within the org, hidden rows included, so a write that collides with
a hidden row must fail and reveals that the value exists. This module keeps that to one bit
per request and a bounded number of requests:
- `shown`: whether the writer may read a row's value of a column (read permission, read row
  policy, column not redacted);
- `explain_unique_conflict`: after a REST write failed on a unique value, one statement finds
  whether only hidden rows hold the value; then the same 409 is raised as a `HiddenConflict`,
  which the error handler counts against the member's limit (auth.ratelimit; 429 past it).
CSV import reports such a conflict as one summary error (records.csv_import).
"""

from __future__ import annotations

from typing import Any, NoReturn

from sqlalchemy import and_, false, func, literal, or_, select, true
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.model import ColumnDef
from authoric.errors import Conflict
from authoric.plan.access import Access, reader
from authoric.plan.runner import Executor


class HiddenConflict(Conflict):
    """A 409 caused by a row the writer may not read: the same answer as any unique conflict,
    counted against the writer's hidden-conflict limit by the error handler."""

    def __init__(self, access: Access, conflict: Conflict) -> None:
        super().__init__(conflict.message, conflict.details, conflict.headers)
        p = access.principal
        self.hidden_conflict_of = (p.app_uid, p.user_uid, p.org_uid)


def shown(access: Access, column: ColumnDef) -> ColumnElement[bool]:
    """True for a row whose value of `column` the writer may read: the read permission, the
    read row policy, and the column not redacted."""
    if access.operator or access.principal.acting_as_app:
        return true()
    decision = reader(access.snapshot, access.principal, access.table)
    if decision is None or {column.name, f"{column.name}_uid"} & decision.redacted:
        return false()
    return true() if decision.policy is None else func.coalesce(decision.policy, False)


def is_unique_violation(conflict: Conflict) -> bool:
    return conflict.details.get("reason") == "unique_violation"


async def explain_unique_conflict(ex: Executor, access: Access, values: dict[str, Any],
                                  conflict: Conflict) -> NoReturn:
    """Raise `conflict` again, as a `HiddenConflict` when every row of the org holding one of
    the written unique values is one the writer may not read. Only on the request path's
    autocommit pool: inside a transaction the failed statement has aborted it."""
    unique = [c for c in access.table.definition.columns
              if c.unique and values.get(c.name) is not None]
    if not unique or ex.guard is None or access.operator or access.principal.acting_as_app:
        raise conflict
    t = access.table.table
    same = [t.c[c.name] == literal(values[c.name], t.c[c.name].type) for c in unique]
    where = [t.c.org_uid == literal(access.principal.org_uid, t.c.org_uid.type), or_(*same)]
    if access.table.soft_delete:  # soft-deleted rows free their values (a partial index)
        where.append(t.c.deleted_at.is_(None))
    readable = or_(*[and_(match, shown(access, c)) for match, c in zip(same, unique, strict=True)])
    rows = await ex.fetch(select(func.count().label("n"),
                                 func.coalesce(func.bool_or(readable), False).label("readable"))
                          .select_from(t).where(*where))
    if rows and rows[0]["n"] and not rows[0]["readable"]:
        raise HiddenConflict(access, conflict) from conflict
    raise conflict
