"""`/{app}/autocrud/{table}`: the generic REST API over each user table.

The edge: every route reads its whole body before any database work, then runs the request
path (`Services.member_call`: token → facts → gate → plan → one statement), parsing the body
and the query into types (row values, filter tree, page) after the gate, in the contract's
check order. Routes hold no SQL and no policy.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from authoric.errors import BadRequest, UnsupportedMediaType
from authoric.http.context import parse_json_body, services
from authoric.http.lean import LeanRoute
from authoric.plan.access import Access
from authoric.plan.filters import EVERYTHING, Node, parse_filter, query_string_filter
from authoric.plan.listing import parse_limit
from authoric.plan.plan import Page
from authoric.plan.runner import ConnectionExecutor, Executor
from authoric.records import bulk, csv_export, csv_import, reads, writes
from authoric.records.values import bulk_set_values, column_values

router = APIRouter(tags=["autocrud"], route_class=LeanRoute)
TABLE_PATH = "/{app}/autocrud/{table}"
ROW_PATH = TABLE_PATH + "/{uid}"
RESERVED_PARAMS = frozenset({"order", "limit", "after", "filter", "lastEventId"})


@asynccontextmanager
async def governed(request: Request, app: str, table: str,
                   action: str) -> AsyncIterator[tuple[ConnectionExecutor, Access]]:
    """A transaction and the caller's admitted access to `table` for `action`."""
    async with services(request).member_transaction(
            request.headers.get("authorization"), app, table, action) as (ex, access):
        yield ex, access


def list_filter(request: Request, reserved: frozenset[str] = RESERVED_PARAMS) -> Node:
    """The filter tree of a list or bulk request: query-string terms AND `?filter=` JSON."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in reserved]
    terms = [query_string_filter(params)] if params else []
    raw = request.query_params.get("filter")
    if raw is not None:
        try:
            terms.append(json.loads(raw))
        except (ValueError, RecursionError) as exc:
            raise BadRequest("`filter` is not valid JSON", {"filter": raw[:200]}) from exc
    if not terms:
        return EVERYTHING
    return parse_filter(terms[0] if len(terms) == 1 else {"and": terms})


def list_page(request: Request) -> Page:
    q = request.query_params
    return Page(q.get("order"), parse_limit(q.get("limit")), q.get("after"))


def wants_csv(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/csv" for part in accept.split(","))


def answer(body: Any, status: int = 200) -> Response:
    """A JSON response encoded once, without FastAPI's generic encoder walking the rows."""
    try:
        encoded = orjson.dumps(body)
    except orjson.JSONEncodeError:
        # A json column may hold what orjson refuses (an integer past 64 bits): the standard
        # encoder writes every value json.loads accepted.
        encoded = json.dumps(body, separators=(",", ":")).encode()
    return Response(encoded, status, media_type="application/json")


@router.get(TABLE_PATH, response_model=None)
async def list_rows(request: Request, app: str, table: str) -> Response:
    svc = services(request)
    header = request.headers.get("authorization")
    if wants_csv(request):
        async with governed(request, app, table, "read_list") as (_, access):
            statement = csv_export.export_statement(access, list_filter(request),
                                                    request.query_params.get("order"))
        rows = csv_export.export_csv(svc.engine, access, statement)
        return StreamingResponse(rows, media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="{access.table.name}.csv"'})

    async def work(ex: Executor, access: Access) -> dict[str, Any]:
        return await reads.list_page(ex, access, list_filter(request), list_page(request))

    return answer(await svc.member_call(header, app, table, "read_list", work))


@router.get(ROW_PATH)
async def read_row(request: Request, app: str, table: str, uid: str) -> Response:
    async def work(ex: Executor, access: Access) -> dict[str, Any]:
        return await reads.read_one(ex, access, reads.parse_uid(uid))

    return answer(await services(request).member_call(
        request.headers.get("authorization"), app, table, "read", work))


@router.post(TABLE_PATH, status_code=201)
async def create_row(request: Request, app: str, table: str) -> Response:
    svc = services(request)
    raw = await request.body()
    content_type = request.headers.get("content-type", "")
    header = request.headers.get("authorization")

    async def work(ex: Executor, access: Access) -> dict[str, Any]:
        body = parse_json_body(content_type, raw)
        if writes.needs_transaction(access, "create"):
            async with governed(request, app, table, "create") as (tx, current):
                values = column_values(current.table, body, creating=True)
                return await writes.create_row(tx, current, values)
        return await writes.create_row(ex, access, column_values(access.table, body, creating=True))

    row = await svc.member_call(header, app, table, "create", work)
    svc.sequencer.nudge()  # the change-log row is committed: stamp it without waiting
    return answer(row, 201)


@router.patch(ROW_PATH)
async def update_row(request: Request, app: str, table: str, uid: str) -> Response:
    svc = services(request)
    raw = await request.body()
    content_type = request.headers.get("content-type", "")

    async def work(ex: Executor, access: Access) -> dict[str, Any]:
        row_uid = reads.parse_uid(uid)
        body = parse_json_body(content_type, raw)
        if not writes.needs_transaction(access, "update"):
            values = column_values(access.table, body, creating=False)
            done, row = await writes.write_at_once(ex, access, row_uid, values)
            if done and row is not None:
                return row
        # A miss (or a reference to check first): the same write in a transaction, which
        # says 403 or 404 and rolls back a row that would leave the writer's policy.
        async with governed(request, app, table, "update") as (tx, current):
            values = column_values(current.table, body, creating=False)
            return await writes.update_row(tx, current, row_uid, values)

    row = await svc.member_call(request.headers.get("authorization"), app, table, "update", work)
    svc.sequencer.nudge()
    return answer(row)


@router.delete(ROW_PATH, status_code=204)
async def delete_row(request: Request, app: str, table: str, uid: str) -> Response:
    svc = services(request)

    async def work(ex: Executor, access: Access) -> None:
        row_uid = reads.parse_uid(uid)
        if not writes.needs_transaction(access, "delete"):
            done, _ = await writes.write_at_once(ex, access, row_uid, None)
            if done:
                return
        async with governed(request, app, table, "delete") as (tx, current):
            await writes.delete_row(tx, current, row_uid)

    await svc.member_call(request.headers.get("authorization"), app, table, "delete", work)
    svc.sequencer.nudge()
    return Response(status_code=204)


# Bulk writes and imports are matched after the single-row routes: routes are tried in order,
# and these are the rarer requests.
@router.patch(TABLE_PATH)
async def bulk_update(request: Request, app: str, table: str) -> Response:
    raw = await request.body()
    async with governed(request, app, table, "update") as (ex, access):
        tree = list_filter(request)
        bulk.checked_plan(access, tree)
        body = parse_json_body(request.headers.get("content-type", ""), raw)
        values = bulk_set_values(access.table, body)
        return answer({"count": await bulk.bulk_update(ex, access, tree, values)})


@router.delete(TABLE_PATH)
async def bulk_delete(request: Request, app: str, table: str) -> Response:
    async with governed(request, app, table, "delete") as (ex, access):
        return answer({"count": await bulk.bulk_delete(ex, access, list_filter(request))})


@router.post(TABLE_PATH + "/import", status_code=201)
async def import_rows(request: Request, app: str, table: str) -> Response:
    # The caller is admitted before the body is read (a stranger cannot make us store a
    # gigabyte), the body is spooled with no connection held (a slow sender holds no pooled
    # connection), and the import transaction admits the caller again (roles may change).
    async with governed(request, app, table, "create"):
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "text/csv":
            raise UnsupportedMediaType("send the file as text/csv", {"contentType": content_type})
    spool = await csv_import.spool_body(request.stream())
    try:
        async with governed(request, app, table, "create") as (ex, access):
            budget = request.app.state.services.settings.import_time_budget
            return answer({"inserted": await csv_import.import_csv(ex.conn, access, spool, budget)},
                          201)
    finally:
        spool.close()
