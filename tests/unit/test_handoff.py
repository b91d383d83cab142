"""Streams routed by org (serving/handoff.py), in process: which requests a worker routes, where
to, the head the receiving worker reads, and a connection changing hands between two workers'
halves over real sockets, as uvicorn serves it there."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
from starlette.types import Message, Receive, Scope, Send

from authoric.observability.metrics import Metrics
from authoric.serving.handoff import Handoff, request_head, slot_of, start_handoff, stream_org
from authoric.settings import Settings

ORG = "0193a8f2-1c4e-7000-8000-00000000000a"


def token(**claims: Any) -> bytes:
    body = {"sub": "u", "aud": "app:x", "exp": time.time() + 60, **claims}
    return jwt.encode(body, "a-secret-of-at-least-thirty-two-bytes!", algorithm="HS256").encode()


def request(path: str, authorization: bytes | None = None, method: str = "GET",
            query: bytes = b"", extra: tuple[tuple[bytes, bytes], ...] = ()) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1"), (b"accept", b"text/event-stream")]
    if authorization is not None:
        headers.append((b"authorization", authorization))
    headers.extend(extra)
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
            "query_string": query, "headers": headers, "http_version": "1.1"}


def test_a_subscribers_stream_is_routed_by_the_org_its_token_names() -> None:
    scope = request("/shop/autocrud/invoices/subscribe", b"Bearer " + token(org=ORG))
    assert stream_org(scope) == ORG
    assert stream_org(request("/shop/subscribe", b"bearer " + token(org=ORG))) == ORG


@pytest.mark.parametrize(("body", "routed"), [
    ((b"content-length", b"12"), False),
    ((b"transfer-encoding", b"chunked"), False),
    ((b"content-length", b"0"), True),
])
def test_a_subscribe_request_carrying_a_body_is_answered_where_it_came_in(
        body: tuple[bytes, bytes], routed: bool) -> None:
    """The worker may have read part of the body already, which the head alone would lose."""
    scope = request("/shop/autocrud/invoices/subscribe", b"Bearer " + token(org=ORG),
                    extra=(body,))
    assert (stream_org(scope) == ORG) is routed


@pytest.mark.parametrize(("path", "authorization", "method"), [
    ("/shop/autocrud/invoices", b"Bearer " + token(org=ORG), "GET"),  # a read, not a stream
    ("/shop/autocrud/invoices/subscribe", b"Bearer " + token(org=ORG), "POST"),
    ("/admin/apps/shop/tables/invoices/rows/subscribe", b"Bearer " + token(org=ORG), "GET"),
    ("/shop/autocrud/invoices/subscribe", None, "GET"),
    ("/shop/autocrud/invoices/subscribe", b"Basic dXNlcjpwYXNz", "GET"),
    ("/shop/autocrud/invoices/subscribe", b"Bearer not-a-token", "GET"),
    ("/shop/autocrud/invoices/subscribe", b"Bearer " + token(), "GET"),  # no org
    ("/shop/autocrud/invoices/subscribe", b"Bearer " + token(org=7), "GET"),
])
def test_requests_that_name_no_org_stream_are_served_where_they_came_in(
        path: str, authorization: bytes | None, method: str) -> None:
    assert stream_org(request(path, authorization, method)) is None


def test_every_worker_computes_the_same_slot_for_an_org_and_orgs_spread_over_the_slots() -> None:
    orgs = [str(uuid.UUID(int=i * 7919)) for i in range(1000)]
    slots = [slot_of(org, 2) for org in orgs]
    # Each worker is a process of its own, with its own string-hash seed.
    for seed in ("1", "2"):
        other = subprocess.run(
            [sys.executable, "-c", "import json, sys, uuid; from authoric.serving.handoff import "
             "slot_of; print(json.dumps([slot_of(str(uuid.UUID(int=i * 7919)), 2) "
             "for i in range(1000)]))"],
            env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, check=True,
            timeout=60)
        assert json.loads(other.stdout) == slots
    assert 400 < slots.count(0) < 600
    assert {slot_of(org, 3) for org in orgs} == {0, 1, 2}


def test_the_receiving_worker_reads_the_head_the_client_sent() -> None:
    scope = request("/shop/autocrud/invoices/subscribe", b"Bearer abc", query=b"expand=vendor")
    assert request_head(scope) == (
        b"GET /shop/autocrud/invoices/subscribe?expand=vendor HTTP/1.1\r\n"
        b"host: 127.0.0.1\r\naccept: text/event-stream\r\nauthorization: Bearer abc\r\n\r\n")


# --- a connection changing hands between two workers' halves, over real sockets -------------

class Cycle:
    """What the sending worker's server gives the application: a `send` bound to an object
    holding the connection's transport (uvicorn's request cycle)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    async def send(self, message: Message) -> None:
        raise AssertionError("a worker that handed a connection over answers nothing on it")


class ServedBy:
    """A worker's application: it answers with its name and the path."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": f"{self.name} {scope['path']}".encode()})


async def accepted(server_end: asyncio.Queue[asyncio.Transport]) -> tuple[Any, Any, Any]:
    """A client connected to a listening socket, and the server's transport of it."""

    class Keep(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            server_end.put_nowait(transport)  # type: ignore[arg-type]

    server = await asyncio.get_running_loop().create_server(Keep, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return reader, writer, await asyncio.wait_for(server_end.get(), 30)


def test_a_stream_due_to_the_other_worker_is_answered_by_it_on_the_same_connection(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        metrics = Metrics()
        here = Handoff(tmp_path, 2, ServedBy("here"), Settings(), metrics)
        there = Handoff(tmp_path, 2, ServedBy("there"), Settings(), Metrics())
        here.start()
        there.start()
        assert (here.slot, there.slot) == (0, 1)
        org = next(str(uuid.UUID(int=i)) for i in range(100) if slot_of(str(uuid.UUID(int=i)), 2) == 1)
        path = "/shop/autocrud/invoices/subscribe"
        scope = request(path, b"Bearer " + token(org=org))
        reader, writer, transport = await accepted(asyncio.Queue())
        assert await here.hand_over(scope, Cycle(transport).send)
        answer = await asyncio.wait_for(reader.readuntil(f"there {path}".encode()), 30)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        assert transport.is_closing()  # `here` let go of its copy
        writer.close()

        # Its own org's stream, `here` keeps; and once `there` is gone, `here` serves all.
        own = next(str(uuid.UUID(int=i)) for i in range(100) if slot_of(str(uuid.UUID(int=i)), 2) == 0)
        reader, writer, transport = await accepted(asyncio.Queue())
        assert not await here.hand_over(request(path, b"Bearer " + token(org=own)),
                                        Cycle(transport).send)
        there.stop()
        assert not await here.hand_over(scope, Cycle(transport).send)
        assert not transport.is_closing()
        writer.close()
        here.stop()
        counted = [metrics.registry.get_sample_value("authoric_sse_stream_handoffs_total",
                                                     {"outcome": outcome})
                   for outcome in ("sent", "kept")]
        assert counted == [1.0, 1.0]

    asyncio.run(scenario())


def test_a_worker_started_while_every_slot_is_held_takes_the_first_one_freed(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        first, second = (Handoff(tmp_path, 1, ServedBy("w"), Settings(), Metrics()) for _ in range(2))
        first.start()
        second.start()
        assert (first.slot, second.slot) == (0, None)
        first.stop()  # the worker died: the kernel frees its lock
        deadline = time.monotonic() + 30
        while second.slot is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert second.slot == 0 and (tmp_path / "slot-0.sock").exists()
        second.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("settings", [
    {"stream_handoff_dir": "gone", "workers": 2},  # a directory that is not there
    {"stream_handoff_dir": ".", "workers": 1},
    {"stream_handoff_dir": ".", "workers": 2, "stream_routing": "off"},
    {"workers": 2},  # not started by `authoric serve`
])
def test_a_worker_that_cannot_or_need_not_route_serves_every_stream_itself(
        tmp_path: Path, settings: dict[str, Any]) -> None:
    if "stream_handoff_dir" in settings:
        settings["stream_handoff_dir"] = tmp_path / settings["stream_handoff_dir"]

    async def started() -> Handoff | None:
        return start_handoff(Settings(**settings), ServedBy("w"), Metrics())

    assert asyncio.run(started()) is None
    assert list(tmp_path.iterdir()) == []
