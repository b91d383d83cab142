"""Unique conflicts with rows the writer may not read: what a writer learns, and what it costs.

A unique value is unique within the org, hidden rows included, so a write that collides with
a hidden row must fail and reveals that the value exists. This module keeps that to one bit
per request and a bounded number of requests:
- `shown`: whether the writer may read a row's value of a column (read permission, read row
  policy, column not redacted);
- `explain_unique_conflict`: after a REST write failed on a unique value, one statement finds
  whether only hidden rows hold the value; then the same 409 is raised as a `HiddenConflict`,
  which the error handler counts against the member's limit (auth.ratelimit; 429 past it).
  A write inside a transaction (references into soft-delete tables, bulk updates) is
  explained after its rollback, on a fresh transaction (`explain_after_rollback`).
CSV import reports such a conflict as one summary error (records.csv_import).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from sqlalchemy import and_, false, func, literal, or_, select, true
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.model import ColumnDef
from authoric.db.errors import translate
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


async def fetch_or_explain(ex: Executor, access: Access, statement: Any,
                           values: dict[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    """The rows of a write `statement` writing `values`; a unique conflict is explained
    (`explain_unique_conflict`) before it is raised."""
    try:
        return await ex.fetch(statement)
    except (Conflict, DBAPIError) as exc:  # a transaction's executor leaves errors untranslated
        conflict = translate(exc) if isinstance(exc, DBAPIError) else exc
        if values is None or not isinstance(conflict, Conflict) or not is_unique_violation(conflict):
            raise
        await explain_unique_conflict(ex, access, values, conflict)


class UnexplainedConflict(Conflict):
    """A unique conflict inside a transaction, which the failed statement aborted: the same 409,
    explained by the pipeline after the rollback (`explain_after_rollback`)."""

    def __init__(self, access: Access, values: dict[str, Any], conflict: Conflict) -> None:
        super().__init__(conflict.message, conflict.details, conflict.headers)
        self.access, self.values, self.conflict = access, values, conflict


async def explain_unique_conflict(ex: Executor, access: Access, values: dict[str, Any],
                                  conflict: Conflict) -> NoReturn:
    """Raise `conflict` again, as a `HiddenConflict` when every row of the org holding one of
    the written unique values is one the writer may not read. On the request path's
    autocommit pool this is asked at once; inside a transaction the failed statement has
    aborted it, so an `UnexplainedConflict` carries the question out past the rollback."""
    if access.operator or access.principal.acting_as_app or not _unique_written(access, values):
        raise conflict
    if ex.guard is None:
        raise UnexplainedConflict(access, values, conflict) from conflict
    if await held_only_by_hidden_rows(ex, access, values):
        raise HiddenConflict(access, conflict) from conflict
    raise conflict


async def explain_after_rollback(ex: Executor, pending: UnexplainedConflict) -> NoReturn:
    """Raise the 409 of a conflict from a rolled-back transaction, as a `HiddenConflict` when
    only hidden rows hold the value; `ex` is a fresh connection's."""
    if await held_only_by_hidden_rows(ex, pending.access, pending.values):
        raise HiddenConflict(pending.access, pending.conflict) from pending.conflict
    raise pending.conflict


def _unique_written(access: Access, values: dict[str, Any]) -> list[ColumnDef]:
    return [c for c in access.table.definition.columns
            if c.unique and values.get(c.name) is not None]


async def held_only_by_hidden_rows(ex: Executor, access: Access, values: dict[str, Any]) -> bool:
    """Whether some row of the org holds one of the written unique values, and none of those
    rows shows the writer that value (one statement)."""
    unique = _unique_written(access, values)
    t = access.table.table
    same = [t.c[c.name] == literal(values[c.name], t.c[c.name].type) for c in unique]
    where = [t.c.org_uid == literal(access.principal.org_uid, t.c.org_uid.type), or_(*same)]
    if access.table.soft_delete:  # soft-deleted rows free their values (a partial index)
        where.append(t.c.deleted_at.is_(None))
    readable = or_(*[and_(match, shown(access, c)) for match, c in zip(same, unique, strict=True)])
    rows = await ex.fetch(select(func.count().label("n"),
                                 func.coalesce(func.bool_or(readable), False).label("readable"))
                          .select_from(t).where(*where))
    return bool(rows and rows[0]["n"] and not rows[0]["readable"])
