"""The table routes' callers: the member a bearer (an access token, or an API key acting as a
member of its org) names, resolved for the pipeline (records.pipeline `execute`), and the
request path that runs a table request as that member: token → facts → snapshot → gate →
plan → statement.

A table request costs one statement when nothing changed: the token's claims come from a
cache of verified tokens, the (app version, roles, email) facts from a per-member cache, the
decision from the snapshot's decision cache, and the statement itself re-checks the facts
(plan.guard). When the guard finds them moved, the facts it returned refresh the cache and
the request is planned again, so a change committed before the statement applies to it.

It stands below the routes (http/) so that `execute`, which asks its caller for a
transaction, never calls back up into them: the routes hand it a header and a
`TableRequest`, and get the answer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.auth.api_keys import ApiKeys, is_api_key
from authoric.auth.principals import (
    FactsCache,
    bearer,
    facts_or_refusal,
    load_facts,
    matches_app,
    principal_of,
)
from authoric.auth.tokens import Claims, VerifiedTokens
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.errors import AuthoricError
from authoric.plan.access import Access, admit
from authoric.plan.guard import PLAN_ATTEMPTS, Facts, Guard, StaleFacts, kept_changing, until_held
from authoric.plan.request import TableRequest
from authoric.plan.runner import (
    PoolExecutor,
    StatementCache,
    count_round_trip,
    prepared_on_old_tables,
)
from authoric.policy.principal import Principal
from authoric.records.pipeline import InTransaction, execute

T = TypeVar("T")

MemberKey = tuple[uuid.UUID, uuid.UUID, uuid.UUID]


@dataclass
class Callers:
    """Table requests run as the member a bearer names. Built once with the services it uses
    (http/context.py `Services.callers`)."""

    engine: AsyncEngine
    pool: asyncpg.Pool | None  # the request path's autocommit pool
    snapshots: SnapshotCache
    statements: StatementCache
    facts: FactsCache
    tokens: VerifiedTokens
    api_keys: ApiKeys
    # A transaction on the engine that nudges the sequencer once it commits (Services.tx).
    tx: Callable[[], AbstractAsyncContextManager[AsyncConnection]]
    # Stamp committed change-log rows without waiting (the sequencer's nudge).
    nudge: Callable[[], None]

    async def run(self, header: str | None, request: TableRequest) -> Any:
        """`request` executed as the bearer's member (records.pipeline): planned from the
        cached facts, whose statement checks them; planned again when they moved."""
        claims = await self.table_claims(header)
        if claims.org_uid is None:  # an account token: 404 or 401 first, as any token gets
            async with self.engine.connect() as conn:
                await load_facts(conn, claims, request.app)
        answer = await self._run_guarded(header, claims, request)
        if request.writes:
            self.nudge()  # the change-log row is committed: stamp it without waiting
        return answer

    async def table_claims(self, header: str | None) -> Claims:
        """Who the bearer is on a table route (sections 4, 5, 5b): an access token, or an API
        key acting as a member of its org. Only these routes take keys."""
        token = bearer(header)
        if is_api_key(token):
            return await self.api_keys.claims(token)
        return self.tokens.access(token)

    async def snapshot_at(self, app_uid: uuid.UUID, version: int) -> AppSnapshot:
        """The app's snapshot at `version` (or later), from memory when it is there."""
        cached = self.snapshots.cached(app_uid)
        if cached is not None and cached.version == version:
            return cached
        async with self.engine.connect() as conn:
            return await self.snapshots.get(conn, app_uid, version)

    async def _run_guarded(self, header: str | None, claims: Claims,
                           request: TableRequest) -> Any:
        app_ref = request.app
        assert claims.org_uid is not None  # `run` refused an account token
        key: MemberKey = (claims.app_uid, claims.user_uid, claims.org_uid)
        facts = self.facts.get(key)
        verified = False
        assert self.pool is not None
        for _ in range(PLAN_ATTEMPTS):
            if facts is None or not matches_app(app_ref, claims.app_uid, facts):
                async with self.engine.connect() as conn:
                    count_round_trip()
                    facts = await load_facts(conn, claims, app_ref)
                self.facts.put(key, facts)
                verified = True
            snapshot = await self.snapshot_at(claims.app_uid, facts.version)
            expected = Facts(snapshot.version, facts.app_name, facts.roles, facts.email)
            if expected != facts:
                # The snapshot is newer than the cached version: plan for it, and keep it, so
                # the next request does not load the snapshot again (the guard checks it).
                facts = expected
                self.facts.put(key, facts)
            guard = Guard(claims.app_uid, claims.user_uid, claims.org_uid, expected,
                          membership=claims.membership)
            caller = Guarded(self, header, app_ref, principal_of(claims, facts), snapshot,
                             PoolExecutor(self.pool, self.statements,
                                          (claims.app_uid, snapshot.version), guard))
            try:
                return await execute(caller, request)
            except StaleFacts as stale:
                if stale.facts is None:  # the app is gone: the loader gives the exact answer
                    self.facts.forget(key)
                    facts = None
                    continue
                try:
                    facts = facts_or_refusal(stale.facts)
                except AuthoricError:
                    self.facts.forget(key)
                    raise
                self.facts.put(key, facts)
                verified = True
            except (AuthoricError, DBAPIError) as error:
                # Refused on facts from the cache that no statement has confirmed (before any
                # statement), or by a statement that failed: planned for a catalog that moved
                # before it ran (a renamed or retyped column), it fails before its guard is
                # looked at. The answer stands only if the facts are still current. (A write
                # that committed never gets here: records.pipeline keeps its answer.)
                if prepared_on_old_tables(error):
                    continue  # a transaction's statement prepared before a retype: again
                if (verified or guard.held) and not _from_a_statement(error):
                    raise
                async with self.engine.connect() as conn:
                    count_round_trip()
                    current = await load_facts(conn, claims, app_ref)
                if current == guard.expected:
                    raise
                self.facts.put(key, current)
                facts, verified = current, True
        raise kept_changing()

    async def export(self, header: str | None,
                     request: TableRequest) -> tuple[AsyncIterator[bytes], str]:
        """A CSV export as the bearer's member, and its file's name: planned in a transaction
        whose facts its statement checks (the rows are read on their own connection, after
        the transaction); planned again when they moved (a rename committed in between), so
        the body is never read at another catalog version, nor cut off by one."""
        for _ in range(PLAN_ATTEMPTS):
            guard: Guard | None = None
            try:
                async with self.member_transaction(header, request.app) as caller:
                    guard = caller.guard
                    rows = await execute(caller, request)
                    return rows, caller.snapshot.table(request.table).name
            except StaleFacts:
                continue
            except DBAPIError as error:
                # The first rows' statement failed: on a catalog that moved, plan again.
                if guard is None:
                    raise
                if prepared_on_old_tables(error):
                    continue
                async with self.engine.connect() as conn:
                    # The same bearer as the attempt's: an access token or an API key.
                    current = await load_facts(conn, await self.table_claims(header),
                                               request.app)
                if current.version == guard.expected.version:
                    raise
        raise kept_changing()

    async def transacted(self, header: str | None, app_ref: str,
                         work: Callable[[InTransaction], Awaitable[T]]) -> T:
        """`work` as the bearer's member in `member_transaction`, planned again in a new one
        when the catalog or the member's facts moved under it (its guard failed before it
        ended, records.pipeline `confirmed`, and it rolled back)."""
        async def attempt() -> T:
            async with self.member_transaction(header, app_ref) as caller:
                return await work(caller)

        return await until_held(attempt)

    @asynccontextmanager
    async def member_transaction(self, header: str | None,
                                 app_ref: str) -> AsyncIterator[InTransaction]:
        """A transaction, and the bearer's member as a caller inside it (facts read there)."""
        claims = await self.table_claims(header)
        async with self.tx() as conn:
            count_round_trip()
            facts = await load_facts(conn, claims, app_ref)
            snapshot = await self.snapshots.get(conn, claims.app_uid, facts.version)
            guard = Guard(claims.app_uid, claims.user_uid, claims.org_uid,
                          Facts(snapshot.version, facts.app_name, facts.roles, facts.email),
                          membership=claims.membership)
            yield InTransaction(conn, self.engine, principal_of(claims, facts), snapshot, guard)


def _from_a_statement(error: BaseException) -> bool:
    """Whether the database refused a statement (rather than the request being refused
    before one ran)."""
    return isinstance(error, DBAPIError) or isinstance(error.__cause__,
                                                      (asyncpg.PostgresError, DBAPIError))


@dataclass
class Guarded:
    """The request path's caller: planned from cached facts, one guarded statement at a time
    on the autocommit pool; its transaction reads the facts afresh."""

    callers: Callers
    header: str | None
    app_ref: str
    principal: Principal
    snapshot: AppSnapshot
    ex: PoolExecutor

    at_once = True

    def admit(self, table: str, action: str) -> Access:
        return admit(self.snapshot, self.principal, table, action)

    def transaction(self) -> AbstractAsyncContextManager[InTransaction]:
        return self.callers.member_transaction(self.header, self.app_ref)
