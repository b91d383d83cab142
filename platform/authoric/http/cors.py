"""Cross-origin requests to an app's routes, allowed per app (contract section 2).

Only `/{app}/auth/...`, `/{app}/autocrud/...`, `/{app}/subscribe` and `/{app}/openapi.json`
are ever opened, and only to the origins in the app's `settings.allowedOrigins` (`"*"`: any).
`/admin` never is. A preflight from an allowed origin is answered here with 204, no token
needed; an actual response (SSE and errors included) gets the allow/expose headers added as
it starts. A disallowed origin gets no CORS header at all, and credentials are never allowed:
tokens travel as bearer headers.

Starlette's `CORSMiddleware` takes one origin list at construction and answers preflights
with 200 and a fixed method list; here the list is the app's, read per request, and the
methods are the route's. The header values follow it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_HEADERS = "Authorization, Content-Type, Accept, Last-Event-ID"
EXPOSE_HEADERS = "Retry-After, Content-Disposition"
MAX_AGE = "600"
METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")
_APP_ROUTE = re.compile(r"^/(?P<app>[^/]+)/(?:auth/|autocrud/|subscribe$|openapi\.json$)")

OriginsOf = Callable[[Scope, str], Awaitable[Sequence[str]]]


def app_of(path: str) -> str | None:
    """The app a path opens to browsers, or None (platform and `/admin` routes)."""
    match = _APP_ROUTE.match(path)
    if match is None or match["app"] == "admin":
        return None
    return match["app"]


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    return "*" in allowed or origin.lower() in {a.rstrip("/").lower() for a in allowed}


def response_headers(origin: str) -> dict[str, str]:
    """What an actual response to an allowed origin carries."""
    return {"Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": EXPOSE_HEADERS, "Vary": "Origin"}


def preflight_headers(origin: str, methods: Sequence[str]) -> dict[str, str]:
    """What a preflight from an allowed origin is answered with."""
    return {"Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": ", ".join(methods),
            "Access-Control-Allow-Headers": ALLOW_HEADERS,
            "Access-Control-Max-Age": MAX_AGE, "Vary": "Origin"}


def route_methods(routes: Sequence[BaseRoute], path: str) -> list[str]:
    """The methods some route answers for `path`, asked of the router itself (so included
    routers count too), in a stable order."""
    found = []
    for method in METHODS:
        scope = {"type": "http", "path": path, "method": method, "root_path": "",
                 "headers": [], "query_string": b""}
        if any(route.matches(scope)[0] == Match.FULL for route in routes):
            found.append(method)
    return found


async def allowed_origin(scope: Scope, origins_of: OriginsOf) -> str | None:
    """The request's Origin when the app it opens allows it; else None (no CORS header)."""
    origin = None
    for name, value in scope["headers"]:
        if name == b"origin":
            origin = value.decode("latin-1")
            break
    ref = app_of(scope["path"]) if origin else None
    if origin is None or ref is None or not origin_allowed(origin, await origins_of(scope, ref)):
        return None
    return origin


def add_cors_headers(message: Message, origin: str) -> None:
    """Add an actual response's CORS headers to its `http.response.start` message."""
    out = MutableHeaders(scope=message)
    for name, value in response_headers(origin).items():
        if name == "Vary":
            out.add_vary_header(value)
        else:
            out[name] = value


class AppCors:
    """ASGI middleware: per-app CORS; `origins_of(scope, app)` gives the app's allowed list."""

    def __init__(self, app: ASGIApp, origins_of: OriginsOf) -> None:
        self.app, self.origins_of = app, origins_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = await allowed_origin(scope, self.origins_of)
        if origin is None:
            await self.app(scope, receive, send)  # no CORS header for anyone else
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in Headers(scope=scope):
            methods = route_methods(scope["app"].router.routes, scope["path"])
            if methods:
                await Response(status_code=204, headers=preflight_headers(origin, methods))(
                    scope, receive, send)
                return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                add_cors_headers(message, origin)
            await send(message)

        await self.app(scope, receive, with_cors)


async def app_origins(scope: Scope, ref: str) -> Sequence[str]:
    """The app's allowed origins, read now (one small query on the pool)."""
    from authoric.catalog.origins import allowed_origins

    async with scope["app"].state.services.engine.connect() as conn:
        return await allowed_origins(conn, ref)
