"""The services a request handler reaches: built once in the lifespan, kept on app.state.

The table routes run their requests through `Services.callers` (callers.py: token → facts →
snapshot → gate → plan → statement); the rest reach the engine, the caches and the workers
here."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from fastapi import Request
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.auth.api_keys import ApiKeys
from authoric.auth.principals import FactsCache
from authoric.auth.ratelimit import RateLimiter
from authoric.auth.tokens import VerifiedTokens
from authoric.callers import Callers
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes.sequencer import Sequencer
from authoric.mail.sender import MailSender
from authoric.observability.metrics import Metrics
from authoric.plan.runner import StatementCache, count_round_trip
from authoric.realtime.hub import Hub
from authoric.realtime.source import Source
from authoric.settings import Settings
from authoric.tables.indexes import IndexBuilder

# Requests that hash or check a password (sign-in, sign-up, reset, change) one process runs at
# once; the rest wait their turn holding nothing. Argon2 takes a few hundred CPU milliseconds:
# a burst of a thousand sign-ins would otherwise all hold pooled connections while the CPU
# works through them, and time out waiting for one (bench.signin_burst).
PASSWORD_SLOTS = 4
COUNT_FLAG = "AUTHORIC_TEST_COUNT_ROUND_TRIPS"  # tests only: X-Authoric-Round-Trips header


@dataclass
class Services:
    settings: Settings
    engine: AsyncEngine
    jwt_secret: str
    admin_token: str
    snapshots: SnapshotCache
    token_limiter: RateLimiter
    hub: Hub
    sequencer: Sequencer
    pool: asyncpg.Pool | None = None  # the request path's autocommit pool
    source: Source | None = None  # where streams' changes come from (the change log)
    mail_sender: MailSender | None = None  # None: no SMTP server, mail stays in the mailbox
    metrics: Metrics | None = None  # None: nothing counted (a Services built outside the app)
    password_work: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(PASSWORD_SLOTS))
    statements: StatementCache = field(default_factory=StatementCache)
    facts: FactsCache = field(default_factory=FactsCache)
    tokens: VerifiedTokens = field(init=False)
    api_keys: ApiKeys = field(init=False)
    indexes: IndexBuilder = field(init=False)
    callers: Callers = field(init=False)  # the table routes' members, and their requests
    count_round_trips: bool = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = VerifiedTokens(self.jwt_secret)
        self.api_keys = ApiKeys(self.engine)
        if self.metrics is not None:
            self.api_keys.writing = self.metrics.api_key_writes.inc
        self.hub.policy_listeners.append(self.api_keys.forget)
        self.indexes = IndexBuilder(self.engine)
        self.callers = Callers(self.engine, self.pool, self.snapshots, self.statements,
                               self.facts, self.tokens, self.api_keys, self.tx,
                               self.sequencer.nudge)
        self.count_round_trips = os.environ.get(COUNT_FLAG) == "1"
        if self.count_round_trips:
            _count_engine_round_trips(self.engine)

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[AsyncConnection]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        async with self.engine.begin() as conn:
            yield conn
        # The transaction may have written change-log rows: stamp them without waiting.
        self.sequencer.nudge()

    async def snapshot(self, conn: AsyncConnection, app_uid: Any, version: int) -> AppSnapshot:
        return await self.snapshots.get(conn, app_uid, version)


def _count_engine_round_trips(engine: AsyncEngine) -> None:
    """Count what the engine sends (statements, BEGIN, COMMIT, ROLLBACK) for the test header."""
    sync = engine.sync_engine
    for name in ("before_cursor_execute", "begin", "commit", "rollback"):
        event.listen(sync, name, lambda *args, **kwargs: count_round_trip())


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc
