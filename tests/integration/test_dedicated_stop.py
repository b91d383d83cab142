"""Shutdown of the dedicated-connection workers (db/dedicated.py: the relay, the sequencer):
stopping one always ends it, even when something it awaits swallows a cancellation, as
`asyncio.wait_for` does on Python 3.11 when the awaited event and the cancel meet."""

from __future__ import annotations

import asyncio

import asyncpg

from authoric.db.dedicated import DedicatedWorker

WIDE = 60.0


class Stubborn(DedicatedWorker):
    """A worker whose session ignores the first cancellation it gets, then carries on."""

    app_name = "authoric-test-stubborn"

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.running = asyncio.Event()
        self.cancels_ignored = 0

    async def session(self, conn: asyncpg.Connection) -> None:
        self.running.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if self.cancels_ignored:
                    raise
                self.cancels_ignored += 1


async def test_an_operator_stopping_a_worker_that_swallows_a_cancel_still_sees_it_end(
        database_url: str) -> None:
    worker = Stubborn(database_url)
    worker.start()
    await asyncio.wait_for(worker.running.wait(), WIDE)
    await asyncio.wait_for(worker.stop(), WIDE)
    assert worker.cancels_ignored == 1
    assert worker._task is not None and worker._task.done()

