"""Positions in commit order.

Writers insert change-log rows with `pos` NULL in their own transactions. One sequencer at a
time (the holder of a session advisory lock, on any server process) stamps
`pos = nextval(...)` on committed, unstamped rows, batch after batch, each batch its own
transaction. A row becomes visible to the sequencer only once its writer has committed, and
batches are stamped one after another, so a higher position is always stamped (and visible)
after a lower one: a reader that has seen position P has already seen every position below P
that will ever exist. Readers only ever read stamped rows.

The leader NOTIFYs once per stamped batch (never inside writers' transactions), which wakes
the relays of every process. The leader also runs retention.

How the leader learns that there is something to stamp, without busy-polling and without a
NOTIFY in every write transaction (which would take PostgreSQL's database-wide notify lock
inside each writer's commit):
- a commit in the leader's own process calls `nudge()`: an in-process event, free;
- a commit in any other process calls `nudge()` there, and that process's sequencer (a
  follower) sends one `NOTIFY authoric_pending` on its own dedicated connection, after the
  writer's commit and outside its transaction. Nudges that arrive while that NOTIFY is in
  flight, or in the gathering time after it, are coalesced into the next one: the leader
  gathers that long once woken anyway, so a busy follower sends at most one NOTIFY per
  gathering, however many writes it commits;
- SQL writes to captured tables (changes/capture.py) come from processes that are not ours:
  while any table is captured, the leader looks for unstamped rows every `CAPTURE_POLL`
  seconds, or the operator's `feed_gather_ms` (below): one index-only `EXISTS`, so they
  wait at most that long. A NOTIFY from the capture trigger would wake it sooner, but a
  NOTIFY at commit takes a database-wide lock that serialises every notifying commit
  (bench.capture_cost: writes/s fell by two thirds);
- writes by anything else that does not nudge (a psql session, an old binary) are found by
  the safety poll, every `SAFETY_POLL` seconds.
The event is cleared before each stamping pass, so a nudge that lands during a pass is not
lost: it causes one more pass. Once woken, the leader gathers for `GATHER` seconds first, so
a burst of commits is stamped (and fanned out) in one pass.

An operator who would rather spend latency than feed CPU sets `AUTHORIC_FEED_GATHER_MS`: the
leader then gathers that long once woken, and looks for captured SQL writes that often. Each
stamping pass costs every process one wake-up and one fan-out pass however many changes it
holds, so fewer, fuller passes cost less per change; every change waits up to that long
more (docs/benchmarks-journal.md, section 15, has the measured trade).

A frozen leader (a proxy or a NAT that stops forwarding its connection, TCP left open) must
not stop the feed: nothing is stamped, and so nothing delivered by any process, while it
leads. Two bounds of the dedicated workers (db/dedicated.py) end it:
- every statement here, the leader's (PENDING, STAMP, RETAIN, CAPTURING,
  LISTEN) and the follower's (`pg_try_advisory_lock`, its NOTIFY), runs under the stall
  bound: unanswered within 10 s, this process drops the connection and reconnects as a
  follower;
- the leader's backend, which never hears of that, ends itself after `IDLE_LIMIT` (20 s) of
  silence from its client (`idle_session_timeout`; `idle_in_transaction_session_timeout`
  too, though stamping is one statement in its own transaction, which PostgreSQL finishes
  without its client). Its advisory lock goes with it, a follower of any process takes the
  lead at its next try (every `FOLLOWER_RETRY`), and stamps what waited.
The leader's longest healthy silence is its safety poll (`SAFETY_POLL`, 2 s), far below the
idle limit. Retention deletes in chunks of `RETAIN_BATCH` rows, so that none of its
statements runs anywhere near the stall bound, however much has expired at once (a first
run after retention was shortened): a statement cut off by the bound would be retried in a
loop while its backend, still running it, kept the lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext

import asyncpg

from authoric.db.dedicated import IDLE_LIMIT, STALL, DedicatedWorker, Wakeup
from authoric.settings import Settings

LOCK_KEY = 0x61757468  # "auth": the sequencer's advisory lock
CHANNEL = "authoric_changes"  # leader -> relays: positions were stamped
PENDING_CHANNEL = "authoric_pending"  # followers -> leader: unstamped rows were committed
SAFETY_POLL = 2.0  # seconds between checks for unstamped rows nobody told us about
CAPTURE_POLL = 0.02  # the same while any table has captureSqlWrites
# Whether any table is captured; asked once per safety poll.
CAPTURING = ("SELECT EXISTS (SELECT 1 FROM pg_trigger "
             "WHERE tgfoid = to_regproc('authoric.capture_sql_writes'))")
FOLLOWER_RETRY = 1.0  # seconds between a follower's attempts to take over the lead
# The leader's heartbeat: it runs a statement at least this often, however idle. Its backend's
# `state_change` in pg_stat_activity then never lies further back than this while it is well.
HEARTBEAT = 1.0
# A leader whose backend has been idle (its client silent) for this long is frozen: a follower
# ends that backend (pg_terminate_backend), so the lock goes with it and the follower takes
# the lead at its next try. Three heartbeats: a leader's process that is merely slow for a
# moment keeps the lead.
LEADER_SILENCE = 3.0
# Ends the backend that holds the leader lock if its client has said nothing for $2 seconds.
# Only an idle backend qualifies: one running a statement (a long retention DELETE) is
# working, and its client is waiting for it. A session advisory lock on one bigint key is
# (classid, objid, objsubid) = (high 32 bits, low 32 bits, 1). Advisory locks belong to one
# database, and pg_locks shows the whole cluster's: without the database condition a follower
# would end the leader of another deployment that shares the cluster (another database).
UNSEAT = """
SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid
  AND a.pid <> pg_backend_pid()
  AND a.state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
  AND a.state_change < clock_timestamp() - make_interval(secs => $2)
"""
# Once woken, the leader waits this long before stamping, so that commits arriving together
# share one stamping transaction (and one relay NOTIFY and fan-out pass) instead of paying
# for one each: under write load, stamping per commit slowed writers down. The old 5 ms poll
# batched the same way, but also ran 200 times a second with nothing to do.
GATHER = 0.005
APP_NAME = "authoric-sequencer"  # how operators (and fault tests) find this connection
BATCH = 5000
PAYLOAD_LIMIT = 8000  # bytes: PostgreSQL refuses a NOTIFY payload this long or longer

# Positions are drawn in id order (nextval evaluated after the sort): an UPDATE ... FROM join
# would draw them in whatever order the join visits rows, reordering a batch's changes.
# One statement, so one round trip and its own transaction: it stamps the batch and NOTIFYs
# the relays (delivered at its commit). The NOTIFY carries the entries themselves, as the
# relay's read would give them (reader.LIVE_COLUMNS: the app's version from the same
# snapshot), with `after`, the head before them, so a relay that has read up to exactly there
# fans them out without reading the log (changes/relay.py). A batch too long for a payload
# (PostgreSQL takes under 8,000 bytes) announces its head alone, and relays read it.
# `after` is read in the statement's snapshot, which the UPDATE's own rows are not part of.
STAMP = f"""
WITH batch AS (
    SELECT id FROM authoric.changes WHERE pos IS NULL ORDER BY id LIMIT {BATCH} FOR UPDATE
), numbered AS (
    SELECT id, nextval('authoric.change_pos') AS pos FROM batch ORDER BY id
), stamped AS (
    UPDATE authoric.changes c SET pos = numbered.pos
    FROM numbered WHERE c.id = numbered.id
    RETURNING c.pos, c.app_uid, c.table_name, c.op, c.row_uid, c.org_uid, c.old_row, c.created_at
), summary AS (
    SELECT count(*) AS stamped, max(s.pos) AS head, json_agg(json_build_array(
        s.pos, s.app_uid, s.table_name, s.op, s.row_uid, s.org_uid, s.old_row,
        extract(epoch FROM s.created_at)::float8,
        (SELECT a.version FROM authoric.apps a WHERE a.uid = s.app_uid)) ORDER BY s.pos)::text
        AS entries
    FROM stamped s
), announced AS (
    SELECT stamped, head, '{{"after":' || GREATEST(
        (SELECT max(pos) FROM authoric.changes), (SELECT pos FROM authoric.log_horizon WHERE id = 1), 0)
        || ',"head":' || head || ',"entries":' || entries || '}}' AS carried
    FROM summary
)
SELECT stamped, CASE WHEN stamped > 0 THEN pg_notify('{CHANNEL}',
    CASE WHEN octet_length(carried) < {PAYLOAD_LIMIT} THEN carried ELSE head::text END) END
FROM announced
"""
PENDING = "SELECT EXISTS (SELECT 1 FROM authoric.changes WHERE pos IS NULL)"
RETAIN_BATCH = 10_000  # expired rows deleted per statement; a full chunk: another soon
RETAIN = f"""
WITH gone AS (
    DELETE FROM authoric.changes WHERE pos IN (
        SELECT pos FROM authoric.changes
        WHERE pos IS NOT NULL AND created_at < now() - make_interval(secs => $1)
        ORDER BY pos LIMIT {RETAIN_BATCH})
    RETURNING pos
), horizon AS (
    UPDATE authoric.log_horizon SET pos = GREATEST(pos, (SELECT max(pos) FROM gone))
    WHERE id = 1 AND EXISTS (SELECT 1 FROM gone)
)
SELECT count(*) FROM gone
"""
RETENTION_EVERY = 60.0  # seconds between retention passes (once nothing is left to delete)


class Sequencer(DedicatedWorker):
    """Runs in every process; stamps only while it holds the leader lock, else forwards
    this process's nudges to the leader."""

    app_name = APP_NAME

    def __init__(self, settings: Settings, dsn: str, safety_poll: float = SAFETY_POLL, *,
                 stall: float = STALL, idle_limit: float | None = IDLE_LIMIT,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(dsn, stall=stall, idle_limit=idle_limit)
        self.settings, self.safety_poll = settings, safety_poll
        chosen = settings.feed_gather_ms
        # How long a woken leader gathers, and how often it looks for captured SQL writes.
        self.gather = GATHER if chosen is None else chosen / 1000
        self.capture_poll = CAPTURE_POLL if chosen is None else chosen / 1000
        self._sleep = sleep  # the gathering's wait (tests hold it to commit during it)
        self.wake = Wakeup()
        self.leader = False
        self.capturing = False  # some table has captureSqlWrites: poll every `capture_poll`
        self.connected = False  # for readiness: the dedicated connection is up
        self.notifies_sent = 0  # as a follower (benchmarks: how well nudges coalesce)
        self.unseated = 0  # frozen leaders' backends this one ended
        self.leader_silence = LEADER_SILENCE

    def server_settings(self) -> dict[str, str]:
        # Every statement here meets the log by key, a few rows at a time. The planner's guess
        # of how many rows are unstamped comes from the last ANALYZE, and one that caught a
        # burst had STAMP join by a merge or a hash over the whole log on every pass: 204 ms
        # at 500,000 entries against 0.3 ms by nested loop, and growing with the log
        # (tests/integration/test_sequencer_plan.py). Only nested loops are right here,
        # whatever the statistics say.
        return super().server_settings() | {"enable_hashjoin": "off", "enable_mergejoin": "off"}

    def nudge(self) -> None:
        """Called after a local commit that may have written change-log rows."""
        self.wake.set()

    def closed(self) -> None:
        self.leader = self.connected = False

    async def session(self, conn: asyncpg.Connection) -> None:
        self.connected = True
        await self._follow(conn)
        await self._lead(conn)

    async def _woken(self, timeout: float) -> bool:
        """Wait for a nudge (True) or `timeout` seconds (False)."""
        return await self.wake.wait(timeout)

    async def _follow(self, conn: asyncpg.Connection) -> None:
        """Until this process takes the lead: pass local commits on to whoever leads."""
        next_try = 0.0
        while True:
            if time.monotonic() >= next_try:
                async with self.answered(conn):
                    led = await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY)
                if led:
                    return
                async with self.answered(conn):
                    ended = await conn.fetchval(UNSEAT, LOCK_KEY, self.leader_silence)
                self.unseated += int(ended or 0)
                # A leader just ended lets go of the lock as its backend exits: try again soon.
                next_try = time.monotonic() + (0.05 if ended else FOLLOWER_RETRY)
            if await self._woken(max(0.0, next_try - time.monotonic())):
                self.wake.clear()  # before the NOTIFY: later nudges make the next one
                async with self.answered(conn):
                    await conn.execute("SELECT pg_notify($1, '')", PENDING_CHANNEL)
                self.notifies_sent += 1
                # The leader it woke gathers before stamping: a NOTIFY sooner would wake it
                # for nothing, and each takes the database's notify lock. (Under create
                # load: 2,700 NOTIFYs in 13 s before, 1,100 with this.)
                await self._sleep(self.gather)

    async def _lead(self, conn: asyncpg.Connection) -> None:
        self.leader = True
        # Only the leader listens: a follower hearing followers would echo them forever.
        async with self.answered(conn):
            await conn.add_listener(PENDING_CHANNEL, lambda *_: self.wake.set())
        self.wake.set()  # a first pass right away: rows may have waited for a leader
        next_retention = next_capture_check = 0.0
        while True:
            self.wake.clear()
            stamped = await self.stamp(conn, lambda: self.answered(conn))
            behind = stamped >= BATCH  # more to do at once, without waiting to be woken
            now = time.monotonic()
            if now >= next_retention:
                async with self.answered(conn):
                    retained = await conn.fetchval(RETAIN, float(self.settings.change_retention))
                behind = behind or retained >= RETAIN_BATCH
                next_retention = now + (0 if retained >= RETAIN_BATCH else RETENTION_EVERY)
            if now >= next_capture_check:
                async with self.answered(conn):
                    self.capturing = bool(await conn.fetchval(CAPTURING))
                next_capture_check = now + self.safety_poll
            if behind:
                continue
            idle = self.capture_poll if self.capturing else min(self.safety_poll, HEARTBEAT)
            if await self._woken(idle):
                await self._sleep(self.gather)

    @staticmethod
    async def stamp(conn: asyncpg.Connection,
                    answered: Callable[[], AbstractAsyncContextManager[None]] = nullcontext,
                    ) -> int:
        """Stamp one batch; NOTIFY the relays once if anything was stamped. The leader passes
        its stall bound (`answered`), for PENDING and for the stamping statement; tests and
        benchmarks stamp without one."""
        # One cheap round trip when there is nothing to do (partial index); the stamping
        # statement only when needed.
        async with answered():
            if not await conn.fetchval(PENDING):
                return 0
        async with answered():
            return int(await conn.fetchval(STAMP))
