"""A subscription: one SSE stream followed to the letter of contract section 5.

- `reauth` (or a 401 `TOKEN_EXPIRED` when connecting): refresh the session, reconnect at once
  with `Last-Event-ID`;
- a dropped connection, a silent one (no byte, not even a ping, for `read_timeout`), a 5xx or a
  restarted server: reconnect with exponential backoff and jitter, with `Last-Event-ID`;
- `429`: wait what `Retry-After` says;
- any other refusal (403, 404...) ends the iteration with `AuthoricError`.

A task reads the stream into a bounded queue, so `close()` works from anywhere and a slow
reader slows the reading (the server may then drop the stream; it is resumed like any drop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from authoric_client.errors import AuthoricError
from authoric_client.models import Event, Status
from authoric_client.session import Session
from authoric_client.sse import FrameParser

R = TypeVar("R")


@dataclass(frozen=True)
class Backoff:
    """Delays between reconnection attempts: doubling from `initial` up to `maximum`, each
    drawn at random from its upper half (so a restarted server is not hit by every client at
    the same instant)."""

    initial: float = 0.25
    maximum: float = 10.0

    def delay(self, attempt: int) -> float:
        ceiling = min(self.maximum, self.initial * 2.0 ** min(attempt, 30))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


class _Reauth(Exception):
    def __init__(self, token: str | None) -> None:
        self.token = token


class _Wait(Exception):
    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds


class _Closed:
    pass


_CLOSED = _Closed()


class AsyncSubscription(Generic[R]):
    """An async iterator of `Event`s; `close()` (or leaving `async with`) ends it."""

    def __init__(self, http: httpx.AsyncClient, session: Session, path: str, params: dict[str, str],
                 *, last_event_id: str | None = None,
                 on_status: Callable[[Status], None] | None = None,
                 backoff: Backoff = Backoff(), read_timeout: float = 60.0,
                 queue_size: int = 1000) -> None:
        self._http = http
        self._session = session
        self._path = path
        self._params = params
        self._on_status = on_status
        self.backoff = backoff
        self._read_timeout = read_timeout
        self._queue: asyncio.Queue[Event[R] | BaseException | _Closed] = asyncio.Queue(queue_size)
        self._task: asyncio.Task[None] | None = None
        self._attempt = 0
        self._done = False
        self.last_event_id = last_event_id
        self.status: Status = "connecting"
        self._reported = False  # on_status hears the first status too, `connecting` included
        self.connections = 0  # streams opened so far (1 + reconnections)
        self.retry_after: float | None = None  # the last wait a 429 (or 5xx) asked for

    def __aiter__(self) -> AsyncSubscription[R]:
        return self

    async def __anext__(self) -> Event[R]:
        if self._done:
            raise StopAsyncIteration
        self.start()
        item = await self._queue.get()
        if isinstance(item, _Closed):
            self._done = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    def pending(self) -> int:
        """Events received and not yet taken."""
        return self._queue.qsize()

    def start(self) -> None:
        """Open the stream now (iterating opens it too)."""
        if self._task is None and not self._done:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        task, self._task = self._task, None
        self._done = True
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._set_status("closed")
        while True:  # wake a reader waiting for the next event
            try:
                self._queue.put_nowait(_CLOSED)
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()

    async def __aenter__(self) -> AsyncSubscription[R]:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _set_status(self, status: Status) -> None:
        if status != self.status or not self._reported:
            self._reported = True
            self.status = status
            if self._on_status is not None:
                self._on_status(status)

    async def _run(self) -> None:
        try:
            while True:
                self._set_status("connecting" if self.connections == 0 else "reconnecting")
                try:
                    await self._follow()
                    delay = self.backoff.delay(self._attempt)  # the server ended the stream
                except _Reauth as reauth:
                    try:
                        await self._session.refresh(reauth.token)
                        continue
                    except httpx.TransportError:  # the server is away: try again later
                        delay = self.backoff.delay(self._attempt)
                    except AuthoricError as exc:
                        if exc.status != 429 and exc.status < 500:
                            raise
                        delay = exc.retry_after or self.backoff.delay(self._attempt)
                except _Wait as wait:
                    self.retry_after = wait.seconds
                    delay = wait.seconds if wait.seconds is not None else \
                        self.backoff.delay(self._attempt)
                except (httpx.TransportError, httpx.StreamError, json.JSONDecodeError):
                    delay = self.backoff.delay(self._attempt)
                self._attempt += 1
                self._set_status("reconnecting")
                await asyncio.sleep(delay)
        except Exception as exc:  # a refusal (AuthoricError) or a bug: the reader hears of it
            self._set_status("closed")
            await self._queue.put(exc)

    async def _follow(self) -> None:
        """One connection, read until it ends; raises what should happen next."""
        try:
            token = await self._session.access_token()
        except AuthoricError as exc:
            if exc.status >= 500 or exc.status == 429:
                raise _Wait(exc.retry_after) from exc
            raise
        headers = {"Accept": "text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        timeout = httpx.Timeout(10.0, read=self._read_timeout)
        async with self._http.stream("GET", self._path, params=self._params, headers=headers,
                                     timeout=timeout) as response:
            if response.status_code >= 400:
                await response.aread()
                error = AuthoricError.from_response(response)
                if error.code == "TOKEN_EXPIRED":
                    raise _Reauth(token)
                if error.status == 429:
                    raise _Wait(error.retry_after)
                if error.status >= 500:
                    raise _Wait(error.retry_after)
                raise error
            self.connections += 1
            parser = FrameParser()
            async for text in response.aiter_text():
                for frame in parser.feed(text):
                    if frame.event == "reauth":
                        raise _Reauth(token)
                    await self._deliver(frame.event, frame.data, frame.id)

    async def _deliver(self, kind: str, raw: str, frame_id: str | None) -> None:
        data: Any = json.loads(raw) if raw else {}
        event = Event.parse(kind, data if isinstance(data, dict) else {}, frame_id)
        if event is None:
            return
        if event.op in ("insert", "update", "delete") and _not_after(frame_id, self.last_event_id):
            return  # already delivered: never twice
        if frame_id is not None:
            self.last_event_id = frame_id
        if event.op == "connected":
            self._attempt = 0
            self._set_status("live")
        await self._queue.put(event)


def _not_after(frame_id: str | None, last: str | None) -> bool:
    if frame_id is None or last is None:
        return False
    try:
        return int(frame_id) <= int(last)
    except ValueError:
        return False
