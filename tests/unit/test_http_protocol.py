"""The HTTP protocol `authoric serve` runs (http.protocol), in process: what a client's
connection receives, write by write, for answers of known length, streams and HEAD. The
protocol is fed raw request bytes and writes to a transport that records each write."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from authoric.http.protocol import OneWriteProtocol

Send = Callable[[dict[str, Any]], Awaitable[None]]
JSON = b'{"ok":true}'


class RecordingTransport(asyncio.Transport):
    """Each write the protocol makes, as the socket would have received it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def connected(app: Callable[[Any, Any, Send], Awaitable[None]]) -> tuple[OneWriteProtocol,
                                                                          RecordingTransport]:
    """A protocol serving `app` on a fresh connection."""
    config = Config(app=app, lifespan="off", log_level="warning")
    config.load()
    protocol = OneWriteProtocol(config, ServerState(), app_state={})
    transport = RecordingTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def settled(writes: list[bytes], until: Callable[[list[bytes]], bool]) -> None:
    """Let the app's task run until `until` holds for the writes so far (or it never will)."""
    for _ in range(1000):
        if until(writes):
            return
        await asyncio.sleep(0)


async def exchange(app: Callable[[Any, Any, Send], Awaitable[None]], request: bytes,
                   until: Callable[[list[bytes]], bool]) -> list[bytes]:
    """Run one request through the protocol; the writes once `until` holds for them."""
    protocol, transport = connected(app)
    protocol.data_received(request)
    await settled(transport.writes, until)
    protocol.connection_lost(None)
    return transport.writes


def answering(*messages: dict[str, Any], between: asyncio.Event | None = None) -> Any:
    """An ASGI app sending `messages` in order, waiting on `between` after the first."""
    async def app(scope: Any, receive: Any, send: Send) -> None:
        await send(messages[0])
        if between is not None:
            await between.wait()
        for message in messages[1:]:
            await send(message)
    return app


def start(*headers: tuple[bytes, bytes], status: int = 200) -> dict[str, Any]:
    return {"type": "http.response.start", "status": status, "headers": list(headers)}


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": more}


GET = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n"
LENGTH = (b"content-length", str(len(JSON)).encode())


async def test_a_client_receives_a_json_answer_of_known_length_in_one_write() -> None:
    writes = await exchange(answering(start(LENGTH, (b"content-type", b"application/json")),
                                      body(JSON)), GET, lambda w: bool(w))
    assert len(writes) == 1
    head, _, rest = writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length: 11" in head
    assert rest == JSON


async def test_a_subscriber_receives_a_streams_headers_before_its_first_event() -> None:
    first_event = asyncio.Event()
    app = answering(start((b"content-type", b"text/event-stream")),
                    body(b"data: 1\n\n", more=True), body(b"", more=False), between=first_event)
    protocol, transport = connected(app)
    protocol.data_received(GET)
    await settled(transport.writes, bool)
    # The stream is open (its headers are out) while no event has been sent yet.
    assert len(transport.writes) == 1 and transport.writes[0].startswith(b"HTTP/1.1 200 OK")
    assert b"transfer-encoding: chunked" in transport.writes[0]
    first_event.set()
    await settled(transport.writes, lambda w: len(w) >= 3)
    assert b"data: 1" in transport.writes[1]
    protocol.connection_lost(None)


async def test_a_head_request_receives_the_headers_and_no_body() -> None:
    request = b"HEAD /x HTTP/1.1\r\nhost: t\r\n\r\n"
    writes = await exchange(answering(start(LENGTH), body(JSON)), request, lambda w: bool(w))
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 200 OK") and writes[0].endswith(b"\r\n\r\n")
    assert JSON not in writes[0]


async def test_an_empty_answer_of_length_zero_still_sends_its_headers() -> None:
    writes = await exchange(answering(start((b"content-length", b"0")), body(b"")), GET,
                            lambda w: bool(w))
    assert b"".join(writes).startswith(b"HTTP/1.1 200 OK")
    assert b"".join(writes).endswith(b"\r\n\r\n")


async def test_a_file_sent_in_chunks_arrives_whole_with_the_head_on_its_first_chunk() -> None:
    length = (b"content-length", b"6")
    writes = await exchange(answering(start(length), body(b"abc", more=True), body(b"def")),
                            GET, lambda w: len(w) >= 2)
    assert len(writes) == 2
    assert writes[0].startswith(b"HTTP/1.1 200 OK") and writes[0].endswith(b"\r\n\r\nabc")
    assert writes[1] == b"def"


async def test_two_pipelined_requests_get_two_whole_answers_in_order() -> None:
    count = 0

    async def app(scope: Any, receive: Any, send: Send) -> None:
        nonlocal count
        count += 1
        data = f'{{"n":{count}}}'.encode()
        await send(start((b"content-length", str(len(data)).encode())))
        await send(body(data))

    writes = await exchange(app, GET + GET, lambda w: len(w) >= 2)
    assert [w.partition(b"\r\n\r\n")[2] for w in writes] == [b'{"n":1}', b'{"n":2}']
