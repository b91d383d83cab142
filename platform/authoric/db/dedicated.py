"""Background workers that own one database connection outside the pool, for good.

The relay (LISTEN) and the sequencer (advisory lock) each need a connection of their own
that survives anything: a killed backend, a PostgreSQL restart, a driver error. This base
class reconnects forever and hands each fresh connection to `session()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import ClassVar

import asyncpg

log = logging.getLogger("authoric.dedicated")


class DedicatedWorker:
    """Subclasses set `app_name` (how operators and fault tests find the connection) and
    implement `session(conn)`, which runs until the connection fails."""

    app_name: ClassVar[str]

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
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

    async def _run(self) -> None:
        while True:
            try:
                conn = await asyncpg.connect(self.dsn,
                                             server_settings={"application_name": self.app_name})
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
