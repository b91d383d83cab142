"""One subscriber's stream over a set of one or more tables of an app: `connected`, replay
from the log, then live frames, pings, and `reauth` at the token's expiry (on a timer, not at
the next event; the expiry is a time of `authoric.clock`, which tests move).

The per-table stream (section 5), the multi-table stream (5b) and the operator's feed (2a)
are this one class: they differ only in the set of tables, the `connected` payload, and who
reads (a member's principal, or None for the operator: every org, no policy).
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric import clock
from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.plan.request import ExpandPaths
from authoric.policy.principal import Principal
from authoric.realtime.hub import Hub, Subscriber
from authoric.realtime.judge import Frame, ReadClass, frame, judge
from authoric.realtime.operator import judge_for_operator
from authoric.realtime.source import POSITION, Change, Source
from authoric.realtime.stream_leases import Lease
from authoric.settings import Settings

PING = b": ping\n\n"
REPLAY_CHUNK = 500
NONE_WRITTEN: list[float] = []  # shared, never appended to: no list per idle stream


@dataclass(slots=True)
class StreamRequest:
    snapshot: AppSnapshot
    tables: Sequence[CompiledTable]
    principal: Principal | None  # None: the operator's feed
    last_event_id: str | None
    multi: bool = False  # opened as `/{app}/subscribe?tables=`: `connected` lists the tables
    expand: ExpandPaths = ()  # `?expand=` of a per-table stream, checked against the table

    @property
    def expires_at(self) -> float:
        """When the stream sends `reauth` and ends: the token's expiry, or never (the
        operator's feed)."""
        return (self.principal.expires_at if self.principal else None) or float("inf")

    def connected(self) -> dict[str, Any]:
        names = [t.name for t in self.tables]
        if self.multi:
            return {"tables": names, "live": True}
        return {"table": names[0], "live": True}


class Stream:
    """Held for as long as its client stays: what an idle stream keeps per client is this,
    its Subscriber and the frames() generator, so both classes have slots and hold no more
    than the loop needs (docs/benchmarks-realtime.md, idle connections)."""

    __slots__ = ("engine", "hub", "last_sent", "lease", "req", "settings", "source", "sub",
                 "written")

    def __init__(self, settings: Settings, engine: AsyncEngine, hub: Hub, source: Source,
                 req: StreamRequest) -> None:
        self.settings, self.engine, self.hub, self.req = settings, engine, hub, req
        self.source = source
        self.sub = Subscriber(req.snapshot.uid, tuple(t.name for t in req.tables), req.principal,
                              settings.sse_queue_size, expand=req.expand)
        # The per-user cap's lease (realtime/stream_leases.py), released with the stream.
        self.lease: Lease | None = None
        self.last_sent = 0
        # When the changes of the live frames in the chunk last yielded were written; read
        # after the chunk was sent, for the delivery-latency histogram.
        self.written: list[float] = NONE_WRITTEN

    def open(self) -> None:
        """Register with the hub. Done before the response starts, and before replaying, so
        nothing committed meanwhile falls between replay and live. (The per-user cap is the
        deployment's: realtime/stream_leases.py.)"""
        self.hub.add(self.sub, self.req.snapshot)

    def close(self) -> None:
        """Unregister and release the lease (idempotent): the stream ended, or its response
        never started."""
        self.hub.remove(self.sub)
        self.sub.stop_timer()
        if self.lease is not None:
            self.lease.release()

    async def frames(self) -> AsyncIterator[bytes]:
        """`connected`, the replay, then live frames, pings and `reauth`, in one generator
        (each nested one would stay alive, and be paid for, as long as the stream)."""
        try:
            yield frame(None, self.req.connected(), "connected")
            if self.req.last_event_id is not None:
                async for chunk in self._replay(self.req.last_event_id):
                    yield chunk
            ping_every = self.settings.sse_ping_interval
            expires = self.req.expires_at  # a time of `clock`, as the token's expiry is
            recheck = clock.recheck_after()  # for ever, unless a test moves the clock
            next_ping = time.time() + ping_every
            sub = self.sub
            while True:
                now = time.time()
                # The expiry on the wall clock: exactly `expires` but under the test clock,
                # so waits share their timer (hub.Subscriber.wait) as they always have.
                deadline = expires - clock.offset()
                if now >= deadline:
                    yield frame(None, {"reason": "token_expired"}, "reauth")
                    return
                if now >= next_ping:
                    yield PING
                    next_ping = now + ping_every
                await sub.wait(min(next_ping, deadline, now + recheck))
                if time.time() >= expires - clock.offset():
                    continue  # `reauth` and the end, not what came in meanwhile
                items = sub.take()
                if items is None:
                    continue  # a ping or the token's expiry is due
                chunk, ended = self.pack(items)
                if chunk:
                    yield chunk  # its reader tallies `written` and clears it
                if ended:
                    return
        finally:
            self.close()

    def pack(self, items: Iterable[Frame]) -> tuple[bytes, bool]:
        """Frames as one write (not one write per frame), skipping those already sent (by the
        replay), and whether the stream must end; `written` gets the frames' write times."""
        out: list[bytes] = []
        stamps: list[float] = []
        for item in items:
            if item.pos < 0:  # CLOSE, or a closing frame of its own (`hub.REVOKED`)
                out.append(item.data)
                self.written = stamps
                return b"".join(out), True
            if item.pos > self.last_sent:  # else: already replayed
                self.last_sent = item.pos
                out.append(item.data)
                stamps.append(item.at)
        self.written = stamps
        return b"".join(out), False

    async def _replay(self, raw: str) -> AsyncIterator[bytes]:
        head, horizon = await self.source.bounds()
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
        if start < horizon:
            yield frame(None, {"reason": "backfill_expired"}, "resync")
            start = horizon
        limit = self.settings.sse_replay_limit
        org = self.req.principal.org_uid if self.req.principal is not None else None
        entries = await self.source.entries(self.sub.app_uid, self.sub.tables, org,
                                            start, head, limit + 1)
        truncated = len(entries) > limit
        entries = entries[:limit]
        async with self.engine.connect() as conn:
            for i in range(0, len(entries), REPLAY_CHUNK):
                judged = await self._judge(conn, entries[i:i + REPLAY_CHUNK])
                if judged:
                    yield b"".join(item.data for item in judged)
        if truncated:
            yield frame(head, {"reason": "backfill_truncated", "lastId": entries[-1].pos}, "resync")
        self.last_sent = head

    async def _judge(self, conn: AsyncConnection, entries: Sequence[Change]) -> list[Frame]:
        """This subscriber's frames for replayed entries, in position order across tables."""
        by_table: dict[str, list[Change]] = defaultdict(list)
        for entry in entries:
            by_table[entry.table].append(entry)
        lists: list[list[Frame]] = []
        for name, batch in by_table.items():
            table = next(t for t in self.req.tables if t.name == name)
            if self.sub.principal is None:
                lists.append(await judge_for_operator(conn, table, batch))
                continue
            cls = ReadClass(self.sub.keys[name], self.sub.principal, self.sub.expand)
            lists.append((await judge(conn, self.req.snapshot, table, [cls], batch))[cls.key])
        return list(heapq.merge(*lists, key=lambda f: f.pos))
