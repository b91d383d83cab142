"""Background workers that own one database connection outside the pool, for good.

The relay (LISTEN) and the sequencer (advisory lock) each need a connection of their own
that survives anything: a killed backend, a PostgreSQL restart, a driver error. This base
class reconnects forever and hands each fresh connection to `session()`.

A connection can also stall without failing: a proxy or a NAT that stops forwarding keeps the
TCP connection open, so no error and no close ever arrive. Two bounds end such a connection,
one on each side of it:

- **Ours, the stall bound.** Every statement of a session runs inside `answered(conn)`: a
  statement that gets no answer within `stall` seconds (`STALL`) terminates the connection,
  and the session ends as after any other loss (the worker reconnects; the relay catches up,
  the sequencer follows or leads again). The bound doubles after each stall in a row, up to
  `STALL_MAX`, and resets after an answer, so a database that is merely slow is not
  reconnected to in a loop. `stalls` counts the connections given up this way. The
  connection is terminated at the deadline rather than the statement cancelled: cancelling
  an asyncpg statement inside a transaction block makes the block's exit wait for a
  ROLLBACK that a frozen connection never answers.
- **PostgreSQL's, the idle bound.** Our side giving up does not end the backend behind a
  frozen proxy: it never hears of it. Such a backend keeps whatever it holds, and for the
  sequencer's leader that is the session advisory lock (and, frozen inside a stamping
  transaction, FOR UPDATE locks on change-log rows), so no other process could take the lead
  and nothing would be stamped anywhere. Each dedicated connection therefore starts with
  `idle_session_timeout` and `idle_in_transaction_session_timeout` at `idle_limit` seconds
  (`IDLE_LIMIT`; PostgreSQL 14+): a backend whose client has said nothing for that long ends
  itself, and its locks and its transaction go with it. Both timeouts are needed: the first
  does not count inside a transaction block, where a stamping transaction frozen between
  statements sits. A notification the backend sends its (silent) client does not reset them.

  Why timeouts, and not a would-be leader terminating a holder it judges stale: the
  database is the only party that sees the backend's silence directly; a follower would have
  to infer staleness from `pg_stat_activity`, needs the right to signal the holder's
  backend (a superuser's only a superuser may end), and could end a healthy leader whose
  client is merely slow to speak. The timeouts need no privilege (both are user settings).
  The price is a healthy worker ended by a false alarm: a reconnect, and possibly a change of
  leader, never a lost or reordered change (an ended leader's transaction rolls back). So
  `IDLE_LIMIT` sits far above the longest idle gap of a healthy worker: the leader runs a
  statement at least every 2 s (its safety poll), a follower every 1 s (its retry), a relay
  every 1 s (its poll) plus the time it spends fanning out a batch it read. The leader's
  takeover after a freeze costs that much: about `IDLE_LIMIT` plus a follower's retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import ClassVar

import asyncpg

log = logging.getLogger("authoric.dedicated")

# Seconds a statement on a dedicated connection may go unanswered before the connection is
# taken for stalled. Their statements are a few milliseconds even under load (index lookups,
# a stamping batch, a retention chunk); the bound doubles after each stall in a row.
STALL, STALL_MAX = 10.0, 80.0
# Seconds of silence from its client after which PostgreSQL ends a dedicated backend (see the
# module's docstring): 10x the longest healthy gap between a worker's statements.
IDLE_LIMIT = 20.0


class Wakeup:
    """A flag a dedicated worker sleeps on until someone sets it or a timeout passes.

    What `asyncio.timeout` around `Event.wait()` does, without its price when the timeout
    passes: that cancels the worker's task, and a CancelledError is raised and caught. The
    relay's waits time out after most passes at low write rates (its linger), and the
    sequencer's every 20 ms while a table is captured: a cancel each time cost about 3% of
    the feed's CPU (py-spy, bench.fanout at 50 writes/s). Here the timeout resolves the wait's
    future instead. A cancel from outside (shutdown) still reaches the waiting task, as the
    wait is a plain await of that future."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[bool] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        _resolve(self._waiter, True)

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout: float) -> bool:
        """True once the flag is set, False once `timeout` seconds have passed first."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(0.0, timeout), _resolve, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _resolve(waiter: asyncio.Future[bool] | None, result: bool) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


class Stalled(TimeoutError):
    """A statement on a dedicated connection went unanswered past the stall bound."""


class DedicatedWorker:
    """Subclasses set `app_name` (how operators and fault tests find the connection) and
    implement `session(conn)`, which runs until the connection fails, running each statement
    inside `answered(conn)`."""

    app_name: ClassVar[str]

    def __init__(self, dsn: str, *, stall: float = STALL,
                 idle_limit: float | None = IDLE_LIMIT) -> None:
        self.dsn = dsn
        self.first_stall = self.stall = stall  # the bound after an answer, and the current one
        self.stalls = 0  # connections given up as stalled (tests, operators' logs)
        self.idle_limit = idle_limit  # None: PostgreSQL's own settings (tests, benchmarks)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.app_name)

    async def stop(self) -> None:
        """Cancel the worker and wait until it has ended. Cancelled again for as long as it
        runs: a library call that swallows one cancellation must not keep shutdown waiting."""
        task = self._task
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        if task is not None and not task.cancelled():
            task.exception()  # retrieved: a worker that died is not reported again at exit

    async def session(self, conn: asyncpg.Connection) -> None:
        raise NotImplementedError

    def closed(self) -> None:
        """Called after each connection ends, before reconnecting."""

    @contextlib.asynccontextmanager
    async def answered(self, conn: asyncpg.Connection) -> AsyncIterator[None]:
        """Statements on `conn` inside get their answer within the current bound, or `conn`
        is terminated at the deadline and `Stalled` ends the session."""
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            self.stalls += 1
            self.stall = min(STALL_MAX, self.stall * 2)
            conn.terminate()  # the awaited statement fails at once, inside a transaction too

        handle = asyncio.get_running_loop().call_later(self.stall, expire)
        try:
            yield
        except Exception as exc:
            if expired:
                raise Stalled(f"{self.app_name}: no answer within the stall bound") from exc
            raise
        finally:
            handle.cancel()
        if expired:  # the answer came as the bound ran out: the connection is gone anyway
            raise Stalled(f"{self.app_name}: no answer within the stall bound")
        self.stall = self.first_stall

    def server_settings(self) -> dict[str, str]:
        settings = {"application_name": self.app_name}
        if self.idle_limit is not None:
            limit = str(max(1, round(self.idle_limit * 1000)))  # milliseconds
            settings["idle_session_timeout"] = limit
            settings["idle_in_transaction_session_timeout"] = limit
        return settings

    async def _run(self) -> None:
        while True:
            try:
                conn = await asyncpg.connect(self.dsn, server_settings=self.server_settings())
            except Exception:  # any failure to connect: retry
                await asyncio.sleep(0.5)
                continue
            try:
                await self.session(conn)
            except Exception as exc:  # e.g. InternalClientError after a kill: never die
                log.warning("%s connection lost, reconnecting: %s", self.app_name, exc)
            finally:
                self.closed()
                with contextlib.suppress(Exception):
                    conn.terminate()
            await asyncio.sleep(0.2)
