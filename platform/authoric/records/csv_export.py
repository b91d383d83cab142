"""CSV export: every row the caller may list, filters honoured, redaction applied, streamed.

Cells of text and JSON columns that start with `=`, `+`, `-`, `@`, tab or carriage return
are prefixed with `'` so spreadsheet programs do not run them as formulas (OWASP's advice).
Typed numbers and dates cannot carry a formula and are written as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.catalog.schema import field_name
from authoric.catalog.types import ColumnType, column_type
from authoric.plan.access import Access
from authoric.plan.guard import Guard
from authoric.plan.plan import Plan
from authoric.query.filters import Node

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
BATCH = 1000
SEND_CHUNK = 1 << 16


def neutralised(value: str) -> str:
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def _cell(kind: ColumnType | None, value: Any) -> str:
    """One cell; `kind` None for a redacted column (its value is the redaction marker)."""
    if value is None:
        return ""
    if kind is None:
        return neutralised(str(value))
    cell = kind.csv_cell(value)
    return neutralised(cell) if kind.free_text else cell


def export_statement(access: Access, filter_tree: Node, order: str | None,
                     guard: Guard | None = None) -> Any:
    """The governed, ordered SELECT of the plan; built before streaming starts, so a bad
    filter is still a clean 400. With `guard`, it reads only at the catalog version (and
    facts) it was planned for (plan.guard)."""
    return Plan(access, filter_tree).select_all(order, guard)


async def primed(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks` with its first chunk already read: what would fail before any row (a guard
    that no longer holds) raises here, before a response has started."""
    first = await anext(chunks)

    async def rest() -> AsyncIterator[bytes]:
        try:
            yield first
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]

    return rest()


async def export_csv(engine: AsyncEngine, access: Access, statement: Any,
                     guard: Guard | None = None) -> AsyncIterator[bytes]:
    """The CSV bytes, read from the database as fast as it answers, sent as fast as the
    client reads.

    A reader task writes the rows to a temporary file and gives its connection back as soon
    as the last row is read; the response streams from the file behind it. A client that
    reads slowly, or stops reading, holds a file and a little memory, never a pooled
    connection or an open transaction. The first bytes go out while rows are still being
    read.
    """
    spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    fd = spool.fileno()
    written = 0
    grew = asyncio.Event()

    def append(data: bytes) -> None:
        nonlocal written
        os.pwrite(fd, data, written)
        written += len(data)
        grew.set()

    reader = asyncio.create_task(_read_rows(engine, access, statement, append, guard))
    try:
        sent = 0
        while True:
            if sent < written:
                data = os.pread(fd, min(SEND_CHUNK, written - sent), sent)
                sent += len(data)
                yield data
                continue
            if reader.done():  # and everything it wrote has been sent
                reader.result()  # a failed read ends the response here (truncated CSV)
                return
            grew.clear()
            more = asyncio.create_task(grew.wait())
            await asyncio.wait([reader, more], return_when=asyncio.FIRST_COMPLETED)
            more.cancel()
    finally:
        if not reader.done():  # the client went away: stop reading, free the connection
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        spool.close()


async def _read_rows(engine: AsyncEngine, access: Access, statement: Any,
                     append: Callable[[bytes], None], guard: Guard | None) -> None:
    table = access.table
    columns = table.definition.columns
    stamp = column_type("timestamp")
    kinds = [column_type("uuid"), *[None if c.name in access.decision.redacted
                                    else column_type(c.type) for c in columns], stamp, stamp]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(["uid", *[field_name(c) for c in columns], "createdAt", "updatedAt"])
    async with engine.connect() as conn:
        result = await conn.stream(statement.execution_options(yield_per=BATCH))
        checked = guard is None
        partition: Sequence[Any]
        async for partition in result.mappings().partitions(BATCH):
            if not checked:  # the first rows tell whether the guard held (StaleFacts if not)
                assert guard is not None
                partition, checked = guard.check(partition), True
            for row in partition:
                shaped = table.row_json(row, access.decision.redacted)
                writer.writerow([_cell(k, v) for k, v in zip(kinds, shaped.values(), strict=True)])
            append(buffer.getvalue().encode())
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        append(buffer.getvalue().encode())
