"""A client that goes away from an idle stream frees what the stream held (issue 20: streams
are served by one task each, and a disconnect is noticed from `receive()`, not by a task group
of sse-starlette's).

Callers: a member capped at one open stream whose client drops its connection while nothing
is sent (no change, no ping due: the default 25 s interval); the operator's feed (no lease)
dropped the same way.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.scenario import AppWorld, Caller
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

WIDE = 60.0
SAMPLE = re.compile(r"^authoric_sse_streams_open (\S+)$", re.M)


@pytest.fixture(scope="module")
def capped(database_url: str, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[tuple[ServerProcess, AppWorld, Caller]]:
    """A server of its own where a user holds at most one stream, an app with a `notes`
    table, and a member of org A allowed to read it."""
    server = start_server(database_url, tmp_path_factory.mktemp("capped"),
                          AUTHORIC_SSE_MAX_STREAMS_PER_USER="1")
    try:
        with httpx.Client(base_url=server.url, timeout=120) as admin:
            world = AppWorld.create(server, admin)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("reader", ["notes:read_list", "notes:read"])
            member = world.caller(world.org("A"), ["reader"])
            yield server, world, member
    finally:
        server.stop()


def eventually(probe: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WIDE
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WIDE}s: {what}")
        time.sleep(0.2)


def open_streams(server: ServerProcess) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=30,
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    match = SAMPLE.search(text)
    assert match is not None, text[:500]
    return float(match.group(1))


def raw_subscribe(server: ServerProcess, path: str, token: str) -> socket.socket:
    """A subscribe request on a bare socket, read up to its `connected` frame."""
    parts = urlsplit(server.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=WIDE)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}"
                 f"\r\nAccept: text/event-stream\r\n\r\n".encode())
    seen = b""
    while b"event: connected" not in seen:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the stream: {seen!r}"
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen[:200]
    return sock


def status_of_another_stream(server: ServerProcess, path: str, token: str) -> int:
    with SSEClient(server.url, path, token) as stream:
        if stream.status_code == 200:
            stream.wait_connected(WIDE)
        return stream.status_code or 0


@contextlib.contextmanager
def dropped_idle_stream(server: ServerProcess, path: str, token: str) -> Iterator[None]:
    """Inside: the only open stream, idle. After: its client vanished without a word (the
    stream had nothing to send), and the server no longer counts it open."""
    eventually(lambda: open_streams(server) == 0, "no stream open before the test")
    sock = raw_subscribe(server, path, token)
    try:
        assert open_streams(server) == 1
        yield
    finally:
        sock.close()
    eventually(lambda: open_streams(server) == 0, "the dropped stream is no longer open")


def test_a_member_whose_client_drops_an_idle_stream_gets_its_one_slot_back(
        capped: tuple[ServerProcess, AppWorld, Caller]) -> None:
    server, world, member = capped
    path = f"{world.rows('notes')}/subscribe"
    with dropped_idle_stream(server, path, member.token):
        # The idle stream holds the member's one slot.
        assert status_of_another_stream(server, path, member.token) == 429
    eventually(lambda: status_of_another_stream(server, path, member.token) == 200,
               "the dropped stream's slot is free again")


def test_the_operators_feed_dropped_while_idle_is_no_longer_counted_open(
        capped: tuple[ServerProcess, AppWorld, Caller]) -> None:
    server, world, _ = capped
    with dropped_idle_stream(server, f"/admin/apps/{world.name}/tables/notes/rows/subscribe",
                             server.admin_token):
        pass
