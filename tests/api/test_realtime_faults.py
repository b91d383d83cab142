"""The feed under faults: connections killed, replicas, a replica SIGKILLed after commit, a
client that stops reading, PostgreSQL restarted. Faults cost latency, never events.

Callers: a clerk of `events` (may read every row of its org) subscribing, and the same clerk
writing, through one server process or another.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from authoric.db.embedded import pgserver_module
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import (
    SSEClient,
    backends,
    collect,
    db_fetch,
    db_value,
    drop_database,
    fresh_database,
    log_head,
    parse,
    strictly_increasing,
    terminate,
)


@dataclass
class Scene:
    """An app with one table `events`, an org and a clerk, on `server`."""

    world: AppWorld
    clerk: Caller
    app_uid: uuid.UUID
    streams: list[SSEClient] = field(default_factory=list)
    clients: list[httpx.Client] = field(default_factory=list)

    @classmethod
    def create(cls, server: ServerProcess, client: httpx.Client) -> Scene:
        world = AppWorld.create(server, client)
        world.table("events", [{"name": "n", "type": "integer"}, {"name": "body", "type": "text"}])
        org = world.org("Northwind")
        world.role("clerk", ["events:*"])
        app_uid = uuid.UUID(expect(world.admin.get(world.base), 200)["uid"])
        return cls(world, world.caller(org, ["clerk"]), app_uid)

    @property
    def path(self) -> str:
        return f"{self.world.rows('events')}/subscribe"

    def subscribe(self, server: ServerProcess | None = None, **kw: Any) -> SSEClient:
        stream = SSEClient((server or self.world.server).url, self.path, self.clerk.token, **kw)
        self.streams.append(stream)
        assert stream.status_code == 200, (stream.status_code, stream.body)
        stream.wait_connected()
        return stream

    def writer(self, server: ServerProcess) -> Caller:
        """The clerk, writing through `server`."""
        client = httpx.Client(base_url=server.url, timeout=30)
        self.clients.append(client)
        return Caller(client, self.clerk.token)

    def insert(self, n: int = 0, via: Caller | None = None, body: str = "") -> str:
        row = expect((via or self.clerk).post(self.world.rows("events"),
                                              json={"n": n, "body": body}), 201)
        return str(row["uid"])

    def close(self) -> None:
        for stream in self.streams:
            stream.close()
        for client in self.clients:
            client.close()


@pytest.fixture
def scene(server: ServerProcess, http: httpx.Client) -> Iterator[Scene]:
    scene = Scene.create(server, http)
    yield scene
    scene.close()


def uids(frames: list[Any]) -> list[str | None]:
    return [f.row_uid for f in frames if f.is_change]


# -- connections killed ---------------------------------------------------------------------

@pytest.mark.parametrize("connection", ["authoric-relay", "authoric-sequencer"])
def test_writes_keep_arriving_when_the_feeds_connection_is_killed_again_and_again(
        scene: Scene, database_url: str, connection: str) -> None:
    stream = scene.subscribe()
    first = scene.insert(0)
    stream.wait_for_change(first)
    written = [first]
    killed: set[int] = set()
    for round_ in range(5):
        killed |= set(terminate(database_url, wait_for_new(database_url, connection, killed)))
        # write while it reconnects: these commits are caught up by position, not notified
        written += [scene.insert(10 * round_ + i) for i in range(8)]
    stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= len(written), timeout=60)
    log = db_fetch(database_url, "SELECT id, pos, row_uid FROM authoric.changes WHERE app_uid = $1 "
                                 "ORDER BY id", scene.app_uid)
    order = {uid: i for i, uid in enumerate(written)}
    assert uids(stream.changes()) == written, (  # nothing lost, nothing reordered
        "stream (pos, write#): " + str([(f.pos, order.get(str(f.row_uid))) for f in stream.changes()])
        + " log (id, pos, write#): " + str([(r["id"], r["pos"], order.get(str(r["row_uid"])))
                                            for r in log]))
    assert strictly_increasing(stream.ids())
    assert not stream.ended.is_set()
    wait_for_new(database_url, connection, killed)  # and it is back


def wait_for_new(database_url: str, connection: str, old: set[int], timeout: float = 20) -> str:
    """Wait until a connection named `connection` other than `old` is up; return the name."""
    deadline = time.monotonic() + timeout
    while not set(backends(database_url, connection)) - old:
        assert time.monotonic() < deadline, f"no new {connection} connection"
        time.sleep(0.05)
    return connection


# -- replicas ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def replica(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    """A second server process on the same database and data directory."""
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


def test_a_write_through_one_replica_reaches_subscribers_of_the_other(
        scene: Scene, replica: ServerProcess) -> None:
    on_main, on_replica = scene.subscribe(), scene.subscribe(replica)
    via_main = scene.insert(1)
    via_replica = scene.insert(2, via=scene.writer(replica))
    for stream in (on_main, on_replica):
        stream.wait_for_change(via_replica)
        assert uids(stream.changes()) == [via_main, via_replica]
    assert on_main.ids() == on_replica.ids()


def test_a_replica_killed_right_after_writes_commit_loses_nothing_for_a_client_resuming_elsewhere(
        database_url: str, tmp_path: Path) -> None:
    """The killed replica is also the sequencer leader: the survivor must take over stamping."""
    url = fresh_database(database_url)
    first = start_server(url, tmp_path)  # alone on its database: it leads the sequencer
    second: ServerProcess | None = None
    scene: Scene | None = None
    try:
        deadline = time.monotonic() + 20
        while not backends(url, "authoric-sequencer"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        second = start_server(url, tmp_path)  # same data dir: same token secret
        with httpx.Client(base_url=first.url, timeout=30) as client:
            scene = Scene.create(first, client)
            stream = scene.subscribe()
            warmup = [scene.insert(i) for i in range(5)]
            stream.wait_for_change(warmup[-1])

            burst: list[str] = []
            lock = threading.Lock()

            def write(k: int) -> None:
                via = scene.writer(first)
                for i in range(10):
                    uid = scene.insert(100 * k + i, via=via)
                    with lock:
                        burst.append(uid)

            threads = [threading.Thread(target=write, args=(k,)) for k in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            first.stop(signal.SIGKILL)  # right after the last commit returned
            stream.wait_ended()

            received = stream.changes()
            last = received[-1].pos
            resumed = scene.subscribe(second, last_event_id=last)
            expected = set(warmup) | set(burst)
            resumed.wait_until(lambda fs: {f.row_uid for f in fs if f.is_change}
                               | {f.row_uid for f in received} >= expected, timeout=60)
            got = received + resumed.changes()
            assert sorted(str(u) for u in uids(got)) == sorted(expected)  # no loss, no duplicate
            assert strictly_increasing(f.pos for f in got)
            log = [r["pos"] for r in db_fetch(url, "SELECT pos FROM authoric.changes WHERE app_uid = $1 "
                                                   "ORDER BY pos", scene.app_uid)]
            assert [f.pos for f in got] == log
    finally:
        if scene is not None:
            scene.close()
        first.stop(signal.SIGKILL)
        if second is not None:
            second.stop()
        drop_database(url)


# -- a client that stops reading ----------------------------------------------------------

@pytest.fixture(scope="module")
def small_queue(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    proc = start_server(database_url, data_dir, AUTHORIC_SSE_QUEUE_SIZE="8")
    yield proc
    proc.stop()


def raw_subscriber(server: ServerProcess, path: str, token: str) -> tuple[socket.socket, bytes]:
    """A subscriber on a bare socket with a tiny receive buffer, read up to `connected`."""
    url = urlsplit(server.url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect((url.hostname, url.port))
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nAccept: text/event-stream\r\n"
                  f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n").encode())
    received = b""
    while b"event: connected" not in received:
        chunk = sock.recv(256)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock, received


def read_to_end(sock: socket.socket, received: bytes) -> bytes:
    """Everything until the server closes the connection (a timeout fails the test)."""
    sock.settimeout(30)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def http_body(raw: bytes) -> str:
    """The body of a raw HTTP/1.1 response, chunked or not."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return body.decode()
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out.decode()


def test_a_client_that_stops_reading_is_disconnected_not_skipped(
        scene: Scene, small_queue: ServerProcess, database_url: str) -> None:
    assert scene.clerk.token is not None
    since = log_head(database_url)
    sock, received = raw_subscriber(small_queue, scene.path, scene.clerk.token)
    try:
        payload = "x" * 100_000  # 120 events of ~100 KB: far more than socket buffers hold
        written = [scene.insert(i, body=payload) for i in range(120)]
        # a client that keeps reading (resuming if it is ever cut off) gets everything
        everything = collect(small_queue.url, scene.path, scene.clerk.token, last_event_id=since,
                             done=lambda fs: written[-1] in uids(fs), timeout=120)
        assert uids(everything.changes()) == written
        expected_ids = [f.pos for f in everything.changes()]

        # now the stalled client reads: what was sent, then the end of the stream
        frames = parse(http_body(read_to_end(sock, received)))
    finally:
        sock.close()
    got = [f for f in frames if f.is_change]
    assert len(got) < len(written), "the stalled client was never disconnected"
    assert [f.pos for f in got] == expected_ids[:len(got)]  # a prefix: nothing skipped
    last = got[-1].pos if got else since
    rest = collect(small_queue.url, scene.path, scene.clerk.token, last_event_id=last,
                   done=lambda fs: written[-1] in uids(fs), timeout=120)
    assert [f.pos for f in got] + [f.pos for f in rest.changes()] == expected_ids
    assert "Traceback" not in small_queue.log()


# -- PostgreSQL restarted ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_writes_after_a_postgres_restart_arrive_and_a_resume_loses_nothing(
        tmp_path_factory: pytest.TempPathFactory, mode: str) -> None:
    pgserver = pgserver_module()

    # Not under pytest's temporary tree: pytest tightens its permissions, and PostgreSQL runs
    # as another user when the tests run as root.
    root = Path(tempfile.mkdtemp(prefix="authoric-pg-restart-"))
    pgdata = root / "pg"
    pgdata.mkdir()
    postgres = pgserver.get_server(pgdata, cleanup_mode="delete")
    url = fresh_database(postgres.get_uri())
    proc = start_server(url, tmp_path_factory.mktemp("pg-restart-data"))
    scene: Scene | None = None
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            scene = Scene.create(proc, client)
            stream = scene.subscribe()
            before = [scene.insert(i) for i in range(3)]
            stream.wait_for_change(before[-1])
            since = stream.changes()[-1].pos
            just_before = [scene.insert(10 + i) for i in range(3)]  # committed; maybe not stamped

            pgserver.pg_ctl(["-w", "-m", mode, "restart"], pgdata=pgdata,  # type: ignore[attr-defined]
                            user=postgres.system_user, timeout=60)

            after = [scene.insert(20 + i) for i in range(5)]  # the pool pings: no error
            # The open stream carries on; or, if the server dropped it ("when in doubt, drop
            # the connection"), the client resumes from the last id it got, as clients do.
            with contextlib.suppress(AssertionError):
                stream.wait_until(lambda fs: set(after) <= set(uids(fs)), timeout=60)
            live = stream.changes()
            if stream.ended.is_set():
                print(f"stream dropped across the restart; server log:\n{proc.log()[-3000:]}")
                assert scene.clerk.token is not None
                rest = collect(proc.url, scene.path, scene.clerk.token, last_event_id=live[-1].pos,
                               done=lambda fs: after[-1] in uids(fs), timeout=60)
                live += rest.changes()
            assert uids(live) == before + just_before + after
            assert strictly_increasing(f.pos for f in live)

            resumed = scene.subscribe(last_event_id=since)
            resumed.wait_for_change(after[-1])
            assert uids(resumed.changes()) == just_before + after
            assert [f.pos for f in resumed.changes()] == [f.pos for f in live if f.pos > since]
            assert db_value(url, "SELECT count(*) FROM authoric.changes WHERE pos IS NULL") == 0
    finally:
        if scene is not None:
            scene.close()
        proc.stop()
        postgres.cleanup()
        shutil.rmtree(root, ignore_errors=True)

