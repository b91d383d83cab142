"""The Server-Sent Events feeds: per table (`GET /{app}/autocrud/{table}/subscribe`), several
tables on one connection (`GET /{app}/subscribe?tables=a,b`) and the operator's feed of a
table across orgs (`GET /admin/apps/{app}/tables/{table}/rows/subscribe`).

Each route runs its gate and hands a `StreamRequest` to the one stream implementation.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from authoric.catalog.apps import find_app
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, NotAcceptable
from authoric.http.admin import require_admin
from authoric.http.context import services
from authoric.observability.metrics import FeedTally, Metrics
from authoric.plan.expand import expansion_tree
from authoric.plan.request import parse_expand
from authoric.policy.principal import Principal
from authoric.realtime.hub import Run
from authoric.realtime.judge import Frame
from authoric.realtime.stream import NONE_WRITTEN, Stream, StreamRequest
from authoric.records.gate import Access, admit
from authoric.serving.lean import LeanRoute
from authoric.serving.wire import ChunkWriter, chunk_writer, chunked

log = logging.getLogger("authoric.subscribe")
BODY_SEND = "authoric.body_send"  # the scope's key for the server's own `send`


class BodySend:
    """Outside every middleware (http/front.py): the server's own `send`, kept in the scope for the
    stream responses' frames.

    A stream's `http.response.start` goes through the middlewares as any response's does
    (CORS headers, the request id, the status its metrics record); its frames then skip them.
    For a stream (a GET) every middleware here looks at the start message only and passes body
    messages on as they are (the admin audit holds the bodies of admin writes only), so
    skipping them changes nothing on the wire, and a frame costs one call where it cost five
    or six. A middleware that rewrote bodies (compression, say) would have to leave streams
    alone, or this be given up."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[BODY_SEND] = send
        await self.app(scope, receive, send)


def serve_stream(handler: Callable[[Request], Awaitable[EventSourceResponse]]) -> ASGIApp:
    """Starlette's `request_response` without what would stay alive as long as the client:
    the Request (and its parsed headers and query) is dropped once the handler has answered,
    and there is no per-request exception wrapper (its frames and `sender` closure): an error
    the handler raises is answered by the app's ExceptionMiddleware with the same handlers."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await handler(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


class StreamRoute(LeanRoute):
    """A stream's route, served by `serve_stream` instead of FastAPI's request handling.

    FastAPI's wraps every request in two exit stacks (for dependencies with `yield`, which the
    streams have none of) that stay alive, with their frames, as long as the response: for
    a stream, as long as its client stays. OpenAPI still documents the route from its
    signature. The routers are included without prefix or dependencies, so the inclusion
    adds nothing to serve here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = serve_stream(self.get_route_handler())  # type: ignore[arg-type]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Starlette's: the method check (405), then `self.app`; FastAPI's would serve the
        # request through the handler it built for the inclusion.
        await Route.handle(self, scope, receive, send)


class _Open:
    """The open stream responses of one event loop, and the one task that ends them all when
    the server shuts down (sse-starlette's exit signal, awaited once instead of per stream)."""

    __slots__ = ("responses", "watcher")

    def __init__(self) -> None:
        self.responses: set[StreamResponse] = set()
        self.watcher: asyncio.Task[None] | None = None

    def add(self, response: StreamResponse) -> None:
        self.responses.add(response)
        if self.watcher is None:
            self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        await EventSourceResponse._listen_for_exit_signal()
        # A stream opened from now on starts a new watcher, which returns at once while the
        # shutdown flag is up: that stream ends at once, as each did with sse-starlette's own.
        self.watcher = None
        for response in list(self.responses):
            response.end("shutdown")


_HEADERS: dict[tuple[tuple[bytes, bytes], ...], list[tuple[bytes, bytes]]] = {}
_open: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = weakref.WeakKeyDictionary()


def tally_written(tally: FeedTally, stream: Stream, chunk: bytes) -> None:
    """Tally a chunk just written to `stream`: its frames by kind and, for live frames, their
    `delivered` latency (once: the stream's write times are then cleared)."""
    tally.count_frames(chunk)
    if stream.written:
        tally.delivered(stream.written, time.time())
        stream.written = NONE_WRITTEN


class DirectFrames:
    """The hub's frames for one idle stream, written on the hub's turn (`Subscriber.direct`):
    no wake-up of the stream's task, the same bytes and tallies as its loop. False (nothing
    written) when they must go through the task instead: the token has expired (the task
    then sends `reauth` and ends, without them), or the writer would have to wait.

    A small object of its own, not a method of the response: a delivery reads only this, the
    stream and uvicorn's cycle, not the response's attribute dict, the request and the
    principal. Between two changes all of them go cold in the cache, and at 50 changes a
    second a delivery costs more in misses than in instructions (docs/benchmarks-journal.md,
    section 20).

    Frames offered to a whole read class come with its `Run` (realtime/hub.py): the first
    stream frames them as one chunk for all, and the hub tallies them once for every stream
    they reached (docs/benchmarks-journal.md, section 21)."""

    __slots__ = ("expires", "stream", "tally", "writer")

    def __init__(self, stream: Stream, writer: ChunkWriter, tally: FeedTally) -> None:
        self.stream, self.writer, self.tally = stream, writer, tally
        self.expires = stream.req.expires_at  # the token's: fixed for the stream's life

    def __call__(self, frames: Sequence[Frame], run: Run | None = None) -> bool:
        writer = self.writer
        if not writer.ready() or time.time() >= self.expires:
            return False
        stream = self.stream
        if run is not None and stream.last_sent < frames[0].pos:
            # None of them sent yet (the usual case: no replay overlaps live frames): the
            # class's chunk as it is, tallied with the class's.
            chunk = run.chunk
            if not chunk:
                run.body = b"".join([item.data for item in frames])
                chunk = run.chunk = chunked(run.body)
                run.tally = self.tally_run
            stream.last_sent = frames[-1].pos
            if self._wrote(writer.write_chunk, chunk):
                run.reached += 1
            return True
        chunk, _ = stream.pack(frames)
        if chunk and self._wrote(writer.write, chunk):
            tally_written(self.tally, stream, chunk)
        return True

    def _wrote(self, write: Callable[[bytes], None], data: bytes) -> bool:
        """Whether `write` took `data`. Else the frames are counted as sent (the replay's
        dedupe would drop them if queued again) and perhaps half written: the stream ends,
        and its client resumes from the last frame it received."""
        try:
            write(data)
        except Exception:
            log.exception("a direct write failed; the stream ends and its client resumes")
            sub = self.stream.sub
            sub.direct = None
            sub.close("error")
            return False
        return True

    def tally_run(self, run: Run) -> None:
        """Tally a class's frames once for every stream they reached (`Run.settle`): their
        kinds, and their `delivered` latency as of now, just after the last of them. Every
        stream of a process tallies into the process's one `FeedTally` (`Metrics.feed`), so
        the first stream's stands for all."""
        tally = self.tally
        tally.count_frames(run.body, run.reached)
        tally.delivered([item.at for item in run.frames], time.time(), run.reached)


class StreamResponse(EventSourceResponse):
    """sse-starlette's response (its headers) served by the request's own task instead of
    sse-starlette's task group.

    sse-starlette runs each stream in an anyio task group of three tasks (the stream, the
    exit signal, the disconnect listener), each with its cancel scope and events, and a
    cancel scope per send: ~15 KB per idle stream. Here the request's task writes the frames;
    pings and the token's expiry come from the stream's own timer (realtime/stream.py); one
    small task per stream waits on `receive()` for the disconnect, and one task per process
    for the shutdown signal. Either cancels the request's task, as the task group's cancel
    scope did: the frames generator ends (unregistering the stream, releasing its lease),
    and on shutdown the body is closed cleanly so the client sees the end of the stream.

    Each chunk of frames the stream yields (already encoded, everything queued in one chunk)
    goes out in one `send`, straight to the server (`BodySend`), and is counted in plain
    numbers (observability/metrics.py, `FeedTally`): open streams, frames by type, the
    `delivered` latency, and why the server ended the stream.

    While the task waits with nothing queued, the hub writes live frames itself
    (`DirectFrames`, through serving/wire.py): the same bytes and tallies, without waking the
    task. A stream then costs the hub a write per frame, not a task switch and a trip through
    the frames generator and the server's `send`."""

    def __init__(self, stream: Stream, metrics: Metrics) -> None:
        self.frames = stream.frames()
        super().__init__(self.frames, ping=0, sep="\n")
        self.metrics = metrics
        # Every stream sends the same headers: one list for all (each send copies it, as
        # middlewares add theirs to the message's list).
        self.raw_headers = _HEADERS.setdefault(tuple(self.raw_headers), self.raw_headers)
        self._send_lock = None  # type: ignore[assignment]  # one task sends: no lock to hold
        self.stream = stream
        self._task: asyncio.Task[Any] | None = None
        self._ended_by = ""  # "disconnect" or "shutdown" once one of them cancels the task

    def end(self, why: str) -> None:
        """Stop the stream from outside its task (the client left, or the server stops)."""
        task = self._task
        if task is not None and not self._ended_by:
            self._ended_by = why
            task.cancel()

    async def _listen(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.end("disconnect")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # GET only: the stream routes answer HEAD with 405, so no HEAD case (sse-starlette's).
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        registry = _open.get(loop)
        if registry is None:
            registry = _open[loop] = _Open()
        listener = loop.create_task(self._listen(receive))
        frames = self.frames
        stream, metrics = self.stream, self.metrics
        body_send = scope.get(BODY_SEND, send)
        self._task = task
        registry.add(self)
        metrics.streams_open.inc()
        try:
            # The start through the middlewares (CORS, request id, status), the frames past.
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": list(self.raw_headers)})
            self._response_started = True
            writer = chunk_writer(body_send)
            if writer is not None:
                stream.sub.direct = DirectFrames(stream, writer, metrics.feed)
            async for chunk in frames:
                await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
                tally_written(metrics.feed, stream, chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self._response_complete = True
        except asyncio.CancelledError:
            # Ours (disconnect, shutdown) ends the stream; anyone else's goes on up.
            if not self._ended_by or task.uncancel() > 0:
                raise
        finally:
            self._task = None  # no cancel from now on: it could land outside this response
            stream.sub.direct = None
            registry.responses.discard(self)
            listener.cancel()
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:  # cancelled in a send: the generator is still suspended
                await aclose()
            # Unregistered and its lease released however it ended, even before its frames
            # started (idempotent: the frames generator does it too).
            stream.close()
            if stream.sub.closed:
                metrics.streams_closed.labels(stream.sub.reason or "unknown").inc()
            metrics.streams_open.dec()
        if self._ended_by == "shutdown" and self._response_started and not self._response_complete:
            # The end of the body, so the client sees the stream end rather than break.
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                self._response_complete = True
            except OSError:
                pass


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


async def event_stream(request: Request, req: StreamRequest) -> StreamResponse:
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
    # The stream closes (and releases its lease) however its frames end; the response closes
    # it too, in case it ended before the frames started.
    return StreamResponse(stream, request.app.state.metrics)


async def stream_caller(request: Request, app: str, *,
                        operator: bool = False) -> tuple[AppSnapshot, Principal | None]:
    """Who opens a stream, found one way for every stream route: the app's snapshot and the
    principal (a member's token or an API key, its facts read in one transaction); for the
    operator's route, the admin token and no principal (every org, nothing redacted)."""
    if operator:
        svc = require_admin(request)
        async with svc.tx() as conn:
            row = await find_app(conn, app)
            return await svc.snapshot(conn, row["uid"], row["version"]), None
    async with services(request).callers.member_transaction(
            request.headers.get("authorization"), app) as caller:
        return caller.snapshot, caller.principal


def admitted_listings(snapshot: AppSnapshot, principal: Principal,
                      names: list[str]) -> list[Access]:
    """The section 5 gate, table by table (the first failure answers): each event is read
    like a single-row GET, so read must be on and granted as well as read_list."""
    listings = []
    for name in names:
        listings.append(admit(snapshot, principal, name, "read_list"))
        admit(snapshot, principal, name, "read")
    return listings


@router.get("/{app}/autocrud/{table}/subscribe", response_model=None)
async def subscribe(request: Request, app: str, table: str) -> StreamResponse:
    snapshot, principal = await stream_caller(request, app)
    assert principal is not None
    [listing] = admitted_listings(snapshot, principal, [table])
    # Checked as a list checks it (400 for a bad path), once; each event is expanded.
    expand = parse_expand(request.query_params.get("expand"))
    expansion_tree(listing, expand)
    require_event_stream(request)
    return await event_stream(request, StreamRequest(snapshot, [listing.table], principal,
                                                     last_event_id(request), expand=expand))


@router.get("/{app}/subscribe", response_model=None)
async def subscribe_tables(request: Request, app: str) -> StreamResponse:
    snapshot, principal = await stream_caller(request, app)
    assert principal is not None
    names = table_names(request.query_params.get("tables"))
    tables = [listing.table for listing in admitted_listings(snapshot, principal, names)]
    require_event_stream(request)
    return await event_stream(request, StreamRequest(snapshot, tables, principal,
                                                     last_event_id(request), multi=True))


@router.get("/admin/apps/{app}/tables/{table}/rows/subscribe", response_model=None)
async def subscribe_as_operator(request: Request, app: str, table: str) -> StreamResponse:
    snapshot, _ = await stream_caller(request, app, operator=True)
    compiled = snapshot.table(table)
    require_event_stream(request)
    return await event_stream(request, StreamRequest(snapshot, [compiled], None, last_event_id(request)))
