"""Many SSE subscribers over raw sockets (one asyncio protocol each, no HTTP client per
stream), and a raw keep-alive HTTP writer: the fan-out bench's load generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any


class SseClient(asyncio.Protocol):
    """One `GET .../subscribe` over its own socket: parses the chunked body into SSE blocks and
    hands each block to `on_block(client, block, arrival)`."""

    def __init__(self, request: bytes, on_block: Callable[[SseClient, bytes, float], None],
                 tag: Any = None) -> None:
        self.request, self.on_block, self.tag = request, on_block, tag
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._raw = b""
        self._body = b""
        self._headers_done = False
        self._chunked = True
        self.frames = 0
        self.pings = 0
        self.ended = False
        self.last_id: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        raw = self._raw + data
        if not self._headers_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self._raw = raw
                return
            head, raw = raw[:end], raw[end + 4:]
            self.status = int(head[9:12])
            self._chunked = b"transfer-encoding: chunked" in head.lower()
            self._headers_done = True
            if not self.ready.done():
                self.ready.set_result(self.status)
        if self._chunked:
            body, pos = [], 0
            while True:
                eol = raw.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(raw[pos:eol].split(b";", 1)[0], 16)
                if size == 0:
                    self.ended = True  # the server ended the stream (the last chunk)
                if len(raw) < eol + 2 + size + 2:
                    break
                body.append(raw[eol + 2:eol + 2 + size])
                pos = eol + 2 + size + 2
            self._raw = raw[pos:]
            text = self._body + b"".join(body)
        else:
            self._raw = b""
            text = self._body + raw
        start = 0
        while (end := text.find(b"\n\n", start)) >= 0:
            self.on_block(self, text[start:end], now)
            start = end + 2
        self._body = text[start:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_result(self.status or -1)
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def subscribe_request(host: str, port: int, path: str, token: str,
                      last_event_id: int | None = None) -> bytes:
    extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: text/event-stream\r\n{extra}\r\n").encode()


async def open_subscribers(host: str, port: int, requests: list[tuple[bytes, Any]],
                           on_block: Callable[[SseClient, bytes, float], None],
                           concurrency: int = 100, progress: bool = False) -> list[SseClient]:
    """Open one SSE stream per request (with its tag); wait for each `200` and `connected`."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    clients: list[SseClient] = []
    started = time.perf_counter()

    async def one(request: bytes, tag: Any) -> None:
        async with gate:
            client = SseClient(request, on_block, tag)
            connected = loop.create_future()
            client.connected = connected  # type: ignore[attr-defined]
            for attempt in range(5):
                try:
                    await loop.create_connection(lambda: client, host, port)
                    break
                except OSError:
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5)
            status = await client.ready
            if status != 200:
                raise SystemExit(f"subscribe failed with HTTP {status}")
            await asyncio.wait_for(connected, 60)
            clients.append(client)
            if progress and len(clients) % 1000 == 0:
                print(f"    {len(clients)} subscribers open after "
                      f"{time.perf_counter() - started:.1f} s", flush=True)

    await asyncio.gather(*[one(r, t) for r, t in requests])
    return clients


def resolve_connected(client: SseClient) -> None:
    """Resolve the client's `connected` future (if anyone waits on it): its stream is live."""
    fut = getattr(client, "connected", None)
    if fut is not None and not fut.done():
        fut.set_result(None)


def mark_connected(client: SseClient, block: bytes) -> bool:
    """True (and resolves the client's `connected` future) for the `connected` frame."""
    if block.startswith(b"event: connected"):
        resolve_connected(client)
        return True
    return False


def note_control(client: SseClient, block: bytes) -> None:
    """A block that carries no change: a ping is counted, the `connected` frame noted."""
    if block.startswith(b": ping"):
        client.pings += 1
    else:
        mark_connected(client, block)


# --- writers --------------------------------------------------------------------------------

class RawHttp:
    """One keep-alive HTTP/1.1 connection over asyncio streams (responses with a length)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, token: str,
                      body: bytes | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Authorization: Bearer {token}\r\n")
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        raw = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in raw.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length) if length else b""
        return int(raw[9:12]), payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None
