"""The sequencer's wait for a nudge (changes/sequencer.py), in process: a shutdown that
cancels it just as a write nudges it still ends it. On Python 3.11 `asyncio.wait_for` returns
the event instead, swallowing the cancellation, and the server then never exited."""

from __future__ import annotations

import asyncio

import pytest

from authoric.changes.sequencer import Sequencer
from authoric.settings import Settings


async def test_a_shutdown_that_cancels_the_sequencer_as_a_write_nudges_it_ends_the_wait() -> None:
    sequencer = Sequencer(Settings(), "postgresql://unused")  # no connection is made
    waiting = asyncio.create_task(sequencer._woken(3600))
    await asyncio.sleep(0)  # the sequencer is now waiting for a nudge
    sequencer.nudge()
    waiting.cancel()  # in the same turn of the loop as the nudge
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_nudge_wakes_the_waiting_sequencer_at_once() -> None:
    sequencer = Sequencer(Settings(), "postgresql://unused")
    waiting = asyncio.create_task(sequencer._woken(3600))
    await asyncio.sleep(0)
    sequencer.nudge()
    assert await asyncio.wait_for(waiting, 60) is True
