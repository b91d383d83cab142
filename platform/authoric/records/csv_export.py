"""CSV export: every row the caller may list, filters honoured, redaction applied, streamed.

Cells of text and JSON columns that start with `=`, `+`, `-`, `@`, tab or carriage return
are prefixed with `'` so spreadsheet programs do not run them as formulas (OWASP's advice).
Typed numbers and dates cannot carry a formula and are written as they are.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.catalog.schema import field_name
from authoric.plan.access import Access
from authoric.plan.filters import Node
from authoric.plan.plan import Plan

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
BATCH = 1000


def neutralised(value: str) -> str:
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def _cell(kind: str, value: Any) -> str:
    if value is None:
        return ""
    if kind == "json":
        return neutralised(json.dumps(value, separators=(",", ":")))
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "text" or kind == "redacted":
        return neutralised(str(value))
    return str(value)


def export_statement(access: Access, filter_tree: Node, order: str | None) -> Any:
    """The governed, ordered SELECT of the plan; built before streaming starts, so a bad
    filter is still a clean 400."""
    return Plan(access, filter_tree).select_all(order)


async def export_csv(engine: AsyncEngine, access: Access, statement: Any) -> AsyncIterator[bytes]:
    table = access.table
    columns = table.definition.columns
    kinds = ["uuid", *["redacted" if c.name in access.decision.redacted else c.type
                       for c in columns], "timestamp", "timestamp"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(["uid", *[field_name(c) for c in columns], "createdAt", "updatedAt"])
    async with engine.connect() as conn:
        result = await conn.stream(statement.execution_options(yield_per=BATCH))
        async for partition in result.mappings().partitions(BATCH):
            for row in partition:
                shaped = table.row_json(row, access.decision.redacted)
                writer.writerow([_cell(k, v) for k, v in zip(kinds, shaped.values(), strict=True)])
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()
