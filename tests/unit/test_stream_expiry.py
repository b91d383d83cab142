"""A stream at its token's expiry (realtime/stream.py): a subscriber whose token has expired
gets `reauth` and the end of the stream, never a change that came in as it expired."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from authoric import clock
from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db.engine import create_engine
from authoric.policy.principal import Principal
from authoric.realtime.hub import Hub
from authoric.realtime.judge import Frame
from authoric.realtime.stream import Stream, StreamRequest
from authoric.settings import Settings

APP = uuid.uuid4()


class Notes:
    name = "notes"


def reader_stream(expires: float) -> Stream:
    """A reader's stream of `notes` (no database: nothing is replayed or judged), whose token
    expires at `expires`."""
    settings = Settings()
    hub = Hub(create_engine(settings, "postgresql://postgres@127.0.0.1:1/none"), SnapshotCache())
    snapshot = AppSnapshot(APP, "notes-app", 1, {}, {}, {}, build_enforcer({}))
    principal = Principal(APP, uuid.uuid4(), uuid.uuid4(), None, ("reader",), expires)
    return Stream(settings, hub.engine, hub, None,  # type: ignore[arg-type]  # no replay
                  StreamRequest(snapshot, [Notes()], principal, None))  # type: ignore[list-item]


def test_a_subscriber_whose_token_expired_while_a_change_came_in_gets_reauth_not_the_change(
        ) -> None:
    expires = time.time() + 0.5
    stream = reader_stream(expires)

    async def run() -> list[bytes]:
        stream.open()
        frames = stream.frames()
        sent = [await frames.__anext__()]  # `connected`
        following = asyncio.ensure_future(frames.__anext__())
        deadline = time.monotonic() + 60
        while stream.sub._waiter is None and not following.done():
            assert time.monotonic() < deadline, "the stream never waited"
            await asyncio.sleep(0)
        # The loop is held up past the expiry (a long pass, a busy box); a change comes in
        # before the expiry's timer can ring.
        time.sleep(max(0.0, expires - time.time()) + 0.05)
        stream.sub.offer([Frame(7, b"id: 7\ndata: {}\n\n", time.time())])
        sent.append(await asyncio.wait_for(following, 60))
        sent.extend([chunk async for chunk in frames])
        return sent

    sent = asyncio.run(run())
    assert b"event: connected" in sent[0]
    assert [b"event: reauth" in chunk for chunk in sent[1:]] == [True]
    assert not any(b"id: 7" in chunk for chunk in sent)


def test_an_idle_subscriber_gets_reauth_from_the_expiry_timer_alone_on_the_wall_clock() -> None:
    # No test clock, no event, no ping due (every 25 s): only the timer armed for the token's
    # expiry can wake the stream, so a `reauth` at all is the proof (no bound on when).
    expires = time.time() + 0.2
    stream = reader_stream(expires)

    async def run() -> list[bytes]:
        stream.open()
        return [chunk async for chunk in stream.frames()]

    sent = asyncio.run(asyncio.wait_for(run(), 60))
    assert b"event: connected" in sent[0]
    assert [b"event: reauth" in chunk for chunk in sent[1:]] == [True]
    assert time.time() >= expires


def test_a_subscriber_gets_reauth_once_a_test_moves_the_clock_past_its_token_s_expiry(
        tmp_path: Path) -> None:
    # An hour-long token: only the moved clock (authoric.clock's test clock) can expire it.
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    stream = reader_stream(time.time() + 3600)

    async def run() -> list[bytes]:
        stream.open()
        frames = stream.frames()
        sent = [await frames.__anext__()]  # `connected`
        following = asyncio.ensure_future(frames.__anext__())
        deadline = time.monotonic() + 60
        while stream.sub._waiter is None and not following.done():
            assert time.monotonic() < deadline, "the stream never waited"
            await asyncio.sleep(0)
        offset.write_text("3601")
        sent.append(await asyncio.wait_for(following, 60))
        sent.extend([chunk async for chunk in frames])
        return sent

    clock.install(offset)
    try:
        sent = asyncio.run(run())
    finally:
        clock.install(None)
    assert b"event: connected" in sent[0]
    assert [b"event: reauth" in chunk for chunk in sent[1:]] == [True]
