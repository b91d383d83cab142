"""How writers wake the sequencer, and what each way costs write throughput.

8 asyncpg writers in this process, each committing transactions of one row + its change-log
row (as the write service does), for `--seconds` per variant, on a fresh embedded PostgreSQL
(or DATABASE_URL). Two platform Sequencers run here too, on their own connections: one leads
(stamps), the other follows, as in a server with two workers.
- `poll-only`   : nobody wakes the leader; it finds rows by its safety poll (2 s).
- `nudge-leader`: each commit calls the leader's `nudge()` (a write in the leader's process).
- `via-follower`: each commit calls the follower's `nudge()`; the follower sends one
                  `NOTIFY authoric_pending` per round trip, outside the writers' transactions,
                  coalescing the nudges that arrive meanwhile (a write in another process).
- `notify-in-tx`: each writer transaction itself runs `pg_notify` (the classic way; takes
                  PostgreSQL's notify lock inside every writer's commit).
Printed: commits/s per variant (and the ratio to poll-only), NOTIFYs the follower sent, and
how long after the last commit every row was stamped.

    .venv/bin/python -m bench.notify_cost                 # 10 s per variant, 2 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

from authoric.changes.sequencer import PENDING_CHANNEL, Sequencer
from authoric.db import migrate
from authoric.settings import Settings
from bench.harness import database

VARIANTS = ["poll-only", "nudge-leader", "via-follower", "notify-in-tx"]
WRITERS = 8
ROW = "INSERT INTO bench_nc.items (uid, title) VALUES ($1, 'row')"
LOG = ("INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
       "VALUES ($1, 'items', 'insert', $2, $1)")


async def writer(dsn: str, until: float, variant: str, leader: Sequencer, follower: Sequencer,
                 app: uuid.UUID) -> int:
    conn = await asyncpg.connect(dsn)
    done = 0
    try:
        while time.monotonic() < until:
            async with conn.transaction():
                row = uuid.uuid4()
                await conn.execute(ROW, row)
                await conn.execute(LOG, app, row)
                if variant == "notify-in-tx":
                    await conn.execute("SELECT pg_notify($1, '')", PENDING_CHANNEL)
            done += 1
            if variant == "nudge-leader":
                leader.nudge()
            elif variant == "via-follower":
                follower.nudge()
    finally:
        await conn.close()
    return done


async def run(dsn: str, variant: str, seconds: float) -> tuple[float, int, float]:
    leader = Sequencer(Settings(), dsn)
    leader.start()
    while not leader.leader:
        await asyncio.sleep(0.05)
    follower = Sequencer(Settings(), dsn)
    follower.start()
    await asyncio.sleep(0.5)
    until = time.monotonic() + seconds
    counts = await asyncio.gather(*[writer(dsn, until, variant, leader, follower, uuid.uuid4())
                                    for _ in range(WRITERS)])
    ended = time.monotonic()
    conn = await asyncpg.connect(dsn)
    try:
        while await conn.fetchval("SELECT EXISTS (SELECT 1 FROM authoric.changes WHERE pos IS NULL)"):
            await asyncio.sleep(0.01)
        drained = time.monotonic() - ended
    finally:
        await conn.close()
    await follower.stop()
    await leader.stop()
    return sum(counts) / seconds, follower.notifies_sent, drained


async def prepare(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE SCHEMA IF NOT EXISTS bench_nc; DROP TABLE IF EXISTS bench_nc.items;"
                           "CREATE TABLE bench_nc.items (uid uuid PRIMARY KEY, title text)")
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authoric-notify-") as tmp, database(Path(tmp)) as db:
        migrate.upgrade(db.url)
        asyncio.run(prepare(db.url))
        results: dict[str, list[tuple[float, int, float]]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):  # interleaved, so drift in other load falls on all
            for variant in VARIANTS:
                results[variant].append(asyncio.run(run(db.url, variant, args.seconds)))
    base = statistics.mean(r[0] for r in results["poll-only"])
    print(f"{WRITERS} writers, {args.seconds:.0f} s x {args.rounds} rounds per variant")
    print("| variant | commits/s | vs poll-only | follower NOTIFYs/s | all stamped after last commit |")
    print("|---|--:|--:|--:|--:|")
    for variant, runs in results.items():
        tps = statistics.mean(r[0] for r in runs)
        notifies = statistics.mean(r[1] for r in runs) / args.seconds
        drained = statistics.mean(r[2] for r in runs)
        print(f"| {variant} | {tps:,.0f} | {tps / base:.2f} | {notifies:,.0f} | {drained * 1000:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
