"""`GET /metrics` as an operator's Prometheus scrapes it: who may scrape, and what the figures
say about requests, streams and the change log. Each test runs its own server, so figures
are not mixed with other tests' traffic."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.client
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import Frame, Parser, SSEClient

WIDE = 60.0
METRICS_TOKEN = "a-separate-scrape-token-for-prometheus"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value, for every sample line."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if match := SAMPLE.match(line):
            out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return out


def scrape(server: ServerProcess, token: str | None = None) -> dict[str, float]:
    response = httpx.get(f"{server.url}/metrics", timeout=30,
                         headers={"Authorization": f"Bearer {token or server.admin_token}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


def wait_for(probe: Any, timeout: float = WIDE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def scrape_until(server: ServerProcess, check: Any) -> dict[str, float] | None:
    """The first scrape whose figures pass `check`, within WIDE seconds (None otherwise)."""
    found: dict[str, float] | None = wait_for(
        lambda: (lambda figures: figures if check(figures) else None)(scrape(server)))
    return found


@contextlib.contextmanager
def clerk_on_own_server(database_url: str, tmp_path: Path,
                        **env: str) -> Iterator[tuple[ServerProcess, AppWorld, Caller]]:
    """A server of its own (with `env`), an app with a `notes` table, and a member of org A
    holding every permission on it."""
    server = start_server(database_url, tmp_path, **env)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as admin:
            world = AppWorld.create(server, admin)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("clerk", ["notes:*"])
            yield server, world, world.caller(world.org("A"), ["clerk"])
    finally:
        server.stop()


@pytest.fixture
def own(database_url: str, tmp_path: Path) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    proc = start_server(database_url, tmp_path, AUTHORIC_METRICS_TOKEN=METRICS_TOKEN)
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        yield proc, client
    proc.stop()


LIST = ('authoric_http_request_duration_seconds_count'
        '{method="GET",route="/{app}/autocrud/{table}",status="200"}')


def test_a_scraper_without_a_token_or_with_a_member_token_gets_401(
        own: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = own
    world = AppWorld.create(server, client)
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("reader", ["notes:read_list"])
    member = world.caller(world.org("A"), ["reader"])
    expect(client.get("/metrics"), 401, "UNAUTHENTICATED")
    expect(client.get("/metrics", headers={"Authorization": f"Bearer {member.token}"}),
           401, "UNAUTHENTICATED")


def test_an_operator_reading_metrics_is_told_which_pool_each_pool_gauge_watches(
        own: tuple[ServerProcess, httpx.Client]) -> None:
    _, client = own
    text = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
    help_of = {line.split()[2]: line for line in text.splitlines() if line.startswith("# HELP")}
    assert "SQLAlchemy engine's pool" in help_of["authoric_db_pool_in_use"]
    assert "authoric_db_request_pool_" in help_of["authoric_db_pool_in_use"]
    assert "asyncpg pool that serves table requests" in help_of["authoric_db_request_pool_size"]


def test_the_metrics_token_scrapes_metrics_but_opens_no_admin_route(
        own: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = own
    assert "authoric_db_pool_in_use" in scrape(server, METRICS_TOKEN)
    expect(client.get("/admin/apps", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}),
           401, "UNAUTHENTICATED")


def test_requests_are_counted_by_route_template_so_no_app_or_table_name_reaches_the_metrics(
        own: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = own
    world = AppWorld.create(server, client)
    world.table("secretive_table_name", [{"name": "body", "type": "text"}])
    world.role("reader", ["secretive_table_name:read_list"])
    member = world.caller(world.org("A"), ["reader"])
    for _ in range(3):
        expect(member.get(world.rows("secretive_table_name")), 200)
    text = httpx.get(f"{server.url}/metrics", timeout=30,
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    assert samples(text).get(LIST) == 3, [line for line in text.splitlines() if "_count" in line]
    assert world.name not in text and "secretive_table_name" not in text


def test_an_open_stream_its_frames_and_the_change_log_show_in_the_figures(
        own: tuple[ServerProcess, httpx.Client]) -> None:
    server, client = own
    world = AppWorld.create(server, client)
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("clerk", ["notes:*"])
    member = world.caller(world.org("A"), ["clerk"])
    before = scrape(server)
    with SSEClient(server.url, f"{world.rows('notes')}/subscribe", member.token) as feed:
        assert feed.status_code == 200
        feed.wait_connected(WIDE)
        row = expect(member.post(world.rows("notes"), json={"body": "hello"}), 201)
        feed.wait_for_change(row["uid"], "insert", WIDE)
        during = scrape(server)
        assert during["authoric_sse_streams_open"] == 1
        assert during['authoric_sse_frames_sent_total{type="connected"}'] == 1
        assert during['authoric_sse_frames_sent_total{type="change"}'] >= 1
        # The live frame's latency, from its write to the socket, with the stages before it.
        for stage in ("read", "judge", "delivered"):
            count = f'authoric_feed_latency_seconds_count{{stage="{stage}"}}'
            assert during[count] >= 1, stage
            assert during[f'authoric_feed_latency_seconds_bucket{{le="+Inf",stage="{stage}"}}'] \
                == during[count]
    # The client went away: the stream is no longer counted as open.
    assert wait_for(lambda: scrape(server)["authoric_sse_streams_open"] == 0)
    after = scrape(server)
    assert after["authoric_change_log_head_position"] > before["authoric_change_log_head_position"]
    assert after["authoric_sequencer_lag_changes"] == 0
    assert after["authoric_relay_lag_positions"] >= 0
    assert after["authoric_change_log_oldest_position"] >= 1


def test_with_two_workers_every_scrape_counts_the_requests_of_both(
        database_url: str, tmp_path: Path) -> None:
    server = start_server(database_url, tmp_path, AUTHORIC_WORKERS="2")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as admin:
            world = AppWorld.create(server, admin)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("reader", ["notes:read_list"])
            member = world.caller(world.org("A"), ["reader"])
        # Fresh connections, so the kernel may hand them to either worker.
        for _ in range(20):
            response = httpx.get(f"{server.url}{world.rows('notes')}", timeout=30,
                                 headers={"Authorization": f"Bearer {member.token}",
                                          "Connection": "close"})
            assert response.status_code == 200
        # Whichever worker answers a scrape, it reports the sum over both.
        for _ in range(6):
            assert scrape(server)[LIST] == 20
    finally:
        server.stop()


class SmallWindow(http.client.HTTPConnection):
    """A client whose socket takes in little until it is read: a reader that stalls."""

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(WIDE)
        self.sock.connect((self.host, self.port))


def read_to_end(response: http.client.HTTPResponse, timeout: float = WIDE) -> bytes:
    """The rest of a streamed body; fails if the server has not ended it within `timeout`."""
    deadline, body = time.monotonic() + timeout, b""
    while chunk := response.read1(65536):
        body += chunk
        assert time.monotonic() < deadline, "the server never ended the stream"
    return body


def read_until_change(response: http.client.HTTPResponse, row_uid: str, stream: Parser,
                      timeout: float = WIDE) -> list[Frame]:
    """The stream's frames up to and including the change of `row_uid`, parsed by `stream`
    (which keeps whatever follows); fails after `timeout`."""
    deadline, frames = time.monotonic() + timeout, list[Frame]()
    while not any(f.is_change and f.row_uid == row_uid for f in frames):
        chunk = response.read1(65536)
        assert chunk, "the stream ended before the change arrived"
        frames += stream.feed(chunk.decode())
        assert time.monotonic() < deadline, "the change never arrived"
    return frames


def test_a_subscriber_that_stops_reading_is_dropped_counted_as_overflow_and_resumes_losing_nothing(
        database_url: str, tmp_path: Path) -> None:
    with clerk_on_own_server(database_url, tmp_path,
                             AUTHORIC_SSE_QUEUE_SIZE="2") as (server, world, member):
        address = httpx.URL(server.url)
        stalled = SmallWindow(address.host, address.port, timeout=WIDE)
        stalled.request("GET", f"{world.rows('notes')}/subscribe", headers={
            "Authorization": f"Bearer {member.token}", "Accept": "text/event-stream"})
        response = stalled.getresponse()
        assert response.status == 200
        # A client that was reading: it has a position to resume from. (Without one, a flood
        # stamped in one batch can overflow the queue before a single frame is written.)
        first = expect(member.post(world.rows("notes"), json={"body": "first"}), 201)["uid"]
        stream = Parser()
        head = read_until_change(response, first, stream)
        # Then it stops reading: 40 rows of 200 KB, far more than the socket buffers and a
        # queue of 2 hold.
        uids = [expect(member.post(world.rows("notes"), json={"body": f"{n:03d}" * 70_000}),
                       201)["uid"] for n in range(40)]
        frames = head + stream.feed(read_to_end(response).decode() + "\n\n")
        stalled.close()
        delivered = [f.row_uid for f in frames if f.is_change]
        assert delivered[0] == first
        delivered = delivered[1:]
        assert len(delivered) < len(uids) and delivered == uids[:len(delivered)]
        figures = scrape_until(server, lambda f: f["authoric_sse_streams_open"] == 0)
        assert figures is not None
        assert figures['authoric_sse_streams_closed_by_server_total{reason="overflow"}'] == 1
        # Resuming from the last frame it got, the client receives every row it missed.
        last = max(f.pos for f in frames if f.id is not None)
        with SSEClient(server.url, f"{world.rows('notes')}/subscribe", member.token,
                       last_event_id=last) as resumed:
            for uid in uids[len(delivered):]:
                resumed.wait_for_change(uid, "insert", WIDE)


def test_requests_held_up_by_a_row_lock_show_in_the_request_pool_gauges(
        database_url: str, tmp_path: Path) -> None:
    with clerk_on_own_server(database_url, tmp_path, AUTHORIC_DB_POOL_SIZE="1",
                             AUTHORIC_STATEMENT_TIMEOUT_MS="600000") as (server, world, member):
        row = expect(member.post(world.rows("notes"), json={"body": "x"}), 201)
        app_uid = uuid.UUID(expect(world.admin.get(f"/admin/apps/{world.name}"), 200)["uid"])
        assert scrape(server)["authoric_db_request_pool_size"] >= 1
        senders = concurrent.futures.ThreadPoolExecutor(2)

        def two_blocked_updates() -> tuple[Any, list[Any]]:
            updates = [senders.submit(member.patch, f"{world.rows('notes')}/{row['uid']}",
                                      json={"body": f"v{n}"}) for n in range(2)]
            held = scrape_until(server, lambda f: f["authoric_db_request_pool_in_use"] == 1
                                and f["authoric_db_request_pool_waiting"] == 1)
            return held, updates

        async def hold_lock_while(check: Any) -> Any:
            conn = await asyncpg.connect(database_url)
            try:
                async with conn.transaction():
                    await conn.execute(f'SELECT 1 FROM "app_{app_uid.hex}".notes '
                                       "WHERE uid = $1 FOR UPDATE", uuid.UUID(row["uid"]))
                    return await asyncio.to_thread(check)
            finally:
                await conn.close()

        held, updates = asyncio.run(hold_lock_while(two_blocked_updates))
        assert held, "one update should hold the pool's connection and one wait for it"
        assert [u.result(WIDE).status_code for u in updates] == [200, 200]
        senders.shutdown()
        assert scrape_until(server, lambda f: f["authoric_db_request_pool_in_use"] == 0)
