"""Live frames written by the hub itself while a stream waits idle (realtime/hub.py
`Subscriber.offer`, serving/wire.py): what the stream's client receives, and when the frames go
through the stream's task instead. The writer is exercised on a real uvicorn server and a
real socket, as `authoric serve` runs it."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
import uvicorn
import uvloop
from starlette.types import Receive, Scope, Send

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db.engine import create_engine
from authoric.http.subscribe import DirectFrames
from authoric.observability.metrics import FeedTally, Metrics
from authoric.policy.principal import Principal
from authoric.realtime.hub import CLOSE, Hub, Run, Subscriber
from authoric.realtime.judge import Frame
from authoric.realtime.stream import Stream, StreamRequest
from authoric.serving.wire import ChunkWriter, chunk_writer, chunked
from authoric.settings import Settings

APP = uuid.uuid4()
FRAMES = [Frame(5, b"id: 5\ndata: {}\n\n"), Frame(6, b"id: 6\ndata: {}\n\n")]
# `authoric serve` runs uvloop where it is installed (uvicorn's `auto`); asyncio otherwise.
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
T = TypeVar("T")


class Notes:
    name = "notes"


def run_on(loop: str, main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(main)


def subscriber(direct: Callable[[Sequence[Frame]], bool] | None, limit: int = 100) -> Subscriber:
    """A stream's subscriber whose direct writer is `direct` (None: it has none)."""
    sub = Subscriber(uuid.uuid4(), ("notes",), None, limit)
    if direct is not None:
        sub.direct = lambda frames, run: direct(frames)
    return sub


async def waiting(sub: Subscriber) -> asyncio.Task[None]:
    """The stream's task, waiting for frames as its live loop does."""
    task = asyncio.get_running_loop().create_task(sub.wait(1e12))
    while sub._waiter is None:
        await asyncio.sleep(0)
    return task


def test_frames_for_a_stream_waiting_idle_are_written_by_the_hub_without_waking_it() -> None:
    written: list[list[Frame]] = []

    async def run() -> None:
        sub = subscriber(lambda frames: written.append(list(frames)) is None)
        task = await waiting(sub)
        sub.offer(FRAMES)
        await asyncio.sleep(0)
        assert not task.done() and sub.take() is None
        task.cancel()

    asyncio.run(run())
    assert written == [FRAMES]


def test_frames_the_writer_cannot_write_now_wait_in_the_queue_and_wake_the_stream() -> None:
    async def run() -> None:
        sub = subscriber(lambda frames: False)  # the client stopped reading
        task = await waiting(sub)
        sub.offer(FRAMES)
        await asyncio.wait_for(task, 60)
        assert list(sub.take() or ()) == FRAMES

    asyncio.run(run())


def test_frames_for_a_stream_whose_task_is_busy_are_queued_behind_what_it_writes() -> None:
    written: list[Sequence[Frame]] = []
    sub = subscriber(lambda frames: written.append(frames) is None)
    sub.offer(FRAMES[:1])  # the task is writing (not waiting): this one is queued
    sub.offer(FRAMES[1:])  # and so is the next, behind it, though no task waits yet
    assert written == [] and list(sub.take() or ()) == FRAMES


def test_frames_for_a_stream_whose_wait_has_just_ended_are_queued_for_its_task() -> None:
    """The task's wait is over (a ping is due, or it was cancelled) but it has not run yet:
    it may write next, so the hub must not write beside it."""
    written: list[Sequence[Frame]] = []

    async def run() -> None:
        sub = subscriber(lambda frames: written.append(frames) is None)
        task = await waiting(sub)
        task.cancel()  # the wait's future is done at once; the task runs later
        sub.offer(FRAMES)
        assert list(sub.take() or ()) == FRAMES

    asyncio.run(run())
    assert written == []


def test_a_writer_that_raises_costs_only_its_own_stream_the_direct_path() -> None:
    # Raising before it wrote anything (a server's internals moved, say): the frames, and
    # this stream's from now on, go through its task; it stays open.
    def broken(frames: Sequence[Frame], run: Run | None = None) -> bool:
        raise AttributeError("a server's internals moved")

    async def run() -> None:
        sub = subscriber(None)
        sub.direct = broken
        task = await waiting(sub)
        sub.offer(FRAMES)  # no exception reaches the hub's pass
        await asyncio.wait_for(task, 60)
        assert list(sub.take() or ()) == FRAMES and not sub.closed and sub.direct is None

    asyncio.run(run())


class FailingWriter:
    """A connection that takes no more bytes: `ready`, then the write raises."""

    def ready(self) -> bool:
        return True

    def write(self, body: bytes) -> None:
        raise OSError("the connection broke mid-write")

    write_chunk = write


class Connection:
    """A connection that takes every byte it is given: what its client would read."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def ready(self) -> bool:
        return True

    def write(self, body: bytes) -> None:
        self.writes.append(chunked(body))

    def write_chunk(self, chunk: bytes) -> None:
        self.writes.append(chunk)


def direct_stream(writer: Any, tally: FeedTally) -> Stream:
    """A member's stream whose frames the hub writes with `writer` (no replay, no database)."""
    settings = Settings()
    hub = Hub(create_engine(settings, "postgresql://postgres@127.0.0.1:1/none"), SnapshotCache())
    snapshot = AppSnapshot(APP, "notes-app", 1, {}, {}, {}, build_enforcer({}))
    principal = Principal(APP, uuid.uuid4(), uuid.uuid4(), None, ("reader",), None)
    stream = Stream(settings, hub.engine, hub, None,  # type: ignore[arg-type]  # no replay
                    StreamRequest(snapshot, [Notes()], principal, None))  # type: ignore[list-item]
    stream.sub.direct = DirectFrames(stream, writer, tally)
    return stream


def offered_to_a_class(streams: list[Stream], frames: Sequence[Frame]) -> None:
    """The hub's pass for one read class: its frames to every idle stream, then the tally."""
    async def run() -> None:
        tasks = [await waiting(stream.sub) for stream in streams]
        run = Run(frames)
        for stream in streams:
            stream.sub.offer(frames, run)
        run.settle()
        for task in tasks:
            task.cancel()

    asyncio.run(run())


def test_a_class_s_frames_are_framed_once_for_its_idle_streams_and_tallied_per_stream() -> None:
    tally = FeedTally([60.0, 600.0])  # wide: a slow box may take seconds between the two
    connections = [Connection() for _ in range(3)]
    streams = [direct_stream(c, tally) for c in connections]
    stamped = [Frame(5, FRAMES[0].data, time.time()), Frame(6, FRAMES[1].data, time.time())]
    offered_to_a_class(streams, stamped)
    assert [c.writes for c in connections] == [[chunked(FRAMES[0].data + FRAMES[1].data)]] * 3
    assert connections[0].writes[0] is connections[2].writes[0], "framed once, for all"
    frames, buckets, _ = tally.take()
    assert frames == {"change": 6} and sum(buckets["delivered"]) == 6
    assert buckets["delivered"][0] == 6, "written just now: within the first bucket"
    assert all(stream.last_sent == 6 and stream.sub.take() is None for stream in streams)


def test_a_stream_whose_replay_sent_some_of_its_class_s_frames_gets_only_the_others() -> None:
    tally = FeedTally([0.1, 1.0])
    connections = [Connection() for _ in range(3)]
    streams = [direct_stream(c, tally) for c in connections]
    streams[1].last_sent = 5  # its replay ended at 5
    offered_to_a_class(streams, FRAMES)
    whole = chunked(FRAMES[0].data + FRAMES[1].data)
    assert [c.writes for c in connections] == [[whole], [chunked(FRAMES[1].data)], [whole]]
    assert tally.take()[0] == {"change": 5}


def test_a_class_write_that_fails_ends_only_that_stream_and_the_others_are_tallied() -> None:
    tally = FeedTally([0.1, 1.0])
    connections = [Connection(), Connection()]
    streams = [direct_stream(connections[0], tally), direct_stream(FailingWriter(), tally),
               direct_stream(connections[1], tally)]
    offered_to_a_class(streams, FRAMES)
    assert (streams[1].sub.closed, streams[1].sub.reason, streams[1].sub.direct) == (
        True, "error", None)
    assert not streams[0].sub.closed and not streams[2].sub.closed
    assert [c.writes for c in connections] == [[chunked(FRAMES[0].data + FRAMES[1].data)]] * 2
    assert tally.take()[0] == {"change": 4}


def test_a_write_that_fails_ends_only_that_stream_so_its_client_resumes_from_the_log() -> None:
    # The frames were packed (counted as sent: queued again, the replay's dedupe would drop
    # them) and maybe half written, so the stream ends with `error` and its client resumes
    # with Last-Event-ID; a stream of the same class is untouched.
    stream = direct_stream(FailingWriter(), Metrics().feed)
    bystander = subscriber(None)

    async def run() -> None:
        task = await waiting(stream.sub)
        stream.sub.offer(FRAMES)  # no exception reaches the hub's pass
        bystander.offer(FRAMES)
        await asyncio.wait_for(task, 60)

    asyncio.run(run())
    assert (stream.sub.closed, stream.sub.reason, stream.sub.direct) == (True, "error", None)
    assert list(stream.sub.take() or ()) == [CLOSE] and stream.last_sent == FRAMES[-1].pos
    assert not bystander.closed and list(bystander.take() or ()) == FRAMES


def test_frames_past_the_queue_limit_end_the_stream_with_overflow() -> None:
    sub = subscriber(None, limit=1)
    sub.offer(FRAMES)
    assert (sub.closed, sub.reason) == (True, "overflow")


@asynccontextmanager
async def served(app: Callable[[Scope, Receive, Send], Any], http: str) -> AsyncIterator[int]:
    """`app` on a real uvicorn server on loopback; yields its port."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, http=http, lifespan="off",
                            log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)


def chunked_body(raw: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 response read to its end."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    body = b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return body
        body, rest = body + rest[:size], rest[size + 2:]


@pytest.mark.parametrize("loop", LOOPS)
def test_chunks_the_writer_writes_reach_the_client_as_the_response_body(loop: str) -> None:
    """A stream's client reads the writer's chunks as it would read `send`'s; once the
    response has ended the writer writes no more."""
    after_end: list[bool] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        writer = chunk_writer(send)
        assert writer is not None and writer.ready()
        writer.write(b"data: one\n\n")
        await send({"type": "http.response.body", "body": b"data: two\n\n", "more_body": True})
        writer.write(b"data: three\n\n")
        writer.write(b"")  # nothing: an empty chunk would end the body
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        after_end.append(writer.ready())

    async def run() -> bytes:
        async with served(app, "httptools") as port:
            return await asyncio.to_thread(fetch, port)

    body = chunked_body(run_on(loop, run()))
    assert body == b"data: one\n\ndata: two\n\ndata: three\n\n" and after_end == [False]


@pytest.mark.parametrize("loop", LOOPS)
def test_the_writer_stops_once_the_client_has_gone(loop: str) -> None:
    seen: dict[str, bool] = {}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        writer = chunk_writer(send)
        assert writer is not None
        seen["before"] = writer.ready()
        while (await receive())["type"] != "http.disconnect":
            pass
        seen["after"] = writer.ready()

    async def run() -> None:
        async with served(app, "httptools") as port:
            assert (await asyncio.to_thread(head_then_leave, port)).startswith(b"HTTP/1.1 200")
            deadline = time.monotonic() + 120
            while "after" not in seen:
                assert time.monotonic() < deadline, "the server never saw the client leave"
                await asyncio.sleep(0.01)

    run_on(loop, run())
    assert seen == {"before": True, "after": False}


@pytest.mark.parametrize("loop", LOOPS)
def test_the_writer_stops_when_the_client_stops_reading_and_loses_nothing(loop: str) -> None:
    """A client that does not read fills the socket buffers; the writer then says it cannot
    write (the frames would wait in the stream's bounded queue), instead of buffering them
    without end. Once the client reads again it gets every byte written."""
    chunk = b"x" * 65_536
    state: dict[str, Any] = {}
    stalled = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        writer = chunk_writer(send)
        assert writer is not None
        count = 0
        while writer.ready() and count < 500:  # 33 MB: far past the socket buffers
            writer.write(chunk)
            count += 1
        state["count"], state["ready"] = count, writer.ready()
        stalled.set()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def run() -> bytes:
        async with served(app, "httptools") as port:
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            await asyncio.wait_for(stalled.wait(), 120)  # nobody has read a byte yet
            return await asyncio.to_thread(read_all, client)

    body = chunked_body(run_on(loop, run()))
    assert state["ready"] is False and state["count"] < 500
    assert body == chunk * state["count"]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_server_other_than_uvicorns_httptools_cycle_gets_no_writer(loop: str) -> None:
    found: list[ChunkWriter | None] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        found.append(chunk_writer(send))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def run() -> None:
        async with served(app, "h11") as port:
            await asyncio.to_thread(fetch, port)

    run_on(loop, run())

    async def plain_send(message: Any) -> None:
        pass

    assert found == [None] and chunk_writer(plain_send) is None


def head_then_leave(port: int) -> bytes:
    """Ask, read the response's head, and close the connection without reading the body."""
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    client.settimeout(120)
    head = client.recv(65_536)
    client.close()
    return head


def fetch(port: int) -> bytes:
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    return read_all(client)


def read_all(client: socket.socket) -> bytes:
    client.settimeout(120)
    parts = []
    while part := client.recv(65_536):
        parts.append(part)
    client.close()
    return b"".join(parts)
