"""The write service: every change to a user table goes through here, and each one records its
change-log entry in the same statement as the change (a data-modifying CTE), so a write and
its log entry commit or roll back together.

On the request path's pool a create, an update or a delete of one row is one statement in
autocommit, guarded by the authentication facts (plan.guard); an update only happens when the
row as updated still matches the writer's policy. A miss (no such row, a policy that does not
allow it) is then explained by the same write inside a transaction, which rolls back a row
that would leave the writer's row policy and says 403 or 404.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import and_, exists, literal, select
from uuid6 import uuid7

from authoric.catalog.types import column_type
from authoric.db.changelog import DELETE, UPDATE
from authoric.errors import Forbidden, NotFound
from authoric.plan.access import Access, reader
from authoric.plan.plan import Plan, governed_rows
from authoric.plan.runner import Executor
from authoric.policy.decision import Decision
from authoric.records.conflicts import fetch_or_explain
from authoric.records.references import refuse_if_referenced, require_live_targets


def needs_transaction(access: Access, action: str) -> bool:
    """Whether a single-row write needs several statements in one transaction: references into
    soft-delete tables (checked live first), and deletes on soft-delete tables (a referenced
    row may not be soft-deleted)."""
    if action == "delete":
        return access.table.soft_delete
    return any(column_type(c.type).is_reference and access.snapshot.table(str(c.references)).soft_delete
               for c in access.table.definition.columns)


async def write_at_once(ex: Executor, access: Access, uid: uuid.UUID,
                        values: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
    """Update (values given) or delete one row in one guarded statement: (done, the row as the
    writer may read it). Not done means a miss, to be explained in a transaction."""
    principal = access.principal
    read = reader(access.snapshot, principal, access.table) if values is not None else None
    op = UPDATE if values is not None else DELETE
    rows = await fetch_or_explain(ex, access, Plan(access).change_one(
        uid, op, values, read, principal.user_uid, ex.guard), values)
    if ex.guard is not None:
        rows = ex.guard.check(rows)
    if not rows:
        return False, None
    return True, (_as_writer(access, read, rows[0]) if values is not None else None)


async def create_row(ex: Executor, access: Access, values: dict[str, Any]) -> dict[str, Any]:
    table, principal = access.table, access.principal
    await require_live_targets(ex, access, values)
    uid = uuid7()
    read = reader(access.snapshot, principal, table)
    statement = Plan(access).create(uid, values, read, ex.guard, principal.user_uid)
    rows = await fetch_or_explain(ex, access, statement, values)
    if ex.guard is not None:
        rows = ex.guard.check(rows)
    if not rows:  # the row policy refused the row as written: nothing was inserted
        raise Forbidden("the row would fall outside your row policy", {"uid": str(uid)})
    return _as_writer(access, read, rows[0])


async def update_row(ex: Executor, access: Access, uid: uuid.UUID,
                     values: dict[str, Any]) -> dict[str, Any]:
    await require_live_targets(ex, access, values)
    read = reader(access.snapshot, access.principal, access.table)
    rows = await fetch_or_explain(ex, access, Plan(access).change_one(
        uid, UPDATE, values, read, access.principal.user_uid), values)
    if not rows:
        await _explain_miss(ex, access, uid)
    row = rows[0]
    if not row["_allowed"]:
        # Raising rolls the caller's transaction back: the row and its log entry go together.
        raise Forbidden("the row would fall outside your row policy", {"uid": str(uid)})
    return _as_writer(access, read, row)


async def delete_row(ex: Executor, access: Access, uid: uuid.UUID) -> None:
    table = access.table
    if table.soft_delete:
        c = table.table.c
        doomed = select(c.uid).where(and_(c.uid == literal(uid, c.uid.type),
                                          Plan(access).where()))
        await refuse_if_referenced(ex, access, doomed)
    rows = await ex.fetch(Plan(access).change_one(uid, DELETE, None, None,
                                                  access.principal.user_uid))
    if not rows:
        await _explain_miss(ex, access, uid)


def _as_writer(access: Access, read: Decision | None, row: Any) -> dict[str, Any]:
    """The row as its writer may read it now, or `{"uid"}` alone when it may not."""
    if read is None or not row["_readable"]:
        return {"uid": str(row["uid"])}
    return access.table.row_json(row, read.redacted)


async def _explain_miss(ex: Executor, access: Access, uid: uuid.UUID) -> None:
    """404 when the principal cannot see the row; 403 when it can read but not change it."""
    visible = reader(access.snapshot, access.principal, access.table)
    if visible is not None:
        table = access.table
        c = table.table.c
        found = await ex.fetch(select(exists().where(and_(
            c.uid == literal(uid, c.uid.type),
            governed_rows(table, visible, access.principal, access.operator))).label("found")))
        if found and found[0]["found"]:
            raise Forbidden(f"your row policy does not allow {access.decision.action} on this row",
                            {"uid": str(uid)})
    raise NotFound("no such row", {"uid": str(uid)})
