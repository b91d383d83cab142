"""SIGTERM as an orchestrator sends it during a rolling deploy: open streams end cleanly and
resume on another replica with Last-Event-ID, a request in flight is still answered, and the
process exits 0."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

WIDE = 60.0


def exit_code_after_sigterm(server: ServerProcess) -> int:
    server.process.send_signal(signal.SIGTERM)
    return server.process.wait(WIDE)


def in_flight(server: ServerProcess) -> float:
    """Requests in flight, this scrape included."""
    text = httpx.get(f"{server.url}/metrics", timeout=30,
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text
    line = next(x for x in text.splitlines() if x.startswith("authoric_http_requests_in_flight "))
    return float(line.split()[1])


def wait_for(probe: Callable[[], bool], timeout: float = WIDE) -> bool:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def refuses_connections(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=2):
            return False
    except OSError:
        return True


def test_a_subscriber_sees_its_stream_end_on_sigterm_and_resumes_on_another_replica(
        database_url: str, tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    # Replicas share the signing key, as docs/operations.md says they must.
    shared = {"AUTHORIC_JWT_SECRET": "replicas-share-this-signing-key-0123456789"}
    first = start_server(database_url, tmp_path / "a", **shared)
    second = start_server(database_url, tmp_path / "b", **shared)
    try:
        with httpx.Client(base_url=first.url, timeout=30) as client:
            world = AppWorld.create(first, client)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("clerk", ["notes:*"])
            member = world.caller(world.org("A"), ["clerk"])
            with SSEClient(first.url, f"{world.rows('notes')}/subscribe", member.token) as feed:
                feed.wait_connected(WIDE)
                row = expect(member.post(world.rows("notes"), json={"body": "one"}), 201)
                last = feed.wait_for_change(row["uid"], "insert", WIDE).pos
                assert exit_code_after_sigterm(first) == 0
                feed.wait_ended(WIDE)
                assert feed.error is None, f"the stream broke instead of ending: {feed.error!r}"
        # Written while the client was away, on the replica that is still up.
        with httpx.Client(base_url=second.url, timeout=30) as client:
            member.client = client
            missed = expect(member.post(world.rows("notes"), json={"body": "two"}), 201)
            with SSEClient(second.url, f"{world.rows('notes')}/subscribe", member.token,
                           last_event_id=last) as resumed:
                frame = resumed.wait_for_change(missed["uid"], "insert", WIDE)
                assert frame.pos > last
                assert row["uid"] not in [f.row_uid for f in resumed.changes()]
    finally:
        first.stop()
        second.stop()


def test_a_request_whose_body_is_still_arriving_at_sigterm_is_answered_before_exit_0(
        database_url: str, tmp_path: Path) -> None:
    server = start_server(database_url, tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            world = AppWorld.create(server, client)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("clerk", ["notes:*"])
            member = world.caller(world.org("A"), ["clerk"])
        body = json.dumps({"body": "sent across a shutdown"}).encode()
        parts = urlsplit(server.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=WIDE) as sock:
            sock.sendall(
                f"POST {world.rows('notes')} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Authorization: Bearer {member.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:5])
            # SIGTERM only once the server works on it (a connection whose request it has not
            # begun reading is idle, and closing idle connections at shutdown is right).
            assert wait_for(lambda: in_flight(server) >= 2), "the request never started"
            server.process.send_signal(signal.SIGTERM)
            # The server has begun shutting down once it no longer accepts connections.
            assert wait_for(lambda: refuses_connections(server.url)), "still accepting after SIGTERM"
            sock.sendall(body[5:])
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 201"), answer[:200]
        try:
            code = server.process.wait(WIDE)
        except Exception:
            raise AssertionError(server.log()) from None
        assert code == 0, server.log()
    finally:
        server.stop()
