"""The fast path of CSV import: PostgreSQL parses and types the file, as a raw COPY does.

The body streams straight into `COPY ... FROM STDIN (FORMAT csv)` into a temporary table of
text columns (uids drawn per row by a column default), while a copy is spooled to a temp
file on disk. One scan looks for values PostgreSQL would accept but our rules refuse
(timestamps without an offset, non-ISO dates, NaN, other boolean spellings, missing
required values); then one `INSERT ... SELECT` casts and moves the rows, the foreign keys
and unique indexes checking them.

Anything unexpected (a COPY error, a suspicious value, a failed cast, a violated key) raises
`NeedsDiagnosis`: the caller rolls the attempt back and runs the careful importer over the
spooled copy, which names every bad line and column exactly, or imports the file itself
when our rules accept what PostgreSQL refused.
"""

from __future__ import annotations

import csv
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any

import asyncpg
from sqlalchemy import TextClause
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.model import ColumnDef
from authoric.catalog.types import REGISTRY, column_type
from authoric.db.errors import sqlstate
from authoric.db.sql import Sql, joined, quoted, statement
from authoric.records.csv_stream import Record
from authoric.records.gate import Access

RAW = "authoric_import_raw"
RAW_SEQ = "authoric_import_seq"
# A quote with ordinary characters on both sides (`"b"x`, `5" screen`) is not RFC 4180;
# PostgreSQL would read past it, the careful parser names the line.
STRAY_QUOTE = re.compile(rb'[^,\r\n"]"[^,\r\n"]')
# PostgreSQL type names by column type, for casts here and in the careful importer's staging.
PG_TYPES = {name: kind.pg_name for name, kind in REGISTRY.items()}
SPOOL_CHUNK = 1 << 20
# Read back in pieces the size the network delivers: the careful parser's transient memory
# grows with the piece (a 1 MiB piece of short lines is tens of thousands of strings).
SPOOL_READ = 1 << 16


class NeedsDiagnosis(Exception):
    """The fast path cannot vouch for the file; the careful importer must look at it."""


# Called when the move into the table broke a unique or foreign key, and every record of the
# file is one line (so a record's place in the staged order is its line): it names the lines
# from the staged rows (raising the 422), or returns when it finds nothing to name.
OnKeyClash = Callable[[], Awaitable[None]]


class Spool:
    """The request body as it streamed by, kept (in memory up to 1 MiB, then on disk) so it
    can be read a second time. A `complete` spool already holds the whole body: writes to
    it are no-ops, and its own `chunks()` feed the importer."""

    def __init__(self, complete: bool = False) -> None:
        self.file: IO[bytes] = tempfile.SpooledTemporaryFile(SPOOL_CHUNK)  # noqa: SIM115 - closed by close()
        self.complete = complete

    def write(self, chunk: bytes) -> None:
        if not self.complete:
            self.file.write(chunk)

    async def drain(self, chunks: AsyncIterator[bytes]) -> None:
        if self.complete:
            return
        async for chunk in chunks:
            self.file.write(chunk)

    async def chunks(self) -> AsyncIterator[bytes]:
        self.file.seek(0)
        while chunk := self.file.read(SPOOL_READ):
            yield chunk

    def close(self) -> None:
        self.file.close()


async def read_header(chunks: AsyncIterator[bytes], spool: Spool) -> tuple[bytes, Record]:
    """The bytes up to the first line break, and that line parsed as the header record."""
    head = b""
    async for chunk in chunks:
        spool.write(chunk)
        head += chunk
        if b"\n" in head or len(head) > SPOOL_CHUNK:
            break
    line = head.split(b"\n", 1)[0]
    try:
        fields = next(csv.reader([line.decode("utf-8-sig").rstrip("\r")]), [])
    except (UnicodeDecodeError, csv.Error) as exc:
        raise NeedsDiagnosis from exc
    return head, Record(1, fields)


def _uid_default() -> str:
    """UUIDv7s for one import, increasing in file order: the import's millisecond, random
    bits drawn once per import, then a 40-bit counter (RFC 9562's counter method)."""
    ms = int(time.time() * 1000)
    fixed = f"{ms:012x}7{secrets.token_hex(2)[:3]}{8 + secrets.randbelow(4):x}{secrets.token_hex(3)[:5]}"
    return f"('{fixed}' || lpad(to_hex(nextval('{RAW_SEQ}')), 10, '0'))::uuid"


def cell_cast(column: ColumnDef) -> str:
    return column_type(column.type).csv_cast(f"s.{quoted(column.name)}")


def _suspicious(column: ColumnDef) -> str:
    """SQL that is true for a value PostgreSQL would cast but our rules refuse."""
    ref = f"s.{quoted(column.name)}"
    # Fields longer than the careful parser takes (csv's field limit) get its verdict too.
    checks = [f"length({ref}) > {csv.field_size_limit()}"]
    if column.required:
        checks.append(f"{ref} IS NULL")
    rule = column_type(column.type).csv_suspicious(ref)
    if rule:
        checks.append(f"({ref} IS NOT NULL AND {rule})")
    return " OR ".join(checks)


async def fast_import(conn: AsyncConnection, access: Access, columns: list[ColumnDef],
                      head: bytes, rest: AsyncIterator[bytes], spool: Spool,
                      on_key_clash: OnKeyClash | None = None) -> int:
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    names = [c.name for c in columns]
    defs = "".join(f", {quoted(n)} text" for n in names)
    await conn.execute(statement("CREATE TEMP SEQUENCE {seq}", seq=RAW_SEQ))
    await conn.execute(statement(
        "CREATE TEMP TABLE {raw} (uid uuid DEFAULT {uid_default}{defs}) ON COMMIT DROP",
        raw=RAW, uid_default=Sql(_uid_default()), defs=Sql(defs)))
    await conn.execute(statement("ALTER SEQUENCE {seq} OWNED BY {raw_uid}",
                                 seq=RAW_SEQ, raw_uid=(RAW, "uid")))

    newlines, tail = 0, b""

    async def body() -> AsyncIterator[bytes]:
        nonlocal newlines, tail
        # Stop the COPY at the first stray quote: the careful path will name its line.
        if STRAY_QUOTE.search(head):
            raise NeedsDiagnosis
        tail, newlines = head[-1:], head.count(b"\n")
        yield head
        async for chunk in rest:
            spool.write(chunk)
            if STRAY_QUOTE.search(tail + chunk[:2]) or STRAY_QUOTE.search(chunk):
                raise NeedsDiagnosis
            tail, newlines = chunk[-1:], newlines + chunk.count(b"\n")
            yield chunk

    try:
        await driver.copy_to_table(RAW, source=body(), columns=names, format="csv", header=True,
                                   force_null=names or None, encoding="utf8")
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise NeedsDiagnosis from exc
    suspicious = [_suspicious(c) for c in columns]
    # (A text value cannot hold NUL: PostgreSQL refuses it during the COPY already.)
    if suspicious and await conn.scalar(statement(
            "SELECT EXISTS (SELECT 1 FROM {raw} s WHERE {suspicious})",
            raw=RAW, suspicious=Sql(" OR ".join(suspicious)))):
        raise NeedsDiagnosis
    count = int(await conn.scalar(statement("SELECT count(*) FROM {raw}", raw=RAW)) or 0)
    if count:
        # One line per record (no quoted line breaks): the header, then `count` lines.
        one_line_each = newlines == count + (1 if tail == b"\n" else 0)
        await _move(conn, access, columns, on_key_clash if one_line_each else None)
    return count


async def _move(conn: AsyncConnection, access: Access, columns: list[ColumnDef],
                on_key_clash: OnKeyClash | None) -> None:
    insert, params = insert_from_stage(access, columns, [cell_cast(c) for c in columns],
                                       RAW, "uid")
    try:
        async with conn.begin_nested():
            for column in columns:
                await _require_live_target(conn, access, column)
            await conn.execute(insert, params)
    except DBAPIError as exc:
        if on_key_clash is None or sqlstate(exc) not in ("23505", "23503"):
            raise NeedsDiagnosis from exc
    else:
        return
    await on_key_clash()
    raise NeedsDiagnosis


def insert_from_stage(access: Access, columns: list[ColumnDef], values: list[str], stage: str,
                      order: str) -> tuple[TextClause, dict[str, Any]]:
    """The one INSERT of an import (both paths): the staged table `stage` (as `s`), in
    `order`, into the caller's table and org; `values` are the columns' SQL over `s`, and
    the columns the file leaves out take their defaults."""
    table = access.table
    names = [c.name for c in columns]
    defaults = [c for c in table.definition.columns if c.name not in names and c.default is not None]
    target = joined(["uid", "org_uid", *names, *[c.name for c in defaults]])
    source = ", ".join(["s.uid", ":org", *values,
                        *[f"CAST(:d{i} AS {PG_TYPES[c.type]})" for i, c in enumerate(defaults)]])
    params: dict[str, Any] = {"org": access.principal.org_uid}
    for i, column in enumerate(defaults):
        params[f"d{i}"] = column.bound_default()
    insert = statement("INSERT INTO {table} ({target}) SELECT {source} FROM {stage} s "
                       "ORDER BY s.{order}", table=(str(table.table.schema), table.name),
                       target=target, source=Sql(source), stage=stage, order=order)
    return insert, params


async def _require_live_target(conn: AsyncConnection, access: Access, column: ColumnDef) -> None:
    """Foreign keys accept soft-deleted targets; such a reference needs the careful path."""
    if not column_type(column.type).is_reference:
        return
    target = access.snapshot.table(str(column.references))
    if not target.soft_delete:
        return
    dangling = await conn.scalar(statement(
        "SELECT EXISTS (SELECT 1 FROM {raw} s WHERE s.{col} IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM {target} r WHERE r.uid = s.{col}::uuid "
        "AND r.org_uid = :org AND r.deleted_at IS NULL))",
        raw=RAW, col=column.name, target=(str(target.table.schema), target.name)),
        {"org": access.principal.org_uid})
    if dangling:
        raise NeedsDiagnosis
