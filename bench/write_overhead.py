"""What the change log and its commit-order technique cost writers, measured in one run.

Part 1, pgbench (the PostgreSQL tool, shipped with the embedded server), 8 clients, prepared
statements, one transaction per write, on a copy of a user table's shape:
- `row`             : INSERT the row (the baseline: the same write without a change log);
- `row+log`         : INSERT the row + INSERT its change-log row (`pos` NULL), no sequencer;
- `row+log+seq`     : the same, with the platform's Sequencer (authoric.changes.sequencer)
                      running in this process, stamping positions after commit (it polls every
                      5 ms: nobody nudges it, as for writes made by another server process);
- `row+log+lock`    : the serialized alternative: pg_advisory_xact_lock, then the log row with
                      `pos = nextval(...)` inside the writer's transaction;
- `row+log+notify`  : the log row + pg_notify in the writer's transaction.
Each variant runs `--rounds` times, in alternating order, after a CHECKPOINT; figures are the
mean tps, and the ratio to `row`.

Part 2, REST creates (`POST /{app}/autocrud/{table}`, 8 keep-alive clients) against the same
database, one server process at a time, identical except for:
- `no-log`          : the write service's record_change replaced by a no-op, sequencer off;
- `log-no-seq`      : the change log written, sequencer off (rows stay unstamped);
- `log+seq`         : the stock server;
- `log+seq-no-preping`: the stock server with the pool's pre-ping off (a what-if, to size
                      the round trips SQLAlchemy's `pool_pre_ping=True` adds to every request).
The variants are started through this module (`--serve-as VARIANT serve ...`), which patches
the platform in-process and then runs `authoric serve` unchanged.

    .venv/bin/python -m bench.write_overhead                  # ~4 minutes
    .venv/bin/python -m bench.write_overhead --seconds 5 --rounds 1 --skip-rest
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from authoric.db.embedded import pgserver_module

PG_VARIANTS = ["row", "row+log", "row+log+seq", "row+log+lock", "row+log+notify"]
REST_VARIANTS = ["no-log", "log-no-seq", "log+seq", "log+seq-no-preping"]
APP_UID = uuid.UUID("00000000-0000-7000-8000-0000000000a1")
ORG_UID = uuid.UUID("00000000-0000-7000-8000-0000000000b1")

DDL = """
CREATE SCHEMA IF NOT EXISTS bench_wo;
DROP TABLE IF EXISTS bench_wo.items;
CREATE TABLE bench_wo.items (
    uid uuid PRIMARY KEY, org_uid uuid NOT NULL, title text, status text, secret text,
    stamp text, qty integer, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), UNIQUE (org_uid, uid));
"""
ROW = (f"INSERT INTO bench_wo.items (uid, org_uid, title, status, secret, qty) VALUES "
       f"(gen_random_uuid(), '{ORG_UID}', 'row', 'open', 's', 1);")
LOG = (f"INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) VALUES "
       f"('{APP_UID}', 'items', 'insert', gen_random_uuid(), '{ORG_UID}');")
LOG_POS = (f"INSERT INTO authoric.changes (pos, app_uid, table_name, op, row_uid, org_uid) VALUES "
           f"(nextval('authoric.change_pos'), '{APP_UID}', 'items', 'insert', gen_random_uuid(), "
           f"'{ORG_UID}');")
SCRIPTS = {
    "row": ["BEGIN;", ROW, "COMMIT;"],
    "row+log": ["BEGIN;", ROW, LOG, "COMMIT;"],
    "row+log+seq": ["BEGIN;", ROW, LOG, "COMMIT;"],
    "row+log+lock": ["BEGIN;", ROW, "SELECT pg_advisory_xact_lock(4242);", LOG_POS, "COMMIT;"],
    "row+log+notify": ["BEGIN;", ROW, LOG, "SELECT pg_notify('bench_wo', '1');", "COMMIT;"],
}


# --- the patched server (run as `python -m bench.write_overhead --serve-as V serve ...`) ----

def serve_as(variant: str, argv: list[str]) -> int:
    if variant in ("no-log", "log-no-seq"):
        from authoric.changes import sequencer

        sequencer.Sequencer.start = lambda self: None  # type: ignore[method-assign]
    if variant == "no-log":
        from authoric.db import changelog as log
        from authoric.records import writes

        async def no_change(*_: Any, **__: Any) -> None:
            return None

        log.record_change = no_change  # type: ignore[assignment]
        writes.record_change = no_change  # type: ignore[assignment]
    if variant.endswith("no-preping"):
        from sqlalchemy.ext import asyncio as sa_asyncio

        from authoric.db import engine

        def without_pre_ping(*args: Any, **kw: Any) -> Any:
            kw["pool_pre_ping"] = False
            return sa_asyncio.create_async_engine(*args, **kw)

        engine.create_async_engine = without_pre_ping  # type: ignore[assignment]
    from authoric import cli

    return cli.main(argv)


# --- part 1: pgbench ------------------------------------------------------------------------

def pgbench_bin() -> str:
    pgserver = pgserver_module()

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin" / "pgbench")


async def prepare(dsn: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(DDL)
    finally:
        await conn.close()


async def sql(dsn: str, statement: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(dsn, server_settings={"application_name": "bench"})
    try:
        return await conn.fetchval(statement)
    finally:
        await conn.close()


async def run_pgbench(variant: str, args: argparse.Namespace, dsn: str, work: Path,
                      db_pid: int | None) -> dict[str, float]:
    from authoric.changes.sequencer import Sequencer
    from authoric.settings import Settings
    from bench.procstat import tree_cpu

    script = work / f"{variant.replace('+', '_')}.sql"
    script.write_text("\n".join(SCRIPTS[variant]) + "\n")
    await sql(dsn, "CHECKPOINT")
    seq = None
    if variant == "row+log+seq":
        seq = Sequencer(Settings(), dsn, safety_poll=0.005)
        seq.start()
        for _ in range(100):
            if seq.leader:
                break
            await asyncio.sleep(0.05)
    own0, kids0 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    db0, t0 = tree_cpu(db_pid), time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        pgbench_bin(), "-n", "-M", "prepared", "-c", str(args.clients), "-j", "2",
        "-T", str(int(args.seconds)), "-f", str(script), dsn,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = (await proc.communicate())[0].decode()
    wall = time.perf_counter() - t0
    own1, kids1 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    db1 = tree_cpu(db_pid)
    lag = 0
    if seq is not None:
        await asyncio.sleep(0.2)
        lag = int(await sql(dsn, "SELECT count(*) FROM authoric.changes WHERE pos IS NULL"))
        await seq.stop()
    # leave no unstamped rows behind for the next variant's sequencer
    await sql(dsn, "DELETE FROM authoric.changes WHERE pos IS NULL")
    m = re.search(r"tps = ([\d.]+)", out)
    if not m:
        raise SystemExit(f"pgbench failed:\n{out}")
    lat = re.search(r"latency average = ([\d.]+) ms", out)
    return {"tps": float(m[1]), "latency": float(lat[1]) if lat else float("nan"),
            "pgbench_cpu": (kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) / wall,
            "sequencer_cpu": (own1.user + own1.system - own0.user - own0.system) / wall,
            "db_cpu": (db1 - db0) / wall, "unstamped_after": lag}


# --- part 2: REST ---------------------------------------------------------------------------

async def rest_creates(server: Any, app: str, token: str, args: argparse.Namespace,
                       db_pid: int | None) -> dict[str, float]:
    from bench.fanout_world import TABLE, row_body
    from bench.procstat import Cpu
    from bench.sse_clients import RawHttp

    start = time.perf_counter()
    measure_from, end = start + args.warmup, start + args.warmup + args.seconds
    done, errors = 0, 0
    lat: list[float] = []
    box: dict[str, Any] = {}

    async def worker(k: int) -> None:
        nonlocal done, errors
        conn = RawHttp(server.host, server.port)
        n = k * 10**7
        try:
            while (t0 := time.perf_counter()) < end:
                n += 1
                status, _ = await conn.request("POST", f"/{app}/autocrud/{TABLE}", token,
                                               row_body(n, False, t0))
                t1 = time.perf_counter()
                if measure_from <= t1 <= end:
                    if status == 201:
                        done += 1
                        lat.append(t1 - t0)
                    else:
                        errors += 1
        finally:
            await conn.close()

    async def cpu() -> None:
        await asyncio.sleep(args.warmup)
        before = Cpu.take(server.pid, db_pid)
        await asyncio.sleep(args.seconds)
        box["cpu"] = Cpu.take(server.pid, db_pid).since(before)

    await asyncio.gather(cpu(), *[worker(k) for k in range(args.clients)])
    lat.sort()
    c = box["cpu"]
    rate = done / args.seconds
    return {"rate": rate, "errors": errors,
            "p50": lat[len(lat) // 2] * 1000 if lat else float("nan"),
            "server_cpu_ms": c["server"] / rate * 1000 if rate else float("nan"),
            "db_cpu_ms": c["database"] / rate * 1000 if rate else float("nan"),
            "server": c["server"], "database": c["database"], "client": c["client"],
            "other": c["other"]}


def rest_part(args: argparse.Namespace, work: Path, db: Any) -> dict[str, list[dict[str, float]]]:
    import secrets

    from bench.fanout_world import build_world
    from bench.harness import running_server

    jwt_secret = secrets.token_urlsafe(32)
    env = {"AUTHORIC_JWT_SECRET": jwt_secret}
    results: dict[str, list[dict[str, float]]] = {v: [] for v in args.rest_variants}
    world = None
    order = list(args.rest_variants)
    for r in range(args.rounds):
        for variant in order if r % 2 == 0 else order[::-1]:
            argv = [sys.executable, "-m", "bench.write_overhead", "--serve-as", variant, "serve"]
            with running_server(work, db, env, argv, name=f"rest-{r}") as server:
                if world is None:
                    world = build_world(server, 1, 1, roles=["reader"])
                res = asyncio.run(rest_creates(server, world.app, world.writers[0], args, db.pid))
            results[variant].append(res)
            print(f"  REST  {variant:<24} round {r + 1}: {res['rate']:7.0f} creates/s  "
                  f"p50 {res['p50']:5.1f} ms  server {res['server_cpu_ms']:.2f} ms CPU/write, "
                  f"postgres {res['db_cpu_ms']:.2f} ms CPU/write  (cores: server "
                  f"{res['server']:.2f} pg {res['database']:.2f} client {res['client']:.2f} "
                  f"other {res['other']:.2f}){'  errors ' + str(res['errors']) if res['errors'] else ''}",
                  flush=True)
    return results


# --- the run --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve-as"]:
        return serve_as(argv[1], argv[2:])
    ap = argparse.ArgumentParser(prog="bench.write_overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=6.0, help="measured seconds per cell (6)")
    ap.add_argument("--warmup", type=float, default=2.0, help="REST warm-up seconds (2)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="repetitions of each variant, alternating the order (3)")
    ap.add_argument("--skip-pgbench", action="store_true")
    ap.add_argument("--skip-rest", action="store_true")
    ap.add_argument("--rest-variants", default=",".join(REST_VARIANTS),
                    help=f"subset of: {', '.join(REST_VARIANTS)}")
    args = ap.parse_args(argv)
    args.rest_variants = [v.strip() for v in args.rest_variants.split(",") if v.strip()]
    from bench.harness import banner, database, install_uvloop

    install_uvloop()
    banner("write overhead")
    pg_results: dict[str, list[dict[str, float]]] = {v: [] for v in PG_VARIANTS}
    rest_results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="authoric-bench-") as tmp:
        work = Path(tmp)
        with database(work) as db:
            env = {**os.environ, "DATABASE_URL": db.url}
            subprocess.run([sys.executable, "-m", "authoric.cli", "migrate"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            if not args.skip_pgbench:
                asyncio.run(prepare(db.url))
                for r in range(args.rounds):
                    for variant in PG_VARIANTS if r % 2 == 0 else PG_VARIANTS[::-1]:
                        res = asyncio.run(run_pgbench(variant, args, db.url, work, db.pid))
                        pg_results[variant].append(res)
                        print(f"  pgbench {variant:<15} round {r + 1}: {res['tps']:8.0f} tps  "
                              f"latency {res['latency']:.2f} ms  (cores: postgres "
                              f"{res['db_cpu']:.2f}, pgbench {res['pgbench_cpu']:.2f}, "
                              f"sequencer {res['sequencer_cpu']:.2f})"
                              + (f"  unstamped 0.2 s after: {res['unstamped_after']}"
                                 if variant == "row+log+seq" else ""), flush=True)
            if not args.skip_rest:
                rest_results = rest_part(args, work, db)
    med = statistics.median
    if pg_results["row"]:
        base = med(r["tps"] for r in pg_results["row"])
        log = med(r["tps"] for r in pg_results["row+log"])
        print(f"\npgbench, {args.clients} clients, {args.seconds:g} s x {args.rounds} rounds "
              "(median; CPU per write = cores / tps):\n")
        print("| variant | tps | runs | vs row | vs row+log | postgres µs CPU/write "
              "| sequencer µs CPU/write |")
        print("|---|--:|---|--:|--:|--:|--:|")
        for v in PG_VARIANTS:
            rs = pg_results[v]
            tps = med(r["tps"] for r in rs)
            runs = " / ".join(f"{r['tps']:.0f}" for r in rs)
            print(f"| {v} | {tps:.0f} | {runs} | {tps / base:.2f}x | {tps / log:.2f}x | "
                  f"{med(r['db_cpu'] / r['tps'] * 1e6 for r in rs):.0f} | "
                  f"{med(r['sequencer_cpu'] / r['tps'] * 1e6 for r in rs):.0f} |")
    if rest_results:
        first = args.rest_variants[0]
        base = med(r["rate"] for r in rest_results[first])
        base_cpu = med(r["server_cpu_ms"] + r["db_cpu_ms"] for r in rest_results[first])
        print(f"\nREST creates, {args.clients} clients, {args.seconds:g} s x {args.rounds} rounds "
              "(median):\n")
        print(f"| server | creates/s | runs | vs {first} | p50 ms | server CPU ms/write "
              f"| postgres CPU ms/write | CPU/write vs {first} (inverse) | other load (cores) |")
        print("|---|--:|---|--:|--:|--:|--:|--:|--:|")
        for v in args.rest_variants:
            rs = rest_results[v]
            rate = med(r["rate"] for r in rs)
            runs = " / ".join(f"{r['rate']:.0f}" for r in rs)
            cpu = med(r["server_cpu_ms"] + r["db_cpu_ms"] for r in rs)
            print(f"| {v} | {rate:.0f} | {runs} | {rate / base:.2f}x | {med(r['p50'] for r in rs):.1f} | "
                  f"{med(r['server_cpu_ms'] for r in rs):.2f} | {med(r['db_cpu_ms'] for r in rs):.2f} | "
                  f"{base_cpu / cpu:.2f}x | {med(r['other'] for r in rs):.2f} |")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
