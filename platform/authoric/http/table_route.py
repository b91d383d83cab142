"""`TableRoutes`: the table routes' requests dispatched by one path split and one lookup.

FastAPI 0.165 matches a request by trying included routers and their routes one after another,
a few microseconds each, then wraps the endpoint in its own request scope (two exit stacks).
The table routes need neither: their paths have one shape, and their endpoints take the request
and the path's strings (`LeanRoute`). So this route, placed first in the application's router,
recognises `/{app}/autocrud/{table}` and `/{app}/autocrud/{table}/{uid}` by splitting the path,
and calls the endpoint for the method through Starlette's plain `request_response`. It runs
inside the application's middleware and exception handling, like any route.

The table of endpoints is read from the autocrud router itself, which stays the one place the
routes are declared (and documented in OpenAPI). Whatever this route does not take, it leaves
to normal matching: HEAD, trailing slashes, other methods (405 there, as before), and every
path whose last segment is a literal route of some router under the row's shape
(`.../subscribe`, `.../import`): those are read from the routers too, so a new one cannot be
taken for a row uid.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match, get_route_path, request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from authoric.http.autocrud import ROW_PATH, TABLE_PATH

Endpoint = Callable[..., Coroutine[Any, Any, Response]]


def path_params(path: str) -> dict[str, str] | None:
    """`{app, table}` or `{app, table, uid}` for a table route's path, else None."""
    parts = path.split("/")
    # ["", app, "autocrud", table] or ["", app, "autocrud", table, uid], no empty segment
    if len(parts) not in (4, 5) or parts[0] or parts[2] != "autocrud" or not all(parts[1:]):
        return None
    params = {"app": parts[1], "table": parts[3]}
    if len(parts) == 5:
        params["uid"] = parts[4]
    return params


def literal_segments(routers: Iterable[APIRouter]) -> frozenset[str]:
    """The last segments of the routes shaped `/{app}/autocrud/{table}/<literal>`."""
    found = set()
    for router in routers:
        for route in router.routes:
            head, _, last = getattr(route, "path", "").rpartition("/")
            if head == TABLE_PATH and last and "{" not in last:
                found.add(last)
    return frozenset(found)


def _asgi(endpoint: Endpoint) -> ASGIApp:
    async def call(request: Request) -> Response:
        return await endpoint(request, **request.path_params)

    return request_response(call)


class TableRoutes(BaseRoute):
    """The autocrud router's single-path routes, matched without trying the others first."""

    def __init__(self, router: APIRouter, routers: Iterable[APIRouter]) -> None:
        """`router`'s table routes; `routers`, every router of the application, to leave their
        literal routes under the row's shape (`.../subscribe`) to them."""
        self.literals = literal_segments(routers)
        self.targets: dict[tuple[str, bool], tuple[APIRoute, ASGIApp]] = {}
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path in (TABLE_PATH, ROW_PATH):
                for method in (route.methods or set()) - {"HEAD"}:
                    key = (method, route.path == ROW_PATH)
                    self.targets.setdefault(key, (route, _asgi(route.endpoint)))

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        params = path_params(get_route_path(scope))
        if params is None or params.get("uid") in self.literals:
            return Match.NONE, {}
        target = self.targets.get((scope["method"], "uid" in params))
        if target is None:
            return Match.NONE, {}
        route, app = target
        # `route` as FastAPI sets it: metrics and logs label requests by its template.
        return Match.FULL, {"endpoint": route.endpoint, "path_params": params, "route": route,
                            "authoric.table_app": app}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope["authoric.table_app"](scope, receive, send)
