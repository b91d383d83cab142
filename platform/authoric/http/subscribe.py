"""`GET /{app}/autocrud/{table}/subscribe`: the Server-Sent Events feed."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from authoric.errors import NotAcceptable
from authoric.http.autocrud import governed
from authoric.http.context import services
from authoric.observability.metrics import metered_frames
from authoric.realtime.stream import Stream, StreamRequest
from authoric.records.gate import admit

router = APIRouter(tags=["subscribe"])


def accepts_event_stream(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/event-stream" for part in accept.split(","))


@router.get("/{app}/autocrud/{table}/subscribe", response_model=None)
async def subscribe(request: Request, app: str, table: str) -> EventSourceResponse:
    svc = services(request)
    async with governed(request, app, table, "read_list") as (_, listing):
        # Each event is read like a single-row GET: read must be on and granted too.
        admit(listing.snapshot, listing.principal, table, "read")
    if not accepts_event_stream(request):
        raise NotAcceptable("send `Accept: text/event-stream` to subscribe")
    last_id = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    stream = Stream(svc.settings, svc.engine, svc.hub,
                    StreamRequest(listing.snapshot, listing.table, listing.principal, last_id))
    return EventSourceResponse(metered_frames(request.app.state.metrics, stream), ping=0, sep="\n")
