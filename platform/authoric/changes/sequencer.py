"""Positions in commit order.

Writers insert change-log rows with `pos` NULL in their own transactions. One sequencer at a
time (the holder of a session advisory lock, on any server process) stamps
`pos = nextval(...)` on committed, unstamped rows, batch after batch, each batch its own
transaction. A row becomes visible to the sequencer only once its writer has committed, and
batches are stamped one after another, so a higher position is always stamped (and visible)
after a lower one: a reader that has seen position P has already seen every position below P
that will ever exist. Readers only ever read stamped rows.

The leader NOTIFYs once per stamped batch (never inside writers' transactions), which wakes
the relays of every process. Waiting is a short poll, cut short when this process's own
writers commit. The leader also runs retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import asyncpg

from authoric.db.dedicated import DedicatedWorker
from authoric.settings import Settings

LOCK_KEY = 0x61757468  # "auth": the sequencer's advisory lock
CHANNEL = "authoric_changes"
APP_NAME = "authoric-sequencer"  # how operators (and fault tests) find this connection
BATCH = 5000

# Positions are drawn in id order (nextval evaluated after the sort): an UPDATE ... FROM join
# would draw them in whatever order the join visits rows, reordering a batch's changes.
STAMP = f"""
WITH batch AS (
    SELECT id FROM authoric.changes WHERE pos IS NULL ORDER BY id LIMIT {BATCH} FOR UPDATE
), numbered AS (
    SELECT id, nextval('authoric.change_pos') AS pos FROM batch ORDER BY id
)
UPDATE authoric.changes c SET pos = numbered.pos
FROM numbered WHERE c.id = numbered.id
RETURNING c.pos
"""
PENDING = "SELECT EXISTS (SELECT 1 FROM authoric.changes WHERE pos IS NULL)"
RETAIN = """
WITH gone AS (
    DELETE FROM authoric.changes
    WHERE pos IS NOT NULL AND created_at < now() - make_interval(secs => $1)
    RETURNING pos
)
UPDATE authoric.log_horizon SET pos = GREATEST(pos, (SELECT max(pos) FROM gone))
WHERE id = 1 AND EXISTS (SELECT 1 FROM gone)
"""


class Sequencer(DedicatedWorker):
    """Runs in every process; stamps only while it holds the leader lock."""

    app_name = APP_NAME

    def __init__(self, settings: Settings, dsn: str, poll_interval: float = 0.005) -> None:
        super().__init__(dsn)
        self.settings, self.poll_interval = settings, poll_interval
        self.wake = asyncio.Event()
        self.leader = False

    def nudge(self) -> None:
        """Called after a local commit that may have written change-log rows."""
        self.wake.set()

    def closed(self) -> None:
        self.leader = False

    async def session(self, conn: asyncpg.Connection) -> None:
        await self._lead(conn)

    async def _lead(self, conn: asyncpg.Connection) -> None:
        while not await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY):
            await asyncio.sleep(1.0)  # another process leads; take over if it dies
        self.leader = True
        next_retention = 0.0
        while True:
            stamped = await self.stamp(conn)
            if time.monotonic() >= next_retention:
                await conn.execute(RETAIN, float(self.settings.change_retention))
                next_retention = time.monotonic() + 60
            if stamped >= BATCH:
                continue
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.poll_interval)

    @staticmethod
    async def stamp(conn: asyncpg.Connection) -> int:
        """Stamp one batch; NOTIFY the relays once if anything was stamped."""
        # One cheap round trip while idle (partial index); the transaction only when needed.
        if not await conn.fetchval(PENDING):
            return 0
        async with conn.transaction():
            rows = await conn.fetch(STAMP)
            if rows:
                head = max(r["pos"] for r in rows)
                await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, str(head))
        return len(rows)
