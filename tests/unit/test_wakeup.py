"""The flag the relay and the sequencer sleep on (db/dedicated.py, `Wakeup`), in process: the
relay waiting for a NOTIFY, the sequencer for a nudge, each with a deadline, and a shutdown
cancelling either. The deadline must end the wait without cancelling the worker's task."""

from __future__ import annotations

import asyncio

import pytest

from authoric.db.dedicated import Wakeup


async def test_a_worker_woken_by_a_notify_returns_true_at_once() -> None:
    wake = Wakeup()
    waiting = asyncio.create_task(wake.wait(3600))
    await asyncio.sleep(0)
    wake.set()
    assert await asyncio.wait_for(waiting, 60) is True


async def test_a_worker_whose_flag_was_set_before_it_waits_does_not_wait() -> None:
    wake = Wakeup()
    wake.set()
    assert await asyncio.wait_for(wake.wait(3600), 60) is True
    wake.clear()
    assert not wake.is_set()


async def test_a_worker_nobody_wakes_returns_false_at_its_deadline_without_being_cancelled(
        ) -> None:
    wake = Wakeup()
    task = asyncio.create_task(wake.wait(0.01))
    assert await asyncio.wait_for(task, 60) is False
    assert not task.cancelled() and task.cancelling() == 0


async def test_a_shutdown_that_cancels_the_worker_as_it_is_woken_ends_the_wait() -> None:
    wake = Wakeup()
    waiting = asyncio.create_task(wake.wait(3600))
    await asyncio.sleep(0)
    wake.set()
    waiting.cancel()  # in the same turn of the loop as the wake-up
    with pytest.raises(asyncio.CancelledError):
        await waiting

