"""The server-side SDK: for background jobs, scripts and custom FastAPI routes.

Open a session as a principal (an app user in one org, with that user's roles and policies)
or as the app itself acting in an explicit org (every permission, no row policy, nothing
redacted, still confined to that org). Every method goes through the same plan, governed
reads and write service as the REST API (values and filters typed as the REST edge types
them), so every write records its change and reaches subscribers (stamped by the sequencer
of any running server process).

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

from authoric.catalog.apps import find_app
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes.capture import SETTING
from authoric.db import tables as t
from authoric.db.embedded import embedded_database_url
from authoric.db.engine import create_engine
from authoric.db.errors import translate
from authoric.errors import NotFound, Unauthenticated
from authoric.plan.access import Access, admit
from authoric.plan.listing import parse_limit
from authoric.plan.plan import Page
from authoric.plan.runner import ConnectionExecutor
from authoric.policy.principal import Principal
from authoric.query.filters import parse_filter
from authoric.records import bulk, csv_export, csv_import, reads, writes
from authoric.records.values import column_values
from authoric.settings import Settings


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
    async def _access(self, table: str,
                      action: str) -> AsyncIterator[tuple[ConnectionExecutor, Access]]:
        try:
            async with self.sdk.engine.begin() as conn:
                principal, snapshot = await self._current(conn)
                yield ConnectionExecutor(conn), admit(snapshot, principal, table, action)
        except DBAPIError as exc:  # the contract's errors, as the REST API gives them (409...)
            raise translate(exc) from exc

    async def _current(self, conn: AsyncConnection) -> tuple[Principal, AppSnapshot]:
        """The principal with its roles as of now, and the app's current snapshot."""
        p = self.principal
        version = await conn.scalar(select(t.apps.c.version).where(t.apps.c.uid == p.app_uid))
        if version is None:
            raise NotFound("no such app")
        if not p.acting_as_app:
            roles = await conn.scalar(select(t.members.c.roles).where(and_(
                t.members.c.org_uid == p.org_uid, t.members.c.user_uid == p.user_uid)))
            if roles is None:
                raise Unauthenticated("membership revoked")
            p = Principal(p.app_uid, p.user_uid, p.org_uid, p.email, tuple(roles))
        return p, await self.sdk.snapshots.get(conn, p.app_uid, version)

    async def create(self, table: str, values: dict[str, Any]) -> dict[str, Any]:
        async with self._access(table, "create") as (ex, access):
            typed = column_values(access.table, values, creating=True)
            return await writes.create_row(ex, access, typed)

    async def read(self, table: str, uid: str | uuid.UUID) -> dict[str, Any]:
        async with self._access(table, "read") as (ex, access):
            return await reads.read_one(ex, access, _uuid(uid, "row"))

    async def list(self, table: str, filter: dict[str, Any] | None = None, order: str | None = None,
                   limit: int | None = None, after: str | None = None) -> dict[str, Any]:
        async with self._access(table, "read_list") as (ex, access):
            page = Page(order, parse_limit(None if limit is None else str(limit)), after)
            return await reads.list_page(ex, access, parse_filter(filter or {}), page)

    async def update(self, table: str, uid: str | uuid.UUID, values: dict[str, Any]) -> dict[str, Any]:
        async with self._access(table, "update") as (ex, access):
            typed = column_values(access.table, values, creating=False)
            return await writes.update_row(ex, access, _uuid(uid, "row"), typed)

    async def delete(self, table: str, uid: str | uuid.UUID) -> None:
        async with self._access(table, "delete") as (ex, access):
            await writes.delete_row(ex, access, _uuid(uid, "row"))

    async def bulk_update(self, table: str, filter: dict[str, Any], values: dict[str, Any]) -> int:
        async with self._access(table, "update") as (ex, access):
            plan = bulk.checked_plan(access, parse_filter(filter))
            typed = column_values(access.table, values, creating=False)
            return await bulk.bulk_update(ex, access, plan, typed)

    async def bulk_delete(self, table: str, filter: dict[str, Any]) -> int:
        async with self._access(table, "delete") as (ex, access):
            return await bulk.bulk_delete(ex, access, parse_filter(filter))

    async def import_csv(self, table: str, chunks: AsyncIterator[bytes]) -> int:
        async with self._access(table, "create") as (ex, access):
            return await csv_import.import_csv(ex.conn, access, chunks)

    async def export_csv(self, table: str, filter: dict[str, Any] | None = None,
                         order: str | None = None) -> AsyncIterator[bytes]:
        async with self._access(table, "read_list") as (_, access):
            statement = csv_export.export_statement(access, parse_filter(filter or {}), order)
        async for chunk in csv_export.export_csv(self.sdk.engine, access, statement):
            yield chunk

    async def sql(self, statement: str, params: dict[str, Any] | None = None) -> builtins.list[Any]:
        """Raw SQL in its own transaction. Produces change events only for tables with
        `captureSqlWrites` (like any direct SQL write); others' subscribers never hear of
        what it writes. Tables live in schema `app_<app uid hex>`."""
        async with self.sdk.engine.begin() as conn:
            # A direct SQL write: not filed by the platform, so capture must not skip it.
            await conn.execute(text(f"SELECT set_config('{SETTING}', 'off', true)"))
            result = await conn.execute(text(statement), params or {})
            return list(result.mappings()) if result.returns_rows else []
