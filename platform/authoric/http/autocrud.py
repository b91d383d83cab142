"""`/{app}/autocrud/{table}`: the generic REST API over each user table.

The edge: every route reads its whole body before any database work, parses the request once
into a `TableRequest` (http/edge.py), and hands it to the pipeline (callers.py `Callers.run`:
token → facts → gate → plan → one statement, records/pipeline.py), which answers a part that
did not parse at the contract's step. Routes hold no SQL and no policy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from authoric.http.bodies import ROW_ERRORS, csv_body, row_body
from authoric.http.context import services
from authoric.http.edge import CSV, RESERVED_PARAMS, accepts, table_request
from authoric.plan.access import Access
from authoric.plan.request import Operation
from authoric.plan.runner import ConnectionExecutor
from authoric.records import csv_import
from authoric.records.pipeline import admitted, execute
from authoric.serving.lean import LeanRoute
from authoric.wire import json_bytes

__all__ = ["RESERVED_PARAMS", "ROW_PATH", "TABLE_PATH", "governed", "router"]

router = APIRouter(tags=["autocrud"], route_class=LeanRoute)
TABLE_PATH = "/{app}/autocrud/{table}"
ROW_PATH = TABLE_PATH + "/{uid}"


@asynccontextmanager
async def governed(request: Request, app: str, table: str,
                   action: str) -> AsyncIterator[tuple[ConnectionExecutor, Access]]:
    """A transaction and the caller's admitted access to `table` for `action`."""
    async with services(request).callers.member_transaction(
            request.headers.get("authorization"), app) as caller:
        yield caller.ex, caller.admit(table, action)


async def run(request: Request, operation: Operation, path: dict[str, str],
              raw: bytes | None = None) -> Any:
    """The route's request, parsed once at the edge and run through the pipeline."""
    return await services(request).callers.run(request.headers.get("authorization"),
                                       table_request(request, operation, path, raw))


def answer(body: Any, status: int = 200) -> Response:
    """A JSON response encoded once, without FastAPI's generic encoder walking the rows."""
    return Response(json_bytes(body), status, media_type="application/json")


@router.get(TABLE_PATH, response_model=None)
async def list_rows(request: Request, app: str, table: str) -> Response:
    path = {"app": app, "table": table}
    if accepts(request.headers.get("accept"), CSV):
        parsed = table_request(request, "export", path)
        rows, name = await services(request).callers.export(
            request.headers.get("authorization"), parsed)
        return StreamingResponse(rows, media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="{name}.csv"'})
    return answer(await run(request, "list", path))


@router.get(ROW_PATH)
async def read_row(request: Request, app: str, table: str, uid: str) -> Response:
    return answer(await run(request, "read", {"app": app, "table": table, "uid": uid}))


@router.post(TABLE_PATH, status_code=201, responses=ROW_ERRORS,
             openapi_extra=row_body("the new row's values; omitted columns take their default"))
async def create_row(request: Request, app: str, table: str) -> Response:
    raw = await request.body()
    return answer(await run(request, "create", {"app": app, "table": table}, raw), 201)


@router.patch(ROW_PATH, responses=ROW_ERRORS,
              openapi_extra=row_body("the columns to change, with their new values"))
async def update_row(request: Request, app: str, table: str, uid: str) -> Response:
    raw = await request.body()
    return answer(await run(request, "update", {"app": app, "table": table, "uid": uid}, raw))


@router.delete(ROW_PATH, status_code=204)
async def delete_row(request: Request, app: str, table: str, uid: str) -> Response:
    await run(request, "delete", {"app": app, "table": table, "uid": uid})
    return Response(status_code=204)


# Bulk writes and imports are matched after the single-row routes: routes are tried in order,
# and these are the rarer requests.
@router.patch(TABLE_PATH, responses=ROW_ERRORS, openapi_extra=row_body(
    "the columns to change, with their new values, on every row the filter in the query matches",
    bulk=True))
async def bulk_update(request: Request, app: str, table: str) -> Response:
    raw = await request.body()
    return answer(await run(request, "update_where", {"app": app, "table": table}, raw))


@router.delete(TABLE_PATH)
async def bulk_delete(request: Request, app: str, table: str) -> Response:
    return answer(await run(request, "delete_where", {"app": app, "table": table}))


@router.post(TABLE_PATH + "/import", status_code=201, responses=ROW_ERRORS,
             openapi_extra=csv_body("the rows to insert, in the caller's org"))
async def import_rows(request: Request, app: str, table: str) -> Response:
    # The caller is admitted before the body is read (a stranger cannot make us store a
    # gigabyte), the body is spooled with no connection held (a slow sender holds no pooled
    # connection), and the import transaction admits the caller again (roles may change).
    svc, header = services(request), request.headers.get("authorization")
    parsed = table_request(request, "import", {"app": app, "table": table})
    async with svc.callers.member_transaction(header, app) as caller:
        admitted(caller, parsed)
    spool = await csv_import.spool_body(request.stream())
    try:
        async with csv_import.time_budget(svc.settings.import_time_budget):
            return answer(await svc.callers.transacted(
                header, app, lambda caller: execute(caller, parsed, spool)), 201)
    finally:
        spool.close()
