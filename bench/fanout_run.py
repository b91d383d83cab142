"""The fan-out bench's measurement: one window of writes at a rate with the subscribers
open (`FanoutRun`, `Phase`), the server's feed histograms, and the figures printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.fanout_world import ROLES, TABLE, World, row_body
from bench.harness import Database, Server
from bench.procstat import Cpu, rss_bytes
from bench.sse_clients import RawHttp, SseClient, note_control, open_subscribers, subscribe_request
from bench.statement_log import classify, logged_statements, set_statement_log


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
