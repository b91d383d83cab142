"""The HTTP/1.1 protocol `authoric serve` runs: uvicorn's httptools protocol, except that a
response of known length leaves in one write instead of two.

uvicorn writes the status line and headers as soon as the app sends `http.response.start`,
then the body in a second write. Each write is a `send` system call and, with Nagle off, a TCP
segment of its own; on a small JSON answer the second one costs about as much as the first.
Here the header block of a response that declares its `content-length` is held until the
body arrives and goes out with it. Streams (SSE, CSV export) declare no length: their headers
still leave at once, so a subscriber sees the stream open before the first event. A HEAD
answer has no body to wait for and is written as uvicorn writes it.

Everything else (parsing, keep-alive, flow control, pipelining, limits) is uvicorn's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from uvicorn._types import ASGI3Application, ASGISendEvent
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

LENGTH = b"content-length"


def declares_length(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a response's headers include its content-length."""
    return any(name.lower() == LENGTH for name, _ in headers)


class HeldWrites:
    """A stand-in transport that keeps what is written to it (the header block)."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)


class PrefixedWrites:
    """A stand-in transport whose first write carries `head` in front of it."""

    __slots__ = ("head", "real")

    def __init__(self, real: asyncio.Transport, head: bytes) -> None:
        self.real, self.head = real, head

    def write(self, data: bytes) -> None:
        head, self.head = self.head, b""
        self.real.write(head + data if head else data)

    def close(self) -> None:
        self.flush()
        self.real.close()

    def flush(self) -> None:
        if self.head:
            head, self.head = self.head, b""
            self.real.write(head)


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's request/response cycle, writing a response of known length at once."""

    held_head: bytes | None = None

    async def send(self, message: ASGISendEvent) -> None:
        kind = message["type"]
        if (kind == "http.response.start" and not self.response_started
                and self.scope["method"] != "HEAD"
                and declares_length(message.get("headers", ()))):  # type: ignore[arg-type]
            await self._send_through(HeldWrites(), message)
            return
        if kind == "http.response.body" and self.held_head is not None:
            prefixed = PrefixedWrites(self.transport, self.held_head)
            self.held_head = None
            await self._send_through(prefixed, message)
            if not self.disconnected:
                prefixed.flush()  # the body wrote nothing: the head still goes
            return
        await super().send(message)

    async def _send_through(self, stand_in: HeldWrites | PrefixedWrites,
                            message: ASGISendEvent) -> None:
        real = self.transport
        self.transport = stand_in  # type: ignore[assignment]
        try:
            await super().send(message)
        finally:
            self.transport = real
        if isinstance(stand_in, HeldWrites):
            self.held_head = b"".join(stand_in.chunks)


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with `OneWriteCycle` for every request."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        # uvicorn builds the cycle itself; the subclass adds behaviour, not state.
        cycle.__class__ = OneWriteCycle
        super()._start_asgi_task(cycle, app)


# uvicorn.run's `http=`, as an import string: each worker process imports it.
PROTOCOL = f"{__name__}:{OneWriteProtocol.__name__}"
