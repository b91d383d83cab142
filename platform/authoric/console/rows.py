"""The operator's view of a table: every org, no row policy, no redaction, operation switches
ignored. Rows carry `org`.

Every call is a `TableRequest` run by the request pipeline (records.pipeline `execute`), as
REST runs a member's, with the operator as its caller (`Operator`), inside the console
route's transaction:
- reads see every org (plan.access `operator_access`), or one org (`?org=`) as the app
  itself acting in it sees it: no row policy, nothing redacted;
- writes run as the app itself acting in the row's org (the org the body names for a create,
  the row's own for an update or delete), so they are validated the same way and record the
  same change-log entries (hence the same events) as a REST write.
Each write also records an audit entry, in the same transaction, naming the row and the
columns given, never their values. The operator is never told that a unique conflict is
hidden (every row is theirs to see), so no second transaction is ever needed to explain one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.console import audit
from authoric.db import tables as t
from authoric.errors import NotFound, ValidationFailed
from authoric.plan.access import Access, admit, operator_access
from authoric.plan.request import TableRequest, call, ok
from authoric.policy.principal import Principal
from authoric.records.csv_fast import Spool
from authoric.records.pipeline import InTransaction, execute

ORG = "org"  # the key a row of the operator's view carries its org under
NO_ORG = uuid.UUID(int=0)  # the org of the operator reading every org: none of them


@dataclass(frozen=True)
class AdminTable:
    """One table of one app, as the operator reaches it."""

    snapshot: AppSnapshot
    table: CompiledTable

    @property
    def app_uid(self) -> uuid.UUID:
        return self.snapshot.uid

    def target(self, uid: uuid.UUID | str | None = None) -> str:
        base = f"tables/{self.table.name}/rows"
        return base if uid is None else f"{base}/{uid}"


@dataclass
class Operator(InTransaction):
    """The operator as the pipeline's caller, in the console route's transaction: every org
    (`org` None), or the app itself acting in `org`; either way its rows carry their org."""

    org: uuid.UUID | None = None

    def admit(self, table: str, action: str) -> Access:
        if self.org is None:
            return operator_access(self.snapshot, self.principal, table, action)
        return replace(admit(self.snapshot, self.principal, table, action), for_operator=True)


def operator(conn: AsyncConnection, target: AdminTable, org: uuid.UUID | None = None) -> Operator:
    """The operator on `target`'s app, in every org or in `org`."""
    principal = Principal(target.app_uid, None, org or NO_ORG, None, (), None, acting_as_app=True)
    return Operator(conn, conn.engine, principal, target.snapshot, org=org)


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


async def list_rows(conn: AsyncConnection, target: AdminTable, org_ref: str | None,
                    request: TableRequest) -> dict[str, Any]:
    """A page of every org's rows, or of the org `?org=` names (404 when none); `?count=` may
    also be `estimate` here (records.reads `estimate_rows`)."""
    org = await org_filter(conn, target.app_uid, org_ref)
    page: dict[str, Any] = await execute(operator(conn, target, org), request)
    return page


async def read_row(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID) -> dict[str, Any]:
    read = call(str(target.app_uid), target.table.name, "read", uid)
    row: dict[str, Any] = await execute(operator(conn, target), read)
    return row


async def _row_org(conn: AsyncConnection, target: AdminTable, uid: uuid.UUID) -> uuid.UUID:
    """The org of the live row `uid` (404 when there is none)."""
    return uuid.UUID((await read_row(conn, target, uid))[ORG])


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


async def create_row(conn: AsyncConnection, target: AdminTable,
                     request: TableRequest) -> dict[str, Any]:
    org_uid, fields = await _body_org(conn, target, request.body.get())
    written = await execute(operator(conn, target, org_uid), replace(request, body=ok(fields)))
    uid = uuid.UUID(written["uid"])
    await audit.record(conn, target.app_uid, "row.create", target.target(uid),
                       {"org": str(org_uid), "columns": sorted(fields)})
    return await read_row(conn, target, uid)  # whole, whatever the table's read switch says


async def update_row(conn: AsyncConnection, target: AdminTable,
                     request: TableRequest) -> dict[str, Any]:
    body, uid = request.body.get(), request.row_uid()  # a bad body is answered before a 404
    org_uid = await _row_org(conn, target, uid)
    await execute(operator(conn, target, org_uid), request)
    await audit.record(conn, target.app_uid, "row.update", target.target(uid),
                       {"org": str(org_uid), "columns": sorted(body)})
    return await read_row(conn, target, uid)


async def delete_row(conn: AsyncConnection, target: AdminTable, request: TableRequest) -> None:
    uid = request.row_uid()
    org_uid = await _row_org(conn, target, uid)
    await execute(operator(conn, target, org_uid), request)
    await audit.record(conn, target.app_uid, "row.delete", target.target(uid),
                       {"org": str(org_uid)})


async def import_rows(caller: Operator, target: AdminTable, request: TableRequest,
                      chunks: AsyncIterator[bytes] | Spool) -> int:
    """The CSV rows inserted into the org `caller` acts in (`import_org`)."""
    inserted = int((await execute(caller, request, chunks))["inserted"])
    await audit.record(caller.conn, target.app_uid, "row.import", target.target(),
                       {"org": str(caller.org), "inserted": inserted})
    return inserted
