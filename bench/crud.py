"""CRUD throughput and latency of `authoric serve`, with and without a row policy and redaction.

Starts a real server process (on a fresh embedded PostgreSQL under a temp dir, or on
DATABASE_URL when set), builds one app over HTTP, then drives create / read one / list
(`?limit=20`) at several concurrencies as a member whose role has plain permissions,
alternating in slices with a member whose role adds a row policy and two redacted columns
(so drift in other load on the machine falls on both alike). Prints req/s,
p50/p99 latency, the ratio policy/plain, and where the CPU went (load generator, server,
PostgreSQL, anything else on the machine).

    .venv/bin/python -m bench.crud        # 8 s per cell in 4 slices, 0.5 s warm-up each: ~3.5 min
    .venv/bin/python -m bench.crud --seconds 2 --concurrency 1,10 --client httpx

The load generator runs on the same cores as the server and the database: its share is
printed so the figures can be read for what they are.
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
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Server, database
from bench.harness import running_server as harness_server

ROUTES = ("create", "read", "list")
TABLE = "items"
COLUMNS = [
    {"name": "title", "type": "text", "required": True},
    {"name": "note", "type": "text"},
    {"name": "status", "type": "text", "default": "open"},
    {"name": "amount", "type": "numeric"},
    {"name": "qty", "type": "integer"},
    {"name": "due", "type": "timestamp"},
]
PERMISSIONS = [f"{TABLE}:read_list", f"{TABLE}:read", f"{TABLE}:create"]
POLICY_ROLE = {
    "permissions": PERMISSIONS,
    "rowPolicies": {TABLE: {"status": {"ne": "draft"}}},
    "redact": {TABLE: ["amount", "note"]},
}
SEED_ROWS = 200
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- CPU accounting (Linux /proc) ----------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # fields from `state` on


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields:
                tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def tree_cpu_seconds(root: int | None, tree: dict[int, list[int]]) -> float:
    """User + system CPU of `root` and its descendants, in seconds: live processes by their
    own time, exited ones through their parent's waited-for-children time."""
    if root is None:
        return 0.0
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        fields = _stat_fields(pid)
        if fields:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        stack.extend(tree.get(pid, []))
    return total / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle, since boot."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in first[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


@dataclass
class CpuSample:
    client: float
    server: float
    database: float
    machine: float

    @classmethod
    def take(cls, server_pid: int, db_pid: int | None) -> CpuSample:
        tree = _children()
        own = os.times()
        return cls(own.user + own.system, tree_cpu_seconds(server_pid, tree),
                   tree_cpu_seconds(db_pid, tree), machine_busy_seconds())


# --- load generators ---------------------------------------------------------------------

Request = tuple[str, str, bytes | None]


class RawConnection:
    """One keep-alive HTTP/1.1 connection over asyncio streams: the cheapest client we have."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.prefix = f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n".encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        if self.writer is None:
            await self._open()
        assert self.reader is not None and self.writer is not None
        head = f"{method} {path} HTTP/1.1\r\n".encode() + self.prefix
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        self.writer.write(head + b"\r\n" + (body or b""))
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status, length, close, chunked = int(raw[9:12]), 0, False, False
        for line in raw.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection":
                close = value.strip().lower() == b"close"
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        payload = await self._chunked() if chunked else (
            await self.reader.readexactly(length) if length else b"")
        if close:
            await self.close()
        return status, payload

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            parts.append(await self.reader.readexactly(size + 2))
            if size == 0:
                return b"".join(parts)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


class HttpxConnection:
    """A view on one shared httpx.AsyncClient (its pool holds one connection per worker)."""

    def __init__(self, client: httpx.AsyncClient, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}
        self.json_headers = {**self.headers, "Content-Type": "application/json"}

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        headers = self.headers if body is None else self.json_headers
        response = await self.client.request(method, path, content=body, headers=headers)
        return response.status_code, response.content

    async def close(self) -> None:
        return None


@dataclass
class Cell:
    """The measured windows of one (route, caller, concurrency): latencies, errors and CPU
    seconds accumulated over every slice run for it."""

    route: str
    caller: str
    concurrency: int
    seconds: float = 0.0  # measured seconds so far
    latencies: list[float] = field(default_factory=list)
    errors: dict[int, int] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    @property
    def cpu(self) -> dict[str, float]:
        """Average share of one core per part (client, server, database, other, machine)."""
        return {k: v / self.seconds for k, v in self.cpu_seconds.items()} if self.seconds else {}

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def run_slice(cell: Cell, seconds: float, connect: Callable[[], Awaitable[Any]],
                    make_request: Callable[[int], Request],
                    on_response: Callable[[int, bytes], None] | None, warmup: float,
                    sample: Callable[[], CpuSample]) -> None:
    """`cell.concurrency` workers back to back for `warmup` + `seconds`; the requests
    completing inside the measured window are added to `cell`."""
    start = time.perf_counter()
    measure_from, end = start + warmup, start + warmup + seconds
    counter = iter(range(10**12))

    async def worker() -> None:
        conn = await connect()
        try:
            while (t0 := time.perf_counter()) < end:
                status, body = await conn.request(*make_request(next(counter)))
                t1 = time.perf_counter()
                if measure_from <= t1 <= end:
                    cell.latencies.append(t1 - t0)
                    if not 200 <= status < 300:
                        cell.errors[status] = cell.errors.get(status, 0) + 1
                if on_response is not None and 200 <= status < 300:
                    on_response(status, body)
        finally:
            await conn.close()

    async def watch_cpu() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        before = sample()
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        after = sample()
        used = {"client": after.client - before.client, "server": after.server - before.server,
                "database": after.database - before.database,
                "machine": after.machine - before.machine}
        used["other"] = max(0.0, used["machine"] - used["client"] - used["server"]
                            - used["database"])
        for key, value in used.items():
            cell.cpu_seconds[key] = cell.cpu_seconds.get(key, 0.0) + value

    await asyncio.gather(watch_cpu(), *[worker() for _ in range(cell.concurrency)])
    cell.seconds += seconds


# --- the server and the app --------------------------------------------------------------

@contextlib.contextmanager
def running_server(work: Path, workers: int) -> Iterator[Server]:
    """`authoric serve --workers N` on DATABASE_URL, or on a fresh embedded PostgreSQL."""
    with database(work) as db, harness_server(work, db, extra_args=["--workers", str(workers)]) as s:
        yield s


@dataclass
class World:
    app: str
    tokens: dict[str, str]  # caller → access token
    seeds: dict[str, list[str]]  # caller → row uids it created


def row_body(n: int) -> bytes:
    return json.dumps({
        "title": f"item {n}", "note": "benchmark row with a little text in it", "status": "open",
        "amount": f"{100 + n % 997}.25", "qty": n % 50, "due": "2026-01-31T12:00:00Z",
    }).encode()


def build_world(server: Server) -> World:
    """App, table, org, the two roles, two members, their tokens, and some rows each."""
    def ok(response: httpx.Response) -> Any:
        if response.status_code >= 300:
            raise SystemExit(f"setup failed: {response.request.method} {response.request.url} "
                             f"→ {response.status_code} {response.text}")
        return response.json() if response.content else None

    admin = httpx.Client(base_url=server.url, timeout=30,
                         headers={"Authorization": f"Bearer {server.admin_token}"})
    app = f"bench_{secrets.token_hex(4)}"
    base = f"/admin/apps/{app}"
    ok(admin.post("/admin/apps", json={"name": app}))
    ok(admin.patch(base, json={"settings": {"accessTokenTtl": 86_400}}))
    ok(admin.post(f"{base}/tables", json={"name": TABLE, "columns": COLUMNS}))
    org = ok(admin.post(f"{base}/orgs", json={"name": "Bench Org"}))["uid"]
    ok(admin.put(f"{base}/roles/plain", json={"permissions": PERMISSIONS}))
    ok(admin.put(f"{base}/roles/policy", json=POLICY_ROLE))
    tokens, seeds = {}, {}
    for caller in ("plain", "policy"):
        email, password = f"{caller}@bench.test", secrets.token_urlsafe(12)
        user = ok(admin.post(f"{base}/users", json={"email": email, "password": password}))
        ok(admin.put(f"{base}/orgs/{org}/members/{user['uid']}", json={"roles": [caller]}))
        pair = ok(admin.post(f"/{app}/auth/token", json={"email": email, "password": password}))
        tokens[caller] = pair["access_token"]
        member = httpx.Client(base_url=server.url, timeout=30, headers={
            "Authorization": f"Bearer {pair['access_token']}", "Content-Type": "application/json"})
        seeds[caller] = [ok(member.post(f"/{app}/autocrud/{TABLE}", content=row_body(n)))["uid"]
                         for n in range(SEED_ROWS)]
        member.close()
    admin.close()
    return World(app, tokens, seeds)


# --- the run -----------------------------------------------------------------------------

def requests_for(route: str, world: World, caller: str) -> Callable[[int], Request]:
    rows = f"/{world.app}/autocrud/{TABLE}"
    if route == "create":
        return lambda n: ("POST", rows, row_body(n))
    if route == "read":
        pool = world.seeds[caller]
        return lambda n: ("GET", f"{rows}/{random.choice(pool)}", None)
    page = f"{rows}?limit=20"
    return lambda n: ("GET", page, None)


def collector(route: str, world: World, caller: str) -> Callable[[int, bytes], None] | None:
    if route != "create":
        return None
    pool = world.seeds[caller]

    def keep(_: int, body: bytes) -> None:
        if len(pool) < 20_000 and body.startswith(b'{"uid":"'):
            pool.append(body[8:44].decode())
    return keep


async def run_all(args: argparse.Namespace, server: Server, world: World) -> list[Cell]:
    done: list[Cell] = []
    limits = max(args.concurrency)
    client = httpx.AsyncClient(base_url=server.url, timeout=60, limits=httpx.Limits(
        max_connections=limits, max_keepalive_connections=limits))

    def sample() -> CpuSample:
        return CpuSample.take(server.process.pid, server.db_pid)

    try:
        for route in args.routes:
            for concurrency in args.concurrency:
                cells = {c: Cell(route, c, concurrency) for c in ("plain", "policy")}
                # ABBA...: the two callers alternate, so drift in the machine's other load
                # falls on both alike.
                order = [("plain", "policy") if i % 2 == 0 else ("policy", "plain")
                         for i in range(args.rounds)]
                for caller in (c for pair in order for c in pair):
                    token = world.tokens[caller]

                    async def connect(token: str = token) -> Any:
                        if args.client == "raw":
                            return RawConnection("127.0.0.1", server.port, token)
                        return HttpxConnection(client, token)

                    await run_slice(cells[caller], args.seconds / args.rounds, connect,
                                    requests_for(route, world, caller),
                                    collector(route, world, caller), args.warmup, sample)
                for cell in cells.values():
                    done.append(cell)
                    print(f"  {route:<6} c={concurrency:<3} {cell.caller:<6} {cell.rps:8.1f} req/s"
                          f"  p50 {cell.percentile(0.50):6.1f} ms  p99 {cell.percentile(0.99):6.1f} ms"
                          f"  (other load {cell.cpu.get('other', 0) * 100:.0f}% of a core)"
                          + (f"  errors {cell.errors}" if cell.errors else ""), flush=True)
    finally:
        await client.aclose()
    return done


def cost_ms(cell: Cell, *parts: str) -> float:
    """CPU milliseconds per completed request spent by `parts` (e.g. server + database)."""
    count = len(cell.latencies)
    return sum(cell.cpu.get(p, 0.0) for p in parts) * cell.seconds * 1000 / count if count else 0.0


def figures_table(cells: list[Cell]) -> str:
    by_key = {(c.route, c.concurrency, c.caller): c for c in cells}
    lines = [
        "| route | conc | plain req/s | p50 ms | p99 ms | policy req/s | p50 ms | p99 ms "
        "| req/s policy/plain | CPU ms/req plain | CPU ms/req policy | CPU policy/plain |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for (route, conc, caller), plain in by_key.items():
        if caller != "plain":
            continue
        pol = by_key[(route, conc, "policy")]
        plain_cost, pol_cost = cost_ms(plain, "server", "database"), cost_ms(pol, "server", "database")
        lines.append(
            f"| {route} | {conc} | {plain.rps:.0f} | {plain.percentile(.5):.1f} | "
            f"{plain.percentile(.99):.1f} | {pol.rps:.0f} | {pol.percentile(.5):.1f} | "
            f"{pol.percentile(.99):.1f} | {pol.rps / plain.rps if plain.rps else float('nan'):.2f} | "
            f"{plain_cost:.2f} | {pol_cost:.2f} | "
            f"{pol_cost / plain_cost if plain_cost else float('nan'):.2f} |")
    return "\n".join(lines)


def cpu_table(cells: list[Cell], external_db: bool) -> str:
    db = "database (external: n/a)" if external_db else "postgres"
    lines = [
        f"| route | conc | caller | load generator | server | {db} | other | idle "
        "| load gen. CPU ms/req |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for c in cells:
        cpu = {k: f"{v * 100:.0f}%" for k, v in c.cpu.items()}
        idle = f"{max(0.0, (os.cpu_count() or 1) - c.cpu.get('machine', 0.0)) * 100:.0f}%"
        lines.append(f"| {c.route} | {c.concurrency} | {c.caller} | {cpu['client']} | "
                     f"{cpu['server']} | {cpu['database'] if not external_db else '-'} | "
                     f"{cpu['other']} | {idle} | {cost_ms(c, 'client'):.2f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.crud", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0,
                    help="measured seconds per cell, i.e. per route, concurrency and caller (8)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="slices each cell is split into, plain and policy alternating (4)")
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per slice (0.5)")
    ap.add_argument("--concurrency", default="1,10,50",
                    help="comma-separated concurrencies (1,10,50)")
    ap.add_argument("--routes", default=",".join(ROUTES), help="subset of create,read,list")
    ap.add_argument("--client", choices=("raw", "httpx"), default="raw",
                    help="load generator: raw asyncio keep-alive sockets (default, cheapest) "
                         "or one shared httpx.AsyncClient")
    ap.add_argument("--workers", type=int, default=1, help="`authoric serve --workers` (1)")
    args = ap.parse_args(argv)
    args.concurrency = [int(x) for x in args.concurrency.split(",") if x]
    args.rounds = max(1, args.rounds)
    args.routes = [r for r in args.routes.split(",") if r]
    if set(args.routes) - set(ROUTES):
        ap.error(f"routes are {', '.join(ROUTES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    cells_total = len(args.routes) * len(args.concurrency) * 2
    per_slice = args.seconds / args.rounds
    print(f"Authoric CRUD benchmark, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{cells_total} cells x {args.rounds} slices x ({args.warmup:g} s warm-up + {per_slice:g} s),"
          f" plain and policy alternating; client "
          f"{args.client}, server workers {args.workers}, pool size "
          f"{os.environ.get('AUTHORIC_DB_POOL_SIZE', '10')} (+ as many overflow)")
    print(f"database: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded, fresh'}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="authoric-bench-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # the embedded PostgreSQL may run as another user
        with running_server(work, args.workers) as server:
            world = build_world(server)
            print(f"app {world.app}: table {TABLE} ({len(COLUMNS)} columns), "
                  f"{SEED_ROWS} seed rows per member\n")
            cells = asyncio.run(run_all(args, server, world))
    print("\nThroughput and latency (policy = row policy + 2 redacted columns):\n")
    print(figures_table(cells))
    print("\nCPU ms/req: server + PostgreSQL CPU time per completed request (includes fixed"
          " background work such as the sequencer's polling).")
    print(f"\nWhere the CPU went during each cell, % of one core ({os.cpu_count()} cores = "
          f"{(os.cpu_count() or 1) * 100}%); 'other' is everything else running on the machine:\n")
    print(cpu_table(cells, bool(os.environ.get("DATABASE_URL"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
