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
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.fanout_run import (
    FanoutRun,
    Phase,
    figures,
    report_server_errors,
    run_group,
    share_summary,
    streams_gone,
)
from bench.fanout_world import ROLES, World, build_world
from bench.harness import Database, Server, banner, database, install_uvloop, running_server
from bench.procstat import raise_nofile


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
