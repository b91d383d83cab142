"""Resume with `Last-Event-ID`: time to replay 1,000 events.

Starts `authoric serve` (fresh embedded PostgreSQL, or DATABASE_URL), builds one app (the
fan-out benchmark's table and roles, one org), writes `--events` rows through REST (one in five
a `draft`, which the `field` role's row policy hides), then resumes from the position just before
them, as each role in turn, `--repeat` times: a fresh connection sending `Last-Event-ID`, timed
from just before the connection is opened to the arrival of the last replayed frame (the
frame carrying the head position the role may see). Also timed: the `connected` frame and the
first replayed frame, and a reconnect storm (`--storm` clients resuming at once).

    .venv/bin/python -m bench.resume                    # 1,000 events, 10 resumes per role
    .venv/bin/python -m bench.resume --events 1000 --repeat 3 --storm 20

Replay is bounded by the contract at 1,000 log entries (AUTHORIC_SSE_REPLAY_LIMIT); a larger
`--events` shows the `backfill_truncated` resync instead.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.fanout_run import pct
from bench.fanout_world import ROLES, TABLE, World, build_world, row_body
from bench.harness import Database, Server, banner, database, install_uvloop, running_server
from bench.procstat import Cpu
from bench.sse_clients import RawHttp, SseClient, subscribe_request


@dataclass
class Resume:
    role: str
    t_open: float = 0.0
    t_connected: float = 0.0
    t_first: float = 0.0
    t_last: float = 0.0
    frames: int = 0
    last_id: int = 0
    ordered: bool = True
    resyncs: list[bytes] = field(default_factory=list)
    done: asyncio.Future[None] | None = None

    @property
    def total(self) -> float:
        return self.t_last - self.t_open


async def write_events(server: Server, world: World, n: int, concurrency: int = 8) -> None:
    counter = iter(range(n))

    async def worker() -> None:
        conn = RawHttp(server.host, server.port)
        try:
            for i in counter:
                status, body = await conn.request("POST", f"/{world.app}/autocrud/{TABLE}",
                                                  world.writers[0],
                                                  row_body(i, i % 5 == 4, time.perf_counter()))
                if status != 201:
                    raise SystemExit(f"write failed: {status} {body[:200]!r}")
        finally:
            await conn.close()

    await asyncio.gather(*[worker() for _ in range(concurrency)])


async def head(db: Database) -> int:
    import asyncpg

    conn = await asyncpg.connect(db.url, server_settings={"application_name": "bench"})
    try:
        return int(await conn.fetchval(
            "SELECT coalesce(max(pos), 0) FROM authoric.changes WHERE pos IS NOT NULL"))
    finally:
        await conn.close()


async def resume_once(server: Server, path: str, token: str, role: str, since: int,
                      expect_last: int) -> Resume:
    loop = asyncio.get_running_loop()
    r = Resume(role, done=loop.create_future())

    def on_block(client: SseClient, block: bytes, now: float) -> None:
        if block.startswith(b"event: connected"):
            r.t_connected = now
            return
        if block.startswith(b"event: resync"):
            r.resyncs.append(block)
            return
        if not block.startswith(b"id: "):
            return
        pos = int(block[4:block.index(b"\n")])
        if pos <= r.last_id:
            r.ordered = False
        r.last_id, r.frames = pos, r.frames + 1
        if r.frames == 1:
            r.t_first = now
        if pos >= expect_last and r.done is not None and not r.done.done():
            r.t_last = now
            r.done.set_result(None)

    client = SseClient(subscribe_request(server.host, server.port, path, token, since), on_block)
    r.t_open = time.perf_counter()
    await loop.create_connection(lambda: client, server.host, server.port)
    try:
        assert r.done is not None
        await asyncio.wait_for(r.done, 60)
    finally:
        client.close()
    return r


async def last_visible(db: Database, world: World, since: int) -> dict[str, int]:
    """The last position each role may see (field: the last non-draft row)."""
    import asyncpg

    conn = await asyncpg.connect(db.url, server_settings={"application_name": "bench"})
    schema = "app_" + world.app_uid.replace("-", "")
    try:
        every = int(await conn.fetchval(
            "SELECT max(pos) FROM authoric.changes WHERE pos > $1", since))
        open_rows = int(await conn.fetchval(
            f'SELECT max(c.pos) FROM authoric.changes c JOIN "{schema}"."{TABLE}" r '
            "ON r.uid = c.row_uid WHERE c.pos > $1 AND r.status <> 'draft'", since))
    finally:
        await conn.close()
    return {"reader": every, "auditor": every, "field": open_rows}


async def run(args: argparse.Namespace, server: Server, db: Database, world: World) -> None:
    since = await head(db)
    t0 = time.perf_counter()
    await write_events(server, world, args.events)
    await asyncio.sleep(0.5)  # let the sequencer stamp the last rows
    print(f"{args.events} events written through REST in {time.perf_counter() - t0:.1f} s; "
          f"resuming from position {since}", flush=True)
    expect = await last_visible(db, world, since)
    path = f"/{world.app}/autocrud/{TABLE}/subscribe"
    rows = []
    for role in ROLES:
        token = world.tokens[(0, role)][0]
        await resume_once(server, path, token, role, since, expect[role])  # warm-up
        runs = []
        before = Cpu.take(server.pid, db.pid)
        for _ in range(args.repeat):
            runs.append(await resume_once(server, path, token, role, since, expect[role]))
        after = Cpu.take(server.pid, db.pid)
        server_cpu = (after.server - before.server) / args.repeat * 1000
        db_cpu = (after.database - before.database) / args.repeat * 1000
        totals = [r.total for r in runs]
        first = [r.t_first - r.t_open for r in runs]
        conn = [r.t_connected - r.t_open for r in runs]
        r0 = runs[0]
        print(f"  {role:<8} {r0.frames:5d} frames  to last frame: min {min(totals) * 1000:6.1f}  "
              f"p50 {pct(totals, .5):6.1f}  max {max(totals) * 1000:6.1f} ms   connected p50 "
              f"{pct(conn, .5):5.1f} ms, first frame p50 {pct(first, .5):5.1f} ms   server CPU "
              f"{server_cpu:.0f} ms, postgres {db_cpu:.0f} ms per resume"
              f"{'' if all(r.ordered for r in runs) else '  OUT OF ORDER'}"
              f"{'  resync: ' + r0.resyncs[0].decode() if r0.resyncs else ''}", flush=True)
        rows.append((role, r0.frames, min(totals) * 1000, pct(totals, .5), max(totals) * 1000,
                     pct(conn, .5), pct(first, .5), server_cpu, db_cpu))
    storm = None
    if args.storm:
        tokens = [(role, world.tokens[(0, role)][0]) for role in ROLES]
        t = time.perf_counter()
        done = await asyncio.gather(*[
            resume_once(server, path, tokens[i % 3][1], tokens[i % 3][0], since,
                        expect[tokens[i % 3][0]]) for i in range(args.storm)])
        wall = time.perf_counter() - t
        totals = [r.total for r in done]
        storm = (args.storm, wall * 1000, pct(totals, .5), max(totals) * 1000,
                 sum(r.frames for r in done))
        print(f"  storm: {args.storm} resumes at once, all replayed in {wall * 1000:.0f} ms "
              f"(each: p50 {pct(totals, .5):.0f} ms, max {max(totals) * 1000:.0f} ms; "
              f"{sum(r.frames for r in done) / wall:.0f} frames/s)", flush=True)
    print("\n| role | frames replayed | to last frame min / p50 / max ms | connected p50 ms "
          "| first frame p50 ms | server CPU ms | postgres CPU ms |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for role, frames, mn, p50, mx, c, f, scpu, dcpu in rows:
        print(f"| {role} | {frames} | {mn:.1f} / {p50:.1f} / {mx:.1f} | {c:.1f} | {f:.1f} | "
              f"{scpu:.0f} | {dcpu:.0f} |")
    if storm:
        print(f"\nstorm: {storm[0]} concurrent resumes of ~{args.events} events: all done in "
              f"{storm[1]:.0f} ms, each p50 {storm[2]:.0f} ms / max {storm[3]:.0f} ms")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.resume", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1000, help="events to replay (1000)")
    ap.add_argument("--repeat", type=int, default=10, help="timed resumes per role (10)")
    ap.add_argument("--storm", type=int, default=10,
                    help="concurrent resumes in the storm case; 0 to skip (10)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_uvloop()
    banner("resume")
    with tempfile.TemporaryDirectory(prefix="authoric-bench-") as tmp:
        work = Path(tmp)
        with database(work) as db, running_server(work, db) as server:
            world = build_world(server, 1, 1)
            asyncio.run(run(args, server, db, world))
    return 0


if __name__ == "__main__":
    sys.exit(main())
