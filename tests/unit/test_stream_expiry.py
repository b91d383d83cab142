"""A stream at its token's expiry (realtime/stream.py): a subscriber whose token has expired
gets `reauth` and the end of the stream, never a change that came in as it expired."""

from __future__ import annotations

import asyncio
import time
import uuid

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


def test_a_subscriber_whose_token_expired_while_a_change_came_in_gets_reauth_not_the_change(
        ) -> None:
    settings = Settings()
    hub = Hub(create_engine(settings, "postgresql://postgres@127.0.0.1:1/none"), SnapshotCache())
    snapshot = AppSnapshot(APP, "notes-app", 1, {}, {}, {}, build_enforcer({}))
    expires = time.time() + 0.5
    principal = Principal(APP, uuid.uuid4(), uuid.uuid4(), None, ("reader",), expires)
    stream = Stream(settings, hub.engine, hub, None,  # type: ignore[arg-type]  # no replay
                    StreamRequest(snapshot, [Notes()], principal, None))  # type: ignore[list-item]

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
