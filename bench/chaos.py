"""Chaos: the live feed under random faults for a while, then a count of what went wrong.

    .venv/bin/python -m bench.chaos --seconds 600          # the ten-minute run
    .venv/bin/python -m bench.chaos --seconds 60 --seed 7  # a short one, reproducible draws

On a fresh embedded PostgreSQL it runs three `authoric serve` replicas, whose database traffic
all goes through a TCP proxy on loopback that this run owns (so that one connection can be
frozen while its TCP stays open). One table, `events`, has `captureSqlWrites`. Writers: two in
org A (one over REST, one by plain SQL straight to PostgreSQL, as another service would) and
one in org B (REST). Followers: three subscribers of the table (two in A, one in B), each
resuming with `Last-Event-ID` on a random live replica whenever its stream drops.

Faults, one after another, drawn at random (the first round takes every kind once):
- `kill`: SIGKILL a replica (never the last live one); it is restarted, on a fresh port,
  until it starts (PostgreSQL may be down at the time);
- `pg_fast`, `pg_immediate`: stop PostgreSQL in that mode, keep it down 1-5 s, start it;
- `freeze`: the proxy stops forwarding, both ways, on a replica's relay connection (the one
  that issued `LISTEN authoric_changes`) for 5-30 s, its TCP left open;
- `freeze_leader`: the same for 15-40 s on the sequencer leader's connection (the one that
  issued `LISTEN authoric_pending`, which a sequencer does once it holds the lock), whichever
  replica leads: nothing is stamped until its backend ends itself and another takes the lead;
- `slow`: a follower stops reading for 5-20 s (a small receive buffer, so the server's
  queue for it fills and the server may drop it, which it must do rather than skip);
- `hook_outage`: a webhook receiver answers 503 for 5-20 s (the webhook retries, holding its
  later changes back).
Webhooks (contract section 8): two receivers on loopback, one for a webhook with the operator's
view of every org, one for a webhook judged as `reader` in org A. Per webhook, after dropping
duplicates by `webhook-id`: every acknowledged write of its orgs received (0 lost), and the
ids strictly increasing (0 out of order). The replicas retry a failed delivery after at most
0.5 s, doubling up to 5 s (AUTHORIC_WEBHOOK_RETRY_BASE/MAX), so the drain is not spent in
hour-long backoffs.

A write is acknowledged when the server answered 201 (or 409 for a retry of a write whose
answer was lost: its unique `number` is taken, so the first attempt committed), or when the
SQL statement returned. A write that was not acknowledged is retried with the same `number`
until it is, so every number a writer moves past must reach every follower of its org.
After the run and a drain, each follower is checked: acknowledged numbers of its org never
received (lost), a number received twice (duplicated), a position not above the previous one
or a writer's numbers out of their commit order (out of order), and a row of the other org
(leaked). All must be zero; the exit status says whether they were.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import random
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server
from tests.sse import fresh_database

from authoric.db.embedded import pgserver_module
from bench.sse_clients import SseClient, subscribe_request

CHANNEL = b"authoric_changes"  # the relay's LISTEN (changes/sequencer.py)
LEADING = b"authoric_pending"  # the sequencer's LISTEN, once it has taken the lead
KINDS = ("kill", "pg_fast", "pg_immediate", "freeze", "freeze_leader", "slow", "hook_outage")
COLUMNS: list[dict[str, Any]] = [
    {"name": "number", "type": "text", "required": True, "unique": True},
    {"name": "org_tag", "type": "text", "required": True},
    {"name": "body", "type": "text"}]
BODY = "x" * 40_000  # events of ~40 KB: a stalled follower overflows within seconds
REPLICA_ENV = {
    "AUTHORIC_SSE_QUEUE_SIZE": "16",  # a follower that stops reading overflows soon
    "AUTHORIC_SSE_MAX_STREAMS_PER_USER": "1000",  # leases of killed replicas linger 60 s
    "AUTHORIC_WEBHOOK_ALLOW_PRIVATE": "true",  # the receivers listen on loopback
    "AUTHORIC_WEBHOOK_DELIVERY": "true",  # every replica delivers (the test servers' default is off)
    "AUTHORIC_WEBHOOK_RETRY_BASE": "0.5",
    "AUTHORIC_WEBHOOK_RETRY_MAX": "5",
}


def _epoch(stamp: str | None) -> float:
    """An RFC 3339 UTC timestamp as epoch seconds (now when absent)."""
    if not stamp:
        return time.time()
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class HookReceiver:
    """A webhook receiver on loopback (HTTP/1.1, keep-alive): records each delivery's
    `webhook-id` and, for an insert, its row's `number`; answers 503 during an outage."""

    def __init__(self, name: str, orgs: tuple[str, ...]) -> None:
        self.name, self.orgs = name, orgs  # the writers' orgs ("A", "B") it should receive
        self.server: asyncio.Server | None = None
        self.received: list[tuple[int, str | None]] = []  # (webhook-id, number), as they came
        self.down_until = 0.0
        self.refused = 0
        self.lags: list[float] = []  # seconds from each first delivery's change to its arrival
        self.arrivals: list[float] = []  # when each of those arrived (epoch seconds)
        self.seen: set[int] = set()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hook"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.decode().partition(":") for line in head.split(b"\r\n")[1:])
                           if k}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if time.monotonic() < self.down_until:
                    self.refused += 1
                    writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                else:
                    event = json.loads(body)
                    row = event.get("row") or {}
                    number = row.get("number") if event.get("type") == "insert" else None
                    pos = int(headers["webhook-id"])
                    if pos not in self.seen:
                        self.seen.add(pos)
                        now = time.time()
                        self.lags.append(now - _epoch(event.get("timestamp")))
                        self.arrivals.append(now)
                    self.received.append((pos, number))
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.close()
        except asyncio.CancelledError:
            # The receivers' loop is ending with this connection open: end quietly (asyncio's
            # stream callback would log a cancelled handler as an error).
            writer.close()

    def first_seen(self) -> list[tuple[int, str | None]]:
        """Each webhook-id once, in the order first received (a receiver's dedup)."""
        seen: dict[int, str | None] = {}
        for pos, number in self.received:
            seen.setdefault(pos, number)
        return list(seen.items())

    def numbers(self) -> set[str]:
        return {n for _, n in self.first_seen() if n is not None}

    def out_of_order(self) -> int:
        ids = [pos for pos, _ in self.first_seen()]
        return sum(1 for a, b in itertools.pairwise(ids) if b <= a)

    def duplicates(self) -> int:
        return len(self.received) - len(self.first_seen())


# --- PostgreSQL and the proxy in front of it -------------------------------------------------

class Postgres:
    """The embedded PostgreSQL (pgserver), stopped and started in place."""

    def __init__(self, root: Path) -> None:
        pgserver = pgserver_module()
        self.pgdata = root / "pg"
        self.pgdata.mkdir()
        self.server = pgserver.get_server(self.pgdata, cleanup_mode="delete")
        info = self.server.get_postmaster_info()
        self.socket_dir = info.socket_dir

    def _pg_ctl(self, *args: str) -> None:
        pgserver = pgserver_module()
        pgserver.pg_ctl(["-w", *args], pgdata=self.pgdata,  # type: ignore[attr-defined]
                        user=self.server.system_user, timeout=120)

    async def restart(self, mode: str, down_for: float) -> None:
        try:
            await asyncio.to_thread(self._pg_ctl, "-m", mode, "stop")
            await asyncio.sleep(down_for)
        finally:
            # The options pgserver started it with: no TCP, its socket directory.
            await asyncio.to_thread(self._pg_ctl, "-o", '-h ""', "-o", f"-k {self.socket_dir}",
                                    "-l", str(self.server.log), "start")

    def cleanup(self) -> None:
        self.server.cleanup()


class Link:
    """One proxied connection: bytes both ways, unless frozen."""

    def __init__(self, client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.client, self.upstream = client, upstream
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.listens = False  # it issued LISTEN authoric_changes: a relay's connection
        self.leads = False  # it issued LISTEN authoric_pending: the sequencer leader's
        self.led_at = math.inf  # when it did (a follower's connection may take the lead late)
        self.done = False
        self.born = time.monotonic()

    async def run(self) -> None:
        await asyncio.gather(self._pump(self.client[0], self.upstream[1], watch=True),
                             self._pump(self.upstream[0], self.client[1], watch=False))
        self.done = True

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    watch: bool) -> None:
        try:
            while True:
                await self.flowing.wait()
                data = await src.read(65536)
                if not data:
                    break
                if watch and b"LISTEN" in data:
                    self.listens = self.listens or CHANNEL in data
                    if LEADING in data and not self.leads:
                        self.leads, self.led_at = True, time.monotonic()
                await self.flowing.wait()  # a chunk read as the freeze began waits too
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:  # one side ended: end both, as a real proxy does
            for _, writer in (self.client, self.upstream):
                writer.close()


Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def upstream(url: str) -> Connect:
    """How to reach the PostgreSQL of `url`: its Unix socket (`?host=/dir`) or TCP."""
    parsed = make_url(url)
    host, port = str(parsed.query.get("host") or parsed.host or "127.0.0.1"), parsed.port or 5432
    if host.startswith("/"):
        return lambda: asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
    return lambda: asyncio.open_connection(host, port)


class Proxy:
    """A TCP listener on loopback that relays each connection to PostgreSQL."""

    def __init__(self, connect: Connect) -> None:
        self.connect = connect
        self.links: list[Link] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def url(self, url: str) -> str:
        """`url` (a libpq URL of the database) with this proxy as its host."""
        parsed = make_url(url)
        return parsed.set(host="127.0.0.1", port=self.port, query={}).render_as_string(
            hide_password=False)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            try:
                up = await self.connect()
            except OSError:  # PostgreSQL is down: the client sees its connection closed
                writer.close()
                return
            link = Link((reader, writer), up)
            self.links = [x for x in self.links if not x.done] + [link]
            await link.run()
        finally:
            self.tasks.discard(task)

    def relay_links(self) -> list[Link]:
        """Open, flowing connections on which a relay listens."""
        return [x for x in self.links if x.listens and not x.done and x.flowing.is_set()]

    def leader_links(self) -> list[Link]:
        """Open, flowing connections of a sequencer that took the lead (at most one holds the
        lock; an older one may linger until PostgreSQL has ended its backend)."""
        return [x for x in self.links if x.leads and not x.done and x.flowing.is_set()]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for link in self.links:
            link.flowing.set()
            for _, writer in (link.client, link.upstream):
                writer.close()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=10)


# --- replicas ----------------------------------------------------------------------------------

class Replicas:
    """`count` server processes on one database; a slot whose process is gone is restarted
    until it starts again."""

    def __init__(self, dsn: str, work: Path, count: int) -> None:
        self.dsn, self.work = dsn, work
        self.slots: list[ServerProcess | None] = [None] * count
        self.killed: set[int] = set()  # pids this run killed (any other exit is a crash)
        self.crashes = 0
        self.start_attempts = 0
        self.closing = False

    async def start(self, slot: int) -> None:
        """Start the replica of `slot`, retrying for as long as it takes (PostgreSQL down)."""
        while not self.closing:
            self.start_attempts += 1
            try:
                proc = await asyncio.to_thread(
                    lambda: start_server(self.dsn, self.work, None, **REPLICA_ENV))
            except RuntimeError:
                await asyncio.sleep(1.0)
                continue
            if self.closing:
                await asyncio.to_thread(proc.stop)
                return
            self.slots[slot] = proc
            return

    def live(self) -> list[ServerProcess]:
        return [p for p in self.slots if p is not None and p.process.poll() is None]

    def kill(self, rng: random.Random) -> bool:
        live = [i for i, p in enumerate(self.slots) if p is not None and p.process.poll() is None]
        if len(live) < 2:
            return False
        slot = rng.choice(live)
        proc = self.slots[slot]
        assert proc is not None
        self.killed.add(proc.process.pid)
        proc.stop(signal.SIGKILL)
        self.slots[slot] = None
        return True

    async def watch(self) -> None:
        """Restart every empty slot; count a process that exited without being killed."""
        restarting: dict[int, asyncio.Task[None]] = {}
        while not self.closing:
            for slot, proc in enumerate(self.slots):
                if proc is not None and proc.process.poll() is not None:
                    if proc.process.pid not in self.killed:
                        self.crashes += 1
                        print(f"  replica {proc.url} exited by itself:\n{proc.log()[-2000:]}",
                              flush=True)
                    self.slots[slot] = None
                if self.slots[slot] is None and (slot not in restarting
                                                 or restarting[slot].done()):
                    restarting[slot] = asyncio.create_task(self.start(slot))
            await asyncio.sleep(0.5)
        # Not cancelled: a start under way in its thread would leave its process behind.
        await asyncio.gather(*restarting.values())

    async def stop(self) -> None:
        """SIGTERM every replica, in a thread: this loop runs the proxy their shutdown uses."""
        self.closing = True
        for proc in self.slots:
            if proc is not None:
                await asyncio.to_thread(proc.stop)


# --- writers -----------------------------------------------------------------------------------

@dataclass
class Writer:
    """Writes `number`s `<name>-1`, `<name>-2`, ... one after another, each until acknowledged."""

    name: str
    org: str  # "A" or "B"
    acknowledged: list[str] = field(default_factory=list)
    acked_at: dict[str, float] = field(default_factory=dict)  # number -> when (monotonic)
    retries: int = 0

    def acked(self, number: str) -> None:
        self.acknowledged.append(number)
        self.acked_at[number] = time.monotonic()

    def number(self) -> str:
        return f"{self.name}-{len(self.acknowledged) + 1}"


async def write_rest(writer: Writer, token: str, path: str, replicas: Replicas,
                     stop: asyncio.Event, pace: float) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            number = writer.number()
            body = {"number": number, "org_tag": writer.org, "body": BODY}
            while True:  # until acknowledged
                live = replicas.live()
                status = 0
                if live:
                    with contextlib.suppress(httpx.HTTPError):
                        response = await client.post(
                            f"{random.choice(live).url}{path}", json=body,
                            headers={"Authorization": f"Bearer {token}"})
                        status = response.status_code
                if status == 201 or status == 409:  # 409: an unanswered attempt committed
                    break
                writer.retries += 1
                await asyncio.sleep(0.3)
            writer.acked(number)
            await asyncio.sleep(pace)


async def write_sql(writer: Writer, dsn: str, table: str, org_uid: str,
                    stop: asyncio.Event, pace: float) -> None:
    """Plain SQL straight to PostgreSQL; any failure (PostgreSQL restarting, a connection
    cut mid-commit) retries the same number, which ON CONFLICT makes safe."""
    insert = (f"INSERT INTO {table} (org_uid, number, org_tag, body) VALUES ($1, $2, $3, $4) "
              "ON CONFLICT DO NOTHING")
    conn: asyncpg.Connection | None = None
    while not stop.is_set():
        number = writer.number()
        while True:
            try:
                if conn is None or conn.is_closed():
                    conn = await asyncpg.connect(dsn, timeout=10)
                async with asyncio.timeout(30):
                    await conn.execute(insert, uuid.UUID(org_uid), number, writer.org, BODY)
                break
            except Exception:  # whatever went wrong, the write is retried
                writer.retries += 1
                if conn is not None:
                    conn.terminate()
                    conn = None
                await asyncio.sleep(0.3)
        writer.acked(number)
        await asyncio.sleep(pace)
    if conn is not None:
        await conn.close()


# --- followers ---------------------------------------------------------------------------------

@dataclass
class Follower:
    """One subscriber of `events` in `org`, resuming wherever it can whenever it drops."""

    name: str
    org: str
    token: str
    path: str
    last_id: int
    received: dict[str, int] = field(default_factory=dict)  # number -> position
    arrived_at: dict[str, float] = field(default_factory=dict)
    latest: dict[str, int] = field(default_factory=dict)  # writer -> highest sequence seen
    duplicated: int = 0
    out_of_order: int = 0
    leaked: int = 0
    resyncs: int = 0
    streams: int = 0
    stalls: int = 0
    dropped_stalled: int = 0  # streams the server ended while (or just as) this one stalled
    client: SseClient | None = None
    paused: bool = False
    resumed_at: float = 0.0
    stalled: list[tuple[float, float]] = field(default_factory=list)  # (from, to), monotonic

    def on_block(self, client: SseClient, block: bytes, now: float) -> None:
        fields: dict[str, str] = {}
        for line in block.decode().split("\n"):
            name, _, value = line.partition(":")
            if name:  # a line starting with ":" is a comment (ping)
                fields[name] = value.removeprefix(" ")
        if fields.get("event") == "resync":
            self.resyncs += 1
            print(f"  {self.name}: resync {fields.get('data')}", flush=True)
        if "id" not in fields or "event" in fields or "data" not in fields:
            return
        self.change(int(fields["id"]), json.loads(fields["data"]))

    def change(self, pos: int, data: dict[str, Any]) -> None:
        row = data.get("row", {})
        number, org = str(row.get("number")), row.get("org_tag")
        if org != self.org:
            self.leaked += 1
        writer, _, seq = number.rpartition("-")
        if number in self.received:
            self.duplicated += 1
        elif pos <= self.last_id or int(seq) <= self.latest.get(writer, 0):
            self.out_of_order += 1
        self.received[number] = pos
        self.arrived_at.setdefault(number, time.monotonic())
        self.latest[writer] = max(self.latest.get(writer, 0), int(seq))
        self.last_id = max(self.last_id, pos)

    async def follow(self, replicas: Replicas, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            live = replicas.live()
            if not live:
                await asyncio.sleep(0.5)
                continue
            url = httpx.URL(random.choice(live).url)
            request = subscribe_request(url.host, url.port or 80, self.path, self.token,
                                        self.last_id)
            client = SseClient(request[:-2] + b"Connection: close\r\n\r\n", self.on_block)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # stalls bite soon
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, (url.host, url.port))
                await loop.create_connection(lambda c=client: c, sock=sock)  # type: ignore[misc]
            except OSError:
                sock.close()
                await asyncio.sleep(0.3)
                continue
            self.client = client
            if self.paused and client.transport is not None:
                client.transport.pause_reading()
            if await client.ready == 200:
                self.streams += 1
            stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
            ended: asyncio.Future[Any] = client.closed
            await asyncio.wait({ended, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if client.closed.done() and (self.paused or time.monotonic() - self.resumed_at < 2):
                self.dropped_stalled += 1  # a stalled stream's end is read once it reads again
            client.close()
            self.client = None
            await asyncio.sleep(random.uniform(0.1, 1.0))  # clients back off with jitter

    async def stall(self, seconds: float) -> None:
        """Stop reading for `seconds` (across a reconnect too), then read again."""
        self.paused, self.stalls = True, self.stalls + 1
        if self.client is not None and self.client.transport is not None:
            self.client.transport.pause_reading()
        began = time.monotonic()
        await asyncio.sleep(seconds)
        self.paused, self.resumed_at = False, time.monotonic()
        self.stalled.append((began, self.resumed_at))
        if self.client is not None and self.client.transport is not None:
            self.client.transport.resume_reading()

    def state(self) -> str:
        """How this follower stands (for a report of what it missed)."""
        client = self.client
        if client is None or client.transport is None:
            return f"no stream open, last id {self.last_id}"
        peer = client.transport.get_extra_info("peername")
        return (f"a stream open to {peer} (HTTP {client.status}, reading "
                f"{client.transport.is_reading()}, ended {client.ended}, frames so far: "
                f"{len(self.received)}), last id {self.last_id}")

    def waited(self, acked_at: dict[str, float]) -> list[tuple[float, str, float]]:
        """(seconds from acknowledgement to arrival, number, arrival) of each write this
        follower got while it was neither stalled nor catching up on a stall: a slow
        consumer's own delay says nothing of the server. It has caught up once a write
        acknowledged after the stall reaches it."""
        behind = [(a, min((t for n, t in self.arrived_at.items() if acked_at.get(n, 0) > b),
                          default=math.inf)) for a, b in self.stalled]
        return [(t - acked_at[n], n, t) for n, t in self.arrived_at.items() if n in acked_at
                and not any(a < t and acked_at[n] < c for a, c in behind)]


# --- the run -----------------------------------------------------------------------------------

@dataclass
class Options:
    seconds: float = 600.0
    drain: float = 180.0  # seconds the followers get, after the faults, to catch up
    seed: int | None = None
    pace: float = 0.1  # seconds between one writer's acknowledged writes
    gap: tuple[float, float] = (2.0, 8.0)  # seconds between faults
    kinds: tuple[str, ...] = KINDS  # the faults to draw from
    quiet: bool = False
    keep_logs_of_failure: bool = False  # the work directory (replicas' logs) of a failed run


@dataclass
class Result:
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    leaked: int = 0
    resyncs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    retried_writes: int = 0
    replica_crashes: int = 0
    replica_start_attempts: int = 0
    streams_opened: int = 0
    stalls_dropped: tuple[int, int] = (0, 0)  # stalled followers the server dropped, stalls
    relistened: list[float] = field(default_factory=list)  # freezes outlived by a reconnect
    taken_over: list[float] = field(default_factory=list)  # leader freezes outlived by a new lead
    hooks_lost: int = 0  # acknowledged writes a webhook's receiver never got
    hooks_out_of_order: int = 0  # first deliveries whose webhook-id was not above the last
    hooks_received: int = 0  # distinct deliveries, all receivers
    hooks_duplicates: int = 0  # deliveries received again (at least once: allowed)
    hooks_refused: int = 0  # attempts answered 503 during outages
    longest_wait: float = 0.0  # seconds from a write's acknowledgement to a reading follower
    longest_what: str = ""
    seconds: float = 0.0
    seed: int = 0

    def clean(self) -> bool:
        return (self.acknowledged > 0 and self.lost == self.duplicated == self.out_of_order
                == self.leaked == self.resyncs == self.hooks_lost == self.hooks_out_of_order == 0)

    def report(self) -> str:
        faults = ", ".join(f"{k} {self.faults[k]}" for k in KINDS)
        relisten = ", ".join(f"{s:.0f}" for s in sorted(self.relistened)) or "none"
        takeover = ", ".join(f"{s:.0f}" for s in sorted(self.taken_over)) or "none"
        return (f"acknowledged {self.acknowledged}, lost {self.lost}, duplicated "
                f"{self.duplicated}, out of order {self.out_of_order}, leaked {self.leaked}, "
                f"resyncs {self.resyncs}\nfaults: {faults}\nfreezes (s) a relay got past by "
                f"reconnecting before the thaw: {relisten}\nleader freezes (s) outlived by "
                f"another sequencer taking the lead before the thaw: {takeover}\n"
                f"webhooks: received {self.hooks_received}, lost {self.hooks_lost}, out of "
                f"order {self.hooks_out_of_order} (after dropping {self.hooks_duplicates} "
                f"duplicates by webhook-id; {self.hooks_refused} attempts refused in outages)\n"
                f"writes retried {self.retried_writes}"
                f", replica crashes {self.replica_crashes}, replica start attempts "
                f"{self.replica_start_attempts}, streams opened {self.streams_opened}, "
                f"slow followers dropped by the server {self.stalls_dropped[0]} of {self.stalls_dropped[1]}, "
                f"longest wait for a delivery {self.longest_wait:.1f} s ({self.longest_what}), "
                f"{self.seconds:.0f} s of "
                f"faults, seed {self.seed}")


@dataclass
class Scene:
    """The app: `events` (captured), orgs A and B, a clerk and two readers in each."""

    path: str  # of the table's rows
    table: str  # its SQL name
    orgs: dict[str, str]  # "A"/"B" -> org uid
    clerks: dict[str, str]  # access tokens
    readers: dict[str, list[str]]

    @classmethod
    def build(cls, server: ServerProcess, hooks: dict[str, str] | None = None) -> Scene:
        """`hooks`: receiver URLs, "all" (the operator's view of every org) and "A" (judged
        as `reader` in org A)."""
        with httpx.Client(base_url=server.url, timeout=60) as client:
            world = AppWorld.create(server, client)
            expect(world.admin.patch(world.base, json={"settings": {"accessTokenTtl": 86_400}}),
                   200)
            table = world.table("events", COLUMNS, captureSqlWrites=True)["sqlName"]
            orgs = {"A": world.org("A"), "B": world.org("B")}
            world.role("clerk", ["events:*"])
            world.role("reader", ["events:read_list", "events:read"])
            for scope, url in (hooks or {}).items():
                body = ({"url": url, "tables": ["events"]} if scope == "all" else
                        {"url": url, "tables": ["events"], "org": orgs[scope], "role": "reader"})
                expect(world.admin.post(f"{world.base}/webhooks", json=body), 201)
            return cls(world.rows("events"), str(table), orgs,
                       {o: str(world.caller(uid, ["clerk"]).token) for o, uid in orgs.items()},
                       {o: [str(world.caller(uid, ["reader"]).token) for _ in range(2)]
                        for o, uid in orgs.items()})


class Chaos:
    def __init__(self, options: Options, work: Path) -> None:
        self.options, self.work = options, work
        self.seed = options.seed if options.seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.faults: Counter[str] = Counter()
        self.started = 0.0
        self.relisten: list[float] = []  # freezes (s) the relay got past before the thaw
        self.takeover: list[float] = []  # leader freezes (s) another lead got past before it
        self.postgres = Postgres(work)
        self.proxy = Proxy(upstream(self.postgres.server.get_uri()))
        self.replicas: Replicas | None = None
        self.writers: list[Writer] = []
        self.followers: list[Follower] = []
        self.hooks = {"all": HookReceiver("all", ("A", "B")), "A": HookReceiver("A", ("A",))}

    def say(self, text: str) -> None:
        if not self.options.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    async def run(self) -> Result:
        direct = await asyncio.to_thread(fresh_database, self.postgres.server.get_uri())
        await self.proxy.start()
        proxied = self.proxy.url(direct)
        self.replicas = replicas = Replicas(proxied, self.work, 3)
        for slot in range(3):
            await replicas.start(slot)
        for hook in self.hooks.values():
            await hook.start()
        # Synchronous HTTP in a thread: this loop runs the proxy the servers need meanwhile.
        scene = await asyncio.to_thread(Scene.build, replicas.live()[0],
                                        {k: h.url for k, h in self.hooks.items()})
        self.say(f"3 replicas up on {proxied}; writing for {self.options.seconds:.0f} s")
        start_id = await log_head(direct)
        path, table, orgs, clerks = scene.path, scene.table, scene.orgs, scene.clerks
        self.followers = [
            Follower(f"{o}{i}", o, scene.readers[o][i], f"{path}/subscribe", start_id)
            for o, i in (("A", 0), ("A", 1), ("B", 0))]
        self.writers = [Writer("A-rest", "A"), Writer("A-sql", "A"), Writer("B-rest", "B")]
        stop_writes, stop_follow = asyncio.Event(), asyncio.Event()
        watcher = asyncio.create_task(replicas.watch())
        following = [asyncio.create_task(f.follow(replicas, stop_follow)) for f in self.followers]
        pace = self.options.pace
        writing = [
            asyncio.create_task(write_rest(self.writers[0], clerks["A"], path, replicas,
                                           stop_writes, pace)),
            asyncio.create_task(write_sql(self.writers[1], direct, table, orgs["A"],
                                          stop_writes, pace)),
            asyncio.create_task(write_rest(self.writers[2], clerks["B"], path, replicas,
                                           stop_writes, pace))]
        self.started = started = time.monotonic()
        try:
            await self.inflict(started + self.options.seconds)
            elapsed = time.monotonic() - started
            stop_writes.set()
            await asyncio.gather(*writing)
            self.say(f"faults over after {elapsed:.0f} s ({dict(self.faults)}); draining")
            await self.drain(time.monotonic() + self.options.drain)
        finally:
            stop_writes.set()
            stop_follow.set()
            await asyncio.gather(*following, return_exceptions=True)
            await replicas.stop()
            await watcher
            await self.proxy.stop()
            for hook in self.hooks.values():
                await hook.stop()
        return self.result(elapsed)

    async def inflict(self, deadline: float) -> None:
        """Faults, one after another, until `deadline`; the first round takes each kind once."""
        kinds = self.options.kinds
        queue = list(kinds)
        self.rng.shuffle(queue)
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.uniform(*self.options.gap))
            if time.monotonic() >= deadline:
                break
            kind = queue.pop(0) if queue else self.rng.choice(kinds)
            if await self.fault(kind):
                self.faults[kind] += 1

    async def fault(self, kind: str) -> bool:
        assert self.replicas is not None
        if kind == "kill":
            done = self.replicas.kill(self.rng)
            self.say(f"kill: {'a replica SIGKILLed' if done else 'skipped (one replica live)'}")
            return done
        if kind in ("pg_fast", "pg_immediate"):
            down = self.rng.uniform(1, 5)
            self.say(f"{kind}: PostgreSQL stopped for {down:.1f} s")
            await self.postgres.restart(kind.removeprefix("pg_"), down)
            return True
        if kind == "freeze":
            links = self.proxy.relay_links()
            if not links:
                self.say("freeze: skipped (no relay connection up)")
                return False
            link, seconds = self.rng.choice(links), self.rng.uniform(5, 30)
            self.say(f"freeze: a relay connection frozen for {seconds:.1f} s")
            began = time.monotonic()
            link.flowing.clear()
            await asyncio.sleep(seconds)
            # Faults come one at a time: a relay connection opened meanwhile is the frozen
            # relay's new one.
            if any(x.born > began for x in self.proxy.relay_links()):
                self.relisten.append(seconds)
            link.flowing.set()
            return True
        if kind == "freeze_leader":
            links = self.proxy.leader_links()
            if not links:
                self.say("freeze_leader: skipped (no leader connection up)")
                return False
            # the one that took the lead last (an older leader link ends as soon as it flows)
            link = max(links, key=lambda x: x.led_at)
            seconds = self.rng.uniform(15, 40)
            self.say(f"freeze_leader: the sequencer leader's connection frozen for {seconds:.1f} s")
            began = time.monotonic()
            link.flowing.clear()
            await asyncio.sleep(seconds)
            # Another sequencer took the lead meanwhile: a follower's connection (born long
            # before) or the frozen replica's new one.
            if any(x.led_at > began for x in self.proxy.leader_links()):
                self.takeover.append(seconds)
            link.flowing.set()
            return True
        if kind == "hook_outage":
            hook, seconds = self.rng.choice(list(self.hooks.values())), self.rng.uniform(5, 20)
            self.say(f"hook_outage: webhook receiver {hook.name} answers 503 for {seconds:.1f} s")
            hook.down_until = time.monotonic() + seconds
            await asyncio.sleep(seconds)
            return True
        follower, seconds = self.rng.choice(self.followers), self.rng.uniform(5, 20)
        self.say(f"slow: follower {follower.name} stops reading for {seconds:.1f} s")
        await follower.stall(seconds)
        return True

    def missing(self, follower: Follower) -> list[str]:
        return [n for w in self.writers if w.org == follower.org for n in w.acknowledged
                if n not in follower.received]

    def hook_missing(self, hook: HookReceiver) -> list[str]:
        got = hook.numbers()
        return [n for w in self.writers if w.org in hook.orgs for n in w.acknowledged
                if n not in got]

    async def drain(self, deadline: float) -> None:
        """Wait until every follower and webhook receiver has every acknowledged write of its
        orgs, or `deadline`."""
        while time.monotonic() < deadline:
            if not (any(self.missing(f) for f in self.followers)
                    or any(self.hook_missing(h) for h in self.hooks.values())):
                return
            await asyncio.sleep(0.5)
        for f in self.followers:
            if gone := self.missing(f):
                self.say(f"{f.name} never received {len(gone)}: {gone[:10]}; {f.state()}")
        for h in self.hooks.values():
            if gone := self.hook_missing(h):
                self.say(f"webhook {h.name} never received {len(gone)}: {gone[:10]}")

    def result(self, elapsed: float) -> Result:
        assert self.replicas is not None
        acked_at = {n: t for w in self.writers for n, t in w.acked_at.items()}
        waits = [(w, f"{n} to {f.name}, {t - self.started:.0f} s in") for f in self.followers
                 for w, n, t in f.waited(acked_at)]
        longest = max(waits, default=(0.0, ""))
        return Result(
            acknowledged=sum(len(w.acknowledged) for w in self.writers),
            lost=sum(len(self.missing(f)) for f in self.followers),
            duplicated=sum(f.duplicated for f in self.followers),
            out_of_order=sum(f.out_of_order for f in self.followers),
            leaked=sum(f.leaked for f in self.followers),
            resyncs=sum(f.resyncs for f in self.followers),
            faults=self.faults, relistened=self.relisten, taken_over=self.takeover,
            hooks_lost=sum(len(self.hook_missing(h)) for h in self.hooks.values()),
            hooks_out_of_order=sum(h.out_of_order() for h in self.hooks.values()),
            hooks_received=sum(len(h.first_seen()) for h in self.hooks.values()),
            hooks_duplicates=sum(h.duplicates() for h in self.hooks.values()),
            hooks_refused=sum(h.refused for h in self.hooks.values()),
            retried_writes=sum(w.retries for w in self.writers),
            replica_crashes=self.replicas.crashes,
            replica_start_attempts=self.replicas.start_attempts,
            streams_opened=sum(f.streams for f in self.followers),
            stalls_dropped=(sum(f.dropped_stalled for f in self.followers),
                            sum(f.stalls for f in self.followers)),
            longest_wait=longest[0], longest_what=longest[1], seconds=elapsed, seed=self.seed)


async def log_head(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(
            "SELECT coalesce(max(pos), 0) FROM authoric.changes WHERE pos IS NOT NULL"))
    finally:
        await conn.close()


async def run(options: Options) -> Result:
    """One chaos run in a temporary directory (removed afterwards)."""
    # Not under pytest's temporary tree, whose permissions the embedded PostgreSQL (running as
    # another user when we are root) cannot get through.
    work = Path(tempfile.mkdtemp(prefix="authoric-chaos-"))
    work.chmod(0o755)
    chaos: Chaos | None = None
    result: Result | None = None
    try:
        chaos = Chaos(options, work)
        result = await chaos.run()
        return result
    finally:
        if chaos is not None:
            chaos.postgres.cleanup()
        if result is not None and not result.clean() and options.keep_logs_of_failure:
            print(f"the replicas' logs are kept in {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="how long faults go on")
    parser.add_argument("--drain", type=float, default=180.0,
                        help="seconds followers get afterwards to catch up")
    parser.add_argument("--seed", type=int, default=None, help="for reproducible draws")
    parser.add_argument("--faults", default=",".join(KINDS),
                        help=f"the kinds to draw from (default: all of {','.join(KINDS)})")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.faults.split(",") if k)
    if not kinds or set(kinds) - set(KINDS):
        parser.error(f"--faults: a comma-separated subset of {','.join(KINDS)}")
    result = asyncio.run(run(Options(seconds=args.seconds, drain=args.drain, seed=args.seed,
                                     kinds=kinds, keep_logs_of_failure=True)))
    print(result.report(), flush=True)
    print("PASS" if result.clean() else "FAIL", flush=True)
    return 0 if result.clean() else 1


if __name__ == "__main__":
    raise SystemExit(main())

