"""CSV import: all or nothing, streamed, set-based.

The body is parsed as it arrives; each record is typed by column and binary-COPYed into a
temporary staging table in batches. Checks that need the database (references into the
caller's org, per-org uniqueness) run as set-based queries on the staging table. Then one
INSERT ... SELECT moves the rows and the change log is written in the same transaction:
one `insert` entry per row up to 1,000 rows, else a single `bulk` entry (a `resync`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, TextClause, and_, func, select
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from uuid6 import uuid7

from authoric.catalog.model import ColumnDef
from authoric.catalog.types import BadValue, column_type
from authoric.db.changelog import BULK, record_change, record_staged_inserts
from authoric.db.sql import Sql, quoted, statement
from authoric.errors import Forbidden, ServiceUnavailable, ValidationFailed
from authoric.records.conflicts import shown
from authoric.records.csv_fast import (
    PG_TYPES,
    RAW,
    NeedsDiagnosis,
    Spool,
    cell_cast,
    fast_import,
    insert_from_stage,
    read_header,
)
from authoric.records.csv_stream import CsvProblem, Record, records
from authoric.records.gate import Access
from authoric.records.values import SERVER_FIELDS

MAX_ERRORS = 100
EVENTS_PER_ROW_LIMIT = 1000
STAGE = "authoric_import_stage"


@dataclass
class ImportErrors:
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, line: int, column: str | None, message: str) -> None:
        if len(self.rows) < MAX_ERRORS:
            self.rows.append({"line": line, "column": column, "message": message})

    @property
    def full(self) -> bool:
        return len(self.rows) >= MAX_ERRORS

    def raise_if_any(self) -> None:
        if self.rows:
            raise ValidationFailed("the file has errors; nothing was imported",
                                   {"rows": sorted(self.rows, key=_by_line)})


def _by_line(row: dict[str, Any]) -> int:
    return int(row["line"] or 0)


class HiddenImportConflict(ValidationFailed):
    """A unique value of the file is taken by a row the importer may not read: one summary
    error, naming no line, column or value, so a file of guesses learns one bit at most.
    It counts against the importer's hidden-conflict limit (`records.conflicts`)."""

    def __init__(self, access: Access, rows: list[dict[str, Any]]) -> None:
        shown = sorted(rows, key=_by_line)
        super().__init__("the file has errors; nothing was imported", {"rows": [
            *shown[:MAX_ERRORS - 1],
            {"line": None, "column": None,
             "message": "a unique value is already taken by a row you may not read"}]})
        p = access.principal
        self.hidden_conflict_of = (p.app_uid, p.user_uid, p.org_uid)


def header_columns(access: Access, header: Record) -> list[ColumnDef]:
    """The columns the header names, in order; 422 before any row is read if it is wrong."""
    table, errors = access.table, ImportErrors()
    columns: list[ColumnDef] = []
    for name in header.fields:
        column = table.by_field.get(name) or table.definition.column(name)
        if name in SERVER_FIELDS:
            errors.add(1, name, "set by the server; remove this column")
        elif column is None:
            errors.add(1, name, "unknown column")
        elif column in columns:
            errors.add(1, name, "named twice")
        else:
            columns.append(column)
    for column in table.definition.columns:
        if column.required and column.default is None and column not in columns:
            errors.add(1, column.name, "required column is missing")
    errors.raise_if_any()
    return columns


def _typed(column: ColumnDef, raw: str) -> Any:
    if raw == "":
        return None
    return column_type(column.type).copy_value(column.parse_text(raw), raw)


def _row(columns: list[ColumnDef], record: Record, errors: ImportErrors) -> list[Any] | None:
    if len(record.fields) != len(columns):
        errors.add(record.line, None, f"expected {len(columns)} fields, found {len(record.fields)}")
        return None
    values: list[Any] = [record.line, uuid7()]
    ok = True
    for column, raw in zip(columns, record.fields, strict=True):
        try:
            value = _typed(column, raw)
        except BadValue as exc:
            errors.add(record.line, column.name, str(exc))
            ok = False
            continue
        if value is None and column.required:
            errors.add(record.line, column.name, "required")
            ok = False
        values.append(value)
    return values if ok else None


async def spool_body(chunks: AsyncIterator[bytes]) -> Spool:
    """The whole request body, read before any database connection is taken: a client that
    sends slowly then holds a file, not one of the pool's connections. (The size limit is
    the body limit's, enforced as the bytes arrive.)"""
    spool = Spool(complete=True)
    try:
        async for chunk in chunks:
            spool.file.write(chunk)
    except BaseException:
        spool.close()
        raise
    return spool


async def import_csv(conn: AsyncConnection, access: Access,
                     chunks: AsyncIterator[bytes] | Spool) -> int:
    """Import the CSV stream (or an already spooled body) into the caller's org; return how
    many rows were inserted.

    The fast path (`csv_fast`) lets PostgreSQL parse and type the file; when it cannot vouch
    for the file, its attempt is rolled back and the careful path below reads the spooled
    copy, naming each bad line and column (or importing what our rules accept).
    """
    if isinstance(chunks, Spool):
        return await _import(conn, access, chunks.chunks(), chunks)
    spool = Spool()
    try:
        return await _import(conn, access, chunks, spool)
    finally:
        spool.close()


@asynccontextmanager
async def time_budget(seconds: float) -> AsyncIterator[None]:
    """Run an import (inside its transaction) for at most `seconds`: past it the statement
    running is cancelled and the client gets 503; the transaction rolls back as the error
    leaves it, so nothing is written and no connection is held."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise ServiceUnavailable(
            f"the import ran past its time budget of {seconds:g} s and nothing was imported; "
            "split the file", {"reason": "import_time_budget", "budgetSeconds": seconds}) from exc


async def _import(conn: AsyncConnection, access: Access, chunks: AsyncIterator[bytes],
                  spool: Spool) -> int:
    try:
        head, header = await read_header(chunks, spool)
        columns = header_columns(access, header) if header.fields else None
        if columns is not None:
            try:
                async with conn.begin_nested():
                    count = await fast_import(conn, access, columns, head, chunks, spool,
                                              lambda: _name_key_clashes(conn, access, columns))
                    await record_import(conn, access, count, RAW, "uid")
                    return count
            except NeedsDiagnosis:
                pass
    except NeedsDiagnosis:
        pass
    await spool.drain(chunks)
    return await _careful_import(conn, access, spool.chunks())


async def _name_key_clashes(conn: AsyncConnection, access: Access,
                             columns: list[ColumnDef]) -> None:
    """The fast path's move broke a unique or foreign key: stage the typed rows from its raw
    table, lines numbered in file order, and run the careful path's checks on them. A big
    file with one bad line late is answered without reading it again in Python."""
    typed = "".join(f", {cell_cast(c)} AS {quoted(c.name)}" for c in columns)
    errors = ImportErrors()
    try:
        async with conn.begin_nested():
            await conn.execute(_drop_stage())
            await conn.execute(statement(
                "CREATE TEMP TABLE {stage} ON COMMIT DROP AS SELECT "
                "row_number() OVER (ORDER BY s.uid) + 1 AS line, s.uid{typed} FROM {raw} s",
                stage=STAGE, typed=Sql(typed), raw=RAW))
            await _check_in_database(conn, access, columns, errors)
    except DBAPIError as exc:  # a value that does not cast: the careful path names it
        raise NeedsDiagnosis from exc
    errors.raise_if_any()


async def _careful_import(conn: AsyncConnection, access: Access, chunks: AsyncIterator[bytes]) -> int:
    """Parse and type every value in Python; exact lines and columns for every problem."""
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    errors = ImportErrors()
    columns: list[ColumnDef] | None = None
    stage_columns: list[str] = []
    count = 0
    try:
        async for batch in records(chunks):
            if columns is None:
                columns = header_columns(access, batch[0])
                stage_columns = ["line", "uid", *[c.name for c in columns]]
                await _create_stage(conn, columns)
                batch = batch[1:]
            rows = [r for r in (_row(columns, rec, errors) for rec in batch) if r is not None]
            if errors.rows:
                if errors.full:
                    break
                continue  # keep collecting errors; nothing will be written
            if rows:
                await driver.copy_records_to_table(STAGE, records=rows, columns=stage_columns)
                count += len(rows)
    except CsvProblem as exc:
        errors.add(exc.line, None, exc.message)
    if columns is None:
        errors.raise_if_any()
        raise ValidationFailed("the file is empty: the first line must name columns",
                               {"rows": [{"line": 1, "column": None, "message": "no header"}]})
    errors.raise_if_any()
    await _check_in_database(conn, access, columns, errors)
    errors.raise_if_any()
    await _insert(conn, access, columns, count)
    return count


def _drop_stage() -> TextClause:
    return statement("DROP TABLE IF EXISTS {stage}", stage=STAGE)


async def _create_stage(conn: AsyncConnection, columns: list[ColumnDef]) -> None:
    defs = "".join(f", {quoted(c.name)} {PG_TYPES[c.type]}" for c in columns)
    await conn.execute(_drop_stage())
    await conn.execute(statement("CREATE TEMP TABLE {stage} (line bigint, uid uuid{defs}) "
                                 "ON COMMIT DROP", stage=STAGE, defs=Sql(defs)))


async def _check_in_database(conn: AsyncConnection, access: Access, columns: list[ColumnDef],
                             errors: ImportErrors) -> None:
    """References must point at live rows of the caller's org; unique values must be new.

    Each check is one set operation over the staged file: hash joins and hash aggregates
    (the stage is analyzed first, so the planner knows its size), linear in the file. A
    conflict with a row the importer may not read is one summary error (`HiddenImportConflict`)."""
    await conn.execute(statement("ANALYZE {stage}", stage=STAGE))
    org = access.principal.org_uid
    schema = access.table.table.schema
    for column in columns:
        if column_type(column.type).is_reference:
            target = access.snapshot.table(str(column.references))
            found = await conn.execute(dangling_references_sql(
                schema, target.name, column.name, target.soft_delete),
                {"org": org, "limit": MAX_ERRORS})
            for (line,) in found:
                errors.add(line, column.name, "references a row that does not exist")
    unique = [c for c in columns if c.unique]
    for column in unique:
        found = await conn.execute(repeated_in_file_sql(column.name), {"limit": MAX_ERRORS})
        for (line,) in found:
            errors.add(line, column.name, "duplicate value for a unique column")
    hidden = False
    for column in unique:
        for line, readable in await conn.execute(existing_conflicts(access, column)):
            if readable:
                errors.add(line, column.name, "duplicate value for a unique column")
            else:
                hidden = True
    if hidden:
        raise HiddenImportConflict(access, errors.rows)


def repeated_in_file_sql(column: str) -> TextClause:
    """Lines whose value of unique `column` an earlier line of the file already holds: one
    hash aggregate finds the repeated values with their first line, one hash join the rest."""
    return statement("SELECT s.line FROM {stage} s JOIN (SELECT {col} AS v, min(line) AS first "
                     "FROM {stage} WHERE {col} IS NOT NULL GROUP BY {col} "
                     "HAVING count(*) > 1) d ON s.{col} = d.v AND s.line > d.first "
                     "ORDER BY s.line LIMIT :limit", stage=STAGE, col=column)


def existing_conflicts(access: Access, column: ColumnDef) -> Select[Any]:
    """Lines whose value of unique `column` a live row of the org already holds, each with
    whether the importer may read that value: a join on the unique index's columns."""
    t = access.table.table
    stage = sql_table(STAGE, sql_column("line"), sql_column(column.name))
    on = [t.c.org_uid == access.principal.org_uid, t.c[column.name] == stage.c[column.name]]
    if access.table.soft_delete:  # soft-deleted rows free their values (a partial index)
        on.append(t.c.deleted_at.is_(None))
    return (select(stage.c.line, shown(access, column).label("shown"))
            .select_from(stage.join(t, and_(*on))).order_by(stage.c.line).limit(MAX_ERRORS))


def dangling_references_sql(schema: str | None, target: str, column: str,
                            soft_delete: bool) -> TextClause:
    """Lines whose reference `column` names no live row of the org (a hash anti-join)."""
    live = " AND r.deleted_at IS NULL" if soft_delete else ""
    return statement("SELECT s.line FROM {stage} s WHERE s.{col} IS NOT NULL AND NOT EXISTS "
                     "(SELECT 1 FROM {target} r WHERE r.uid = s.{col} "
                     "AND r.org_uid = :org{live}) ORDER BY s.line LIMIT :limit",
                     stage=STAGE, col=column, target=(str(schema), target), live=Sql(live))


async def _insert(conn: AsyncConnection, access: Access, columns: list[ColumnDef], count: int) -> None:
    if not count:
        return
    await conn.execute(*insert_from_stage(access, columns,
                                          [f"s.{quoted(c.name)}" for c in columns], STAGE, "line"))
    await record_import(conn, access, count, STAGE, "line")


async def record_import(conn: AsyncConnection, access: Access, count: int, stage: str,
                        order: str) -> None:
    """After the rows of `stage` went in: the writer's policy holds for each, and the change
    log says so (one insert entry per row up to 1,000 rows, else one bulk entry)."""
    principal, table = access.principal, access.table
    await _still_allowed(conn, access, stage)
    if count <= EVENTS_PER_ROW_LIMIT:
        await record_staged_inserts(conn, app_uid=principal.app_uid, table=table.name,
                                    org_uid=principal.org_uid, actor_uid=principal.user_uid,
                                    stage=stage, order=order)
    else:
        await record_change(conn, app_uid=principal.app_uid, table=table.name, op=BULK,
                            org_uid=principal.org_uid, row_uid=None, actor_uid=principal.user_uid)


async def _still_allowed(conn: AsyncConnection, access: Access, stage: str) -> None:
    policy = access.decision.policy
    if policy is None:
        return
    t = access.table.table
    staged: Any = select(sql_column("uid")).select_from(sql_table(stage))
    outside = await conn.scalar(select(func.count()).select_from(t).where(and_(
        t.c.uid.in_(staged), ~func.coalesce(policy, False))))
    if outside:
        raise Forbidden("some imported rows would fall outside your row policy",
                        {"rows": int(outside)})
