"""Expanding references (`?expand=vendor,vendor.country`, contract section 4).

Each expanded row is read through the referenced table's governed read for the same caller,
as `GET /{app}/autocrud/{reftable}/{uid}` would read it: the `read` permission and the `read`
operation (the gate), the caller's org, the row policy, live rows only, and redaction. A row
the caller may not read, a null reference, or a reference the caller sees redacted expands to
`null`; the `<name>_uid` field is there either way. One statement per expanded path reads the
referenced rows of the whole page at once (`uid = ANY(...)`), never one per row.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, Forbidden, NotFound, TableLocked
from authoric.plan.access import Access
from authoric.plan.plan import Plan
from authoric.plan.request import ExpandPaths
from authoric.plan.runner import Executor

REDACTED = "[redacted]"
Tree = dict[str, "Tree"]


class Reader(Protocol):
    """The caller whose governed reads the expansion runs (records.pipeline.Caller)."""

    @property
    def ex(self) -> Executor: ...

    def admit(self, table: str, action: str) -> Access: ...


def expansion_tree(access: Access, paths: ExpandPaths) -> Tree:
    """The paths as a tree of reference names, each checked against its table (400 for a name
    that is not a reference column)."""
    tree: Tree = {}
    for path in paths:
        table, level = access.table, tree
        for name in path:
            column = table.definition.column(name)
            if column is None or column.references is None:
                raise BadRequest(f"{name!r} is not a reference column of {table.name!r}",
                                 {"expand": ".".join(path)})
            table = access.snapshot.table(column.references)
            level = level.setdefault(name, {})
    return tree


async def expand_rows(reader: Reader, snapshot: AppSnapshot, table: CompiledTable,
                      rows: list[dict[str, Any]], tree: Tree) -> None:
    """Add `expand` to each row (in place), level by level: one statement per path."""
    for name, below in tree.items():
        column = table.definition.column(name)
        assert column is not None and column.references is not None
        key = f"{name}_uid"
        uids = sorted({r[key] for r in rows if isinstance(r.get(key), str) and r[key] != REDACTED})
        found = await _governed_rows(reader, column.references, uids) if uids else {}
        for row in rows:
            row.setdefault("expand", {})[name] = found.get(str(row.get(key)))
        if below:
            await expand_rows(reader, snapshot, snapshot.table(column.references),
                              list(found.values()), below)


async def _governed_rows(reader: Reader, table_name: str, uids: list[str]) -> dict[str, Any]:
    """The rows among `uids` the caller may read, rendered as it would GET them."""
    try:
        access = reader.admit(table_name, "read")
    except (Forbidden, TableLocked, NotFound):
        return {}
    rows = await reader.ex.fetch(Plan(access).read_many([uuid.UUID(u) for u in uids]))
    return {str(r["uid"]): access.table.row_json(r, access.decision.redacted) for r in rows}
