"""The front of the ASGI stack: table requests, the ones clients mostly send, are served by
one layer of their own; every other request by FastAPI's full stack.

FastAPI's stack is, outermost first: Starlette's ServerErrorMiddleware, FastAPI's telemetry
and body-limit layers, the application's middlewares (CORS, request id and metrics, admin
audit, round trips, URL and body limits), ExceptionMiddleware, FastAPI's exit-stack layer,
then the router, which tries its routes in order. Each layer is a coroutine frame and most
wrap `send` or `receive`: together they cost a table request a sixth of the worker's CPU
(docs/benchmarks.md, "Seventh session").

`TableEdge` does, for a table request, what those layers do for it, with one `send` wrapper,
calling the same functions the middlewares call (http/cors.py, http/observe.py,
http/limits.py), and keeps their order: the CORS headers and the request id go on every
answer, the URL and body limits' included, and an unhandled error gets the 500 handler's
answer by Starlette's own ServerErrorMiddleware. Errors the endpoint raises are answered by
the application's exception handlers, which Starlette's `request_response` (inside
`TableRoutes`) finds in the scope as ExceptionMiddleware would have put them there. The
admin audit is the one middleware left out: it records only writes under `/admin/apps`.
A middleware the application adds that is in neither list (`SERVED_BY_EDGE`,
`NOT_FOR_TABLES`) stops the application from starting: table requests must not skip it
silently, so the edge has to learn it first.

Which requests are table requests is decided by `TableRoutes` (one path split and one
lookup); whatever it does not take (HEAD, OPTIONS and so preflights, `.../subscribe`, a
trailing slash) goes to the full stack, as before.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from fastapi import FastAPI
from starlette.datastructures import State
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from authoric.errors import InternalError, PayloadTooLarge
from authoric.http.admin_audit import AdminAudit
from authoric.http.cors import AppCors, OriginsOf, add_cors_headers, allowed_origin
from authoric.http.limits import (
    BodyLimit,
    RoundTripHeader,
    UrlLimit,
    counting_round_trips,
    declared_over,
    limited,
    refuse_body,
    round_trips_header,
    send_error,
    url_refusal,
)
from authoric.http.observe import Observe, RequestLog
from authoric.http.subscribe import BodySend
from authoric.http.table_route import TableRoutes
from authoric.observability.metrics import Metrics
from authoric.plan.runner import round_trips
from authoric.serving.handoff import handed_over

# The application's middlewares whose work TableEdge does for table requests, and the ones
# that have nothing to do for them.
SERVED_BY_EDGE: tuple[type, ...] = (AppCors, Observe, RoundTripHeader, UrlLimit, BodyLimit)
NOT_FOR_TABLES: tuple[type, ...] = (AdminAudit,)


class TableEdge:
    """AppCors, Observe, RoundTripHeader, UrlLimit and BodyLimit for a table request, in one
    layer, around `TableRoutes`."""

    def __init__(self, tables: TableRoutes, handlers: tuple[dict[Any, Any], dict[Any, Any]],
                 metrics: Metrics, origins_of: OriginsOf, limit: int) -> None:
        self.tables, self.handlers, self.origins_of, self.limit = (
            tables, handlers, origins_of, limit)
        self.log = RequestLog(metrics)
        self.counting = counting_round_trips()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = await allowed_origin(scope, self.origins_of)
        started = time.perf_counter()
        added = [self.log.begin(scope)]
        counter = [0]
        token = round_trips.set(counter) if self.counting else None
        status, answering = 500, False

        async def answer(message: Message) -> None:
            nonlocal status, answering
            if message["type"] == "http.response.start":
                status, answering = message["status"], True
                if token is not None:
                    added.append(round_trips_header(counter))
                message["headers"] = [*message.get("headers", ()), *added]
                if origin is not None:
                    add_cors_headers(message, origin)
            await send(message)

        try:
            refusal = url_refusal(scope)
            if refusal is not None:
                await send_error(answer, refusal)
            elif declared_over(scope, self.limit):
                await refuse_body(answer, self.limit)
            else:
                scope["starlette.exception_handlers"] = self.handlers
                await self.tables.handle(scope, limited(receive, self.limit), answer)
        except PayloadTooLarge:
            if not answering:
                await refuse_body(answer, self.limit)
        finally:
            if token is not None:
                round_trips.reset(token)
            self.log.finish(scope, status, started)


class TableFront:
    """Table requests to `edge`; a stream due to another worker to that worker, before anything
    here has looked at it (serving/handoff.py); everything else to `full`."""

    def __init__(self, full: ASGIApp, edge: ASGIApp, tables: TableRoutes, state: State) -> None:
        self.full, self.edge, self.tables, self.state = full, edge, tables, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match, child = self.tables.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                await self.edge(scope, receive, send)
                return
            if await handed_over(self.state, scope, receive, send):
                return
        await self.full(scope, receive, send)


class Front(NamedTuple):
    """What the table requests' front needs from the application."""

    tables: TableRoutes
    metrics: Metrics
    origins_of: OriginsOf
    body_limit: int


class Platform(FastAPI):
    """FastAPI, with table requests served by `TableEdge` once `front` is set, streams'
    frames sent past the full stack's middlewares (`BodySend`, http/subscribe.py), and streams
    due to another worker handed to it (`TableFront`, serving/handoff.py)."""

    front: Front | None = None

    def build_middleware_stack(self) -> ASGIApp:
        # Outside every middleware of the full stack, Starlette's error middleware included:
        # the server's own `send`, for the streams' frames. Table requests do not pass it.
        full = BodySend(super().build_middleware_stack())
        if self.front is None:
            return full
        unknown = [getattr(m.cls, "__name__", repr(m.cls)) for m in self.user_middleware
                   if m.cls not in SERVED_BY_EDGE + NOT_FOR_TABLES]
        if unknown:
            raise InternalError(f"table requests would skip the middlewares {unknown}: "
                                "teach http/front.py's TableEdge what they do")
        # Split as FastAPI's stack splits them: the 500 handler for ServerErrorMiddleware, the
        # others by exception type and by status code, as ExceptionMiddleware keeps them.
        error_handler: Any = None
        by_type: dict[Any, Any] = {}
        by_status: dict[Any, Any] = {}
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                (by_status if isinstance(key, int) else by_type)[key] = value
        edge = TableEdge(self.front.tables, (by_type, by_status), self.front.metrics,
                         self.front.origins_of, self.front.body_limit)
        caught = ServerErrorMiddleware(edge, handler=error_handler, debug=self.debug)
        return TableFront(full, caught, self.front.tables, self.state)
