"""Live-feed fan-out: many SSE subscribers across orgs and roles, writes at a fixed rate.

Starts `authoric serve` (a fresh embedded PostgreSQL under a temp dir, or DATABASE_URL),
builds one app over HTTP: a table, N orgs, three reading roles (`reader`: plain; `auditor`:
one redacted column; `field`: a row policy `status != draft` and the redacted column) and a
`writer` role, a few users per (org, role), one login each. Then opens the subscribers, spread
round-robin over the orgs and roles (subscribers of one (org, role) share tokens: they are one
read class anyway), and drives REST creates at fixed rates, round-robin over the orgs, one row
in five a `draft` (which `field` subscribers must not receive).

Printed per rate: writes/s achieved, deliveries/s (SSE data frames received by all
subscribers) against the deliveries the policy allows, latency, CPU, and authorization
violations seen by the client (a draft row reaching `field`, an unredacted `secret` reaching
`auditor`/`field`).

Latency is given two ways, both measured by the client on one clock:
- sent→delivered: from just before the write request is sent (the time travels in the row's
  `stamp` column) to the frame's arrival; an upper bound on commit-to-delivery (it includes
  the REST request up to its commit);
- response→delivered: from the write's HTTP response (sent after the commit) to the frame's
  arrival; a lower bound (negative when the frame beats the response).

DB statements per change: the server's statements are counted from PostgreSQL's own log
(log_statement=all switched on with ALTER SYSTEM for a short census phase at the first rate,
then off; embedded PostgreSQL only), grouped by connection role: the relay's log reads, the
hub's judge statements (and the pool round trips around them), the sequencer's stamping.

    .venv/bin/python -m bench.fanout                          # 1,000 subscribers, 50/200/400 writes/s
    .venv/bin/python -m bench.fanout --rates 50 --seconds 5   # quick
    .venv/bin/python -m bench.fanout --writer sql --rates 500,1000,2000
        # fan-out ceiling: rows + change-log rows inserted directly by the bench
        # (as the write service does), bypassing the REST write cost
    .venv/bin/python -m bench.fanout --tables 5 --subscribers 5000 --multi-subscribers 1000
        # multi-table mode: 5 tables (same columns and policies), writes round-robin over
        # them; first 5,000 single-table subscribers (each follows one table), then, in the
        # same run on the same app, 1,000 subscribers of `/{app}/subscribe?tables=` (each
        # follows all 5). Both groups get the same deliveries per change; compare deliveries/s,
        # CPU and judge statements per change.

    .venv/bin/python -m bench.fanout --rates 50,200 --baseline
        # each rate first with no stream open: the feed's share of server CPU per change is
        # the difference (the REST write's own cost is not the feed's)

    .venv/bin/python -m bench.fanout --rates 50,200 --seconds 20 --rounds 3
        # the same, three times over, alone and followed windows alternating, and the median
        # share per rate: a drift of the box's speed during the run lands on both sides

    .venv/bin/python -m bench.fanout --hot-orgs 3 --rates 200
        # the same 150 read classes, 3 involved per change, but writes go to 3 orgs only and
        # the subscribers beyond one per class follow those: ~267 recipients per change
        # (~53,500 deliveries/s at 200 writes/s) instead of ~19

    .venv/bin/python -m bench.fanout --writer capture --rates 50,200
        # the table has captureSqlWrites; the bench writes plain SQL INSERTs (no change-log
        # row): the capture trigger files them and the sequencer's capture poll finds them

The server's own latency is read from its `authoric_feed_latency_seconds` histogram (scraped
before and after each window): p50/p99 of write → read by the relay, → judged, → socket
write (`delivered`), printed beside the client's figures.

Everything (load generator, server, PostgreSQL) shares this machine's cores: the CPU table
says who used what (the load client's CPU beside the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import random
import re
import resource
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Database, Server, database, running_server

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
TABLE = "events"
COLUMNS = [
    {"name": "title", "type": "text", "required": True},
    {"name": "status", "type": "text", "default": "open"},
    {"name": "secret", "type": "text"},
    {"name": "stamp", "type": "text"},
    {"name": "qty", "type": "integer"},
]
READ = [f"{TABLE}:read_list", f"{TABLE}:read"]
ROLES: dict[str, dict[str, Any]] = {
    "reader": {"permissions": READ},
    "auditor": {"permissions": READ, "redact": {TABLE: ["secret"]}},
    "field": {"permissions": READ, "rowPolicies": {TABLE: {"status": {"ne": "draft"}}},
              "redact": {TABLE: ["secret"]}},
}
WRITER = {"permissions": [*READ, f"{TABLE}:create"]}


def table_names(count: int) -> list[str]:
    """The bench's tables: `events`, then `events1` ... for the multi-table mode."""
    return [TABLE] + [f"{TABLE}{i}" for i in range(1, count)]


def role_body(role: str, tables: list[str]) -> dict[str, Any]:
    """A role of ROLES (or `writer`) granting the same thing on each of `tables`."""
    body = {**ROLES, "writer": WRITER}[role]
    out: dict[str, Any] = {"permissions": [], "rowPolicies": {}, "redact": {}}
    for name in tables:
        out["permissions"] += [p.replace(f"{TABLE}:", f"{name}:") for p in body["permissions"]]
        for key in ("rowPolicies", "redact"):
            if TABLE in body.get(key, {}):
                out[key][name] = body[key][TABLE]
    return out


# --- processes: CPU and memory (Linux /proc) -----------------------------------------------

def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            tree[int(fields[1])].append(int(entry.name))
    return tree


def tree_cpu(root: int | None, tree: dict[int, list[int]] | None = None) -> float:
    """User + system CPU seconds of `root` and its descendants (live, or exited and reaped)."""
    if root is None:
        return 0.0
    tree = _children() if tree is None else tree
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if fields := _stat(pid):
            # own CPU + that of children already reaped (backends that exited, workers)
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        stack.extend(tree.get(pid, []))
    return total / CLK_TCK


def machine_busy() -> float:
    first = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(first) - first[3] - first[4]) / CLK_TCK


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


@dataclass
class Cpu:
    """CPU seconds used so far by the load generator, the server, PostgreSQL, the machine."""

    client: float
    server: float
    database: float
    machine: float
    wall: float

    @classmethod
    def take(cls, server_pid: int, db_pid: int | None) -> Cpu:
        tree = _children()
        own = os.times()
        return cls(own.user + own.system, tree_cpu(server_pid, tree), tree_cpu(db_pid, tree),
                   machine_busy(), time.perf_counter())

    def since(self, before: Cpu) -> dict[str, float]:
        """Cores used per role over the interval (1.0 = one core busy)."""
        span = self.wall - before.wall
        out = {k: (getattr(self, k) - getattr(before, k)) / span
               for k in ("client", "server", "database", "machine")}
        out["other"] = max(0.0, out["machine"] - out["client"] - out["server"] - out["database"])
        return out


def raise_nofile(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(want, hard) if hard != resource.RLIM_INFINITY else want
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- building an app over HTTP --------------------------------------------------------------

def ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"setup failed: {response.request.method} {response.request.url} "
                         f"→ {response.status_code} {response.text}")
    return response.json() if response.content else None


@dataclass
class World:
    app: str
    app_uid: str
    orgs: list[str]
    # (org index, role) → access tokens of distinct users with that single role in that org
    tokens: dict[tuple[int, str], list[str]]
    writers: list[str]  # one writer token per org (same index)
    logins: int = 0  # tokens obtained by a real password login (the rest minted)
    tables: list[str] = field(default_factory=lambda: [TABLE])


def build_world(server: Server, orgs: int, users_per_class: int, roles: list[str] | None = None,
                writers: bool = True, login_all: bool = False, tables: int = 1,
                capture: bool = False) -> World:
    """App, table, orgs, roles; per role `users_per_class` users, each a member of every org
    with that one role (plus one writer user, member of every org); an access token per
    (user, org).

    Tokens: one real password login per role proves the path; the others are minted with the
    platform's own encoder and the server's signing key (AUTHORIC_JWT_SECRET), because every
    login costs an Argon2 verification (~0.1-0.5 s of server CPU here). The server checks
    minted tokens exactly like issued ones (signature, claims, membership looked up).
    `login_all` logs in for every token instead."""
    from authoric.auth import tokens as jwt_tokens

    roles = roles or list(ROLES)
    admin = httpx.Client(base_url=server.url, timeout=120,
                         headers={"Authorization": f"Bearer {server.admin_token}"})
    app = f"bench_{secrets.token_hex(4)}"
    base = f"/admin/apps/{app}"
    app_uid = ok(admin.post("/admin/apps", json={"name": app}))["uid"]
    ok(admin.patch(base, json={"settings": {"accessTokenTtl": 86_400}}))
    names = table_names(tables)
    for name in names:
        ok(admin.post(f"{base}/tables", json={"name": name, "columns": COLUMNS,
                                              "captureSqlWrites": capture}))
    for role in [*roles, "writer"]:
        ok(admin.put(f"{base}/roles/{role}", json=role_body(role, names)))
    org_uids = [ok(admin.post(f"{base}/orgs", json={"name": f"org {i}"}))["uid"]
                for i in range(orgs)]
    people = [(role, n) for role in roles for n in range(users_per_class)]
    if writers:
        people.append(("writer", 0))
    password = "bench password"
    users: dict[tuple[str, int], dict[str, Any]] = {}
    for role, n in people:
        email = f"{role}{n}-{secrets.token_hex(3)}@bench.test"
        users[(role, n)] = {"email": email, **ok(admin.post(
            f"{base}/users", json={"email": email, "password": password}))}

    async def enrol() -> None:
        gate = asyncio.Semaphore(8)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={
                "Authorization": f"Bearer {server.admin_token}"}) as client:
            async def one(org: str, role: str, user: str) -> None:
                async with gate:
                    ok(await client.put(f"{base}/orgs/{org}/members/{user}", json={"roles": [role]}))
            await asyncio.gather(*[one(org, role, users[(role, n)]["uid"])
                                   for org in org_uids for role, n in people])

    asyncio.run(enrol())
    secret = server.jwt_secret if server.db_url else None
    memberships = asyncio.run(_membership_uids(server.db_url, app_uid)) if secret else {}
    out: dict[tuple[int, str], list[str]] = defaultdict(list)
    logins = 0
    for role, n in people:
        user = users[(role, n)]
        for i, org in enumerate(org_uids):
            if login_all or (n == 0 and i == 0) or not secret:
                pair = ok(admin.post(f"/{app}/auth/token", json={
                    "email": user["email"], "password": password, "org": org}))
                token, logins = pair["access_token"], logins + 1
            else:
                token = jwt_tokens.encode(secret, jwt_tokens.Claims(
                    uuid.UUID(app_uid), uuid.UUID(user["uid"]), uuid.UUID(org), uuid.uuid4(),
                    time.time() + 86_400, jwt_tokens.ACCESS,
                    membership=memberships[(uuid.UUID(org), uuid.UUID(user["uid"]))]))
            out[(i, role)].append(token)
    admin.close()
    writer_tokens = [out.pop((i, "writer"))[0] for i in range(orgs)] if writers else []
    return World(app, app_uid, org_uids, dict(out), writer_tokens, logins, names)


async def _membership_uids(db_url: str, app_uid: str) -> dict[tuple[uuid.UUID, uuid.UUID], uuid.UUID]:
    """Each membership's uid (a minted access token names its membership, as issued ones do)."""
    import asyncpg

    conn = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch("SELECT org_uid, user_uid, uid FROM authoric.members "
                                "WHERE app_uid = $1", uuid.UUID(app_uid))
    finally:
        await conn.close()
    return {(r["org_uid"], r["user_uid"]): r["uid"] for r in rows}


# --- SSE subscribers over raw sockets -------------------------------------------------------

class SseClient(asyncio.Protocol):
    """One `GET .../subscribe` over its own socket: parses the chunked body into SSE blocks and
    hands each block to `on_block(client, block, arrival)`."""

    def __init__(self, request: bytes, on_block: Callable[[SseClient, bytes, float], None],
                 tag: Any = None) -> None:
        self.request, self.on_block, self.tag = request, on_block, tag
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._raw = b""
        self._body = b""
        self._headers_done = False
        self._chunked = True
        self.frames = 0
        self.pings = 0
        self.ended = False
        self.last_id: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        raw = self._raw + data
        if not self._headers_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self._raw = raw
                return
            head, raw = raw[:end], raw[end + 4:]
            self.status = int(head[9:12])
            self._chunked = b"transfer-encoding: chunked" in head.lower()
            self._headers_done = True
            if not self.ready.done():
                self.ready.set_result(self.status)
        if self._chunked:
            body, pos = [], 0
            while True:
                eol = raw.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(raw[pos:eol].split(b";", 1)[0], 16)
                if size == 0:
                    self.ended = True  # the server ended the stream (the last chunk)
                if len(raw) < eol + 2 + size + 2:
                    break
                body.append(raw[eol + 2:eol + 2 + size])
                pos = eol + 2 + size + 2
            self._raw = raw[pos:]
            text = self._body + b"".join(body)
        else:
            self._raw = b""
            text = self._body + raw
        start = 0
        while (end := text.find(b"\n\n", start)) >= 0:
            self.on_block(self, text[start:end], now)
            start = end + 2
        self._body = text[start:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_result(self.status or -1)
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def subscribe_request(host: str, port: int, path: str, token: str,
                      last_event_id: int | None = None) -> bytes:
    extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: text/event-stream\r\n{extra}\r\n").encode()


async def open_subscribers(host: str, port: int, requests: list[tuple[bytes, Any]],
                           on_block: Callable[[SseClient, bytes, float], None],
                           concurrency: int = 100, progress: bool = False) -> list[SseClient]:
    """Open one SSE stream per request (with its tag); wait for each `200` and `connected`."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    clients: list[SseClient] = []
    started = time.perf_counter()

    async def one(request: bytes, tag: Any) -> None:
        async with gate:
            client = SseClient(request, on_block, tag)
            connected = loop.create_future()
            client.connected = connected  # type: ignore[attr-defined]
            for attempt in range(5):
                try:
                    await loop.create_connection(lambda: client, host, port)
                    break
                except OSError:
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5)
            status = await client.ready
            if status != 200:
                raise SystemExit(f"subscribe failed with HTTP {status}")
            await asyncio.wait_for(connected, 60)
            clients.append(client)
            if progress and len(clients) % 1000 == 0:
                print(f"    {len(clients)} subscribers open after "
                      f"{time.perf_counter() - started:.1f} s", flush=True)

    await asyncio.gather(*[one(r, t) for r, t in requests])
    return clients


def resolve_connected(client: SseClient) -> None:
    """Resolve the client's `connected` future (if anyone waits on it): its stream is live."""
    fut = getattr(client, "connected", None)
    if fut is not None and not fut.done():
        fut.set_result(None)


def mark_connected(client: SseClient, block: bytes) -> bool:
    """True (and resolves the client's `connected` future) for the `connected` frame."""
    if block.startswith(b"event: connected"):
        resolve_connected(client)
        return True
    return False


def note_control(client: SseClient, block: bytes) -> None:
    """A block that carries no change: a ping is counted, the `connected` frame noted."""
    if block.startswith(b": ping"):
        client.pings += 1
    else:
        mark_connected(client, block)


# --- writers --------------------------------------------------------------------------------

class RawHttp:
    """One keep-alive HTTP/1.1 connection over asyncio streams (responses with a length)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, token: str,
                      body: bytes | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Authorization: Bearer {token}\r\n")
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        raw = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in raw.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length) if length else b""
        return int(raw[9:12]), payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


# --- PostgreSQL's statement log (census) ----------------------------------------------------

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] ([^:]*): (\w+):  (.*)$")


async def set_statement_log(dsn: str, on: bool) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn, server_settings={"application_name": "bench"})
    try:
        if on:
            await conn.execute("ALTER SYSTEM SET log_statement = 'all'")
            await conn.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] %a: '")
            await conn.execute("ALTER SYSTEM SET log_parameter_max_length = 0")
        else:
            await conn.execute("ALTER SYSTEM RESET log_statement")
            await conn.execute("ALTER SYSTEM RESET log_line_prefix")
            await conn.execute("ALTER SYSTEM RESET log_parameter_max_length")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()
    await asyncio.sleep(0.3)  # backends pick the new settings up at their next command


def logged_statements(log: Path, offset: int) -> list[tuple[int, str, str]]:
    """(pid, application_name, statement text) for each statement logged after `offset`."""
    out: list[tuple[int, str, str]] = []
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    current: list[Any] | None = None
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m is None:
            if current is not None:
                current[2] += "\n" + line
            continue
        if current is not None:
            out.append(tuple(current))  # type: ignore[arg-type]
            current = None
        pid, app, level, message = int(m[1]), m[2], m[3], m[4]
        if level != "LOG":
            continue
        if message.startswith("statement: "):
            current = [pid, app, message[len("statement: "):]]
        elif message.startswith("execute "):
            current = [pid, app, message.split(": ", 1)[1] if ": " in message else message]
    if current is not None:
        out.append(tuple(current))  # type: ignore[arg-type]
    return out


def classify(statements: list[tuple[int, str, str]]) -> dict[str, Any]:
    """Group the server's statements: relay, hub (judge + the round trips around it),
    sequencer, and everything else (the REST writes)."""
    kinds: Counter[str] = Counter()
    branches: list[int] = []
    by_pid: dict[int, list[str]] = defaultdict(list)
    for pid, app, sql in statements:
        if app == "bench":
            continue
        if app == "authoric-relay":
            kinds["relay: " + ("log read" if "FROM authoric.changes" in sql else sql[:40])] += 1
        elif app == "authoric-sequencer":
            kinds["sequencer: " + ("stamp" if "nextval('authoric.change_pos')" in sql else
                                   "notify" if "pg_notify" in sql else
                                   "retention" if "log_horizon" in sql else _short(sql))] += 1
        else:
            by_pid[pid].append(sql)
    # Pool connections serve both REST and the hub. A hub dispatch is the transaction holding
    # the judge statement (`... AS k`): BEGIN, app version, judge, ROLLBACK; SQLAlchemy's
    # pool pre-ping (BEGIN, `;`, ROLLBACK) comes right before it.
    for sqls in by_pid.values():
        words = [_short(s) for s in sqls]
        hub = [False] * len(sqls)
        for i, sql in enumerate(sqls):
            if not (" AS k" in sql and "dpos" in sql):
                continue
            branches.append(sql.count("UNION ALL") + 1)
            j = i
            while j > 0 and words[j - 1] not in ("commit", "rollback"):
                j -= 1
            if j >= 2 and words[j - 1] == "rollback" and words[j - 2] in ("begin", "pre-ping"):
                j -= 2
                if j >= 1 and words[j] == "pre-ping" and words[j - 1] == "begin":
                    j -= 1
            end = i + 1 if i + 1 < len(sqls) and words[i + 1] in ("rollback", "commit") else i
            for k in range(j, end + 1):
                hub[k] = True
        for i, sql in enumerate(sqls):
            if not hub[i]:
                kinds["rest"] += 1
            elif " AS k" in sql and "dpos" in sql:
                kinds["hub: judge"] += 1
            else:
                kinds["hub: " + words[i]] += 1
    return {"kinds": kinds, "branches": branches}


def _short(sql: str) -> str:
    s = " ".join(sql.split())
    if s in (";", ""):
        return "pre-ping"
    word = s.split()[0].upper().rstrip(";")
    if word in ("BEGIN", "ROLLBACK", "COMMIT"):
        return word.lower()
    if "authoric.apps.version" in s:
        return "app version"
    return s[:50]


# --- the fan-out run ------------------------------------------------------------------------

@dataclass
class Phase:
    label: str
    rate: float
    seconds: float
    writes: int = 0
    write_errors: Counter[int] = field(default_factory=Counter)
    late: int = 0  # sent more than 50 ms after their slot
    unsent: int = 0  # slots still unsent when the window closed
    delivered: int = 0  # frames arriving in the window
    received: int = 0  # frames of writes sent in the window (arriving up to `grace` later)
    expected: int = 0  # frames the policy allows for the writes sent in the window
    lat_sent: list[float] = field(default_factory=list)
    lat_resp: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    violations: int = 0
    census: dict[str, Any] | None = None
    changes: int = 0
    # The server's own latency histogram over the window: stage -> (p50, p99) in ms.
    server_lat: dict[str, tuple[float, float]] = field(default_factory=dict)
    alone: float | None = None  # server CPU-seconds per write at this rate, no stream open

    def feed_share(self) -> float:
        """Server CPU-seconds per change the feed adds to the writes' own (NaN: no baseline):
        judging, fan-out, relay, sequencer and the open streams' upkeep."""
        if self.alone is None or not self.writes:
            return float("nan")
        return self.cpu["server"] * self.seconds / self.writes - self.alone


FEED_BUCKET = re.compile(
    r'^authoric_feed_latency_seconds_bucket\{le="([^"]+)",stage="([a-z]+)"\} (\S+)$')


def scrape(server: Server) -> str:
    """The server's metrics page, as Prometheus would read it."""
    return httpx.get(f"{server.url}/metrics", timeout=60,
                     headers={"Authorization": f"Bearer {server.admin_token}"}).text


def feed_buckets(server: Server) -> dict[str, dict[float, float]]:
    """The server's `authoric_feed_latency_seconds` buckets (cumulative), per stage."""
    text = scrape(server)
    out: dict[str, dict[float, float]] = defaultdict(dict)
    for line in text.splitlines():
        if m := FEED_BUCKET.match(line):
            out[m.group(2)][float(m.group(1))] = float(m.group(3))
    return out


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-quantile (ms) of what was observed between two scrapes, interpolated within
    its bucket as Prometheus' histogram_quantile does."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower * 1000
            inside = cumulative - below
            return (lower + (bound - lower) * ((rank - below) / inside if inside else 1)) * 1000
        lower, below = bound, cumulative
    return lower * 1000


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class FanoutRun:
    def __init__(self, args: argparse.Namespace, server: Server, db: Database, world: World) -> None:
        self.args, self.server, self.db, self.world = args, server, db, world
        self.window: tuple[float, float] = (float("inf"), float("-inf"))
        self.phase: Phase | None = None
        self.arrivals: list[tuple[bytes, float]] = []  # (row uid, arrival) inside the window
        self.responses: dict[bytes, float] = {}
        # Subscribers per (org, role, table) they follow; a multi-table one counts per table.
        self.subs: Counter[tuple[int, str, str]] = Counter()
        # Server CPU-seconds per write at each rate with no stream open (`--baseline`).
        self.alone: dict[float, float] = {}

    # subscribers -----------------------------------------------------------------------
    def on_block(self, client: SseClient, block: bytes, now: float) -> None:
        if not block.startswith(b"id: "):
            note_control(client, block)
            return
        client.frames += 1
        phase = self.phase
        if phase is None:
            return
        lo, hi = self.window
        if lo <= now <= hi:
            phase.delivered += 1  # throughput: frames arriving inside the measured window
        i = block.find(b'"stamp":"')
        if i < 0:
            return
        sent = float(block[i + 9:block.index(b'"', i + 9)])
        if not lo <= sent <= hi:
            return
        # completeness and latency: frames of the writes sent inside the window
        phase.received += 1
        phase.lat_sent.append(now - sent)
        j = block.find(b'"uid":"')
        if j >= 0:
            self.arrivals.append((block[j + 7:j + 43], now))
        role = client.tag
        if role != "reader" and b'"secret":"[redacted]"' not in block:
            phase.violations += 1
        if role == "field" and b'"status":"draft"' in block:
            phase.violations += 1

    async def open(self, count: int, multi: bool = False) -> list[SseClient]:
        """`count` subscribers spread over orgs and roles; each follows one table (round-robin
        over the app's tables), or with `multi` all of them on one `/{app}/subscribe`."""
        a, w = self.args, self.world
        roles = list(ROLES)
        requests = []
        self.subs.clear()
        every = f"/{w.app}/subscribe?tables={','.join(w.tables)}"
        for n in range(count):
            org, which, round_ = placement(n, len(w.orgs), len(roles), a.hot_orgs)
            role = roles[which]
            tokens = w.tokens[(org, role)]
            token = tokens[round_ % len(tokens)]
            table = w.tables[round_ % len(w.tables)]
            path = every if multi else f"/{w.app}/autocrud/{table}/subscribe"
            requests.append((subscribe_request(self.server.host, self.server.port, path,
                                               token), role))
            for followed in (w.tables if multi else [table]):
                self.subs[(org, role, followed)] += 1
        return await open_subscribers(self.server.host, self.server.port, requests,
                                      self.on_block, a.connect_concurrency, progress=count > 2000)

    def written_orgs(self) -> int:
        """How many orgs the writes go round-robin over (the first ones)."""
        return self.args.hot_orgs or len(self.world.orgs)

    def reach(self, org: int, draft: bool, table: str = TABLE) -> int:
        c = self.subs
        return (c[(org, "reader", table)] + c[(org, "auditor", table)]
                + (0 if draft else c[(org, "field", table)]))

    # writers ---------------------------------------------------------------------------
    async def drive(self, phase: Phase, warmup: float) -> None:
        """Open-loop writes at `phase.rate` for warm-up + measured seconds."""
        a, w = self.args, self.world
        start = time.perf_counter() + 0.05
        measure_from, end = start + warmup, start + warmup + phase.seconds
        total = int(phase.rate * (warmup + phase.seconds))
        slots: asyncio.Queue[int] = asyncio.Queue()
        for n in range(total):
            slots.put_nowait(n)
        sql = {"sql": self.sql, "capture": self.sql_captured}.get(a.writer)
        written = self.written_orgs()

        async def worker() -> None:
            conn = RawHttp(self.server.host, self.server.port) if sql is None else None
            pg = await self.connect_pg() if sql is not None else None
            try:
                while True:
                    try:
                        n = slots.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    if time.perf_counter() > end:
                        phase.unsent += 1  # the pacer fell behind: not sent at all
                        continue
                    due = start + n / phase.rate
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    elif delay < -0.05 and measure_from <= due <= end:
                        phase.late += 1
                    org, draft = n % written, n % 5 == 4
                    table = w.tables[(n // written) % len(w.tables)]
                    t0 = time.perf_counter()
                    if sql is not None:
                        await sql(pg, org, draft, t0, table)
                        status, body = 201, b""
                    else:
                        assert conn is not None
                        status, body = await conn.request(
                            "POST", f"/{w.app}/autocrud/{table}", w.writers[org],
                            row_body(n, draft, t0))
                    t1 = time.perf_counter()
                    if measure_from <= t0 <= end:
                        if status == 201:
                            phase.writes += 1
                            phase.expected += self.reach(org, draft, table)
                        else:
                            phase.write_errors[status] += 1
                    if status == 201 and body.startswith(b'{"uid":"'):
                        self.responses[body[8:44]] = t1
            finally:
                if conn is not None:
                    await conn.close()
                if pg is not None:
                    await pg.close()

        self.window = (measure_from, end)
        await asyncio.gather(*[worker() for _ in range(a.write_connections)])

    async def connect_pg(self) -> Any:
        import asyncpg

        return await asyncpg.connect(self.db.url, server_settings={"application_name": "bench"})

    async def sql(self, pg: Any, org: int, draft: bool, t0: float, table: str = TABLE) -> None:
        """What the write service does for a create: the row and its change-log row, one
        transaction (minus the REST request around it)."""
        w = self.world
        uid = uuid.uuid4()
        schema = "app_" + uuid.UUID(w.app_uid).hex
        async with pg.transaction():
            await pg.execute(
                f'INSERT INTO "{schema}"."{table}" (uid, org_uid, title, status, secret, stamp, qty)'
                " VALUES ($1, $2, $3, $4, $5, $6, $7)", uid, uuid.UUID(w.orgs[org]), "row",
                "draft" if draft else "open", "s-secret", f"{t0:.6f}", 1)
            await pg.execute(
                "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid)"
                " VALUES ($1, $2, 'insert', $3, $4)", uuid.UUID(w.app_uid), table, uid,
                uuid.UUID(w.orgs[org]))
        self.responses[str(uid).encode()] = time.perf_counter()

    async def sql_captured(self, pg: Any, org: int, draft: bool, t0: float,
                           table: str = TABLE) -> None:
        """A plain SQL insert into a table with `captureSqlWrites`: its trigger files the
        change and wakes the sequencer; nothing of ours runs in the writer."""
        w = self.world
        schema = "app_" + uuid.UUID(w.app_uid).hex
        uid = await pg.fetchval(
            f'INSERT INTO "{schema}"."{table}" (org_uid, title, status, secret, stamp, qty)'
            " VALUES ($1, $2, $3, $4, $5, $6) RETURNING uid", uuid.UUID(w.orgs[org]), "row",
            "draft" if draft else "open", "s-secret", f"{t0:.6f}", 1)
        self.responses[str(uid).encode()] = time.perf_counter()

    async def head(self) -> int:
        pg = await self.connect_pg()
        try:
            return int(await pg.fetchval(
                "SELECT coalesce(max(pos), 0) FROM authoric.changes WHERE pos IS NOT NULL"))
        finally:
            await pg.close()

    async def run_phase(self, label: str, rate: float, seconds: float, warmup: float,
                        census: bool = False) -> Phase:
        phase = Phase(label, rate, seconds)
        self.phase, self.arrivals, self.responses = phase, [], {}
        log_offset = 0
        if census:
            assert self.db.log is not None
            await set_statement_log(self.db.url, True)
            log_offset = self.db.log.stat().st_size
        head0 = await self.head()

        histogram: dict[str, dict[str, dict[float, float]]] = {}

        async def cpu() -> None:
            await asyncio.sleep(warmup + 0.05)
            histogram["before"] = await asyncio.to_thread(feed_buckets, self.server)
            before = Cpu.take(self.server.pid, self.db.pid)
            await asyncio.sleep(seconds)
            phase.cpu = Cpu.take(self.server.pid, self.db.pid).since(before)

        await asyncio.gather(self.drive(phase, warmup), cpu())
        # Let the feed catch up: wait until no frame of the window's writes arrived for
        # `grace` seconds (at most 30 s), so `received` counts what is late, not lost.
        deadline, seen, still = time.perf_counter() + 30, -1, time.perf_counter()
        while time.perf_counter() < deadline and time.perf_counter() - still < self.args.grace:
            if phase.received != seen:
                seen, still = phase.received, time.perf_counter()
            await asyncio.sleep(0.1)
        after = await asyncio.to_thread(feed_buckets, self.server)
        for stage, buckets in after.items():
            old = histogram.get("before", {}).get(stage, {})
            phase.server_lat[stage] = (bucket_quantile(old, buckets, .5),
                                       bucket_quantile(old, buckets, .99))
        if census:
            await set_statement_log(self.db.url, False)
            assert self.db.log is not None
            phase.census = classify(logged_statements(self.db.log, log_offset))
            phase.changes = await self.head() - head0
        self.phase = None
        for uid, arrival in self.arrivals:
            if (t := self.responses.get(uid)) is not None:
                phase.lat_resp.append(arrival - t)
        return phase


def row_body(n: int, draft: bool, stamp: float) -> bytes:
    return json.dumps({"title": f"event {n}", "status": "draft" if draft else "open",
                       "secret": f"s-{n}", "stamp": f"{stamp:.6f}", "qty": n % 100}).encode()


def print_phase(p: Phase) -> None:
    secs = p.seconds
    print(f"  {p.label:<8} {p.writes / secs:7.1f} writes/s (target {p.rate:g}"
          f"{', late ' + str(p.late) if p.late else ''}"
          f"{', unsent ' + str(p.unsent) if p.unsent else ''}"
          f"{', errors ' + str(dict(p.write_errors)) if p.write_errors else ''})  "
          f"{p.delivered / secs:8.0f} deliveries/s ({p.expected / secs:.0f}/s allowed, "
          f"{p.received}/{p.expected} received)  "
          f"sent→delivered p50 {pct(p.lat_sent, .5):6.1f} p99 {pct(p.lat_sent, .99):7.1f} ms  "
          f"response→delivered p50 {pct(p.lat_resp, .5):6.1f} p99 {pct(p.lat_resp, .99):7.1f} ms  "
          f"violations {p.violations}", flush=True)
    c = p.cpu
    per_write = c["server"] * secs / p.writes * 1000 if p.writes else float("nan")
    per_delivery = c["server"] * secs / p.delivered * 1e6 if p.delivered else float("nan")
    print(f"           server CPU: {per_write:.1f} ms per write, {per_delivery:.0f} µs per delivery "
          f"(all of it, writes included: {p.delivered / (c['server'] * secs):.0f} deliveries per "
          f"server CPU-second)" if c["server"] else "", flush=True)
    if p.alone is not None:
        print(f"           the feed's share: {p.feed_share() * 1e3:.2f} ms per change (the same "
              f"writes with no stream open: {p.alone * 1e3:.2f} ms each)", flush=True)
    lat = p.server_lat
    if lat:
        print("           server-side latency (its histogram), p50 / p99 ms: " + "  ".join(
            f"{stage} {lat[stage][0]:.1f} / {lat[stage][1]:.1f}"
            for stage in ("read", "judge", "delivered") if stage in lat), flush=True)
    print(f"           CPU (cores): server {c['server']:.2f}  postgres {c['database']:.2f}  "
          f"load generator {c['client']:.2f}  other {c['other']:.2f}  machine {c['machine']:.2f} "
          f"of {os.cpu_count()}", flush=True)


def census_report(p: Phase, classes_per_org: int) -> str:
    assert p.census is not None
    kinds: Counter[str] = p.census["kinds"]
    branches: list[int] = p.census["branches"]
    changes = max(1, p.changes)
    judges = kinds.get("hub: judge", 0)
    fanout = sum(v for k, v in kinds.items() if k.startswith(("hub:", "relay:")))
    lines = [f"Statement census ({p.label}, {p.seconds:g} s, log_statement=all): "
             f"{p.changes} changes stamped",
             "| statements | count | per change |", "|---|--:|--:|"]
    for k, v in sorted(kinds.items()):
        if v:
            lines.append(f"| {k} | {v} | {v / changes:.2f} |")
    lines.append(f"| **fan-out total (relay + hub)** | {fanout} | {fanout / changes:.2f} |")
    if branches:
        lines.append("")
        lines.append(f"judge statements: {judges}, {judges / changes:.2f} per change; read-class "
                     f"branches per judge: mean {statistics.mean(branches):.1f}, max {max(branches)}"
                     f"; changes per judge {changes / judges:.1f}; read classes involved per "
                     f"change: {classes_per_org} (the 3 roles of its org)")
    return "\n".join(lines)


async def run(args: argparse.Namespace, server: Server, db: Database, world: World) -> list[Phase]:
    bench = FanoutRun(args, server, db, world)
    if args.rounds > 1:
        # Alone and followed windows alternate, so a drift of the box's speed over the run
        # lands on both sides of each difference instead of on one.
        phases = []
        for n in range(1, args.rounds + 1):
            print(f"round {n} of {args.rounds}", flush=True)
            phases += await run_group(bench, f"r{n} ", args.subscribers, multi=False,
                                      baseline=True, census=n == 1)
            await streams_gone(server)
        print("\n" + share_summary(phases))
        return phases
    if not args.multi_subscribers:
        return await run_group(bench, "", args.subscribers, multi=False, baseline=args.baseline)
    # Multi-table mode: the same app, writes and deliveries per change, one group at a time.
    phases = await run_group(bench, "single ", args.subscribers, multi=False)
    await asyncio.sleep(3)  # let the server see the first group's connections go
    return phases + await run_group(bench, "multi ", args.multi_subscribers, multi=True)


def placement(n: int, orgs: int, roles: int, hot: int = 0) -> tuple[int, int, int]:
    """Subscriber `n`'s org, role (both indexes) and round (which of its class's tokens and
    tables): round-robin over every (org, role). With `hot` (`--hot-orgs`), one subscriber
    per (org, role) first, so every read class exists, then the rest round-robin over the
    classes of the first `hot` orgs, the written ones."""
    if hot and n >= orgs * roles:
        n -= orgs * roles
        return n % hot, (n // hot) % roles, 1 + n // (hot * roles)
    return n % orgs, (n // orgs) % roles, n // (orgs * roles)


async def idle_cpu(server: Server, db: Database, seconds: float = 5.0) -> dict[str, float]:
    """Cores used with no writes (after a second to settle): what is left when nothing changes,
    the upkeep of open streams (pings, the relays' polls) and the sequencer's polls."""
    await asyncio.sleep(1)
    before = Cpu.take(server.pid, db.pid)
    await asyncio.sleep(seconds)
    return Cpu.take(server.pid, db.pid).since(before)


async def run_group(bench: FanoutRun, label: str, count: int, multi: bool,
                    baseline: bool = False, census: bool = True) -> list[Phase]:
    """Open `count` subscribers, measure each rate (and, with `census`, the statement
    census), close them. With `baseline`, each rate is first measured with no stream open:
    the writes alone."""
    args, server, db, world = bench.args, bench.server, bench.db, bench.world
    if baseline:
        idle = await idle_cpu(server, db)
        print(f"  idle     CPU (cores): server {idle['server']:.3f}  postgres {idle['database']:.3f}"
              "  (no writes, no stream open)", flush=True)
        for rate in args.rates:
            phase = await bench.run_phase(f"{label}alone {rate:g}/s", rate, args.seconds,
                                          args.warmup)
            print_phase(phase)
            bench.alone[rate] = phase.cpu["server"] * phase.seconds / max(1, phase.writes)
    t0 = time.perf_counter()
    clients = await bench.open(count, multi)
    follows = (f"each following all {len(world.tables)} tables on one stream" if multi else
               f"each following one of {len(world.tables)} tables" if len(world.tables) > 1
               else "")
    print(f"{label}{len(clients)} subscribers {follows} open in {time.perf_counter() - t0:.1f} s "
          f"(server RSS {rss_bytes(server.pid) / 2**20:.0f} MiB)", flush=True)
    idle = await idle_cpu(server, db)
    print(f"  idle     CPU (cores): server {idle['server']:.3f}  postgres {idle['database']:.3f}"
          f"  (no writes, {len(clients)} open streams)", flush=True)
    phases = []
    for rate in args.rates:
        phase = await bench.run_phase(f"{label}{rate:g}/s", rate, args.seconds, args.warmup)
        phase.alone = bench.alone.get(rate)
        print_phase(phase)
        phases.append(phase)
    census_seconds = args.census if census else 0.0
    if census_seconds and db.log is not None:
        phase = await bench.run_phase(f"{label}{args.rates[0]:g}/s", args.rates[0], census_seconds,
                                      args.warmup, census=True)
        phases.append(phase)
        print()
        print(census_report(phase, len(ROLES)))
    elif census_seconds:
        print("statement census: n/a (DATABASE_URL: the PostgreSQL log is not ours to read)")
    dropped = sum(1 for c in clients if c.closed.done() or c.ended)
    print(f"\n{label}streams ended by the server during the run: {dropped} of {len(clients)}")
    for c in clients:
        c.close()
    bench.subs.clear()  # nobody follows now: a later window with no stream expects no frame
    return phases


OPEN_STREAMS = re.compile(r"^authoric_sse_streams_open(?:\{[^}]*\})? (\S+)$", re.M)


def streams_counted(metrics: str) -> float:
    """Open streams in a metrics page (`authoric_sse_streams_open`, summed over its series)."""
    return sum(float(v) for v in OPEN_STREAMS.findall(metrics))


def open_streams(server: Server) -> float:
    """Streams the server counts as open."""
    return streams_counted(scrape(server))


async def streams_gone(server: Server, limit: float = 60.0) -> None:
    """Wait until the server has let every closed stream go (at most `limit` seconds), so the
    next window with no stream open does not pay for their teardown."""
    deadline = time.monotonic() + limit
    while (left := await asyncio.to_thread(open_streams, server)) > 0:
        if time.monotonic() >= deadline:
            print(f"  {left:.0f} streams still open after {limit:g} s: the next window with "
                  "no stream open may pay for their teardown", flush=True)
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)


def share_summary(phases: list[Phase]) -> str:
    """Per rate, the feed's share of server CPU per change in each round, and their median."""
    by_rate: dict[float, list[float]] = defaultdict(list)
    for p in phases:
        if p.census is None and p.alone is not None:
            by_rate[p.rate].append(p.feed_share() * 1e3)
    lines = ["| rate | the feed's share, ms per change, by round | median |", "|---|---|--:|"]
    for rate, shares in by_rate.items():
        lines.append(f"| {rate:g}/s | {', '.join(f'{s:.2f}' for s in shares)} | "
                     f"{statistics.median(shares):.2f} |")
    return "\n".join(lines)


def report_server_errors(server: Server) -> None:
    """Print what the server logged at WARNING or above (it runs with --log-level warning)."""
    text = server.log_path.read_text(errors="replace")
    errors = [line for line in text.splitlines()
              if re.search(r"\b(ERROR|WARNING|CRITICAL)\b|Error:|Exception:", line)]
    if errors:
        print(f"\nserver log: {len(errors)} warning/error lines; distinct ones:")
        for line in dict.fromkeys(e[:300] for e in errors):
            print("  " + line)


def figures(phases: list[Phase]) -> str:
    lines = ["| rate | writes/s | deliveries/s | allowed/s | received/allowed "
             "| sent→deliv p50 / p99 ms | resp→deliv p50 / p99 ms "
             "| server-side p50 / p99 ms | server CPU | postgres CPU "
             "| client CPU | other CPU | server CPU ms / write | feed's share ms / change "
             "| server CPU µs / delivery | violations |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for p in phases:
        if p.census is not None:
            continue
        c = p.cpu
        served = p.server_lat.get("delivered", (float("nan"), float("nan")))
        lines.append(
            f"| {p.label} | {p.writes / p.seconds:.0f} | {p.delivered / p.seconds:.0f} | "
            f"{p.expected / p.seconds:.0f} | {p.received / max(1, p.expected):.3f} | "
            f"{pct(p.lat_sent, .5):.1f} / {pct(p.lat_sent, .99):.1f}"
            f" | {pct(p.lat_resp, .5):.1f} / {pct(p.lat_resp, .99):.1f} | "
            f"{served[0]:.1f} / {served[1]:.1f} | {c['server']:.2f} | "
            f"{c['database']:.2f} | {c['client']:.2f} | {c['other']:.2f} | "
            f"{c['server'] * p.seconds / max(1, p.writes) * 1e3:.2f} | "
            f"{p.feed_share() * 1e3:.2f} | "
            f"{c['server'] * p.seconds / max(1, p.delivered) * 1e6:.0f} | {p.violations} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.fanout", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscribers", type=int, default=1000, help="SSE subscribers (1000)")
    ap.add_argument("--orgs", type=int, default=50, help="orgs (50)")
    ap.add_argument("--hot-orgs", type=int, default=0,
                    help="write to the first H orgs only; every (org, role) still gets one "
                         "subscriber, so every read class exists, and the other subscribers "
                         "follow the written orgs: more deliveries per change with the same "
                         "classes (0: every org is written and followed alike)")
    ap.add_argument("--users-per-class", type=int, default=2,
                    help="users (one login each) per (org, role); subscribers share them (2)")
    ap.add_argument("--login-all", action="store_true",
                    help="obtain every token by password login (slow: Argon2) instead of minting")
    ap.add_argument("--rates", default="50,200,400",
                    help="comma-separated write rates per second, run in turn (50,200,400)")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per rate (10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per rate (2)")
    ap.add_argument("--grace", type=float, default=3.0,
                    help="after the writes, wait until no frame arrived for this long (3)")
    ap.add_argument("--writer", choices=("rest", "sql", "capture"), default="rest",
                    help="rest: POST through the API (default); sql: the bench inserts the row "
                         "and its change-log row itself, to find the fan-out ceiling; capture: "
                         "plain SQL inserts into tables with captureSqlWrites (the trigger "
                         "files them)")
    ap.add_argument("--write-connections", type=int, default=32,
                    help="concurrent write connections the pacer may use (32)")
    ap.add_argument("--connect-concurrency", type=int, default=50,
                    help="subscribe requests in flight while opening (50)")
    ap.add_argument("--tables", type=int, default=1,
                    help="tables written round-robin, same columns and policies (1)")
    ap.add_argument("--multi-subscribers", type=int, default=0,
                    help="multi-table mode: after the single-table group, this many subscribers "
                         "of /{app}/subscribe?tables=<all tables> (0: off)")
    ap.add_argument("--baseline", action="store_true",
                    help="first measure each rate with no stream open, and report the feed's "
                         "share of server CPU per change: the difference")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with more than 1: that many rounds, each measuring every rate with no "
                         "stream open and then with the subscribers open (implies --baseline), "
                         "and the median share per rate (1)")
    ap.add_argument("--census", type=float, default=5.0,
                    help="seconds of statement census at the first rate; 0 to skip (5)")
    args = ap.parse_args(argv)
    args.rates = [float(x) for x in args.rates.split(",") if x]
    if not 0 <= args.hot_orgs <= args.orgs:
        ap.error("--hot-orgs is between 0 and --orgs")
    if args.rounds < 1:
        ap.error("--rounds is at least 1")
    if args.rounds > 1 and args.multi_subscribers:
        ap.error("--rounds measures the single-table subscribers only: drop --multi-subscribers")
    return args


def banner(name: str) -> None:
    print(f"Authoric {name} benchmark, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} cores (shared by load generator, server and PostgreSQL), "
          f"Python {platform.python_version()}, database: "
          f"{'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded, fresh'}; "
          f"load average before: {os.getloadavg()[0]:.2f}", flush=True)


def install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_uvloop()
    raise_nofile(max(args.subscribers, args.multi_subscribers) + 2000)
    banner("fan-out")
    random.seed(1)
    with tempfile.TemporaryDirectory(prefix="authoric-bench-") as tmp:
        work = Path(tmp)
        with database(work) as db, running_server(work, db) as server:
            t0 = time.perf_counter()
            world = build_world(server, args.orgs, args.users_per_class,
                                login_all=args.login_all, tables=args.tables,
                                capture=args.writer == "capture")
            print(f"app {world.app}: {args.orgs} orgs, roles {', '.join(ROLES)} (+ writer), "
                  f"{len(ROLES) * args.users_per_class + 1} users, each a member of every org; "
                  f"{sum(len(v) for v in world.tokens.values()) + len(world.writers)} tokens "
                  f"({world.logins} by password login), built in {time.perf_counter() - t0:.0f} s;"
                  f" {args.subscribers} subscribers = {args.orgs * len(ROLES)} read classes "
                  f"per table; tables: {', '.join(world.tables)}; writer: {args.writer}"
                  + (f"; writes to the first {args.hot_orgs} orgs, followed by the "
                     "subscribers beyond one per read class" if args.hot_orgs else ""),
                  flush=True)
            phases = asyncio.run(run(args, server, db, world))
            report_server_errors(server)
    print("\n" + figures(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
