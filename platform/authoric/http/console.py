"""Contract section 2a for the admin token: rows across orgs, impersonation, policy preview
and the audit log. (The admin feed, `GET .../rows/subscribe`, is served by the realtime
routes.) Parse, call a `console` service, serialize; no SQL and no policy here.

These routes write their own audit entries, in the transaction of their change, so the
admin edge (`http.admin_audit`) is told to leave them alone.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.apps import find_app
from authoric.console import audit, impersonation, preview, rows
from authoric.console.impersonation import ImpersonationRequest
from authoric.console.preview import PreviewRequest
from authoric.console.rows import AdminListQuery, AdminTable
from authoric.http.admin import require_admin
from authoric.http.admin_audit import audited_by_route
from authoric.http.bodies import ERROR_RESPONSES, TypedRoute, body_of
from authoric.http.context import services
from authoric.http.edge import CSV, RESERVED_PARAMS, json_body, query_filter, require_media
from authoric.plan.request import parse_count
from authoric.records import csv_import

router = APIRouter(prefix="/admin/apps/{app}", tags=["console"],
                   dependencies=[Depends(require_admin), Depends(audited_by_route)],
                   route_class=TypedRoute, responses=ERROR_RESPONSES)
# Typed bodies, parsed after the admin token is checked. (Row bodies are the table's own.)
ImpersonationBody = Annotated[ImpersonationRequest, Depends(body_of(ImpersonationRequest))]
PreviewBody = Annotated[PreviewRequest, Depends(body_of(PreviewRequest))]
ROWS = "/tables/{table}/rows"
# A row uid in the path must parse as one, so `.../rows/subscribe` stays the feed's.
ROW = ROWS + "/{uid:uuid}"
ADMIN_LIST_PARAMS = RESERVED_PARAMS | {"org"}


@asynccontextmanager
async def admin_table(request: Request, app: str,
                      table: str) -> AsyncIterator[tuple[AsyncConnection, AdminTable]]:
    """A transaction and the table as the operator reaches it (404 for app or table)."""
    svc = services(request)
    async with svc.tx() as conn:
        app_row = await find_app(conn, app)
        snapshot = await svc.snapshot(conn, app_row["uid"], app_row["version"])
        yield conn, AdminTable(snapshot, snapshot.table(table))


@router.get(ROWS)
async def list_rows(request: Request, app: str, table: str) -> dict[str, Any]:
    q = request.query_params
    async with admin_table(request, app, table) as (conn, target):
        org = await rows.org_filter(conn, target.app_uid, q.get("org"))
        query = AdminListQuery(query_filter(q.multi_items(), q.get("filter"),
                                            ADMIN_LIST_PARAMS).get(), q.get("order"),
                               q.get("limit"), q.get("after"), org,
                               parse_count(q.get("count")))
        return await rows.list_rows(conn, target, query)


@router.post(ROWS, status_code=201)
async def create_row(request: Request, app: str, table: str) -> dict[str, Any]:
    async with admin_table(request, app, table) as (conn, target):
        return await rows.create_row(conn, target, await json_body(request))


@router.post(ROWS + "/import", status_code=201)
async def import_rows(request: Request, app: str, table: str) -> dict[str, Any]:
    # As for REST: the request is checked, then the body is spooled with no connection held
    # (a slow upload holds a file, not a pooled connection), then imported in one transaction.
    async with admin_table(request, app, table) as (conn, target):
        await rows.import_org(conn, target.app_uid, request.query_params.get("org"))
        require_media(request.headers.get("content-type"), CSV, "the file")
    spool = await csv_import.spool_body(request.stream())
    try:
        budget = request.app.state.services.settings.import_time_budget
        async with admin_table(request, app, table) as (conn, target), \
                csv_import.time_budget(budget):
            org = await rows.import_org(conn, target.app_uid, request.query_params.get("org"))
            return {"inserted": await rows.import_rows(conn, target, org, spool)}
    finally:
        spool.close()


@router.get(ROW)
async def read_row(request: Request, app: str, table: str, uid: uuid.UUID) -> dict[str, Any]:
    async with admin_table(request, app, table) as (conn, target):
        return await rows.read_row(conn, target, uid)


@router.patch(ROW)
async def update_row(request: Request, app: str, table: str, uid: uuid.UUID) -> dict[str, Any]:
    async with admin_table(request, app, table) as (conn, target):
        return await rows.update_row(conn, target, uid, await json_body(request))


@router.delete(ROW, status_code=204)
async def delete_row(request: Request, app: str, table: str, uid: uuid.UUID) -> Response:
    async with admin_table(request, app, table) as (conn, target):
        await rows.delete_row(conn, target, uid)
    return Response(status_code=204)


@router.post("/impersonate")
async def impersonate(request: Request, app: str, body: ImpersonationBody) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_uid = (await find_app(conn, app))["uid"]
        return await impersonation.impersonate(conn, svc.jwt_secret, app_uid, body)


@router.post("/roles/{role}/preview")
async def preview_role(request: Request, app: str, role: str, body: PreviewBody) -> dict[str, Any]:
    svc = services(request)
    async with svc.tx() as conn:
        app_row = await find_app(conn, app)
        snapshot = await svc.snapshot(conn, app_row["uid"], app_row["version"])
        return await preview.preview(conn, snapshot, role, body)


@router.get("/audit")
async def audit_log(request: Request, app: str) -> dict[str, Any]:
    q = request.query_params
    async with services(request).tx() as conn:
        app_uid = (await find_app(conn, app))["uid"]
        return await audit.list_entries(conn, app_uid, q.get("limit"), q.get("after"))
