"""Indexes an app owner defines on a table: their definition, their state, and their build.

An index is built with `CREATE INDEX CONCURRENTLY`, so reads and writes of the table go on
while it builds. That statement cannot run inside a transaction, so the request records the
index as `building` (in `authoric.table_indexes`, visible to every replica) and commits; the
`IndexBuilder` then builds it on its own autocommit connection and records `ready`, or `failed`
with the contract's error object. A failed build leaves an INVALID index behind, which the
builder drops. Every index leads with `org_uid`, because every governed read is org-scoped, so
a `unique` index means unique among one org's rows (as the columns' own `unique` does).

A `search` index is GIN over `(ARRAY[org_uid]), authoric.search_vector(column)` (migrations
0006 and 0010: the `simple` configuration over the accent-folded first 100,000 characters of a
value); the `search` filter operator compares the same expressions, so the planner can use it.
It leads with the org as a one-element array, the one way GIN holds a uuid without the
`btree_gin` extension (which the embedded PostgreSQL lacks): a search within an org reads the
org's entries and the words' together, never other orgs' matches (security round four).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import TextClause, and_, delete, func, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.catalog.model import TableDef
from authoric.catalog.names import check_name
from authoric.catalog.schema import PLATFORM_FIELDS, constraint_name, schema_name
from authoric.catalog.types import TEXTUAL_TYPES
from authoric.db import tables as t
from authoric.db.sql import Sql, joined, quoted, statement
from authoric.errors import Conflict, ErrorDetail, NotFound, ValidationFailed

log = logging.getLogger("authoric.indexes")

MAX_INDEX_COLUMNS = 8
MAX_LISTED_ROWS = 100
BUILDING, READY, FAILED = "building", "ready", "failed"
# Column types whose text a `search` index can hold (the registry's textual types).
SEARCHABLE_TYPES = TEXTUAL_TYPES  # a search index holds text


class IndexSpec(BaseModel):
    """`PUT .../tables/{table}/indexes/{name}`: the columns (`-` for descending), `unique`
    and `kind` (`btree`, or `search` for full-text over text columns)."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str] = Field(min_length=1, max_length=MAX_INDEX_COLUMNS)
    unique: bool = False
    kind: Literal["btree", "search"] = "btree"


class IndexView(BaseModel):
    """An index as the admin routes answer it: its spec and its build's state; `error` (the
    contract's error object) only once the build `failed`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    columns: list[str]
    unique: bool
    kind: Literal["btree", "search"]
    state: Literal["building", "ready", "failed"]
    error: ErrorDetail = Field(default=None)  # type: ignore[assignment]  # absent unless failed


class IndexList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[IndexView]


def physical_name(table: str, name: str) -> str:
    return constraint_name("ix", table, name)


def _column(definition: TableDef, spec_column: str) -> tuple[str, bool]:
    """The physical column an index column names, and whether it is descending; 422 else."""
    descending = spec_column.startswith("-")
    name = spec_column[1:] if descending else spec_column
    if name in PLATFORM_FIELDS:
        return PLATFORM_FIELDS[name], descending
    column = definition.column(name)
    if column is None:
        raise ValidationFailed(f"index names unknown column {name!r}", {"column": name})
    return column.name, descending


def check_spec(definition: TableDef, spec: IndexSpec) -> None:
    """The spec fits the table: known columns, once each; a search index over text columns."""
    physical = [_column(definition, c) for c in spec.columns]
    names = [p for p, _ in physical]
    if len(set(names)) != len(names):
        raise ValidationFailed("an index names each column once", {"columns": spec.columns})
    if spec.kind == "search":
        if spec.unique:
            raise ValidationFailed("a search index cannot be unique", {"kind": spec.kind})
        for name, descending in physical:
            column = definition.column(name)
            if descending or column is None or column.type not in SEARCHABLE_TYPES:
                raise ValidationFailed(f"a search index holds text columns only, not {name!r}",
                                       {"column": name})


def create_statement(app_uid: uuid.UUID, definition: TableDef, name: str,
                     spec: IndexSpec) -> TextClause:
    """The `CREATE INDEX CONCURRENTLY` for the spec. Names are checked identifiers (quoted);
    nothing from the request is pasted but them."""
    index, target = physical_name(definition.name, name), (schema_name(app_uid), definition.name)
    physical = [_column(definition, c) for c in spec.columns]
    if spec.kind == "search":
        parts = [Sql("(ARRAY[org_uid])")] + [
            Sql("authoric.search_vector(" + quoted(c) + ")") for c, _ in physical]
        return statement("CREATE INDEX CONCURRENTLY {index} ON {target} USING gin ({parts})",
                         parts=joined(parts), index=index, target=target)
    # NULLs sort last both ways (plan.listing), so each direction gets its own index; the
    # uid breaks ties in the same direction, so a keyset page is one index range.
    parts = [quoted("org_uid")] + [
        Sql(quoted(c) + (" DESC" if d else " ASC") + " NULLS LAST") for c, d in physical]
    if not spec.unique:
        parts.append(Sql(quoted("uid") + (" DESC" if physical[-1][1] else " ASC")))
    return statement("CREATE {unique}INDEX CONCURRENTLY {index} ON {target} ({parts}){live}",
                     unique=Sql("UNIQUE " if spec.unique else ""), parts=joined(parts),
                     live=Sql(" WHERE deleted_at IS NULL" if definition.soft_delete else ""),
                     index=index, target=target)


def _drop_statement(app_uid: uuid.UUID, table: str, name: str) -> TextClause:
    """Drop the physical index of `name`, without blocking the table; none is fine."""
    return statement("DROP INDEX CONCURRENTLY IF EXISTS {index}",
                     index=(schema_name(app_uid), physical_name(table, name)))


def public_index(row: Any) -> dict[str, Any]:
    out = {"name": row.name, **row.spec, "state": row.state}
    if row.error is not None:
        out["error"] = row.error
    return out


def _where(app_uid: uuid.UUID, table: str, name: str | None = None) -> Any:
    c = t.table_indexes.c
    clauses = [c.app_uid == app_uid, c.table_name == table]
    if name is not None:
        clauses.append(c.name == name)
    return and_(*clauses)


async def put_index(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef, name: str,
                    spec: IndexSpec) -> tuple[dict[str, Any], bool]:
    """Record the index as building; (its view, whether a build must start). The same spec
    again answers the index as it stands (a failed one is built again); another spec is 409."""
    check_name(name, "index")
    check_spec(definition, spec)
    stored = spec.model_dump()
    row = (await conn.execute(select(t.table_indexes).where(
        _where(app_uid, definition.name, name)).with_for_update())).first()
    if row is not None:
        if row.spec != stored:
            raise Conflict(f"index {name!r} exists with other columns", {"index": name})
        if row.state != FAILED:
            return public_index(row), False
        await conn.execute(delete(t.table_indexes).where(_where(app_uid, definition.name, name)))
    await conn.execute(t.table_indexes.insert().values(
        app_uid=app_uid, table_name=definition.name, name=name, spec=stored, state=BUILDING))
    return {"name": name, **stored, "state": BUILDING}, True


def _builder_gone() -> Any:
    """True for a record whose build has a builder backend that no longer exists."""
    alive = select(text("1")).select_from(text("pg_stat_activity")).where(
        text("pid = authoric.table_indexes.builder_pid")).exists()
    c = t.table_indexes.c
    return and_(c.state == BUILDING, c.builder_pid.isnot(None), ~alive)


_INTERRUPTED = {"state": FAILED, "builder_pid": None, "error": {
    "code": "INTERNAL", "details": {}, "message": "the build was interrupted; put the index again"}}


async def _interrupted(conn: AsyncConnection, app_uid: uuid.UUID, table: str) -> None:
    """Mark failed the builds whose builder backend is gone (its process died mid-build)."""
    await conn.execute(update(t.table_indexes).where(_where(app_uid, table), _builder_gone())
                       .values(**_INTERRUPTED))


async def list_indexes(conn: AsyncConnection, app_uid: uuid.UUID,
                       table: str) -> list[dict[str, Any]]:
    await _interrupted(conn, app_uid, table)
    rows = await conn.execute(select(t.table_indexes).where(_where(app_uid, table))
                              .order_by(t.table_indexes.c.name))
    return [public_index(r) for r in rows]


async def indexes_by_table(conn: AsyncConnection, app_uid: uuid.UUID) -> dict[str, list[Any]]:
    """Every table's indexes as definitions list them (no interruption check: a listing)."""
    out: dict[str, list[Any]] = {}
    rows = await conn.execute(select(t.table_indexes).where(t.table_indexes.c.app_uid == app_uid)
                              .order_by(t.table_indexes.c.name))
    for r in rows:
        out.setdefault(r.table_name, []).append(public_index(r))
    return out


async def get_index(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                    name: str) -> dict[str, Any]:
    await _interrupted(conn, app_uid, table)
    row = (await conn.execute(select(t.table_indexes).where(
        _where(app_uid, table, name)))).first()
    if row is None:
        raise NotFound(f"no index {name!r}", {"index": name})
    return public_index(row)


async def forget_index(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                       name: str) -> int | None:
    """Delete the record (404 if none); the builder pid of a build still running, if any."""
    row = (await conn.execute(delete(t.table_indexes).where(_where(app_uid, table, name))
                              .returning(t.table_indexes.c.state,
                                         t.table_indexes.c.builder_pid))).first()
    if row is None:
        raise NotFound(f"no index {name!r}", {"index": name})
    return row.builder_pid if row.state == BUILDING else None


async def follow_renames(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                         renames: dict[str, str]) -> None:
    """Index specs name columns: a rename rewrites them (the physical index follows by itself)."""
    rows = (await conn.execute(select(t.table_indexes).where(_where(app_uid, table)))).all()
    for row in rows:
        columns = []
        for spec_column in row.spec["columns"]:
            sign = "-" if spec_column.startswith("-") else ""
            bare = spec_column.lstrip("-")
            columns.append(sign + renames.get(bare, bare))
        if columns != row.spec["columns"]:
            await conn.execute(update(t.table_indexes).where(_where(app_uid, table, row.name))
                               .values(spec={**row.spec, "columns": columns}))


async def forget_dropped(conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                         dropped: set[str]) -> None:
    """PostgreSQL drops an index with any of its columns; its record goes too."""
    rows = (await conn.execute(select(t.table_indexes).where(_where(app_uid, table)))).all()
    for row in rows:
        if {c.lstrip("-") for c in row.spec["columns"]} & dropped:
            await conn.execute(delete(t.table_indexes).where(_where(app_uid, table, row.name)))


# Index builds run one at a time across replicas (`_take_turn`), and one that still meets a
# deadlock (with a schema change waiting on the table) is tried again.
BUILD_TURN = 0x61757468_6f726978  # the advisory lock key of the build queue ("authorix")
# Fixed statements, run as written (`exec_driver_sql`), their parameters numbered.
TRY_TURN = "SELECT pg_try_advisory_lock($1)"  # $1: BUILD_TURN
END_TURN = "SELECT pg_advisory_unlock($1)"  # $1: BUILD_TURN
CANCEL_BUILDER = "SELECT pg_cancel_backend($1) FROM pg_stat_activity WHERE pid = $1"  # $1: pid
NO_STATEMENT_TIMEOUT = "SET statement_timeout = 0"  # a build or a drop takes what it takes
RESET_STATEMENT_TIMEOUT = "RESET statement_timeout"
NO_STATEMENT_TIMEOUT_HERE = "SET LOCAL statement_timeout = 0"  # this transaction only
# The physical indexes left invalid among the names $1 (a build that died half way).
INVALID_INDEXES = (
    "SELECT n.nspname, x.relname FROM pg_index i "
    "JOIN pg_class x ON x.oid = i.indexrelid "
    "JOIN pg_namespace n ON n.oid = x.relnamespace "
    "WHERE NOT i.indisvalid AND x.relname = ANY($1)")
TURN_POLL = 0.1  # seconds between tries of the queue's lock
BUILD_ATTEMPTS = 5
RETRY_PAUSE = 0.2  # seconds, times the attempt number
DEADLOCK = "40P01"


class IndexBuilder:
    """Builds recorded indexes in background tasks on autocommit connections."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, app_uid: uuid.UUID, table: str, name: str) -> None:
        self._spawn(self._build(app_uid, table, name))

    def start_sweep(self) -> None:
        """`sweep` in the background: a concurrent drop waits for older transactions."""
        self._spawn(self._sweep_logged())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sweep_logged(self) -> None:
        try:
            dropped = await self.sweep()
        except asyncio.CancelledError:
            raise
        except Exception:  # the next start sweeps again; a put of the index drops it too
            log.exception("could not sweep interrupted index builds")
        else:
            if dropped:
                log.info("dropped %d index(es) left invalid by interrupted builds", dropped)

    async def idle(self) -> None:
        """Wait for every build started here (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def drop(self, app_uid: uuid.UUID, table: str, name: str,
                   builder_pid: int | None) -> None:
        """Drop the physical index without blocking the table (a running build is cancelled
        first, on whichever replica runs it)."""
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            if builder_pid is not None:
                await conn.exec_driver_sql(CANCEL_BUILDER, (builder_pid,))
            await conn.exec_driver_sql(NO_STATEMENT_TIMEOUT)
            try:
                await conn.execute(_drop_statement(app_uid, table, name))
            finally:
                await conn.exec_driver_sql(RESET_STATEMENT_TIMEOUT)

    async def sweep(self) -> int:
        """At startup: mark failed every build whose builder died (on any replica), and drop the
        invalid physical index such a build leaves, so it costs no write until someone puts
        the index again. The number of indexes dropped."""
        c = t.table_indexes.c
        async with self._engine.begin() as conn:
            # Off the request path, like a build: the statement timeout bounds what a client
            # waits for, and a busy catalog or a locked record must delay the sweep, not end it.
            await conn.exec_driver_sql(NO_STATEMENT_TIMEOUT_HERE)
            await conn.execute(update(t.table_indexes).where(_builder_gone())
                               .values(**_INTERRUPTED))
            failed = (await conn.execute(select(c.app_uid, c.table_name, c.name)
                                         .where(c.state == FAILED))).all()
            by_name = {(schema_name(a), physical_name(tb, n)): (a, tb, n) for a, tb, n in failed}
            # Of those, the ones whose physical index is still there, invalid: a build that
            # died between creating it and recording the failure.
            invalid = (await conn.exec_driver_sql(
                INVALID_INDEXES, ([name for _, name in by_name],))).all() if by_name else []
        leftovers = [by_name[(row.nspname, row.relname)] for row in invalid
                     if (row.nspname, row.relname) in by_name]
        for app_uid, table, name in leftovers:
            await self.drop(app_uid, table, name, None)
        return len(leftovers)

    async def _build(self, app_uid: uuid.UUID, table: str, name: str) -> None:
        try:
            async with self._engine.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await self._build_on(conn, app_uid, table, name)
        except asyncio.CancelledError:
            raise
        except Exception:  # a build that cannot even record its failure is logged
            log.exception("index %s on %s could not be built", name, table)

    async def _build_on(self, conn: AsyncConnection, app_uid: uuid.UUID, table: str,
                        name: str) -> None:
        pid = (await conn.execute(select(func.pg_backend_pid()))).scalar_one()
        row = (await conn.execute(update(t.table_indexes).where(
            _where(app_uid, table, name), t.table_indexes.c.state == BUILDING,
        ).values(builder_pid=pid).returning(t.table_indexes.c.spec))).first()
        doc = (await conn.execute(select(t.app_tables.c.definition).where(
            t.app_tables.c.app_uid == app_uid, t.app_tables.c.name == table))).scalar()
        if row is None or doc is None:
            return
        definition = TableDef.model_validate(doc)
        spec = IndexSpec.model_validate(row.spec)
        # Whatever goes wrong (even while reporting a failure) ends in a recorded state and
        # no builder pid: a pooled connection's pid would otherwise look like a live build.
        built, error = False, {"code": "INTERNAL", "details": {},
                               "message": "the index could not be built"}
        try:
            await conn.exec_driver_sql(NO_STATEMENT_TIMEOUT)
            await _take_turn(conn)
            try:
                for attempt in range(BUILD_ATTEMPTS):
                    try:
                        # a half-built one left by a past try
                        await conn.execute(_drop_statement(app_uid, table, name))
                        await conn.execute(create_statement(app_uid, definition, name, spec))
                        built = True
                        break
                    except DBAPIError as exc:
                        await conn.execute(_drop_statement(app_uid, table, name))
                        if _sqlstate(exc) == DEADLOCK and attempt + 1 < BUILD_ATTEMPTS:
                            await asyncio.sleep(RETRY_PAUSE * (attempt + 1))
                            continue
                        error = await _failure(conn, app_uid, definition, spec, exc)
                        break
            finally:
                await conn.exec_driver_sql(END_TURN, (BUILD_TURN,))
                await conn.exec_driver_sql(RESET_STATEMENT_TIMEOUT)
        finally:
            done = await conn.execute(update(t.table_indexes).where(
                _where(app_uid, table, name), t.table_indexes.c.builder_pid == pid,
            ).values(state=READY if built else FAILED, error=None if built else error,
                     builder_pid=None))
        if not done.rowcount and built:
            # deleted (or replaced) while it was building
            await conn.execute(_drop_statement(app_uid, table, name))


async def _take_turn(conn: AsyncConnection) -> None:
    """Wait until no other build runs, on any replica: builds queue on one advisory lock.

    `CREATE INDEX CONCURRENTLY` waits for every transaction older than its own snapshots,
    and so does any other build's: two at once wait for each other, and PostgreSQL cancels
    one ("deadlock detected"; 57 of 60 builds asked for within 3 s). The lock is tried, not
    waited for: a statement waiting for it would hold a snapshot the running build waits
    for, the same deadlock again."""
    while not (await conn.exec_driver_sql(TRY_TURN, (BUILD_TURN,))).scalar_one():
        await asyncio.sleep(TURN_POLL)


def _sqlstate(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None) or getattr(
        getattr(exc.orig, "__cause__", None), "sqlstate", None)


async def _failure(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                   spec: IndexSpec, exc: DBAPIError) -> dict[str, Any]:
    """The error object a failed build records; duplicates under `unique` are listed."""
    sqlstate = _sqlstate(exc)
    if sqlstate == "23505":
        rows = await duplicate_rows(conn, app_uid, definition, spec.columns)
        return {"code": "CONFLICT", "message": "rows of one org share the index's values",
                "details": {"rows": rows}}
    if sqlstate == "57014":
        return {"code": "CONFLICT", "message": "the build was cancelled", "details": {}}
    reason = str(exc.orig).splitlines()[-1] if exc.orig else str(exc)
    return {"code": "INTERNAL", "message": "the index could not be built",
            "details": {"reason": reason}}


async def duplicate_rows(conn: AsyncConnection, app_uid: uuid.UUID, definition: TableDef,
                         spec_columns: list[str],
                         values: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of each group of rows (within one org) sharing the columns' values, up to
    100, as `{"uid", "column", "message"}`. Rows with a null in them never collide.
    `values`, one SQL expression per column, compares what the columns will hold instead
    (a type change's converted values: "01" and "1" as integers)."""
    physical = [_column(definition, c)[0] for c in spec_columns]
    exprs = values or [quoted(c) for c in physical]
    # `_dup_v0`, `_dup_n`: no column can be named so (names start with a letter).
    named = joined([Sql(e + " AS _dup_v" + str(i)) for i, e in enumerate(exprs)])
    cols = joined([Sql("_dup_v" + str(i)) for i in range(len(exprs))])
    query = statement(
        "SELECT uid FROM (SELECT uid, org_uid, {cols}, count(*) OVER "
        "(PARTITION BY org_uid, {cols}) AS _dup_n FROM (SELECT uid, org_uid, {named} "
        "FROM {target} WHERE {live}{not_null}) v) d "
        "WHERE _dup_n > 1 ORDER BY org_uid, {cols}, uid LIMIT :limit",
        cols=cols, named=named, target=(schema_name(app_uid), definition.name),
        live=Sql("deleted_at IS NULL AND " if definition.soft_delete else ""),
        not_null=joined([Sql(quoted(c) + " IS NOT NULL") for c in physical], " AND "))
    column = ",".join(c.lstrip("-") for c in spec_columns)
    uids = (await conn.execute(query, {"limit": MAX_LISTED_ROWS})).scalars()
    return [{"uid": str(u), "column": column,
             "message": "another row of its org has the same value"} for u in uids]

