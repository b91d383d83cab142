"""What an idle server costs: CPU of the server and its PostgreSQL with no clients at all.

Starts `authoric serve` (bench/harness.py: a fresh embedded PostgreSQL under a temp dir, or
DATABASE_URL), waits for it to settle, then reads CPU time from /proc before and after
`--seconds` of doing nothing, and prints the share of one core used by:
- the server's process tree (all workers);
- its PostgreSQL: the embedded postmaster's whole tree (backends, checkpointer, WAL writer,
  autovacuum), or, with DATABASE_URL, only the backends whose application_name starts with
  `authoric` (the rest of a shared cluster is not ours to count).

    .venv/bin/python -m bench.idle                  # 60 s, default worker count
    .venv/bin/python -m bench.idle --seconds 20 --workers 2

The target (issue 8.5) is under 1% of one core for server + PostgreSQL together.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.harness import (
    Database,
    Server,
    database,
    process_children,
    process_cpu_seconds,
    process_tree,
    running_server,
    tree_cpu_seconds,
)


async def backend_pids(url: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity "
                                "WHERE application_name LIKE 'authoric%' AND pid <> pg_backend_pid()")
        return [int(r["pid"]) for r in rows]
    finally:
        await conn.close()


def cpu_seconds(server: Server, db: Database, backends: list[int]) -> tuple[float, float]:
    """(server tree, its PostgreSQL) CPU seconds so far."""
    tree = process_children()
    server_cpu = tree_cpu_seconds(server.pid, tree)
    if db.pid is not None:
        return server_cpu, tree_cpu_seconds(db.pid, tree)
    return server_cpu, sum(tree_cpu_seconds(pid, {}) for pid in backends)


def process_label(pid: int) -> str:
    """A process's command line, shortened to what tells the processes of a tree apart."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "(gone)"
    words = [w.decode(errors="replace") for w in argv if w]
    return " ".join([Path(words[0]).name, *words[1:]])[:70] if words else "?"


def own_cpu_by_process(root: int) -> dict[int, float]:
    """Each live process of the tree: its own CPU seconds so far (children not included)."""
    return {pid: process_cpu_seconds(pid, with_reaped_children=False)
            for pid in process_tree(root)}


def print_by_process(before: dict[int, float], after: dict[int, float], span: float) -> None:
    print("  by process (own CPU, % of one core):")
    for pid, seconds in sorted(after.items(), key=lambda kv: -(kv[1] - before.get(kv[0], 0))):
        share = 100 * (seconds - before.get(pid, 0.0)) / span
        print(f"    {share:5.2f}%  {pid:>7}  {process_label(pid)}")


def measure(args: argparse.Namespace) -> None:
    extra = ["--workers", str(args.workers)] if args.workers else []
    with tempfile.TemporaryDirectory(prefix="authoric-idle-") as tmp, \
            database(Path(tmp)) as db, running_server(Path(tmp), db, extra_args=extra) as server:
        time.sleep(args.settle)  # startup work (migrations check, first polls) is not idle
        backends = [] if db.pid is not None else asyncio.run(backend_pids(db.url))
        own_before = own_cpu_by_process(server.pid)
        before, started = cpu_seconds(server, db, backends), time.monotonic()
        time.sleep(args.seconds)
        after, span = cpu_seconds(server, db, backends), time.monotonic() - started
        own_after = own_cpu_by_process(server.pid)
        server_share = 100 * (after[0] - before[0]) / span
        db_share = 100 * (after[1] - before[1]) / span
        which = "embedded postmaster tree" if db.pid is not None else \
            f"{len(backends)} authoric backends"
        print(f"idle over {span:.0f} s, workers {args.workers or 'default'}:")
        print(f"  server process tree   {server_share:5.2f}% of one core")
        print(f"  PostgreSQL ({which}) {db_share:5.2f}% of one core")
        print(f"  total                 {server_share + db_share:5.2f}% of one core")
        print_by_process(own_before, own_after, span)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measured idle time (60)")
    ap.add_argument("--settle", type=float, default=5.0, help="wait before measuring (5)")
    ap.add_argument("--workers", type=int, default=0,
                    help="`authoric serve --workers N` (default: the server's own default)")
    measure(ap.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
