"""The outbox's live half, the relay: one dedicated LISTEN connection per process (never
from the pool) that only wakes the fan-out; the fan-out always reads the log by position.

A lost notification, a killed listener connection or a PostgreSQL restart costs latency,
never events: after any reconnect the relay catches up from the last position it handed
to the hub, and it also polls once a second in case a notification went missing.

A connection can also stall without failing: a proxy or a NAT that stops forwarding keeps the
TCP connection open, so no error and no close ever arrive, and notifications simply stop.
The once-a-second read doubles as a heartbeat: every statement on the listener connection
runs under the dedicated workers' stall bound (db/dedicated.py: no answer within 10 s ends
the connection), and the relay reconnects and catches up as after any other loss
(bench/chaos.py freezes it through a proxy).

A process with no open stream reads nothing: the sequencer's NOTIFY names the head it just
stamped, and the relay moves its position there. Those entries were stamped before anyone
here subscribed, so they were nobody's to receive, exactly as if they had been read and
handed to an empty hub. A stream that wants them asks for them with `Last-Event-ID`, and
replay reads them from the log. Under write load without subscribers this spares every
worker a log read per stamped batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import asyncpg

from authoric.changes import reader
from authoric.changes.sequencer import CHANNEL
from authoric.db.dedicated import IDLE_LIMIT, STALL, DedicatedWorker
from authoric.realtime.source import Sink

POLICY_CHANNEL = "authoric_policy"
SAFETY_POLL = 1.0
LINGER = 0.05  # seconds: the longest wait after a pass during which a NOTIFY arrived
APP_NAME = "authoric-relay"  # how operators (and fault tests) find the listener connection
BATCH = 2000


class Relay(DedicatedWorker):
    app_name = APP_NAME

    def __init__(self, dsn: str, hub: Sink, batch: int = BATCH, *, stall: float = STALL,
                 idle_limit: float | None = IDLE_LIMIT) -> None:
        super().__init__(dsn, stall=stall, idle_limit=idle_limit)
        self.hub, self.batch = hub, batch
        self.position = -1  # last position handed to the hub (-1: not started)
        self.announced = -1  # the highest head the sequencer's NOTIFYs have named
        self.reads = 0  # log reads issued, and
        self.skips = 0  # moves to an announced head without reading (tests, benchmarks)
        self.connected = asyncio.Event()
        self._wake = asyncio.Event()
        self.conn: asyncpg.Connection | None = None
        self._spoke = 0.0  # monotonic time of the last statement on the listener connection

    def _notified(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        if channel == CHANNEL and payload.isdigit():
            self.announced = max(self.announced, int(payload))
        self._wake.set()

    async def session(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        async with self.answered(conn):
            await conn.add_listener(CHANNEL, self._notified)
            await conn.add_listener(POLICY_CHANNEL, self._notified)
            if self.position < 0:
                self.position = await reader.head(conn)
        self.connected.set()
        await self._follow(conn)

    def closed(self) -> None:
        self.connected.clear()
        self.conn = None

    async def _follow(self, conn: asyncpg.Connection) -> None:
        while True:
            # No await between the check and the move: a stream registering with the hub
            # is either seen here (and the entries are read for it) or registers after.
            if self.hub.empty() and self.announced > self.position:
                self.position = self.announced
                self.skips += 1
                changes = []
                if time.monotonic() - self._spoke > SAFETY_POLL:
                    # Skipping says nothing to PostgreSQL, and under back-to-back NOTIFYs
                    # nothing else does: past the idle bound (db/dedicated.py) it would end
                    # this connection. One round trip a second keeps it, as the poll does.
                    async with self.answered(conn):
                        await conn.execute("SELECT 1")
                    self._spoke = time.monotonic()
            else:
                async with self.answered(conn):
                    changes = await reader.changes_after(conn, self.position, self.batch)
                self.reads += 1
                self._spoke = time.monotonic()
            if changes:
                await self.hub.dispatch(changes, time.time())
                self.position = changes[-1].pos
                if len(changes) == self.batch:
                    continue
            if conn.is_closed():
                raise asyncpg.InterfaceError("listener connection closed")
            # A NOTIFY that landed during this pass may name entries the read did not see yet.
            # Under load the next NOTIFY follows within milliseconds, and reading after it
            # fans out both batches in one pass (a pass per NOTIFY cost 5-12% more CPU per
            # delivery in bench.fanout); when writes stop, LINGER bounds how long those
            # entries wait.
            timeout = LINGER if self._wake.is_set() else SAFETY_POLL
            self._wake.clear()
            # asyncio.timeout: wait_for (3.11) can swallow a cancel that meets a NOTIFY.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
