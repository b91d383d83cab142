"""The table routes' dispatch (http/table_route.py), in process: which requests it takes, with
which endpoint and path parameters, and which it leaves to normal routing."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter, Response
from starlette.routing import Match

from authoric.http import autocrud, subscribe
from authoric.http.table_route import ROW_PATH, TableRoutes, path_params

ROUTERS = (subscribe.router, autocrud.router)


def table_routes() -> TableRoutes:
    return TableRoutes(autocrud.router, ROUTERS)


def scope(method: str, path: str, kind: str = "http") -> dict[str, Any]:
    return {"type": kind, "method": method, "path": path, "root_path": "", "headers": [],
            "query_string": b""}


@pytest.mark.parametrize(("path", "params"), [
    ("/shop/autocrud/invoices", {"app": "shop", "table": "invoices"}),
    ("/shop/autocrud/invoices/0193", {"app": "shop", "table": "invoices", "uid": "0193"}),
    ("/shop/autocrud/invoices/", None),  # a trailing slash: normal routing redirects it
    ("/shop/autocrud//x", None),
    ("/shop/autocrud", None),
    ("/shop/openapi.json", None),
    ("/shop/autocrud/invoices/0193/extra", None),
    ("/shop/admin/invoices/0193", None),
])
def test_a_path_is_a_table_route_only_in_the_two_table_shapes(
        path: str, params: dict[str, str] | None) -> None:
    assert path_params(path) == params


@pytest.mark.parametrize(("method", "path", "endpoint"), [
    ("GET", "/shop/autocrud/invoices", autocrud.list_rows),
    ("POST", "/shop/autocrud/invoices", autocrud.create_row),
    ("PATCH", "/shop/autocrud/invoices", autocrud.bulk_update),
    ("DELETE", "/shop/autocrud/invoices", autocrud.bulk_delete),
    ("GET", "/shop/autocrud/invoices/0193", autocrud.read_row),
    ("PATCH", "/shop/autocrud/invoices/0193", autocrud.update_row),
    ("DELETE", "/shop/autocrud/invoices/0193", autocrud.delete_row),
])
def test_a_client_calling_a_table_route_reaches_its_endpoint_with_the_path_parameters(
        method: str, path: str, endpoint: Any) -> None:
    match, child = table_routes().matches(scope(method, path))
    assert match == Match.FULL
    assert child["endpoint"] is endpoint
    assert child["path_params"] == path_params(path)
    assert str(child["route"].path) in ("/{app}/autocrud/{table}", ROW_PATH)


@pytest.mark.parametrize(("method", "path", "kind"), [
    ("GET", "/shop/autocrud/invoices/subscribe", "http"),  # the feed's own route
    ("POST", "/shop/autocrud/invoices/import", "http"),  # the CSV import's own route
    ("POST", "/shop/autocrud/invoices/0193", "http"),  # no such route: 405 from routing
    ("PUT", "/shop/autocrud/invoices", "http"),
    ("HEAD", "/shop/autocrud/invoices", "http"),
    ("GET", "/shop/autocrud/invoices", "websocket"),
])
def test_a_request_the_table_routes_do_not_serve_is_left_to_normal_routing(
        method: str, path: str, kind: str) -> None:
    match, child = table_routes().matches(scope(method, path, kind))
    assert match == Match.NONE and child == {}


def test_a_literal_route_added_under_the_row_shape_is_not_taken_for_a_row_uid() -> None:
    later = APIRouter()

    @later.get("/{app}/autocrud/{table}/count")
    async def count(app: str, table: str) -> Response:
        return Response()

    routes = TableRoutes(autocrud.router, (*ROUTERS, later))
    assert routes.matches(scope("GET", "/shop/autocrud/invoices/count"))[0] == Match.NONE
    assert table_routes().matches(scope("GET", "/shop/autocrud/invoices/count"))[0] == Match.FULL
