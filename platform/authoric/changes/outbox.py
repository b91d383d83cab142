"""The platform's change log as the stream's `Source` (realtime/source.py).

Live changes come through the relay (`changes/relay.py`: LISTEN, then a read by position);
resumes read the log by position on a pooled connection. Everything about the log's table
and its SQL stays in `changes/`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.changes import reader
from authoric.changes.relay import BATCH, Relay
from authoric.realtime.source import Change, Sink


class OutboxSource:
    def __init__(self, engine: AsyncEngine, dsn: str, batch: int = BATCH) -> None:
        self.engine, self.dsn, self.batch = engine, dsn, batch
        self.relay: Relay | None = None

    @property
    def position(self) -> int:
        return self.relay.position if self.relay is not None else -1

    def start(self, sink: Sink) -> None:
        self.relay = Relay(self.dsn, sink, batch=self.batch)
        self.relay.start()

    async def stop(self) -> None:
        if self.relay is not None:
            await self.relay.stop()

    def listening(self) -> bool:
        relay = self.relay
        # `is_closed` turns true as soon as the socket drops, before the relay's next read.
        return (relay is not None and relay.connected.is_set() and relay.conn is not None
                and not relay.conn.is_closed())

    @asynccontextmanager
    async def _driver(self, given: asyncpg.Connection | None) -> AsyncIterator[asyncpg.Connection]:
        if given is not None:
            yield given
            return
        async with self.engine.connect() as conn:
            yield (await conn.get_raw_connection()).driver_connection

    async def bounds(self, conn: asyncpg.Connection | None = None) -> tuple[int, int]:
        async with self._driver(conn) as raw:
            return await reader.bounds(raw)

    async def entries(self, app_uid: uuid.UUID, tables: Sequence[str], org_uid: uuid.UUID | None,
                      after: int, upto: int, limit: int,
                      conn: asyncpg.Connection | None = None) -> list[Change]:
        async with self._driver(conn) as raw:
            return await reader.changes_in(raw, app_uid, tables, org_uid, after, upto, limit)
