"""The front of the ASGI stack (http/front.py), in process: which requests a client sends go to
the table requests' one layer, and which to FastAPI's full stack."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from authoric.errors import InternalError
from authoric.http.front import Front, Platform, TableFront
from authoric.observability.metrics import Metrics
from tests.unit.test_table_route import scope, table_routes


class Recorder:
    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])


def served_by(method: str, path: str, kind: str = "http") -> tuple[str, dict[str, Any]]:
    full, edge = Recorder(), Recorder()
    request = scope(method, path, kind)
    asyncio.run(TableFront(full, edge, table_routes(), State())(request, None, None))  # type: ignore[arg-type]
    assert len(full.paths) + len(edge.paths) == 1
    return ("edge" if edge.paths else "full"), request


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/shop/autocrud/invoices"),
    ("POST", "/shop/autocrud/invoices"),
    ("PATCH", "/shop/autocrud/invoices/0193"),
    ("DELETE", "/shop/autocrud/invoices/0193"),
])
def test_a_clients_table_request_is_served_by_the_one_layer_with_its_route_and_params(
        method: str, path: str) -> None:
    served, request = served_by(method, path)
    assert served == "edge"
    assert request["path_params"]["table"] == "invoices"
    assert request["route"].path.startswith("/{app}/autocrud/{table}")  # metrics' label


@pytest.mark.parametrize(("method", "path", "kind"), [
    ("OPTIONS", "/shop/autocrud/invoices", "http"),  # a browser's preflight: AppCors answers
    ("HEAD", "/shop/autocrud/invoices", "http"),
    ("GET", "/shop/autocrud/invoices/subscribe", "http"),  # a stream
    ("POST", "/shop/autocrud/invoices/import", "http"),
    ("GET", "/shop/autocrud/invoices/", "http"),  # a trailing slash: redirected
    ("GET", "/admin/apps", "http"),
    ("GET", "/shop/autocrud/invoices", "websocket"),
])
def test_every_other_request_goes_through_the_full_stack(method: str, path: str,
                                                         kind: str) -> None:
    assert served_by(method, path, kind)[0] == "full"


def test_an_operator_adding_a_middleware_the_table_edge_does_not_know_gets_an_app_that_will_not_start(
) -> None:
    """A table request must not skip a middleware silently: the stack refuses to build (at the
    lifespan's first call, so the server does not start) until TableEdge learns it."""

    class Stamp:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await self.app(scope, receive, send)

    app = Platform()
    app.front = Front(table_routes(), Metrics(), no_origins, 1024)
    app.build_middleware_stack()  # FastAPI's own layers only: fine
    app.add_middleware(Stamp)
    with pytest.raises(InternalError, match="Stamp"):
        app.build_middleware_stack()


async def no_origins(scope: Scope, ref: str) -> list[str]:
    return []
