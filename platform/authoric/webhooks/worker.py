"""The delivery worker: each process started by the app delivers the webhooks it leases.

Leases: every `RENEW` seconds a process claims, in one statement, the active webhooks whose
lease is its own, free or expired (`LEASE` seconds after its holder last renewed it), so
across replicas each webhook is delivered by one process at a time and a dead process's
webhooks are taken over within `LEASE` + `RENEW` seconds. Each taking of a lease gets a token
of its own (`lease_owner`), kept while it is renewed. Every cursor move is fenced by that
token and by the cursor the pass started from (`WHERE lease_owner = mine AND cursor = mine`):
a process that lost its lease while a delivery was in flight, or whose webhook was replayed
(a replay frees the lease) or delivered by another holder meanwhile, cannot move the cursor,
even if it has claimed the lease back since (under a new token; the old task is cancelled),
and the next pass sends from the stored cursor, the same position again with the same
`webhook-id`.

Per webhook, one delivery in flight, in position order: read the webhook's row (the passes
that start together read theirs in one statement), take the changes after the cursor from
the relay's recent batches (`webhooks.handed`) or else from the change log through the feed's
`Source` (`entries`), judge the batch (`webhooks.events`), POST each delivery, and record what
was sent: the deliveries and the cursor's move to the last of them
are one statement (`RECORDED`), so the cursor still advances in the same transaction as its
delivery records. The records are written per run of successes, not per delivery: when the
batch ends, when a delivery fails, and at the latest `RECORD_EVERY` seconds after the oldest
success not yet recorded. A process that dies in between has sent deliveries it did not
record; its successor sends them again with the same `webhook-id` (at least once, as any
delivery cut off before its record). A failure is recorded, and the same position is tried
again after a full-jitter backoff (`webhooks.backoff`); nothing later is sent meanwhile.
After the app's `webhookRetryHours` of failing the webhook turns `failing` and waits for the
operator.

The cursor never passes entries retention removed without saying so: a cursor below the log's
horizon (a webhook that kept failing, or waited paused, longer than the log keeps its entries)
sends a `resync` `backfill_expired` first, as a resumed webhook does.

The database work runs on a small asyncpg pool of the worker's own (`WORKER_CONNECTIONS`,
autocommit: each statement is its own transaction), with a connection held only while
statements run, never across a delivery. A role's judging runs there as SQL compiled once
per shape, as the feed's judge does on the request path's pool; on that pool, a hundred
webhooks woken by one batch held the connections the requests were waiting for.

Waking: the worker sits behind the relay as part of its sink (`Tee`): a batch the relay
hands on wakes the webhooks it concerns; each also looks once a second (the safety poll).
The clock, the wall clock (for signatures) and the random source are injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random as random_module
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
from aiodataloader import DataLoader
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric import clock
from authoric.catalog.snapshot import SnapshotCache
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.observability.metrics import Metrics
from authoric.realtime.source import Change, Sink, Source
from authoric.realtime.verdicts import Verdicts
from authoric.settings import Settings
from authoric.webhooks.backoff import retry_delay
from authoric.webhooks.events import (
    Audience,
    Delivery,
    Judging,
    Memos,
    audience_of,
    deliveries,
    expired,
    in_scope,
    want_verdicts,
    wanted,
)
from authoric.webhooks.handed import Handed
from authoric.webhooks.signing import signed_headers
from authoric.webhooks.targets import PinnedTransport, Resolve, TargetRefused, resolve_host
from authoric.wire import json_bytes

log = logging.getLogger("authoric.webhooks")

LEASE = 5.0  # seconds a lease lives unless renewed
RENEW = 1.0  # seconds between claims (renewals and takeovers)
POLL = 1.0  # seconds a webhook waits for a wake-up before looking anyway
BATCH = 200  # log entries read per pass
# Seconds a webhook woken by the relay waits before its pass, gathering what follows: a pass
# costs five statements whatever its size, and at 500 writes/s one per change doubled the
# CPU per delivery (docs/benchmarks-realtime.md); 10 ms is 1% of the 1 s lag target.
GATHER = 0.01
RECORD_EVERY = 0.1  # seconds a success waits at most for its record (and the cursor's move)
WORKER_CONNECTIONS = 4  # the worker's own pool (app.py): never the request path's connections
TIMEOUT = 10.0  # seconds per attempt (contract: a 2xx within 10 s)
LAST = 2**63 - 1
W = t.webhooks
# Renew the leases this process holds ($1: their tokens) and take the free or expired ones,
# each under a new token; both return the leases now held. (Two updates of one table in one
# statement: they never touch the same row.)
CLAIM = """
WITH renewed AS (
    UPDATE authoric.webhooks SET lease_until = now() + make_interval(secs => $2)
    WHERE status = 'active' AND lease_owner = ANY($1::uuid[]) RETURNING uid, lease_owner
), taken AS (
    UPDATE authoric.webhooks SET lease_owner = gen_random_uuid(),
        lease_until = now() + make_interval(secs => $2)
    WHERE status = 'active' AND (lease_owner IS NULL
        OR (lease_until < now() AND lease_owner <> ALL($1::uuid[])))
    RETURNING uid, lease_owner
)
SELECT uid, lease_owner FROM renewed UNION ALL SELECT uid, lease_owner FROM taken
"""
# The webhooks ($1), each with its app's name, catalog version and settings.
ROWS = """
SELECT w.*, a.name AS app_name, a.version AS app_version, a.settings AS app_settings
FROM authoric.webhooks w JOIN authoric.apps a ON a.uid = w.app_uid WHERE w.uid = ANY($1::uuid[])
"""
# A run of successes: the cursor moves to $3 and each delivery is recorded, in one statement,
# only while this lease's token ($2) holds the webhook, the cursor is still where this pass
# left it ($4), and the webhook is active (a pause, or `failing`, keeps the cursor where it
# was: a delivery that raced the pause is sent again on resume). A replay (or a takeover)
# frees the lease, and this process's next claim takes it back under a new token: an old pass
# still in flight, whose batch started at the very cursor the replay put back, cannot record
# its batch and skip the replayed positions. A cursor moved by anyone else ends the pass
# (`_Lost`), and the next one starts from the cursor as stored. A `backfill_expired` resync
# ($5) clears `resync_first`. With no deliveries ($6 empty) it only moves the cursor (past
# entries that were nobody's to receive here). Answers whether the cursor moved.
RECORDED = """
WITH moved AS (
    UPDATE authoric.webhooks SET cursor = $3, attempt = 0, failing_since = NULL,
        next_attempt_at = NULL, resync_first = resync_first AND NOT $5
    WHERE uid = $1 AND lease_owner = $2 AND cursor = $4 AND status = 'active' RETURNING uid
), recorded AS (
    INSERT INTO authoric.webhook_deliveries (webhook_uid, position, attempt, status,
                                             duration_ms, at)
    SELECT moved.uid, d.position, d.attempt, d.status, d.duration_ms, to_timestamp(d.at)
    FROM moved, unnest($6::bigint[], $7::int[], $8::int[], $9::float8[], $10::float8[])
        AS d(position, attempt, status, duration_ms, at)
)
SELECT count(*) FROM moved
"""
# A failed attempt: recorded, with the retry's schedule (and `failing` past the window), in
# one statement, fenced as `RECORDED`. Answers whether it was recorded.
FAILED = """
WITH moved AS (
    UPDATE authoric.webhooks SET attempt = $3, failing_since = $4, next_attempt_at = $5,
        status = COALESCE($6::text, status)
    WHERE uid = $1 AND lease_owner = $2 AND cursor = $7 AND status = 'active' RETURNING uid
), recorded AS (
    INSERT INTO authoric.webhook_deliveries (webhook_uid, position, attempt, status, error,
                                             duration_ms, at)
    SELECT uid, $8, $3, $9, $10, $11, to_timestamp($12) FROM moved
)
SELECT count(*) FROM moved
"""


@dataclass
class Running:
    """One webhook this process delivers: its task and what wakes it."""

    task: asyncio.Task[None]
    wake: asyncio.Event
    audience: Audience | None = None
    behind: int = 0  # positions between the cursor and the head (metrics)
    waiting_since: float = 0.0  # when its oldest undelivered change was written (0: none)
    token: uuid.UUID = field(default_factory=uuid.uuid4)  # the lease's (`lease_owner`)


@dataclass(frozen=True)
class Attempt:
    """What one POST got: the HTTP status (None: no answer), why it failed (None: a 2xx), how
    long it took (ms), and when it was made (epoch seconds)."""

    status: int | None
    error: str | None
    ms: float
    at: float

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class Sent:
    """A pass's successes not yet recorded: the cursor they start from, and per delivery its
    position, attempt number, status, duration and time."""

    cursor: int
    positions: list[int] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    statuses: list[int | None] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    since: float = 0.0  # monotonic time of the oldest (0: none)

    def add(self, pos: int, number: int, attempt: Attempt) -> None:
        if not self.positions:
            self.since = time.monotonic()
        self.positions.append(pos)
        self.attempts.append(number)
        self.statuses.append(attempt.status)
        self.durations.append(attempt.ms)
        self.times.append(attempt.at)

    def due(self) -> bool:
        return bool(self.positions) and time.monotonic() - self.since >= RECORD_EVERY


@dataclass
class Deliverer:
    settings: Settings
    engine: AsyncEngine
    source: Source
    snapshots: SnapshotCache
    metrics: Metrics | None = None
    now: Callable[[], float] = clock.now  # the retry schedule and the failing window
    wall: Callable[[], float] = time.time  # webhook-timestamp (receivers check it)
    random: Callable[[], float] = random_module.random
    resolve: Resolve = resolve_host
    running: dict[uuid.UUID, Running] = field(default_factory=dict)
    # The worker's own pool (`WORKER_CONNECTIONS`), where its statements run; app.py opens it.
    # Without one (a worker built alone) they run on the engine's connections.
    pool: asyncpg.Pool | None = None
    # The hub's recent verdicts, shared by app.py: a webhook judged as a read class that a
    # stream of this process has just judged reuses them (realtime/verdicts.py).
    verdicts: Verdicts | None = None
    # The log's newest entries, as the relay handed them on: a caught-up pass reads no log.
    handed: Handed = field(default_factory=Handed)
    _memos: dict[uuid.UUID, Memos] = field(default_factory=dict)  # per app, shared (events.py)
    _tokens: list[uuid.UUID] = field(default_factory=list)  # the leases' tokens held
    _task: asyncio.Task[None] | None = None
    _transport: PinnedTransport | None = None
    _rows: DataLoader[uuid.UUID, asyncpg.Record | None] | None = None  # the passes' rows
    _urls: dict[str, httpx.URL] = field(default_factory=dict)  # each target parsed once
    # The last position the relay handed on (every entry up to it has been through the hub),
    # and when (monotonic).
    _heard: tuple[int, float] = (0, 0.0)

    def start(self) -> None:
        self._transport = PinnedTransport(self.resolve, self.settings.webhook_allow_private)
        # Not cached: every pass reads its row afresh (status, lease, settings, the retry's
        # schedule); only the passes that start in the same turn of the loop share the read.
        self._rows = DataLoader(self._rows_of, cache=False)
        self._task = asyncio.create_task(self._lead(), name="webhook-leases")

    async def stop(self) -> None:
        tasks = [r.task for r in self.running.values()]
        if self._task is not None:
            tasks.append(self._task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        tokens, self._tokens = self._tokens, []
        self.running.clear()
        with contextlib.suppress(Exception):
            async with self.engine.begin() as conn:  # a clean stop hands the leases on at once
                await conn.execute(update(W).where(W.c.lease_owner.in_(tokens))
                                   .values(lease_owner=None, lease_until=None))
        if self._transport is not None:
            await self._transport.aclose()

    def delivering(self) -> bool:
        return bool(self.running)

    def heard(self, changes: Sequence[Change], after: int = -1) -> None:
        """A batch the relay handed on (after the hub judged it), following on from `after`:
        kept (`handed`), and the webhooks it concerns woken."""
        self.handed.add(changes, after)
        if changes:
            self._heard = (changes[-1].pos, time.monotonic())
        for running in self.running.values():
            if running.audience is None or any(wanted(running.audience, c) for c in changes):
                running.wake.set()

    async def test_send(self, url: str, secret: str, app_name: str) -> dict[str, Any]:
        """One signed `test` delivery, outside the log (no cursor moves, nothing recorded):
        what the receiver answered, for the console's "send a test"."""
        test_id = f"test_{uuid.uuid4().hex}"
        body = json_bytes({"type": "test", "app": app_name, "table": None, "org": None,
                           "position": None, "timestamp": rfc3339(datetime.now(UTC))})
        got = await self._attempt(url, secret, Delivery(0, body), test_id)
        return {"status": got.status, "error": got.error, "durationMs": round(got.ms, 3)}

    # Leases --------------------------------------------------------------------------------

    async def _lead(self) -> None:
        while True:
            try:
                held = await self._claim()
                for uid, running in list(self.running.items()):
                    # Ended (lost its lease, or failed), let go, or taken again under a new
                    # token (a replay freed it): this task is over; the next claim, or the
                    # loop below, starts the webhook again.
                    if running.task.done() or held.get(uid) != running.token:
                        self.running.pop(uid).task.cancel()
                        if uid not in held and self.metrics is not None:
                            self.metrics.webhook_lag(str(uid), 0, 0.0)
                            self.metrics.webhook_running(str(uid), False)
                for uid, token in held.items():
                    if uid not in self.running:
                        wake = asyncio.Event()
                        self.running[uid] = Running(
                            asyncio.create_task(self._deliver(uid, token, wake)), wake,
                            token=token)
                        if self.metrics is not None:
                            self.metrics.webhook_running(str(uid), True)
                self._tokens = [r.token for r in self.running.values()]
                self._observe()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook leases: claim failed; retrying")
            await asyncio.sleep(RENEW)

    async def _claim(self) -> dict[uuid.UUID, uuid.UUID]:
        """Renew this process's leases and take the free or expired ones (active only), each
        taken one under a new token: the leases held now, with their tokens."""
        async with self._raw() as raw:
            rows = await raw.fetch(CLAIM, self._tokens, LEASE)
        return {r["uid"]: r["lease_owner"] for r in rows}

    def _observe(self) -> None:
        if self.metrics is None:
            return
        now = time.time()
        for uid, running in self.running.items():
            seconds = now - running.waiting_since if running.waiting_since else 0.0
            self.metrics.webhook_lag(str(uid), running.behind, max(0.0, seconds))

    # The database ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _raw(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection for a few statements (autocommit), given back at once."""
        if self.pool is not None:
            async with self.pool.acquire() as raw:
                yield raw
            return
        async with self.engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            yield driver
            await conn.commit()

    # One webhook ---------------------------------------------------------------------------

    async def _deliver(self, uid: uuid.UUID, token: uuid.UUID, wake: asyncio.Event) -> None:
        judging = Judging()
        while True:
            wake.clear()
            try:
                more = await self._pass(uid, token, judging)
            except _Lost:
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook %s: delivery pass failed; retrying", uid)
                more = 0.0
            if more is None:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), more or POLL)
                # Woken by a batch: under steady writes more follow within milliseconds, and
                # a pass that takes them together costs its statements once (`GATHER`).
                await asyncio.sleep(GATHER)

    async def _pass(self, uid: uuid.UUID, token: uuid.UUID, judging: Judging) -> float | None:
        """One pass: None when there may be more to send at once, else seconds to wait at
        most (0: until woken or the poll)."""
        assert self._rows is not None
        found = await self._rows.load(uid)
        if found is None or found["status"] != "active" or found["lease_owner"] != token:
            raise _Lost
        row = dict(found)
        due = row["next_attempt_at"]
        if due is not None and due.timestamp() > self.now():
            return min(POLL, due.timestamp() - self.now())
        settings = row["app_settings"]
        app = {"name": row["app_name"], "version": row["app_version"],
               "settings": json.loads(settings) if isinstance(settings, str) else settings}
        audience = audience_of(row, app["name"])
        changes, head, horizon = await self._after_cursor(row, audience)
        running = self.running.get(uid)
        if running is not None:
            running.audience = audience
        if row["resync_first"] or row["cursor"] < horizon:
            # Entries after the cursor are gone (retention): say so before going on.
            sent = Sent(row["cursor"])
            if await self._sent(row, app, sent, expired(audience, horizon, self.wall())):
                await self._record(row, sent, horizon, resync=True)
            return None
        if running is not None:
            running.behind = max(0, head - row["cursor"]) if changes else 0
            running.waiting_since = changes[0].at if changes else 0.0
        if not changes:
            self._want_verdicts(row["app_uid"], app["version"], audience)
            return 0.0
        sends = await self._judged(row, app, audience, changes, judging)
        sent = Sent(row["cursor"])
        for delivery in sends:
            if not await self._sent(row, app, sent, delivery):
                return None  # failed (recorded): the next pass waits for the retry
            if sent.due():
                row["cursor"] = await self._record(row, sent, delivery.pos)
                sent = Sent(row["cursor"])
        last = changes[-1].pos
        if last > row["cursor"]:  # the rest of the batch was nobody's to receive here
            await self._record(row, sent, last)
        return None

    def _want_verdicts(self, app_uid: uuid.UUID, version: int, audience: Audience) -> None:
        """With nothing to send yet, ask the hub for the verdicts of the webhook's read
        classes (events.want_verdicts), on the app's version when this process has it."""
        snapshot = self.snapshots.cached(app_uid)
        if self.verdicts is not None and snapshot is not None and snapshot.version == version:
            want_verdicts(snapshot, audience, self.verdicts)

    async def _rows_of(self, uids: list[uuid.UUID]) -> list[asyncpg.Record | None]:
        """The rows of the webhooks whose passes start together (`_rows`), in one statement:
        a batch the relay hands on wakes every webhook it concerns at once, and each pass
        reading its own row was one round trip per delivery where only a few webhooks' writes
        come at a time (docs/benchmarks-realtime.md, "Webhooks")."""
        async with self._raw() as raw:
            found = {r["uid"]: r for r in await raw.fetch(ROWS, uids)}
        return [found.get(uid) for uid in uids]

    async def _after_cursor(self, row: dict[str, Any],
                            audience: Audience) -> tuple[list[Change], int, int]:
        """The changes after the webhook's cursor (at most `BATCH`), the log's head and its
        horizon: from what the relay handed on lately when that reaches back to the cursor
        and holds nothing retention may have removed (webhooks/handed.py; the horizon is then
        0: nothing after the cursor is gone), else read from the log."""
        if not row["resync_first"]:
            # Half the retention: an entry the log's retention may have removed by now is
            # read from the log, whose horizon says so (the database's clock, not ours).
            found = self.handed.after(row["cursor"], functools.partial(in_scope, audience),
                                      BATCH, self.wall() - self.settings.change_retention / 2)
            if found is not None:
                return found[0], self.handed.end, 0
        async with self._raw() as raw:
            changes = await self.source.entries(row["app_uid"], audience.tables,
                                                audience.org_uid, row["cursor"], self._upto(),
                                                BATCH, raw)
            # The bounds after the entries: retention moves the horizon in the transaction
            # that deletes, so a horizon still at or below the cursor now means the entries
            # just read were all there.
            head, horizon = await self.source.bounds(raw)
        return changes, head, horizon

    def _upto(self) -> int:
        """The last log position a pass reads: while the relay hands batches on, the last it
        handed, so a pass never reads ahead of the hub and re-reads rows a stream of its read
        class is about to judge (realtime/verdicts.py); once the relay has been silent for
        `POLL`, the whole log (nothing to share, and a stalled relay never holds webhooks up)."""
        pos, at = self._heard
        return pos if self.verdicts is not None and time.monotonic() - at < POLL else LAST

    async def _judged(self, row: dict[str, Any], app: dict[str, Any], audience: Audience,
                      changes: Sequence[Change], judging: Judging) -> list[Delivery]:
        """The deliveries for `changes`, judged on the app's version read with the webhook."""
        async with contextlib.AsyncExitStack() as stack:
            conn: AsyncConnection | None = None

            async def connect() -> AsyncConnection:
                nonlocal conn
                if conn is None:
                    conn = await stack.enter_async_context(self.engine.connect())
                return conn

            snapshot = self.snapshots.cached(row["app_uid"])
            if snapshot is None or snapshot.version != app["version"]:
                snapshot = await self.snapshots.get(await connect(), row["app_uid"],
                                                    app["version"])
            raw: asyncpg.Connection | None = None

            async def raw_connect() -> asyncpg.Connection | None:
                # Taken only when a statement runs: a batch whose verdicts a stream of its
                # read class already reached waits for none of the pool's connections.
                nonlocal raw
                if raw is None and self.pool is not None:
                    raw = await stack.enter_async_context(self.pool.acquire())
                return raw

            judging.memos = self._memos.setdefault(row["app_uid"], Memos())
            sends = await deliveries(connect, raw_connect, snapshot, audience, changes, judging,
                                     self.verdicts)
            if self.metrics is not None and audience.role is not None:
                self.metrics.webhook_judging(str(row["uid"]), judging.shared, judging.own)
            judging.shared = judging.own = 0
            return sends
        raise AssertionError("unreachable")  # pragma: no cover

    async def _sent(self, row: dict[str, Any], app: dict[str, Any], sent: Sent,
                    delivery: Delivery) -> bool:
        """One attempt. A success joins `sent` (recorded later); a failure records the
        successes before it (the cursor moves to the last of them) and then itself."""
        got = await self._attempt(row["url"], row["secret"], delivery)
        if self.metrics is not None:
            self.metrics.webhook_delivered(str(row["uid"]), got.ok)
        number = row["attempt"] + 1 if not sent.positions else 1
        if got.ok:
            sent.add(delivery.pos, number, got)
            return True
        if sent.positions:
            row["cursor"] = await self._record(row, sent, sent.positions[-1])
            number = 1
        await self._record_failure(row, app, delivery.pos, number, got)
        return False

    async def _record(self, row: dict[str, Any], sent: Sent, pos: int,
                      resync: bool = False) -> int:
        """Record `sent` and move the cursor to `pos`, in one statement fenced by the lease
        and the cursor `sent` started from: the new cursor, or _Lost (nothing written: the
        next pass, or the successor, sends them again)."""
        async with self._raw() as raw:
            moved = await raw.fetchval(RECORDED, row["uid"], row["lease_owner"], pos, sent.cursor,
                                       resync,
                                       sent.positions, sent.attempts, sent.statuses,
                                       sent.durations, sent.times)
        if not moved:
            raise _Lost
        row.update(cursor=pos, attempt=0, failing_since=None)
        return pos

    async def _record_failure(self, row: dict[str, Any], app: dict[str, Any], pos: int,
                              attempt: int, got: Attempt) -> None:
        values = self._failed(row, app, attempt)
        async with self._raw() as raw:
            recorded = await raw.fetchval(
                FAILED, row["uid"], row["lease_owner"], attempt, values["failing_since"],
                values["next_attempt_at"], values.get("status"), row["cursor"], pos, got.status,
                got.error, got.ms, got.at)
        if not recorded:
            raise _Lost  # the successor records its own attempt

    def _failed(self, row: Any, app: Any, attempt: int) -> dict[str, Any]:
        now = self.now()
        since = row["failing_since"].timestamp() if row["failing_since"] is not None else now
        hours = float((app["settings"] or {}).get("webhookRetryHours", 72))
        values: dict[str, Any] = {
            "attempt": attempt, "failing_since": datetime.fromtimestamp(since, UTC),
            "next_attempt_at": datetime.fromtimestamp(
                now + retry_delay(attempt, self.random, self.settings.webhook_retry_base,
                                  self.settings.webhook_retry_max), UTC)}
        if now - since >= hours * 3600:
            values["status"] = "failing"
        return values

    async def _attempt(self, url: str, secret: str, delivery: Delivery,
                       msg_id: str | None = None) -> Attempt:
        """POST one delivery. The error names what failed, never the URL's query or a header
        (they may hold secrets). The request goes straight to the transport: httpx's client
        would add cookies, auth and redirects, none of which a delivery has, at about 0.3 ms
        of CPU per request (webhooks/connections.py)."""
        assert self._transport is not None
        at = self.wall()
        headers = signed_headers(secret, msg_id or str(delivery.pos), delivery.body, at)
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(TIMEOUT):
                request = delivery_request(self._urls, url, headers, delivery.body)
                response = await self._transport.handle_async_request(request)
                try:
                    status = response.status_code
                    async for _ in response.aiter_raw():  # ends at 4 KiB (connections.py)
                        pass
                finally:
                    await response.aclose()
        except TargetRefused as exc:
            error = f"refused: {exc}"
        except TimeoutError:
            error = f"no answer within {TIMEOUT:g} s"
        except Exception as exc:
            # httpx's and the network's errors, and any other (a URL httpx refuses): a failed
            # attempt, recorded and retried, so the webhook turns `failing`, never stalls unseen
            error = type(exc).__name__
        if status is not None and not 200 <= status < 300 and error is None:
            error = f"HTTP {status}"
        return Attempt(status, error, (time.perf_counter() - started) * 1000, at)


def delivery_request(urls: dict[str, httpx.URL], url: str, headers: dict[str, str],
                     body: bytes) -> httpx.Request:
    """The POST of `body` to `url`, as httpx builds it from `content=` (Host and
    Content-Length first), with the URL parsed once per target (`urls` keeps them): parsing
    it and normalizing the headers on every delivery was about 50 us of CPU, a tenth of a
    delivery's."""
    target = urls.get(url)
    if target is None:
        if len(urls) >= 4096:
            urls.clear()
        target = urls[url] = httpx.URL(url)
    raw = [(b"host", target.netloc), (b"content-length", str(len(body)).encode()),
           *[(name.encode(), value.encode()) for name, value in headers.items()]]
    # No read timeout of its own: the attempt's `asyncio.timeout(TIMEOUT)` bounds the whole
    # exchange, and a timer set again on every read of the socket was a tenth of its CPU.
    return httpx.Request("POST", target, headers=raw, stream=httpx.ByteStream(body),
                         extensions={"timeout": {"connect": TIMEOUT, "read": None}})


class _Lost(Exception):
    """This process no longer delivers the webhook (lease lost, paused, deleted)."""


@dataclass
class Tee:
    """The relay's sink: the hub, and the webhooks this process delivers. The relay reads the
    log when either has someone to hand changes to."""

    hub: Sink
    webhooks: Deliverer

    def empty(self) -> bool:
        if self.hub.empty() and not self.webhooks.delivering():
            # Told so, the relay may move past entries without handing them on: what it
            # hands next no longer follows on from what the webhooks kept.
            self.webhooks.handed.clear()
            return True
        return False

    async def dispatch(self, changes: Sequence[Change], read_at: float, after: int = -1) -> None:
        # The hub first: a webhook woken after it finds the verdicts of the streams of its
        # read class already kept (realtime/verdicts.py) and re-reads nothing they covered.
        try:
            await self.hub.dispatch(changes, read_at, after)
        finally:
            self.webhooks.heard(changes, after)

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        # Webhooks judge each batch on the app's version read with it: nothing to re-read.
        await self.hub.policy_changed(app_uids)
