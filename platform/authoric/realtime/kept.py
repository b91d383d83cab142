"""The hub's pooled connection, kept between fan-out passes that follow each other closely.

Each pass judges on a connection of the request path's asyncpg pool (realtime/hub.py). At 50
changes a second each change is its own pass, and taking a connection and giving it back
(asyncpg shields the release in a task of its own) cost CPU at every one. So the hub keeps the
connection while passes keep coming, and gives it back once none came for `hold` seconds.

Requests come first:
- it is kept only while the pool could still serve a request without it: another connection
  idle, or room to open one (a request then pays for opening it, once);
- a pass that finds the pool exhausted gives the kept connection back and queues for one like
  a request, behind the requests already waiting;
- so a request waits for the kept connection at most `hold`, when the pool runs out between
  two passes.

And only a sound connection is kept or lent: not after a pass in which something failed,
not one PostgreSQL closed, not one lost while kept (it goes back to the pool, which drops it:
asyncpg frees a connection's slot only when someone releases it after some failures).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import asyncpg

from authoric.plan.runner import free_slots

HOLD = 0.1  # seconds without a pass before the kept connection goes back to the pool


class KeptConnection:
    """At most one connection of `pool`, lent to one pass at a time."""

    def __init__(self, pool: asyncpg.Pool, hold: float = HOLD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool, self.hold, self.clock = pool, hold, clock
        self._conn: asyncpg.Connection | None = None
        self._used = 0.0  # when the last pass gave the connection back (clock)
        self._timer: asyncio.TimerHandle | None = None
        self._releasing: set[asyncio.Task[None]] = set()
        self._closed = False

    def holding(self) -> bool:
        """Whether a connection is kept now (between passes)."""
        return self._conn is not None

    async def take(self) -> asyncpg.Connection:
        """The kept connection, else one from the pool: also when the kept one was lost
        meanwhile, or when the pool has run out (requests may be waiting: they go first)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            if _open(conn) and not self._exhausted():
                return conn
            await self.pool.release(conn)  # returns at once if the pool took it back already
        return await self.pool.acquire()

    async def give(self, conn: asyncpg.Connection, *, clean: bool) -> None:
        """Take back `conn` after a pass (`clean`: nothing in it failed)."""
        if not (clean and not self._closed and self._conn is None and self._keepable(conn)):
            await self.pool.release(conn)
            return
        self._conn, self._used = conn, self.clock()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.hold, self._expire)

    def _keepable(self, conn: asyncpg.Connection) -> bool:
        return _open(conn) and not conn.is_in_transaction() and not self._exhausted()

    def _exhausted(self) -> bool:
        """Whether a request would have to wait for a connection now: none idle, and no room
        to open one. Kept only while it is not; lent only while it is not.

        One look at the pool's free slots (`free_slots`), where the public counts walk every
        slot twice (a pass asks twice, and at 50 changes a second each change is a pass). A
        pool without that queue is asked through the counts."""
        queue = free_slots(self.pool)
        if queue is not None:
            return queue.empty()
        pool = self.pool
        return pool.get_idle_size() == 0 and pool.get_size() >= pool.get_max_size()

    def _expire(self) -> None:
        # One timer per `hold`, re-armed for what is left of it, not one armed and cancelled
        # per pass. A pass that holds the connection now re-arms it when it gives it back.
        self._timer = None
        if self._conn is None:
            return
        idle = self.clock() - self._used
        loop = asyncio.get_running_loop()
        if idle < self.hold:
            self._timer = loop.call_later(self.hold - idle, self._expire)
            return
        conn, self._conn = self._conn, None
        task = loop.create_task(self.pool.release(conn))
        self._releasing.add(task)
        task.add_done_callback(self._released)

    def _released(self, task: asyncio.Task[None]) -> None:
        self._releasing.discard(task)
        if not task.cancelled():
            task.exception()  # the pool has dropped a connection it could not reset: nothing to do

    async def close(self) -> None:
        """Give back what is kept, and keep nothing from now on (the pool is about to close,
        and waits for every connection taken from it)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn, self._conn = self._conn, None
        if conn is not None:
            await self.pool.release(conn)
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)


def _open(conn: asyncpg.Connection) -> bool:
    """Whether `conn` can still run a statement: not closed, and not taken back by the pool,
    which detaches a lost connection's proxy (asking it anything then raises)."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False
