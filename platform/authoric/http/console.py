"""Contract section 2a for the admin token: rows across orgs, impersonation, policy preview
and the audit log. (The admin feed, `GET .../rows/subscribe`, is served by the realtime
routes.) Parse, call a `console` service, serialize; no SQL and no policy here.

These routes write their own audit entries, in the transaction of their change, so the
admin edge (`http.admin_audit`) is told to leave them alone.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.apps import find_app
from authoric.console import audit, impersonation, preview, rows
from authoric.console.audit import AuditPage
from authoric.console.impersonation import AccessToken, ImpersonationRequest
from authoric.console.preview import Preview, PreviewRequest
from authoric.console.rows import AdminTable
from authoric.http.admin import require_admin
from authoric.http.admin_audit import audited_by_route
from authoric.http.answers import declared
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute, csv_body, row_body
from authoric.http.context import services
from authoric.http.edge import RESERVED_PARAMS, table_request
from authoric.plan.guard import until_held
from authoric.plan.request import Operation, TableRequest
from authoric.records import csv_import
from authoric.records.pipeline import admitted

router = APIRouter(prefix="/admin/apps/{app}", tags=["console"],
                   dependencies=[Depends(require_admin), Depends(audited_by_route)],
                   route_class=TypedRoute, responses=ERROR_RESPONSES)
# Typed bodies, parsed after the admin token is checked. (Row bodies are the table's own.)
ROWS = "/tables/{table}/rows"
# A row uid in the path must parse as one, so `.../rows/subscribe` stays the feed's.
ROW = ROWS + "/{uid:uuid}"
ADMIN_LIST_PARAMS = RESERVED_PARAMS | {"org"}
T = TypeVar("T")


@asynccontextmanager
async def admin_table(request: Request, app: str,
                      table: str) -> AsyncIterator[tuple[AsyncConnection, AdminTable]]:
    """A transaction and the table as the operator reaches it (404 for app or table)."""
    svc = services(request)
    async with svc.tx() as conn:
        app_row = await find_app(conn, app)
        snapshot = await svc.snapshot(conn, app_row["uid"], app_row["version"])
        yield conn, AdminTable(snapshot, snapshot.table(table))


async def on_admin_table(request: Request, app: str, table: str,
                         work: Callable[[AsyncConnection, AdminTable], Awaitable[T]]) -> T:
    """`work` in `admin_table`'s transaction, planned again in a new one when the catalog
    moved under it (a rename committed after the version was read: the transaction's guard
    failed and it rolled back, records.pipeline `confirmed`)."""
    async def attempt() -> T:
        async with admin_table(request, app, table) as (conn, target):
            return await work(conn, target)

    return await until_held(attempt)


def row_request(request: Request, operation: Operation, app: str, table: str,
                uid: uuid.UUID | None = None, raw: bytes | None = None) -> TableRequest:
    """The route's `TableRequest`, parsed once by the REST edge's parser (`?org=` aside)."""
    path = {"app": app, "table": table, **({} if uid is None else {"uid": str(uid)})}
    return table_request(request, operation, path, raw, ADMIN_LIST_PARAMS)


@router.get(ROWS)
async def list_rows(request: Request, app: str, table: str) -> dict[str, Any]:
    parsed = row_request(request, "list", app, table)
    org = request.query_params.get("org")
    return await on_admin_table(request, app, table, lambda conn, target: rows.list_rows(
        conn, target, org, parsed))


@router.post(ROWS, status_code=201, openapi_extra=row_body(
    "the new row's org and values; omitted columns take their default", in_org=True))
async def create_row(request: Request, app: str, table: str) -> dict[str, Any]:
    parsed = row_request(request, "create", app, table, raw=await request.body())
    return await on_admin_table(request, app, table, lambda conn, target: rows.create_row(
        conn, target, parsed))


@router.post(ROWS + "/import", status_code=201,
             openapi_extra=csv_body("the rows to insert, into the org named by `?org=`"))
async def import_rows(request: Request, app: str, table: str) -> dict[str, Any]:
    # As for REST: the request is checked, then the body is spooled with no connection held
    # (a slow upload holds a file, not a pooled connection), then imported in one transaction.
    parsed, org = row_request(request, "import", app, table), request.query_params.get("org")
    async with admin_table(request, app, table) as (conn, target):
        admitted(rows.operator(conn, target, await rows.import_org(conn, target.app_uid, org)),
                 parsed)
    spool = await csv_import.spool_body(request.stream())
    budget = request.app.state.services.settings.import_time_budget

    async def imported(conn: AsyncConnection, target: AdminTable) -> dict[str, Any]:
        caller = rows.operator(conn, target, await rows.import_org(conn, target.app_uid, org))
        return {"inserted": await rows.import_rows(caller, target, parsed, spool)}

    try:
        async with csv_import.time_budget(budget):
            return await on_admin_table(request, app, table, imported)
    finally:
        spool.close()


@router.get(ROW)
async def read_row(request: Request, app: str, table: str, uid: uuid.UUID) -> dict[str, Any]:
    return await on_admin_table(request, app, table, lambda conn, target: rows.read_row(
        conn, target, uid))


@router.patch(ROW, openapi_extra=row_body("the columns to change, with their new values"))
async def update_row(request: Request, app: str, table: str, uid: uuid.UUID) -> dict[str, Any]:
    parsed = row_request(request, "update", app, table, uid, await request.body())
    return await on_admin_table(request, app, table, lambda conn, target: rows.update_row(
        conn, target, parsed))


@router.delete(ROW, status_code=204)
async def delete_row(request: Request, app: str, table: str, uid: uuid.UUID) -> Response:
    parsed = row_request(request, "delete", app, table, uid)
    await on_admin_table(request, app, table, lambda conn, target: rows.delete_row(
        conn, target, parsed))
    return Response(status_code=204)


@router.post("/impersonate", response_model=None, responses=declared(200, AccessToken))
async def impersonate(request: Request, app: str, body: Body[ImpersonationRequest]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid = (await find_app(conn, app))["uid"]
        return await impersonation.impersonate(conn, svc.jwt_secret, app_uid, body)


@router.post("/roles/{role}/preview", response_model=None,
             responses=declared(200, Preview))
async def preview_role(request: Request, app: str, role: str, body: Body[PreviewRequest]) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_row = await find_app(conn, app)
        snapshot = await svc.snapshot(conn, app_row["uid"], app_row["version"])
        return await preview.preview(conn, snapshot, role, body)


@router.get("/audit", response_model=None, responses=declared(200, AuditPage))
async def audit_log(request: Request, app: str) -> dict[str, Any]:
    q = request.query_params
    async with services(request).tx() as conn:
        app_uid = (await find_app(conn, app))["uid"]
        return await audit.list_entries(conn, app_uid, q.get("limit"), q.get("after"),
                                        q.get("actor"))
