"""The Server-Sent Events feeds: per table (`GET /{app}/autocrud/{table}/subscribe`), several
tables on one connection (`GET /{app}/subscribe?tables=a,b`) and the operator's feed of a
table across orgs (`GET /admin/apps/{app}/tables/{table}/rows/subscribe`).

Each route runs its gate and hands a `StreamRequest` to the one stream implementation.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.routing import Route, request_response
from starlette.types import Receive, Scope, Send

from authoric.auth.principals import authenticate
from authoric.catalog.apps import find_app
from authoric.errors import BadRequest, NotAcceptable
from authoric.http.admin import require_admin
from authoric.http.autocrud import governed
from authoric.http.context import services
from authoric.http.lean import LeanRoute
from authoric.observability.metrics import metered_frames
from authoric.plan.request import parse_expand
from authoric.realtime.stream import Stream, StreamRequest
from authoric.records.expand import expansion_tree
from authoric.records.gate import admit


class StreamRoute(LeanRoute):
    """A stream's route, served through Starlette's plain `request_response`.

    FastAPI's wraps every request in two exit stacks (for dependencies with `yield`, which the
    streams have none of) that stay alive, with their frames, as long as the response: for
    a stream, as long as its client stays (about 2 KiB of each idle stream's 45). OpenAPI
    still documents the route from its signature. The routers are included without prefix
    or dependencies, so the inclusion adds nothing to serve here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = request_response(self.get_route_handler())

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Starlette's: the method check (405), then `self.app`; FastAPI's would serve the
        # request through the handler it built for the inclusion.
        await Route.handle(self, scope, receive, send)


router = APIRouter(tags=["subscribe"], route_class=StreamRoute)
MAX_TABLES = 16


def accepts_event_stream(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/event-stream" for part in accept.split(","))


def require_event_stream(request: Request) -> None:
    if not accepts_event_stream(request):
        raise NotAcceptable("send `Accept: text/event-stream` to subscribe")


def last_event_id(request: Request) -> str | None:
    return request.headers.get("last-event-id") or request.query_params.get("lastEventId")


def table_names(raw: str | None) -> list[str]:
    """The `tables` parameter: 1 to 16 names, in the order given, each once."""
    names = list(dict.fromkeys(n.strip() for n in (raw or "").split(",") if n.strip()))
    if not 1 <= len(names) <= MAX_TABLES:
        raise BadRequest(f"`tables` names 1 to {MAX_TABLES} tables, comma-separated",
                         {"tables": (raw or "")[:200]})
    return names


async def event_stream(request: Request, req: StreamRequest) -> EventSourceResponse:
    """Open the stream (429 over the deployment's per-user cap) and answer with it.

    No closure or wrapper generator here: whatever the response holds stays alive as long as
    the client does, so the stream itself carries its lease and its cleanup."""
    svc = services(request)
    assert svc.source is not None
    stream = Stream(svc.settings, svc.engine, svc.hub, svc.source, req)
    stream.open()
    if req.principal is not None:
        try:
            stream.lease = await request.app.state.stream_leases.take(req.principal)
        except BaseException:
            stream.close()
            raise
    # The stream closes (and releases its lease) however its frames end; the background task
    # closes it too, in case the response ended before the frames started.
    return EventSourceResponse(metered_frames(request.app.state.metrics, stream),
                               ping=0, sep="\n", background=BackgroundTask(stream.closed))


@router.get("/{app}/autocrud/{table}/subscribe", response_model=None)
async def subscribe(request: Request, app: str, table: str) -> EventSourceResponse:
    async with governed(request, app, table, "read_list") as (_, listing):
        # Each event is read like a single-row GET: read must be on and granted too.
        admit(listing.snapshot, listing.principal, table, "read")
    # Checked as a list checks it (400 for a bad path), once; each event is expanded.
    expand = parse_expand(request.query_params.get("expand"))
    expansion_tree(listing, expand)
    require_event_stream(request)
    return await event_stream(request, StreamRequest(listing.snapshot, [listing.table],
                                               listing.principal, last_event_id(request),
                                               expand=expand))


@router.get("/{app}/subscribe", response_model=None)
async def subscribe_tables(request: Request, app: str) -> EventSourceResponse:
    svc = services(request)
    async with svc.tx() as conn:
        auth = await authenticate(conn, svc.jwt_secret, request.headers.get("authorization"), app)
        snapshot = await svc.snapshot(conn, auth.principal.app_uid, auth.version)
    names = table_names(request.query_params.get("tables"))
    tables = []
    for name in names:  # the section 5 gate, table by table: the first failure answers
        admit(snapshot, auth.principal, name, "read_list")
        tables.append(admit(snapshot, auth.principal, name, "read").table)
    require_event_stream(request)
    return await event_stream(request, StreamRequest(snapshot, tables, auth.principal,
                                               last_event_id(request), multi=True))


@router.get("/admin/apps/{app}/tables/{table}/rows/subscribe", response_model=None)
async def subscribe_as_operator(request: Request, app: str, table: str) -> EventSourceResponse:
    svc = require_admin(request)
    async with svc.tx() as conn:
        row = await find_app(conn, app)
        snapshot = await svc.snapshot(conn, row["uid"], row["version"])
    compiled = snapshot.table(table)
    require_event_stream(request)
    return await event_stream(request, StreamRequest(snapshot, [compiled], None, last_event_id(request)))
