"""The outermost middleware: a request id for every request, its metrics, its access line.

The request id is the client's `X-Request-ID` when it sends a sane one (so a proxy's id
carries through), else a new random one. It is echoed as the `X-Request-ID` response header,
put on every log line written while the request runs, and into error bodies as
`details.requestId` (http.errors).
"""

from __future__ import annotations

import itertools
import logging
import re
import secrets
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from authoric.observability.logs import request_id
from authoric.observability.metrics import Metrics

HEADER = b"x-request-id"
SANE_ID = re.compile(rb"[A-Za-z0-9._:@/+=-]{1,128}")  # never log or echo arbitrary bytes
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # the route label of requests no route matched (404s, probes)

access = logging.getLogger("authoric.access")


def incoming_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == HEADER:
            return value.decode() if SANE_ID.fullmatch(value) else None
    return None


def route_label(scope: Scope) -> str:
    """The route template (`/{app}/autocrud/{table}`), never a raw path with names in it:
    label values stay bounded, and no tenant's names reach the metrics."""
    route = scope.get("route")  # set by FastAPI's routes once matched
    if route is not None:
        return str(route.path)
    if "endpoint" in scope and not scope.get("path_params"):
        return str(scope["path"])  # a plain Starlette route (/openapi.json, /docs): literal
    return UNMATCHED


class RequestLog:
    """A request's id, metrics and access line, begun and finished by whoever serves it: the
    `Observe` middleware, or the table requests' own edge (http/front.py)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        # Ids need to be unique, not secret: a random per-process prefix and a counter cost
        # a fraction of uuid4's urandom call.
        self._prefix = secrets.token_hex(8)
        self._serial = itertools.count(1)

    def begin(self, scope: Scope) -> tuple[bytes, bytes]:
        """Start a request: its id, set for the logs, as the response header to add."""
        rid = incoming_id(scope) or f"{self._prefix}{next(self._serial):08x}"
        # Not reset afterwards: each request runs in its own task (its own context copy), and
        # the outer 500 handler, which runs after this middleware has returned, needs it.
        request_id.set(rid)
        self.metrics.in_flight.inc()
        return (HEADER, rid.encode())

    def finish(self, scope: Scope, status: int, started: float) -> None:
        self.metrics.in_flight.dec()
        seconds = time.perf_counter() - started
        route = route_label(scope)
        method = scope["method"] if scope["method"] in METHODS else "OTHER"
        self.metrics.request(route, method, status, seconds)
        if access.isEnabledFor(logging.INFO):
            access.info("%s %s %d", scope["method"], route, status, extra={
                "method": scope["method"], "route": route, "path": scope["path"],
                "status": status, "durationMs": round(seconds * 1000, 2)})


class Observe:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.log = app, RequestLog(metrics)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        header = self.log.begin(scope)
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.log.finish(scope, status, started)
