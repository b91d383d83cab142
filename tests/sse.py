"""A small Server-Sent Events client for tests: real HTTP (httpx streaming), a reader thread
that parses frames as they arrive, and `wait_for` helpers with timeouts (never sleeps).

Frames follow the SSE wire format: `field: value` lines, a blank line ends a frame, lines
end with `\\n`, `\\r\\n` or `\\r`, and a line starting with `:` is a comment (`: ping`).

Also here: small synchronous helpers on the change log and databases (head, the relay and
sequencer connections, a fresh migrated database) that the feed tests share.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import contextlib
import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

DEFAULT_TIMEOUT = 20.0


@dataclass(frozen=True)
class Frame:
    """One parsed frame: an event (`event`/`id`/`data`) or a comment such as `: ping`."""

    event: str | None = None  # the `event:` field; None for a plain message
    id: str | None = None  # the `id:` field of this frame, if it had one
    raw: str | None = None  # the `data:` lines joined with "\n"
    comment: str | None = None  # set (and nothing else) for a comment line
    at: float = 0.0  # time.time() when the frame was parsed

    @property
    def data(self) -> Any:
        return None if self.raw is None else json.loads(self.raw)

    @property
    def pos(self) -> int:
        assert self.id is not None, f"frame has no id: {self}"
        return int(self.id)

    @property
    def is_comment(self) -> bool:
        return self.comment is not None

    @property
    def is_change(self) -> bool:
        """An insert, update or delete frame (a plain message with an id)."""
        return self.event is None and self.id is not None and self.raw is not None

    @property
    def op(self) -> str | None:
        return self.data.get("op") if self.is_change else None

    @property
    def row_uid(self) -> str | None:
        if not self.is_change:
            return None
        data = self.data
        return str(data["rowUid"]) if data["op"] == "delete" else str(data["row"]["uid"])


class Parser:
    """Incremental SSE parser: feed it text chunks, it returns the frames they complete."""

    def __init__(self) -> None:
        self._buffer = ""
        self._pending_cr = False
        self._event: str | None = None
        self._id: str | None = None
        self._data: list[str] = []

    def feed(self, text: str) -> list[Frame]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the "\n" of a "\r\n" split across two chunks
        self._pending_cr = False
        self._buffer += text
        frames: list[Frame] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return frames
            end, width = cut
            if width == 1 and self._buffer[end] == "\r" and end + 1 == len(self._buffer):
                self._pending_cr = True  # maybe half of "\r\n": the next chunk will tell
            line, self._buffer = self._buffer[:end], self._buffer[end + width:]
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)

    def _line(self, line: str) -> Frame | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return Frame(comment=line[1:].strip(), at=time.time())
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None  # `retry` and unknown fields are ignored, as the SSE spec says

    def _dispatch(self) -> Frame | None:
        event, id_, data = self._event, self._id, self._data
        self._event, self._id, self._data = None, None, []
        if event is None and id_ is None and not data:
            return None
        return Frame(event=event, id=id_, raw="\n".join(data) if data else None, at=time.time())


def _line_end(buffer: str) -> tuple[int, int] | None:
    """Where the first line of `buffer` ends, and the terminator's width."""
    lf, cr = buffer.find("\n"), buffer.find("\r")
    if lf < 0 and cr < 0:
        return None
    if cr < 0 or (0 <= lf < cr):
        return lf, 1
    if cr + 1 < len(buffer) and buffer[cr + 1] == "\n":
        return cr, 2
    return cr, 1


def parse(text: str) -> list[Frame]:
    """All frames of a complete stream body."""
    return Parser().feed(text + "\n\n")


class SSEClient:
    """Subscribe over HTTP and collect frames in a background thread.

    `status_code` and `headers` are set once the response starts; `frames` grows as frames
    arrive; `ended` is set when the server ends the stream (or the connection drops).
    """

    def __init__(self, base_url: str, path: str, token: str | None = None, *,
                 last_event_id: str | int | None = None, params: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None, accept: bool = True,
                 connect_timeout: float = DEFAULT_TIMEOUT) -> None:
        request_headers: dict[str, str] = {}
        if accept:
            request_headers["Accept"] = "text/event-stream"
        if token:
            request_headers["Authorization"] = f"Bearer {token}"
        if last_event_id is not None:
            request_headers["Last-Event-ID"] = str(last_event_id)
        request_headers.update(headers or {})
        self._client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(
            connect_timeout, read=None))
        self._request = self._client.build_request("GET", path, headers=request_headers,
                                                   params=params)
        self._cond = threading.Condition()
        self._frames: list[Frame] = []
        self._started = threading.Event()
        self._closing = False
        self._socket: socket.socket | None = None
        self.status_code: int | None = None
        self.headers: httpx.Headers = httpx.Headers()
        self.body: bytes = b""  # the body of a non-200 response
        self.ended = threading.Event()
        self.ended_at: float | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"sse {path}")
        self._thread.start()
        if not self._started.wait(connect_timeout):
            self.close()
            raise TimeoutError(f"no response to {path} within {connect_timeout}s")
        if self.error is not None and self.status_code is None:
            raise self.error

    def __enter__(self) -> SSEClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self) -> None:
        try:
            response = self._client.send(self._request, stream=True)
            with contextlib.closing(response):
                self.status_code, self.headers = response.status_code, response.headers
                stream = response.extensions.get("network_stream")
                if stream is not None:
                    self._socket = stream.get_extra_info("socket")
                if response.status_code != 200:
                    self.body = response.read()
                    self._started.set()
                    return
                self._started.set()
                parser = Parser()
                decoder = codecs.getincrementaldecoder("utf-8")()
                for chunk in response.iter_raw():
                    self._add(parser.feed(decoder.decode(chunk)))
        except Exception as exc:  # a dropped connection ends the stream; keep why
            if not self._closing:
                self.error = exc
        finally:
            self._started.set()
            with self._cond:
                self.ended_at = time.time()
                self.ended.set()
                self._cond.notify_all()

    def _add(self, frames: list[Frame]) -> None:
        if frames:
            with self._cond:
                self._frames.extend(frames)
                self._cond.notify_all()

    # -- reading what arrived -------------------------------------------------------------

    @property
    def frames(self) -> list[Frame]:
        with self._cond:
            return list(self._frames)

    def events(self) -> list[Frame]:
        """Every frame except comments."""
        return [f for f in self.frames if not f.is_comment]

    def changes(self) -> list[Frame]:
        """Insert, update and delete frames."""
        return [f for f in self.frames if f.is_change]

    def ids(self) -> list[int]:
        return [f.pos for f in self.frames if f.id is not None]

    def text(self) -> str:
        """Everything received so far, as one string (for "never sent" checks)."""
        return "\n".join(f"{f.event} {f.id} {f.raw} {f.comment}" for f in self.frames)

    # -- waiting ----------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[list[Frame]], Any],
                   timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Wait until `condition(frames)` is truthy; return its value. Fails on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = condition(self._frames)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.ended.is_set() and not condition(self._frames)):
                    break
                self._cond.wait(min(remaining, 0.5))
            frames = list(self._frames)
        state = "ended" if self.ended.is_set() else f"timed out after {timeout}s"
        raise AssertionError(f"stream {state} before the condition held; error={self.error!r}; "
                             f"frames={[_short(f) for f in frames]}")

    def wait_for(self, predicate: Callable[[Frame], bool], timeout: float = DEFAULT_TIMEOUT,
                 start: int = 0) -> Frame:
        """The first frame (from index `start`) matching `predicate`, waiting for it."""

        def found(frames: list[Frame]) -> Frame | None:
            return next((f for f in frames[start:] if predicate(f)), None)

        frame: Frame = self.wait_until(found, timeout)
        return frame

    def wait_for_change(self, row_uid: str, op: str | None = None,
                        timeout: float = DEFAULT_TIMEOUT) -> Frame:
        return self.wait_for(lambda f: f.is_change and f.row_uid == row_uid
                             and (op is None or f.op == op), timeout)

    def wait_connected(self, timeout: float = DEFAULT_TIMEOUT) -> Frame:
        return self.wait_for(lambda f: f.event == "connected", timeout)

    def wait_ended(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not self.ended.wait(timeout):
            raise AssertionError(f"stream still open after {timeout}s: "
                                 f"{[_short(f) for f in self.frames[-5:]]}")

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the connection (as a client going away would) and stop the reader thread."""
        self._closing = True
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self._client.close()


@dataclass
class Collected:
    """What `collect` gathered: change and resync frames across reconnects, in arrival order."""

    frames: list[Frame]
    reconnects: int

    def changes(self) -> list[Frame]:
        return [f for f in self.frames if f.is_change]


def collect(base_url: str, path: str, token: str | None, *, last_event_id: int | None,
            done: Callable[[list[Frame]], bool], timeout: float = 60.0) -> Collected:
    """Follow a feed as a well-behaved client does: whenever the stream ends, resume with the
    last id received, until `done(frames)` (frames with ids, across all connections)."""
    deadline = time.monotonic() + timeout
    frames: list[Frame] = []
    reconnects = -1
    last = last_event_id
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"not done after {timeout}s: {[_short(f) for f in frames[-5:]]}"
        reconnects += 1
        with SSEClient(base_url, path, token, last_event_id=last) as stream:
            assert stream.status_code == 200, (stream.status_code, stream.body)

            def finished(fs: list[Frame], stream: SSEClient = stream,
                         before: list[Frame] = frames) -> bool:
                return done(before + [f for f in fs if f.id is not None]) or stream.ended.is_set()

            with contextlib.suppress(AssertionError):  # an ended stream: resume
                stream.wait_until(finished, timeout=remaining)
            frames += [f for f in stream.frames if f.id is not None]
            if done(frames):
                return Collected(frames, reconnects)
            if frames:
                last = frames[-1].pos


def _short(frame: Frame) -> str:
    if frame.is_comment:
        return f": {frame.comment}"
    return f"[{frame.event or 'message'} id={frame.id} {(frame.raw or '')[:120]}]"


def strictly_increasing(ids: Iterable[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(ids))


# -- the change log and databases, for feed tests ----------------------------------------------

def db_fetch(url: str, sql: str, *args: Any) -> list[Any]:
    """Run one query on `url` (a fresh connection) and return its rows."""

    async def run() -> list[Any]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from an async test
        return pool.submit(asyncio.run, run()).result()


def db_value(url: str, sql: str, *args: Any) -> Any:
    rows = db_fetch(url, sql, *args)
    return rows[0][0] if rows else None


def log_head(url: str) -> int:
    """The highest stamped position (what the server calls the head)."""
    return int(db_value(url, "SELECT GREATEST((SELECT max(pos) FROM authoric.changes), "
                             "(SELECT pos FROM authoric.log_horizon WHERE id = 1), 0)"))


def backends(url: str, application_name: str) -> list[int]:
    """Pids of this database's connections named `application_name` (relay, sequencer)."""
    return [r["pid"] for r in db_fetch(
        url, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 "
             "AND datname = current_database()", application_name)]


def terminate(url: str, application_name: str) -> list[int]:
    """pg_terminate_backend every connection of this database named `application_name`."""
    pids = backends(url, application_name)
    for pid in pids:
        db_fetch(url, "SELECT pg_terminate_backend($1)", pid)
    return pids


def fresh_database(url: str) -> str:
    """A new, migrated database on the server of `url`; returns its URL."""
    from authoric.db import migrate

    name = f"authoric_feed_{uuid.uuid4().hex[:12]}"
    db_fetch(url, f'CREATE DATABASE "{name}"')
    new = make_url(url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(new)
    return new


def drop_database(url: str) -> None:
    """Drop the database `url` names (connecting to `postgres` on the same server)."""
    name = make_url(url).database
    admin = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    db_fetch(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
    db_fetch(admin, f'DROP DATABASE IF EXISTS "{name}"')


LOCK_WAIT_S = 20.0  # how long a lock wait may take to show up in pg_locks (a loaded machine)


async def wait_for_lock_waiter(conn: asyncpg.Connection, relation: str, mode: str) -> None:
    """Until some session waits for `mode` on `relation` (pg_locks, not granted)."""
    deadline = asyncio.get_running_loop().time() + LOCK_WAIT_S
    while asyncio.get_running_loop().time() < deadline:
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE relation = $1::regclass AND mode = $2 "
            "AND NOT granted AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database())", relation, mode)
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nobody waited for {mode} on {relation}")
