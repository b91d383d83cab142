"""Running plans: SQLAlchemy builds a statement, it is compiled to PostgreSQL text once per shape,
and asyncpg runs it as a prepared statement on a pooled connection.

The request path's statements come as `Shaped` (plan.binds): their SQL text is kept per (app,
catalog version, shape key), so a repeat request builds no statement at all, it fills the named
slots. Other statements are kept per SQLAlchemy cache key, which captures a statement's shape
and extracts its bound values: a repeat pays for building the statement and its key, never for
compiling it. asyncpg keeps each connection's prepared statements, so a repeat statement is one
round trip.

The pool's connections run in autocommit: a single statement is its own transaction, so a read
or a write (its change-log row rides in the same statement) costs one round trip, with no
BEGIN and no COMMIT. Nothing pings a connection before use; a read that meets a dead
connection is retried once on a fresh one.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.db.errors import translate
from authoric.errors import InternalError
from authoric.plan.binds import PREFIX, Shaped

log = logging.getLogger("authoric")

MAX_COMPILED = 2000
# Errors after which the connection is gone, not the statement wrong: a read may be retried.
CONNECTION_LOST = (asyncpg.exceptions.ConnectionDoesNotExistError,
                   asyncpg.exceptions.PostgresConnectionError,
                   asyncpg.exceptions.InterfaceError, ConnectionError, OSError)

def prepared_on_old_tables(error: BaseException) -> bool:
    """Whether `error` is a statement prepared (and kept) on a connection before its tables
    changed: asyncpg's InvalidCachedStatementError ("cached plan must not change result
    type", after a retype) or its stale type cache ("cache lookup failed for type"). asyncpg
    retries such a statement itself outside a transaction; inside one (SQLAlchemy's
    connections) it cannot, and the statement is to be run again, planned afresh."""
    seen: BaseException | None = error
    for _ in range(4):  # SQLAlchemy's error, its adapter's, asyncpg's
        if seen is None:
            return False
        if isinstance(seen, asyncpg.exceptions.InvalidCachedStatementError) or (
                isinstance(seen, asyncpg.exceptions.InternalServerError)
                and "cache lookup failed for type" in str(seen)):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


# Statements sent per request, counted only when the server runs with the test flag on.
round_trips: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "round_trips", default=None)


def count_round_trip() -> None:
    counter = round_trips.get()
    if counter is not None:
        counter[0] += 1


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    compiled: Any


@dataclass(frozen=True)
class _Template:
    sql: str
    slots: tuple[tuple[str | None, Any], ...]  # per position: a param name, or None and a constant


class StatementCache:
    """Compiled SQL text per statement shape, bounded (least recently used goes first)."""

    def __init__(self) -> None:
        self.dialect = asyncpg_dialect.dialect()
        # Names may be 63 characters (PostgreSQL's limit). At the default label length,
        # SQLAlchemy renames such a column when a statement selects it from a CTE
        # (`inserted.<name>_1`), a column that does not exist. Our labels are column names or
        # short, so a longer allowance changes nothing else.
        self.dialect.label_length = 127
        self._entries: OrderedDict[Any, _Compiled] = OrderedDict()
        self._templates: OrderedDict[Any, _Template] = OrderedDict()

    def sql_and_args(self, scope: Any, statement: Any) -> tuple[str, list[Any]]:
        """The SQL text and positional arguments of `statement` (a `Shaped` or a SQLAlchemy
        statement) in `scope` (app, catalog version)."""
        if isinstance(statement, Shaped):
            if statement.key is None:
                return self.sql_and_args(scope, statement.build())
            return self._filled(scope, statement)
        key = statement._generate_cache_key()
        full = (scope, key.key)
        entry = self._entries.get(full)
        if entry is None:
            compiled = statement._compiler(self.dialect, cache_key=key, column_keys=None,
                                           for_executemany=False)
            entry = _Compiled(compiled.string, tuple(compiled.positiontup or ()), compiled)
            self._entries[full] = entry
            if len(self._entries) > MAX_COMPILED:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(full)
        params = entry.compiled.construct_params(extracted_parameters=key.bindparams,
                                                 escape_names=False)
        return entry.sql, [params[name] for name in entry.names]

    def _filled(self, scope: Any, shaped: Shaped) -> tuple[str, list[Any]]:
        full = (scope, shaped.key)
        template = self._templates.get(full)
        if template is None:
            template = self._templates[full] = self._template(shaped)
            if len(self._templates) > MAX_COMPILED:
                self._templates.popitem(last=False)
        else:
            self._templates.move_to_end(full)
        params = shaped.params
        return template.sql, [params[name] if name is not None else constant
                              for name, constant in template.slots]

    def _template(self, shaped: Shaped) -> _Template:
        """Compile the statement once and tell its named slots from its constants, checking
        that the plan bound exactly the values it named."""
        compiled = shaped.build().compile(dialect=self.dialect)
        values = compiled.construct_params(escape_names=False)
        slots: list[tuple[str | None, Any]] = []
        for position in compiled.positiontup or ():
            name = compiled.binds[position]._orig_key
            if name in shaped.params:
                given, bound = shaped.params[name], values[position]
                # Identity first: a NaN inside a json value is the same object, never equal.
                if bound is not given and bound != given:
                    raise InternalError(f"statement binds {name} to another value than its plan")
                slots.append((name, None))
            elif shaped.own_binds and str(name).startswith(PREFIX):
                raise InternalError(f"statement binds {name}, which its plan does not name")
            else:
                slots.append((None, values[position]))
        return _Template(compiled.string, tuple(slots))


async def _init_connection(conn: asyncpg.Connection) -> None:
    # JSON travels as Python values, as SQLAlchemy's asyncpg dialect does it for the engine.
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, schema="pg_catalog", encoder=_dumps, decoder=json.loads,
                                  format="text")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


async def open_pool(dsn: str, size: int, server_settings: Mapping[str, str]) -> asyncpg.Pool:
    """The request path's pool: autocommit connections with the server-wide settings."""
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, init=_init_connection, reset=_keep_session,
        server_settings=dict(server_settings), statement_cache_size=512)
    return pool


def free_slots(pool: asyncpg.Pool) -> asyncio.Queue[Any] | None:
    """asyncpg's queue of the pool's slots not lent out, connected or not: a request waits
    exactly when it is empty, and its waiting getters are the requests waiting. A private
    layout of asyncpg's, read here only (None if it ever changes), by the hub's kept
    connection and by the pool's metrics."""
    queue = getattr(pool, "_queue", None)
    return queue if isinstance(queue, asyncio.Queue) else None


async def _keep_session(conn: asyncpg.Connection) -> None:
    """What a connection needs before it goes back to the pool: nothing. asyncpg's default
    (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) is a second round trip per
    request, and these connections never take a lock, open a cursor, LISTEN or SET. asyncpg
    still rolls back a transaction left open before calling this."""


class Executor(Protocol):
    """Where a service's statements run. `guard` is set when the statement must carry the
    authentication facts check (see `plan.guard`)."""

    @property
    def guard(self) -> Any: ...

    async def fetch(self, statement: Any, *, retry: bool = False) -> Sequence[Mapping[str, Any]]: ...


class PoolExecutor:
    """One statement per call on the request path's pool (autocommit)."""

    def __init__(self, pool: asyncpg.Pool, cache: StatementCache, scope: Any,
                 guard: Any = None) -> None:
        self.pool, self.cache, self.scope, self.guard = pool, cache, scope, guard

    async def fetch(self, statement: Any, *, retry: bool = False) -> Sequence[Mapping[str, Any]]:
        sql, args = self.cache.sql_and_args(self.scope, statement)
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                async with self.pool.acquire() as conn:
                    count_round_trip()
                    rows: list[Mapping[str, Any]] = await conn.fetch(sql, *args)
                    return rows
            except asyncpg.PostgresError as exc:
                if isinstance(exc, CONNECTION_LOST) and attempt + 1 < attempts:
                    continue
                error = translate(DBAPIError(sql, None, exc))
                if isinstance(error, InternalError):
                    log.error("unexpected database error: %s", exc)
                raise error from exc
            except CONNECTION_LOST as exc:
                if attempt + 1 < attempts:
                    continue
                raise translate(DBAPIError(sql, None, _Lost(str(exc)))) from exc
        raise AssertionError("unreachable")


class _Lost(Exception):
    sqlstate = "08006"


class ConnectionExecutor:
    """Statements on a SQLAlchemy connection inside the caller's transaction (the paths that
    need several statements: bulk writes, imports, soft-delete checks, the SDK)."""

    guard = None

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def fetch(self, statement: Any, *, retry: bool = False) -> Sequence[Mapping[str, Any]]:
        count_round_trip()
        if isinstance(statement, Shaped):
            statement = statement.build()
        rows: Any = (await self.conn.execute(statement)).mappings().all()
        return rows


def new_counter() -> list[int]:
    return [0]


def uid_of(row: Mapping[str, Any]) -> uuid.UUID | None:
    value = row["uid"]
    return None if value is None else uuid.UUID(str(value))
