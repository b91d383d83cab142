"""Idle SSE subscribers on one server process: memory per connection and the CPU pings cost.

Starts `authoric serve` (fresh embedded PostgreSQL, or DATABASE_URL) with a short ping interval
(AUTHORIC_SSE_PING_INTERVAL, 5 s by default here; 25 s in production), builds one app (the
fan-out benchmark's table and roles over a few orgs; the subscribers share a handful of
tokens), then:
1. measures the idle server (no subscribers) for `--window` seconds: RSS, CPU;
2. opens `--subscribers` streams (one socket each, from this process) and waits for each
   `connected` frame; RSS after, and RSS per connection = (after - before) / subscribers;
3. measures the server idle again for `--window` seconds with every stream open: the extra
   CPU over step 1 is what the pings cost; per ping round = that / (window / interval), and
   per ping; the pings received are counted to check the rounds happened;
4. closes every stream and reports the RSS left.

    .venv/bin/python -m bench.connections                     # 10,000 subscribers, 5 s pings
    .venv/bin/python -m bench.connections --subscribers 2000 --window 10

The open-file limit is raised here (RLIMIT_NOFILE, inherited by the server) to fit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.fanout_world import ROLES, TABLE, World, build_world
from bench.harness import Database, Server, banner, database, install_uvloop, running_server
from bench.procstat import Cpu, raise_nofile, rss_bytes
from bench.sse_clients import SseClient, mark_connected, open_subscribers, subscribe_request

MiB = 2**20


def on_block(client: SseClient, block: bytes, now: float) -> None:
    if block.startswith(b": ping"):
        client.pings += 1
    elif not mark_connected(client, block):
        client.frames += 1


async def idle(server: Server, db: Database, seconds: float) -> dict[str, float]:
    before = Cpu.take(server.pid, db.pid)
    await asyncio.sleep(seconds)
    return Cpu.take(server.pid, db.pid).since(before)


async def run(args: argparse.Namespace, server: Server, db: Database, world: World) -> None:
    path = f"/{world.app}/autocrud/{TABLE}/subscribe"
    keys = sorted(world.tokens)

    def requests(n: int) -> list[tuple[bytes, str]]:
        out = []
        for i in range(n):
            key = keys[i % len(keys)]
            out.append((subscribe_request(server.host, server.port, path,
                                          world.tokens[key][0]), key[1]))
        return out

    # Warm the server up (imports, caches, first-use allocations), then measure it idle.
    warm = await open_subscribers(server.host, server.port, requests(50), on_block, 50)
    for c in warm:
        c.close()
    await asyncio.sleep(2)
    rss0 = rss_bytes(server.pid)
    base = await idle(server, db, args.window)
    print(f"idle, no subscribers: server RSS {rss0 / MiB:.1f} MiB, CPU server "
          f"{base['server'] * 100:.1f}% postgres {base['database'] * 100:.1f}% of a core "
          f"(the sequencer polls the log every few ms; other load on the machine "
          f"{base['other'] * 100:.0f}%)", flush=True)

    t0, cpu0 = time.perf_counter(), Cpu.take(server.pid, db.pid)
    clients = await open_subscribers(server.host, server.port, requests(args.subscribers),
                                     on_block, args.connect_concurrency, progress=True)
    opened = time.perf_counter() - t0
    spent = Cpu.take(server.pid, db.pid).since(cpu0)
    print(f"opening cost: server {spent['server'] * opened / len(clients) * 1000:.1f} ms CPU, "
          f"postgres {spent['database'] * opened / len(clients) * 1000:.1f} ms CPU per subscribe;"
          f" load generator {spent['client'] * 100:.0f}% of a core, other load "
          f"{spent['other'] * 100:.0f}%", flush=True)
    await asyncio.sleep(2)
    rss1 = rss_bytes(server.pid)
    per = (rss1 - rss0) / len(clients)
    print(f"{len(clients)} subscribers open in {opened:.1f} s ({len(clients) / opened:.0f}/s); "
          f"server RSS {rss1 / MiB:.1f} MiB: +{(rss1 - rss0) / MiB:.1f} MiB, "
          f"{per / 1024:.1f} KiB per connection", flush=True)

    pings0 = sum(c.pings for c in clients)
    busy = await idle(server, db, args.window)
    pings = sum(c.pings for c in clients) - pings0
    rounds = args.window / args.ping
    extra = busy["server"] - base["server"]  # cores
    per_round = extra * args.window / rounds  # CPU seconds per round
    rss2 = rss_bytes(server.pid)
    print(f"idle, {len(clients)} subscribers, ping every {args.ping:g} s: server CPU "
          f"{busy['server'] * 100:.1f}% of a core (+{extra * 100:.1f}% over no subscribers), "
          f"load generator {busy['client'] * 100:.1f}%, other {busy['other'] * 100:.0f}%; "
          f"{pings} pings received in {args.window:g} s ({pings / len(clients) / rounds:.2f} per "
          f"stream per interval); {per_round * 1000:.0f} ms server CPU per ping round, "
          f"{per_round / len(clients) * 1e6:.1f} µs per ping; RSS now {rss2 / MiB:.1f} MiB",
          flush=True)
    dropped = sum(1 for c in clients if c.closed.done() or c.ended)

    for c in clients:
        c.close()
    await asyncio.sleep(3)
    rss3 = rss_bytes(server.pid)
    print(f"all closed: server RSS {rss3 / MiB:.1f} MiB ({(rss3 - rss0) / MiB:+.1f} MiB over the "
          f"start); streams the server ended during the run: {dropped}")
    for cycle in range(2, args.cycles + 1):
        again = await open_subscribers(server.host, server.port, requests(args.subscribers),
                                       on_block, args.connect_concurrency)
        await asyncio.sleep(2)
        open_rss = rss_bytes(server.pid)
        for c in again:
            c.close()
        await asyncio.sleep(3)
        print(f"cycle {cycle}: {len(again)} open → RSS {open_rss / MiB:.1f} MiB; all closed → "
              f"{rss_bytes(server.pid) / MiB:.1f} MiB (memory kept by the allocator is reused, "
              f"not leaked, if this does not grow cycle after cycle)", flush=True)
    print("\n| subscribers | open time s | RSS before MiB | RSS after MiB | KiB per connection "
          "| server CPU idle, 0 subs | with subs | per ping round ms | per ping µs "
          "| RSS after close MiB |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    print(f"| {len(clients)} | {opened:.1f} | {rss0 / MiB:.1f} | {rss1 / MiB:.1f} | "
          f"{per / 1024:.1f} | {base['server'] * 100:.1f}% | {busy['server'] * 100:.1f}% | "
          f"{per_round * 1000:.0f} | {per_round / len(clients) * 1e6:.1f} | {rss3 / MiB:.1f} |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.connections", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscribers", type=int, default=10_000, help="idle streams (10000)")
    ap.add_argument("--orgs", type=int, default=5, help="orgs the tokens are spread over (5)")
    ap.add_argument("--ping", type=float, default=5.0,
                    help="AUTHORIC_SSE_PING_INTERVAL for the server, seconds (5)")
    ap.add_argument("--window", type=float, default=30.0,
                    help="seconds of each idle CPU measurement (30: six 5 s ping rounds)")
    ap.add_argument("--cycles", type=int, default=1,
                    help="open/close cycles; later ones only report RSS, to tell reuse from a leak (1)")
    ap.add_argument("--connect-concurrency", type=int, default=100,
                    help="subscribe requests in flight while opening (100)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_uvloop()
    limit = raise_nofile(2 * args.subscribers + 1000)  # the server inherits it
    banner("idle connections")
    print(f"open files limit: {limit} (this process and the server); tokens shared by "
          f"{len(ROLES) * args.orgs} (org, role) pairs", flush=True)
    with tempfile.TemporaryDirectory(prefix="authoric-bench-") as tmp:
        work = Path(tmp)
        # One worker: RSS and CPU are read from the process the bench started, which with
        # several workers would be uvicorn's supervisor, holding no stream.
        env = {"AUTHORIC_SSE_PING_INTERVAL": str(args.ping), "AUTHORIC_WORKERS": "1"}
        with database(work) as db, running_server(work, db, env) as server:
            world = build_world(server, args.orgs, 1, writers=False)
            asyncio.run(run(args, server, db, world))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
