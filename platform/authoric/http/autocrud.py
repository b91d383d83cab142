"""`/{app}/autocrud/{table}`: the generic REST API over each user table.

Every route runs the same pipeline: authenticate → app and table → operation switch →
permission (records.gate.admit) → request shape → governed read or write service.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.auth.principals import authenticate
from authoric.errors import BadRequest, UnsupportedMediaType
from authoric.http.context import json_body, services
from authoric.query.filters import query_string_filter
from authoric.records import bulk, csv_export, csv_import, reads, writes
from authoric.records.gate import Access, admit

router = APIRouter(tags=["autocrud"])
RESERVED_PARAMS = frozenset({"order", "limit", "after", "filter", "lastEventId"})


@asynccontextmanager
async def governed(request: Request, app: str, table: str,
                   action: str) -> AsyncIterator[tuple[AsyncConnection, Access]]:
    """A transaction and the caller's admitted access to `table` for `action`."""
    svc = services(request)
    async with svc.tx() as conn:
        auth = await authenticate(conn, svc.jwt_secret, request.headers.get("authorization"), app)
        snapshot = await svc.snapshot(conn, auth.principal.app_uid, auth.version)
        yield conn, admit(snapshot, auth.principal, table, action)


def list_filter(request: Request, reserved: frozenset[str] = RESERVED_PARAMS) -> dict[str, Any]:
    """The filter of a list or bulk request: query-string terms AND `?filter=` JSON."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in reserved]
    terms = [query_string_filter(params)] if params else []
    raw = request.query_params.get("filter")
    if raw is not None:
        try:
            terms.append(json.loads(raw))
        except (ValueError, RecursionError) as exc:
            raise BadRequest("`filter` is not valid JSON", {"filter": raw[:200]}) from exc
    if not terms:
        return {}
    return terms[0] if len(terms) == 1 else {"and": terms}


def wants_csv(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/csv" for part in accept.split(","))


@router.get("/{app}/autocrud/{table}", response_model=None)
async def list_rows(request: Request, app: str, table: str) -> dict[str, Any] | StreamingResponse:
    q = request.query_params
    async with governed(request, app, table, "read_list") as (conn, access):
        if wants_csv(request):
            statement = csv_export.export_statement(access, list_filter(request), q.get("order"))
        else:
            query = reads.ListQuery(list_filter(request), q.get("order"), q.get("limit"),
                                    q.get("after"))
            return await reads.list_page(conn, access, query)
    rows = csv_export.export_csv(services(request).engine, access, statement)
    return StreamingResponse(rows, media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="{access.table.name}.csv"'})


@router.patch("/{app}/autocrud/{table}")
async def bulk_update(request: Request, app: str, table: str) -> dict[str, Any]:
    async with governed(request, app, table, "update") as (conn, access):
        body = await json_body(request)
        return {"count": await bulk.bulk_update(conn, access, list_filter(request), body)}


@router.delete("/{app}/autocrud/{table}")
async def bulk_delete(request: Request, app: str, table: str) -> dict[str, Any]:
    async with governed(request, app, table, "delete") as (conn, access):
        return {"count": await bulk.bulk_delete(conn, access, list_filter(request))}


@router.post("/{app}/autocrud/{table}/import", status_code=201)
async def import_rows(request: Request, app: str, table: str) -> dict[str, Any]:
    # The caller is admitted before the body is read (a stranger cannot make us store a
    # gigabyte), the body is spooled with no connection held (a slow sender holds no pooled
    # connection), and the import transaction admits the caller again (roles may change).
    async with governed(request, app, table, "create"):
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "text/csv":
            raise UnsupportedMediaType("send the file as text/csv", {"contentType": content_type})
    spool = await csv_import.spool_body(request.stream())
    try:
        async with governed(request, app, table, "create") as (conn, access):
            return {"inserted": await csv_import.import_csv(conn, access, spool)}
    finally:
        spool.close()


@router.get("/{app}/autocrud/{table}/{uid}")
async def read_row(request: Request, app: str, table: str, uid: str) -> dict[str, Any]:
    async with governed(request, app, table, "read") as (conn, access):
        return await reads.read_one(conn, access, reads.parse_uid(uid))


@router.post("/{app}/autocrud/{table}", status_code=201)
async def create_row(request: Request, app: str, table: str) -> dict[str, Any]:
    async with governed(request, app, table, "create") as (conn, access):
        return await writes.create_row(conn, access, await json_body(request))


@router.patch("/{app}/autocrud/{table}/{uid}")
async def update_row(request: Request, app: str, table: str, uid: str) -> dict[str, Any]:
    async with governed(request, app, table, "update") as (conn, access):
        row_uid = reads.parse_uid(uid)
        return await writes.update_row(conn, access, row_uid, await json_body(request))


@router.delete("/{app}/autocrud/{table}/{uid}", status_code=204)
async def delete_row(request: Request, app: str, table: str, uid: str) -> Response:
    async with governed(request, app, table, "delete") as (conn, access):
        await writes.delete_row(conn, access, reads.parse_uid(uid))
    return Response(status_code=204)
