"""Keep-alive HTTP/1.1 connections to webhook receivers, over h11 (httpx's HTTP/1.1 engine).

`PinnedTransport` (webhooks/targets.py) decides where a request may go; this module carries it
there: per host, a few idle connections kept open, each to the address it was opened to, and
reused only for that address while both sides left it ready for another request.

Why not httpcore's pool: a delivery is one small POST, and a receiver usually answers at once,
so the HTTP client's own work is most of a delivery's cost. Through httpx's client and
httpcore's pool it was about 0.85 ms of CPU per request on the benchmark machine (the pool's
locks, cancellation shields and event set-ups on every request; each of those looks for
`sniffio` by importing it, a search of sys.path when it is not installed); h11 on an asyncio
stream with httpx's request and response around it, 0.18 ms (docs/benchmarks-realtime.md).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import h11
import httpx

# Contract section 8: a response is read up to 4 KiB of its body. Every read asks the socket for
# at most that much, and a body's reads only for what is left of it (`Body`), so a receiver
# answering with megabytes has at most 4 KiB of its body taken; the rest is dropped with the
# connection. A receiver's answer to a delivery is a few hundred bytes: one read.
BODY_LIMIT = 4096
READ = BODY_LIMIT  # bytes asked of the socket at a time
IDLE_PER_HOST = 8  # idle connections kept per host (webhooks to one host share them)


@dataclass(eq=False)
class Connection:
    """One open connection to one address."""

    address: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    h11: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def reusable(self) -> bool:
        """Both sides finished their message and kept the connection, and it is still open
        (a receiver that closed an idle connection is seen here, not on the next request)."""
        return (self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE
                and not self.reader.at_eof() and not self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()

    async def next_event(self, timeout: float | None, most: int = READ) -> object:
        """h11's next event, reading at most `most` bytes of the socket at a time."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if timeout is None:  # bounded by the caller (the worker's whole attempt)
                data = await self.reader.read(most)
            else:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(most)
            self.h11.receive_data(data)


@dataclass(eq=False)
class Host:
    """One host's idle connections (a scheme, a name and a port)."""

    scheme: str
    name: str
    port: int
    idle: list[Connection] = field(default_factory=list)

    def take(self, address: str) -> Connection | None:
        """An idle connection to `address` (the one just resolved), or None."""
        while self.idle:
            conn = self.idle.pop()
            if conn.address == address and conn.reusable():
                conn.h11.start_next_cycle()
                return conn
            conn.close()
        return None

    def give(self, conn: Connection) -> None:
        if conn.reusable() and len(self.idle) < IDLE_PER_HOST:
            self.idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self.idle:
            conn.close()
        self.idle.clear()


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None]:
    """(connect, read) seconds from httpx's per-request timeout (None: no bound)."""
    given = request.extensions.get("timeout") or {}
    return given.get("connect"), given.get("read")


async def opened(host: Host, address: str, request: httpx.Request,
                 tls: ssl.SSLContext | None) -> Connection:
    """A new connection to `address`; for https, TLS with the host's name (SNI and the
    certificate check)."""
    connect, _ = _timeouts(request)
    try:
        async with asyncio.timeout(connect):
            reader, writer = await asyncio.open_connection(
                address, host.port, ssl=tls, server_hostname=host.name if tls else None,
                limit=READ)
    except TimeoutError as exc:
        raise httpx.ConnectTimeout("no connection within the timeout", request=request) from exc
    except OSError as exc:
        raise httpx.ConnectError(type(exc).__name__, request=request) from exc
    return Connection(address, reader, writer)


class Body(httpx.AsyncByteStream):
    """A response's body, read from its connection as the caller asks, up to `BODY_LIMIT`
    bytes; closing it gives the connection back to its host when the whole body was read,
    else ends it (a body cut at the limit too)."""

    def __init__(self, host: Host, conn: Connection, read: float | None) -> None:
        self.host, self.conn, self.read = host, conn, read
        self.done = False
        self.taken = 0  # bytes of the body read so far

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self.done and self.taken < BODY_LIMIT:
            # The head's read may have brought some of the body: h11 hands that out first,
            # and the socket is asked only for what the limit leaves.
            event = await self.conn.next_event(self.read, BODY_LIMIT - self.taken)
            if isinstance(event, h11.Data):
                data = bytes(event.data)[:BODY_LIMIT - self.taken]
                self.taken += len(data)
                yield data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                self.done = True

    async def aclose(self) -> None:
        if self.done:
            self.host.give(self.conn)
        else:
            self.conn.close()


async def exchange(host: Host, conn: Connection, request: httpx.Request) -> httpx.Response:
    """Send `request` on `conn` and read the response's head; the body follows as it is read
    (`Body`). Any error ends the connection."""
    _, read = _timeouts(request)
    try:
        head = h11.Request(method=request.method, target=request.url.raw_path,
                           headers=request.headers.raw)
        out = [conn.h11.send(head)]
        async for chunk in request.stream:  # type: ignore[union-attr]
            out.append(conn.h11.send(h11.Data(data=chunk)))
        out.append(conn.h11.send(h11.EndOfMessage()))
        conn.writer.write(b"".join(b for b in out if b))
        while True:
            event = await conn.next_event(read)
            if isinstance(event, h11.Response):
                return httpx.Response(event.status_code, headers=event.headers,
                                      stream=Body(host, conn, read),
                                      extensions={"http_version": b"HTTP/1.1",
                                                  "reason_phrase": event.reason})
            if isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("the receiver closed the connection",
                                                request=request)
    except TimeoutError as exc:
        conn.close()
        raise httpx.ReadTimeout("no answer within the timeout", request=request) from exc
    except h11.ProtocolError as exc:
        conn.close()
        raise httpx.RemoteProtocolError(str(exc), request=request) from exc
    except OSError as exc:
        conn.close()
        raise httpx.ReadError(type(exc).__name__, request=request) from exc
    except BaseException:
        conn.close()
        raise
