"""One subscriber's stream: `connected`, replay from the log, then live frames, pings, and
`reauth` at the token's expiry (on a timer, not at the next event)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.changes import reader
from authoric.policy.principal import Principal
from authoric.realtime.hub import CLOSE, Hub, Subscriber
from authoric.realtime.judge import ReadClass, frame, judge
from authoric.settings import Settings

PING = b": ping\n\n"
POSITION = re.compile(r"[0-9]{1,19}")  # ASCII digits only: "+5", "1_0", "٣" do not parse
REPLAY_CHUNK = 500


@dataclass
class StreamRequest:
    snapshot: AppSnapshot
    table: CompiledTable
    principal: Principal
    last_event_id: str | None


class Stream:
    def __init__(self, settings: Settings, engine: AsyncEngine, hub: Hub, req: StreamRequest) -> None:
        self.settings, self.engine, self.hub, self.req = settings, engine, hub, req
        self.sub = Subscriber(req.principal.app_uid, req.table.name, req.principal,
                              asyncio.Queue(maxsize=settings.sse_queue_size))
        self.last_sent = 0

    async def frames(self) -> AsyncIterator[bytes]:
        # Register before replaying, so nothing committed meanwhile falls between the two.
        self.hub.add(self.sub, self.req.snapshot)
        try:
            yield frame(None, {"table": self.req.table.name, "live": True}, "connected")
            if self.req.last_event_id is not None:
                async for chunk in self._replay(self.req.last_event_id):
                    yield chunk
            async for chunk in self._live():
                yield chunk
        finally:
            self.hub.remove(self.sub)

    async def _replay(self, raw: str) -> AsyncIterator[bytes]:
        async with self.engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            head = await reader.head(driver)
            try:
                if not POSITION.fullmatch(raw.strip()):
                    raise ValueError(raw)
                start = int(raw.strip())
                if start > head:
                    raise ValueError(raw)
            except ValueError:
                self.last_sent = head
                yield frame(head, {"reason": "invalid_position"}, "resync")
                return
            horizon = await reader.horizon(driver)
            if start < horizon:
                yield frame(None, {"reason": "backfill_expired"}, "resync")
                start = horizon
            limit = self.settings.sse_replay_limit
            entries = await reader.table_changes_after(
                driver, self.req.principal.app_uid, self.req.table.name, start, head, limit + 1)
            truncated = len(entries) > limit
            entries = entries[:limit]
            cls = ReadClass(self.sub.key, self.sub.principal)
            for i in range(0, len(entries), REPLAY_CHUNK):
                chunk = entries[i:i + REPLAY_CHUNK]
                judged = await judge(conn, self.req.snapshot, self.req.table, [cls], chunk)
                if judged[cls.key]:
                    yield b"".join(item.data for item in judged[cls.key])
        if truncated:
            yield frame(head, {"reason": "backfill_truncated", "lastId": entries[-1].pos}, "resync")
        self.last_sent = head

    async def _live(self) -> AsyncIterator[bytes]:
        ping_every = self.settings.sse_ping_interval
        expires = self.req.principal.expires_at or float("inf")
        next_ping = time.time() + ping_every
        queue = self.sub.queue
        while True:
            now = time.time()
            if now >= expires:
                yield frame(None, {"reason": "token_expired"}, "reauth")
                return
            if now >= next_ping:
                yield PING
                next_ping = now + ping_every
            try:
                item = await asyncio.wait_for(queue.get(), min(next_ping, expires) - now)
            except TimeoutError:
                continue
            # Send everything already queued in one write, not one write per frame.
            out: list[bytes] = []
            while True:
                if item is CLOSE:
                    if out:
                        yield b"".join(out)
                    return
                if item.pos > self.last_sent:  # else: already replayed
                    self.last_sent = item.pos
                    out.append(item.data)
                if queue.empty():
                    break
                item = queue.get_nowait()
            if out:
                yield b"".join(out)
