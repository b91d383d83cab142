"""The server-side SDK: for background jobs, scripts and custom FastAPI routes.

Open a session as a principal (an app user in one org, with that user's roles and policies)
or as the app itself acting in an explicit org (every permission, no row policy, nothing
redacted, still confined to that org). Every method is one `TableRequest` (plan.request
`call`, parsed by the REST edge's parsers) run by the REST API's own pipeline
(records.pipeline `execute`) as a `Fresh` caller: in one transaction whose roles and catalog
are read in it. So every write records its change and reaches subscribers (stamped by the
sequencer of any running server process).

`Session.sql()` runs raw SQL. It is the one path that produces no events: the change log
knows nothing of it. Write through the CRUD methods when subscribers must hear of a change.

    sdk = await Authoric.connect()                        # DATABASE_URL or the embedded DB
    async with sdk.as_app("acme", org_uid) as s:
        row = await s.create("invoices", {"invoice_number": "A-1"})
    await sdk.close()
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.auth.principals import member_facts
from authoric.catalog.apps import find_app
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db import tables as t
from authoric.db.changelog import PLATFORM_WRITE
from authoric.db.embedded import embedded_database_url
from authoric.db.engine import create_engine
from authoric.db.errors import translate
from authoric.errors import NotFound
from authoric.plan.request import Operation, call
from authoric.policy.principal import Principal
from authoric.records.pipeline import Fresh, InTransaction, execute
from authoric.settings import Settings

# The setting $1 off for this transaction (run as written): SQL capture then files the writes.
SET_LOCAL_OFF = "SELECT set_config($1, 'off', true)"


class Authoric:
    """A connection to an Authoric database, from which sessions are opened."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.engine, self.settings = engine, settings
        self.snapshots = SnapshotCache()

    @classmethod
    async def connect(cls, database_url: str | None = None,
                      settings: Settings | None = None) -> Authoric:
        settings = settings or Settings()
        url = database_url or settings.database_url or embedded_database_url(settings.data_dir)
        return cls(create_engine(settings, url), settings)

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def as_app(self, app: str, org: str | uuid.UUID) -> AsyncIterator[Session]:
        """The app itself, acting in `org` (its uid or its name)."""
        async with self.engine.connect() as conn:
            row = await find_app(conn, app)
            org_uid = await _org_of(conn, row["uid"], org)
        yield Session(self, Principal(row["uid"], None, org_uid, None, (), None, acting_as_app=True))

    @asynccontextmanager
    async def as_user(self, app: str, user: str | uuid.UUID,
                      org: str | uuid.UUID) -> AsyncIterator[Session]:
        """An app user in one of its orgs, with that membership's roles (looked up per call)."""
        async with self.engine.connect() as conn:
            row = await find_app(conn, app)
            org_uid = await _org_of(conn, row["uid"], org)
            user_row = (await conn.execute(select(t.users.c.uid, t.users.c.email).where(and_(
                t.users.c.app_uid == row["uid"], t.users.c.uid == _uuid(user, "user"))))).first()
            if user_row is None:
                raise NotFound("no such user")
        yield Session(self, Principal(row["uid"], user_row.uid, org_uid, user_row.email, ()))


def _uuid(value: str | uuid.UUID, what: str) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(value)
    except ValueError as exc:
        raise NotFound(f"no such {what}") from exc


async def _org_of(conn: AsyncConnection, app_uid: uuid.UUID, org: str | uuid.UUID) -> uuid.UUID:
    """The org `org` names: its uid, or its name (unique within the app)."""
    try:
        named = t.orgs.c.uid == (org if isinstance(org, uuid.UUID) else uuid.UUID(org))
    except ValueError:
        named = t.orgs.c.name == org
    found = await conn.scalar(select(t.orgs.c.uid).where(and_(t.orgs.c.app_uid == app_uid, named)))
    if found is None:
        raise NotFound("no such org")
    return uuid.UUID(str(found))


@dataclass
class Session:
    sdk: Authoric
    principal: Principal

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[InTransaction]:
        """A transaction, and this session's principal in it, its roles and the app's snapshot
        read there (records.pipeline.Fresh: an SDK call never runs on cached facts)."""
        async with self.sdk.engine.begin() as conn:
            principal, snapshot = await self._current(conn)
            yield InTransaction(conn, self.sdk.engine, principal, snapshot)

    async def _current(self, conn: AsyncConnection) -> tuple[Principal, AppSnapshot]:
        """The principal with its roles as of now, and the app's current snapshot."""
        p = self.principal
        if p.acting_as_app:
            version = await conn.scalar(select(t.apps.c.version).where(t.apps.c.uid == p.app_uid))
            if version is None:
                raise NotFound("no such app")
        else:  # roles as a request's are loaded (auth.principals), without a token's membership
            assert p.user_uid is not None
            facts = await member_facts(conn, str(p.app_uid), p.app_uid, p.user_uid, p.org_uid,
                                       None, any_membership=True)
            version = facts.version
            p = Principal(p.app_uid, p.user_uid, p.org_uid, facts.email, facts.roles or ())
        return p, await self.sdk.snapshots.get(conn, p.app_uid, version)

    async def _execute(self, table: str, operation: Operation, uid: str | uuid.UUID | None = None,
                       chunks: AsyncIterator[bytes] | None = None, **parts: Any) -> Any:
        """One call through the request pipeline, as REST runs it (records.pipeline)."""
        request = call(str(self.principal.app_uid), table, operation, uid, **parts)
        try:
            return await execute(Fresh(self.transaction), request, chunks)
        except DBAPIError as exc:  # the contract's errors, as the REST API gives them (409...)
            raise translate(exc) from exc

    async def create(self, table: str, values: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = await self._execute(table, "create", body=values)
        return row

    async def read(self, table: str, uid: str | uuid.UUID) -> dict[str, Any]:
        row: dict[str, Any] = await self._execute(table, "read", uid)
        return row

    async def list(self, table: str, filter: dict[str, Any] | None = None, order: str | None = None,
                   limit: int | None = None, after: str | None = None) -> dict[str, Any]:
        page: dict[str, Any] = await self._execute(table, "list", filter=filter, order=order,
                                                   limit=limit, after=after)
        return page

    async def update(self, table: str, uid: str | uuid.UUID, values: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = await self._execute(table, "update", uid, body=values)
        return row

    async def delete(self, table: str, uid: str | uuid.UUID) -> None:
        await self._execute(table, "delete", uid)

    async def bulk_update(self, table: str, filter: dict[str, Any], values: dict[str, Any]) -> int:
        done = await self._execute(table, "update_where", filter=filter, body={"set": values})
        return int(done["count"])

    async def bulk_delete(self, table: str, filter: dict[str, Any]) -> int:
        return int((await self._execute(table, "delete_where", filter=filter))["count"])

    async def import_csv(self, table: str, chunks: AsyncIterator[bytes]) -> int:
        return int((await self._execute(table, "import", chunks=chunks))["inserted"])

    async def export_csv(self, table: str, filter: dict[str, Any] | None = None,
                         order: str | None = None) -> AsyncIterator[bytes]:
        async for chunk in await self._execute(table, "export", filter=filter, order=order):
            yield chunk

    async def sql(self, statement: str, params: dict[str, Any] | None = None) -> builtins.list[Any]:
        """Raw SQL in its own transaction. Produces change events only for tables with
        `captureSqlWrites` (like any direct SQL write); others' subscribers never hear of
        what it writes. Tables live in schema `app_<app uid hex>`."""
        async with self.sdk.engine.begin() as conn:
            # A direct SQL write: not filed by the platform, so capture must not skip it.
            await conn.exec_driver_sql(SET_LOCAL_OFF, (PLATFORM_WRITE,))
            result = await conn.execute(text(statement), params or {})
            return list(result.mappings()) if result.returns_rows else []
