"""`python -m bench.capture_cost`: what SQL capture costs a writer, trigger against logical
decoding, on a fresh embedded PostgreSQL.

Single-row INSERT transactions from `--clients` connections for `--seconds` each, into a
table shaped like an app's (uid, org_uid, three columns, timestamps), in these variants:
- `plain`: no capture (the floor);
- `logged`: the platform's write: the row and its change-log row in one statement;
- `platform`: the same, with the capture triggers installed (the platform's connection says
  `authoric.platform_write = on`, so they return at once): what capture costs writes that
  come through the server;
- `trigger`: a plain SQL insert with the capture triggers (changes/capture.py): the
  change-log row is written in the writer's transaction;
- `trigger+notify`: the same, plus a NOTIFY in the transaction, as a trigger that woke the
  sequencer itself would send (the design this bench rejected);
- `logical`: no trigger; `wal_level = logical` (the server is restarted for it) with a
  publication and a pgoutput slot that a consumer drains every `--poll` seconds with
  `pg_logical_slot_get_binary_changes`, as a decoder would. The decoded changes would still
  have to be written into the change log (a second write per change) to share its positions;
  that write is not counted here, so this variant is a lower bound on decoding's cost.

Printed per variant: writes/s, PostgreSQL CPU per write (its whole process tree: backends,
WAL writer, decoding), and the writer's latency p50/p99. The machine may be shared: CPU per
write is the figure that travels.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from bench.harness import database, tree_cpu_seconds

APP = uuid.UUID("01900000-0000-7000-8000-000000000001")
SCHEMA = "app_" + APP.hex
TABLE = "events"
ORGS = [uuid.uuid4() for _ in range(8)]


async def prepare(url: str) -> None:
    from authoric.db import migrate

    await asyncio.to_thread(migrate.upgrade, url)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
        await conn.execute(
            f'CREATE TABLE "{SCHEMA}"."{TABLE}" (uid uuid PRIMARY KEY DEFAULT authoric.uuid_v7(), '
            "org_uid uuid NOT NULL, title text, status text, qty bigint, "
            "created_at timestamptz NOT NULL DEFAULT now(), "
            "updated_at timestamptz NOT NULL DEFAULT now())")
    finally:
        await conn.close()


async def set_triggers(url: str, on: bool) -> None:
    from authoric.changes.capture import capture_ddl

    conn = await asyncpg.connect(url)
    try:
        for statement in capture_ddl(APP, TABLE, False, on):
            await conn.execute(statement.text)
    finally:
        await conn.close()


async def run_writers(url: str, variant: str, clients: int, seconds: float,
                      pid: int) -> dict[str, Any]:
    platform = variant in ("platform", "logged")
    settings = {"authoric.platform_write": "on"} if platform else {}
    conns = [await asyncpg.connect(url, server_settings=settings) for _ in range(clients)]
    insert = (f'INSERT INTO "{SCHEMA}"."{TABLE}" (org_uid, title, status, qty) '
              "VALUES ($1, 'row', 'open', 1) RETURNING uid")
    logged = ("WITH w AS (" + insert.replace("RETURNING uid", "RETURNING uid, org_uid") + ") "
              "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
              f"SELECT '{APP}', '{TABLE}', 'insert', uid, org_uid FROM w")
    if variant == "trigger+notify":  # as if the trigger sent a NOTIFY to wake the sequencer
        insert = f"WITH w AS ({insert}) SELECT pg_notify('authoric_pending', '') FROM w"
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    cpu0 = tree_cpu_seconds(pid)
    t0 = time.perf_counter()

    async def one(conn: asyncpg.Connection, i: int) -> int:
        n = 0
        while time.perf_counter() < stop:
            s = time.perf_counter()
            await conn.execute(logged if platform else insert, ORGS[(i + n) % len(ORGS)])
            latencies.append(time.perf_counter() - s)
            n += 1
        return n

    counts = await asyncio.gather(*(one(c, i) for i, c in enumerate(conns)))
    wall = time.perf_counter() - t0
    cpu = tree_cpu_seconds(pid) - cpu0
    for c in conns:
        await c.close()
    writes = sum(counts)
    latencies.sort()
    return {"writes": writes, "wall": wall, "cpu": cpu,
            "p50": statistics.median(latencies) * 1000,
            "p99": latencies[int(0.99 * (len(latencies) - 1))] * 1000}


async def drain(url: str, poll: float, stopping: asyncio.Event, seen: list[int]) -> None:
    """A decoder's consumer: drain the slot every `poll` seconds."""
    conn = await asyncpg.connect(url)
    try:
        while not stopping.is_set():
            rows = await conn.fetch(
                "SELECT data FROM pg_logical_slot_get_binary_changes('capture', NULL, NULL, "
                "'proto_version', '1', 'publication_names', 'capture')")
            seen[0] += sum(1 for r in rows if r["data"][:1] == b"I")
            await asyncio.sleep(poll)
    finally:
        await conn.close()


def restart_with_logical(db: Any) -> None:
    from pgserver._commands import pg_ctl

    pg_ctl(["-w", "restart"], pgdata=db.handle.pgdata, user=db.handle.system_user)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="authoric-capture-") as tmp, \
            database(Path(tmp)) as db:
        assert db.pid is not None and db.handle is not None, "needs the embedded PostgreSQL"
        await prepare(db.url)
        results: dict[str, dict[str, Any]] = {}
        for variant in ("plain", "logged", "platform", "trigger", "trigger+notify"):
            await set_triggers(db.url, variant in ("platform", "trigger", "trigger+notify"))
            results[variant] = await run_writers(db.url, variant, args.clients, args.seconds,
                                                 db.pid)
        await set_triggers(db.url, False)
        conn = await asyncpg.connect(db.url)
        await conn.execute("ALTER SYSTEM SET wal_level = logical")
        await conn.close()
        await asyncio.to_thread(restart_with_logical, db)
        pid = int((Path(db.handle.pgdata) / "postmaster.pid").read_text().split()[0])
        conn = await asyncpg.connect(db.url)
        await conn.execute(f'CREATE PUBLICATION capture FOR TABLE "{SCHEMA}"."{TABLE}"')
        await conn.execute("SELECT pg_create_logical_replication_slot('capture', 'pgoutput')")
        await conn.close()
        stopping, seen = asyncio.Event(), [0]
        consumer = asyncio.create_task(drain(db.url, args.poll, stopping, seen))
        results["logical"] = await run_writers(db.url, "logical", args.clients, args.seconds, pid)
        stopping.set()
        await consumer
        results["logical"]["decoded"] = seen[0]
        print(f"\n{args.clients} clients, {args.seconds:g} s per variant, single-row INSERT "
              "transactions; PostgreSQL CPU = its whole process tree\n")
        print("| variant | writes/s | PostgreSQL CPU µs / write | writer p50 / p99 ms | note |")
        print("|---|--:|--:|--:|---|")
        for name, r in results.items():
            note = f"{r['decoded']} inserts decoded" if "decoded" in r else ""
            print(f"| {name} | {r['writes'] / r['wall']:.0f} | {r['cpu'] / r['writes'] * 1e6:.0f} "
                  f"| {r['p50']:.2f} / {r['p99']:.2f} | {note} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.capture_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--poll", type=float, default=0.01, help="the decoder's drain interval (s)")
    asyncio.run(main_async(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
