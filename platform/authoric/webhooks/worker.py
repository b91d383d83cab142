"""The delivery worker: each process started by the app delivers the webhooks it leases.

Leases: every `RENEW` seconds a process claims, in one statement, the active webhooks whose
lease is its own, free or expired (`LEASE` seconds after its holder last renewed it), so
across replicas each webhook is delivered by one process at a time and a dead process's
webhooks are taken over within `LEASE` + `RENEW` seconds. Every cursor move is fenced by the
lease and by the cursor the pass started from (`WHERE lease_owner = me AND cursor = mine`): a
process that lost its lease while a delivery was in flight, or whose webhook was replayed or
delivered by another holder meanwhile (even if it has claimed the lease back since), cannot
move the cursor, stops, and the next pass sends from the stored cursor, the same position
again with the same `webhook-id`.

Per webhook, one delivery in flight, in position order: read the change log after the cursor
through the feed's `Source` (`entries`), judge the batch (`webhooks.events`), POST each
delivery and, in the transaction that records it, move the cursor to its position. A failure
is recorded, and the same position is tried again after a full-jitter backoff
(`webhooks.backoff`); nothing later is sent meanwhile. After the app's `webhookRetryHours`
of failing the webhook turns `failing` and waits for the operator.

Waking: the worker sits behind the relay as part of its sink (`Tee`): a batch the relay
hands on wakes the webhooks it concerns; each also looks once a second (the safety poll).
The clock, the wall clock (for signatures) and the random source are injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as random_module
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from authoric import clock
from authoric.catalog.snapshot import SnapshotCache
from authoric.catalog.types import rfc3339
from authoric.db import tables as t
from authoric.observability.metrics import Metrics
from authoric.realtime.source import Change, Sink, Source
from authoric.settings import Settings
from authoric.webhooks.backoff import retry_delay
from authoric.webhooks.events import Audience, Delivery, Judging, audience_of, deliveries, expired, wanted
from authoric.webhooks.signing import signed_headers
from authoric.webhooks.targets import PinnedTransport, Resolve, TargetRefused, resolve_host
from authoric.wire import json_bytes

log = logging.getLogger("authoric.webhooks")

LEASE = 5.0  # seconds a lease lives unless renewed
RENEW = 1.0  # seconds between claims (renewals and takeovers)
POLL = 1.0  # seconds a webhook waits for a wake-up before looking anyway
BATCH = 200  # log entries read per pass
TIMEOUT = 10.0  # seconds per attempt (contract: a 2xx within 10 s)
READ_LIMIT = 4096  # bytes of a response read at most
LAST = 2**63 - 1
W = t.webhooks
# A success: the cursor moves to the position and the delivery is recorded, in one statement,
# only while this process holds the lease AND the cursor is still where this pass left it
# ($8). The owner alone is not a fence: a replay (or a takeover) frees the lease, and this
# process's next claim, a second later, takes it back while the old pass is still in flight;
# that pass would then move the cursor from where the replay (or the other holder) put it to
# its own position, skipping the replayed positions. A cursor moved by anyone else ends the
# pass (`_Lost`), and the next one starts from the cursor as stored. A `backfill_expired`
# resync ($7) clears `resync_first`.
DELIVERED = """
WITH moved AS (
    UPDATE authoric.webhooks SET cursor = $3, attempt = 0, failing_since = NULL,
        next_attempt_at = NULL, resync_first = resync_first AND NOT $7
    WHERE uid = $1 AND lease_owner = $2 AND cursor = $8 RETURNING uid
)
INSERT INTO authoric.webhook_deliveries (webhook_uid, position, attempt, status, duration_ms)
SELECT uid, $3, $4, $5, $6 FROM moved RETURNING id
"""


@dataclass
class Running:
    """One webhook this process delivers: its task and what wakes it."""

    task: asyncio.Task[None]
    wake: asyncio.Event
    audience: Audience | None = None
    behind: int = 0  # positions between the cursor and the head (metrics)
    waiting_since: float = 0.0  # when its oldest undelivered change was written (0: none)


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
    owner: uuid.UUID = field(default_factory=uuid.uuid4)
    running: dict[uuid.UUID, Running] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _client: httpx.AsyncClient | None = None

    def start(self) -> None:
        transport = PinnedTransport(self.resolve, self.settings.webhook_allow_private)
        self._client = httpx.AsyncClient(transport=transport, follow_redirects=False,
                                         timeout=TIMEOUT)
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
        self.running.clear()
        with contextlib.suppress(Exception):
            async with self.engine.begin() as conn:  # a clean stop hands the leases on at once
                await conn.execute(update(W).where(W.c.lease_owner == self.owner)
                                   .values(lease_owner=None, lease_until=None))
        if self._client is not None:
            await self._client.aclose()

    def delivering(self) -> bool:
        return bool(self.running)

    def heard(self, changes: Sequence[Change]) -> None:
        """A batch the relay handed on: wake the webhooks it concerns."""
        for running in self.running.values():
            if running.audience is None or any(wanted(running.audience, c) for c in changes):
                running.wake.set()

    async def test_send(self, url: str, secret: str, app_name: str) -> dict[str, Any]:
        """One signed `test` delivery, outside the log (no cursor moves, nothing recorded):
        what the receiver answered, for the console's "send a test"."""
        test_id = f"test_{uuid.uuid4().hex}"
        body = json_bytes({"type": "test", "app": app_name, "table": None, "org": None,
                           "position": None, "timestamp": rfc3339(datetime.now(UTC))})
        status, error, ms = await self._attempt(url, secret, Delivery(0, body), test_id)
        return {"status": status, "error": error, "durationMs": round(ms, 3)}

    # Leases --------------------------------------------------------------------------------

    async def _lead(self) -> None:
        while True:
            try:
                held = await self._claim()
                for uid in held - self.running.keys():
                    wake = asyncio.Event()
                    self.running[uid] = Running(asyncio.create_task(self._deliver(uid, wake)),
                                                wake)
                for uid in self.running.keys() - held:
                    self.running.pop(uid).task.cancel()
                    if self.metrics is not None:
                        self.metrics.webhook_lag(str(uid), 0, 0.0)
                for uid, running in list(self.running.items()):
                    if running.task.done():  # ended (lost its lease, or failed): start again
                        self.running.pop(uid)
                self._observe()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook leases: claim failed; retrying")
            await asyncio.sleep(RENEW)

    async def _claim(self) -> set[uuid.UUID]:
        """Renew this process's leases and take the free or expired ones (active only)."""
        async with self.engine.begin() as conn:
            rows = await conn.execute(text(
                "UPDATE authoric.webhooks SET lease_owner = :me, "
                "lease_until = now() + make_interval(secs => :ttl) "
                "WHERE status = 'active' AND (lease_owner = :me OR lease_owner IS NULL "
                "OR lease_until < now()) RETURNING uid"), {"me": self.owner, "ttl": LEASE})
            return set(rows.scalars())

    def _observe(self) -> None:
        if self.metrics is None:
            return
        now = time.time()
        for uid, running in self.running.items():
            seconds = now - running.waiting_since if running.waiting_since else 0.0
            self.metrics.webhook_lag(str(uid), running.behind, max(0.0, seconds))

    # One webhook ---------------------------------------------------------------------------

    async def _deliver(self, uid: uuid.UUID, wake: asyncio.Event) -> None:
        judging = Judging()
        while True:
            wake.clear()
            try:
                more = await self._pass(uid, judging)
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

    async def _pass(self, uid: uuid.UUID, judging: Judging) -> float | None:
        """One pass: None when there may be more to send at once, else seconds to wait at
        most (0: until woken or the poll)."""
        row = await self._row(uid)
        if row is None or row["status"] != "active" or row["lease_owner"] != self.owner:
            raise _Lost
        due = row["next_attempt_at"]
        if due is not None and due.timestamp() > self.now():
            return min(POLL, due.timestamp() - self.now())
        app = {"name": row["app_name"], "version": row["app_version"],
               "settings": row["app_settings"]}
        audience = audience_of(row, app["name"])
        running = self.running.get(uid)
        if running is not None:
            running.audience = audience
        head, horizon = await self.source.bounds()
        if row["resync_first"]:
            await self._send(row, expired(audience, horizon, self.wall()), app, resync=True)
            return None
        changes = await self.source.entries(row["app_uid"], audience.tables, audience.org_uid,
                                            row["cursor"], LAST, BATCH)
        if running is not None:
            running.behind = max(0, head - row["cursor"]) if changes else 0
            running.waiting_since = changes[0].at if changes else 0.0
        if not changes:
            return 0.0
        async with self.engine.connect() as conn:
            snapshot = await self.snapshots.get(conn, row["app_uid"], app["version"])
            sends = await deliveries(conn, snapshot, audience, changes, judging)
        for delivery in sends:
            if not await self._send(row, delivery, app):
                return None  # failed: the next pass waits for the retry
            row = {**row, "cursor": delivery.pos, "attempt": 0, "failing_since": None}
        last = changes[-1].pos
        if last > row["cursor"]:  # the rest of the batch was nobody's to receive here
            await self._move(row, last)
        return None

    async def _row(self, uid: uuid.UUID) -> Any:
        """The webhook, with its app's name, catalog version and settings (one statement)."""
        a = t.apps
        query = (select(W, a.c.name.label("app_name"), a.c.version.label("app_version"),
                        a.c.settings.label("app_settings"))
                 .join(a, a.c.uid == W.c.app_uid).where(W.c.uid == uid))
        async with self.engine.connect() as conn:
            return (await conn.execute(query)).mappings().first()

    async def _move(self, row: Any, pos: int) -> None:
        async with self.engine.begin() as conn:
            moved = await conn.execute(update(W).where(W.c.uid == row["uid"],
                                                       W.c.lease_owner == self.owner,
                                                       W.c.cursor == row["cursor"])
                                       .values(cursor=pos))
            if moved.rowcount == 0:
                raise _Lost

    async def _send(self, row: Any, delivery: Delivery, app: Any, resync: bool = False) -> bool:
        """One attempt; recorded, with the cursor moved on success, in one transaction."""
        status, error, ms = await self._attempt(row["url"], row["secret"], delivery)
        ok = status is not None and 200 <= status < 300
        attempt = row["attempt"] + 1
        if ok:
            await self._delivered(row["uid"], row["cursor"], delivery.pos, attempt, status, ms,
                                  resync)
        else:
            await self._record_failure(row, app, delivery.pos, attempt, status, error, ms)
        if self.metrics is not None:
            self.metrics.webhook_delivered(str(row["uid"]), ok)
        return ok

    async def _delivered(self, uid: uuid.UUID, cursor: int, pos: int, attempt: int,
                         status: int | None, ms: float, resync: bool) -> None:
        """The delivery recorded and the cursor moved to it: one statement, so one round trip
        and one transaction, fenced by the lease (asyncpg straight: the path every delivery
        takes)."""
        async with self.engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            recorded = await raw.fetchval(DELIVERED, uid, self.owner, pos, attempt, status, ms,
                                          resync, cursor)
        if recorded is None:
            raise _Lost  # nothing written: the successor sends it again

    async def _record_failure(self, row: Any, app: Any, pos: int, attempt: int,
                              status: int | None, error: str | None, ms: float) -> None:
        async with self.engine.begin() as conn:
            moved = await conn.execute(update(W).where(W.c.uid == row["uid"],
                                                       W.c.lease_owner == self.owner,
                                                       W.c.cursor == row["cursor"])
                                       .values(**self._failed(row, app, attempt)))
            if moved.rowcount == 0:
                raise _Lost  # rolls back: the successor records its own attempt
            await conn.execute(t.webhook_deliveries.insert().values(
                webhook_uid=row["uid"], position=pos, attempt=attempt, status=status,
                error=error, duration_ms=ms, at=func.now()))

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
                       msg_id: str | None = None) -> tuple[int | None, str | None, float]:
        """POST one delivery: (HTTP status or None, error or None, milliseconds). The error
        names what failed, never the URL's query or a header (they may hold secrets)."""
        assert self._client is not None
        headers = signed_headers(secret, msg_id or str(delivery.pos), delivery.body, self.wall())
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(TIMEOUT):
                async with self._client.stream("POST", url, content=delivery.body,
                                               headers=headers) as response:
                    status = response.status_code
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read >= READ_LIMIT:
                            break
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
        return status, error, (time.perf_counter() - started) * 1000


class _Lost(Exception):
    """This process no longer delivers the webhook (lease lost, paused, deleted)."""


@dataclass
class Tee:
    """The relay's sink: the hub, and the webhooks this process delivers. The relay reads the
    log when either has someone to hand changes to."""

    hub: Sink
    webhooks: Deliverer

    def empty(self) -> bool:
        return self.hub.empty() and not self.webhooks.delivering()

    async def dispatch(self, changes: Sequence[Change], read_at: float) -> None:
        self.webhooks.heard(changes)
        await self.hub.dispatch(changes, read_at)

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        # Webhooks judge each batch on the app's version read with it: nothing to re-read.
        await self.hub.policy_changed(app_uids)
