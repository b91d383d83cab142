"""`python -m bench.cpu_split`: where a request's CPU goes, by process: the Authoric server's
process tree, and PostgreSQL's split by what each backend serves (the request path's
connections, the sequencer, the relays) and its background processes (WAL writer,
checkpointer, autovacuum).

Starts Authoric (`authoric serve`, its default workers) on a fresh embedded PostgreSQL, sets
it up as `bench.peers` does, drives one route with `wrk`, and reads every process's CPU time
from /proc before and after. Backends are named by their `application_name` (the sequencer's
and the relay's dedicated connections set theirs), or else their backend type. No profiler
runs, so the figures are the ones `bench.peers` would see for Authoric alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import asyncpg

from bench.harness import database, process_cpu_seconds, process_tree, running_server, tree_cpu_seconds
from bench.peers import wrk
from bench.peers.systems import ROUTES, authoric_target


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench.cpu_split", description=__doc__)
    ap.add_argument("--route", choices=ROUTES, default="create")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1, help="measured runs, one after another")
    return ap.parse_args(argv)


async def backend_names(url: str) -> dict[int, str]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch(
            "SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS name "
            "FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return {int(row["pid"]): str(row["name"]) for row in rows}


def postgres_cpu(postmaster: int) -> dict[int, float]:
    return {pid: process_cpu_seconds(pid, with_reaped_children=False)
            for pid in process_tree(postmaster)}


def split(before: dict[int, float], after: dict[int, float],
          names: dict[int, str]) -> dict[str, float]:
    """CPU seconds per backend name (PostgreSQL's request backends are all `authoric`)."""
    used: dict[str, float] = {}
    for pid, seconds in after.items():
        name = names.get(pid, "postmaster and others")
        used[name] = used.get(name, 0.0) + seconds - before.get(pid, 0.0)
    return used


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authoric-cpu-split-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        with database(work) as db, running_server(work, db) as server:
            if db.pid is None:
                raise SystemExit("bench.cpu_split needs the embedded PostgreSQL (no DATABASE_URL)")
            target = authoric_target(server, db)
            wrk.run(target, args.route, args.concurrency, 3, 1, work / "warm.lua")
            for _ in range(args.rounds):
                database_before, server_before = postgres_cpu(db.pid), tree_cpu_seconds(server.pid)
                run = wrk.run(target, args.route, args.concurrency, args.seconds, 1,
                              work / "load.lua")
                database_after, server_after = postgres_cpu(db.pid), tree_cpu_seconds(server.pid)
                used = split(database_before, database_after,
                             asyncio.run(backend_names(db.url)))
                per = 1000 / run.requests
                print(f"{args.route} c={args.concurrency}: {run.rps:.0f} req/s, p99 "
                      f"{run.p99_ms:.1f} ms; CPU ms per request: server "
                      f"{per * (server_after - server_before):.3f}, PostgreSQL "
                      f"{per * sum(used.values()):.3f}")
                for name, seconds in sorted(used.items(), key=lambda kv: -kv[1]):
                    print(f"    {per * seconds:.4f}  {name}")


if __name__ == "__main__":
    main()
