"""The operator's feed (contract section 2a): every org's changes of a table, unredacted.

No row policy, no redaction and no operation switch applies: inserted and updated rows are
re-read as they stand (live rows only, as the operator's row list shows them) and carry their
`org`; every delete and bulk change is sent, with the `org` it happened in. One statement per
chunk of changes, whatever the number of operator subscribers: they all share the frames.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.db.changelog import BULK, DELETE, SCHEMA
from authoric.plan.binds import Shaped
from authoric.plan.request import ExpandPaths
from authoric.plan.runner import StatementCache
from authoric.realtime.expansion import expand_for_operator
from authoric.realtime.judge import Frame, frame
from authoric.realtime.source import RESYNC_REASONS, Change

# An event's bytes for the operator: (table, change, the row as it stands with its `org`, or
# None) -> bytes, or None: not sent.
OperatorRender = Callable[[CompiledTable, Change, dict[str, Any] | None], bytes | None]


async def judge_for_operator(conn: AsyncConnection | None, table: CompiledTable,
                             changes: Sequence[Change],
                             render: OperatorRender | None = None,
                             snapshot: AppSnapshot | None = None,
                             expand: ExpandPaths = (), raw: asyncpg.Connection | None = None,
                             statements: StatementCache | None = None) -> list[Frame]:
    """The operator's frames for `changes` (one table, ascending positions); `render` makes
    each event's bytes (default: the SSE frame; webhooks render their body). With `expand`
    (and the `snapshot` the table is of), each row's references are read as the operator
    reads them: one more statement per expanded table and level, never one per row.

    `raw` (an asyncpg connection of the request path's pool, with `statements` and the
    `snapshot`): the rows are re-read there, as SQL text compiled once per table and catalog
    version, with no SQLAlchemy statement built per batch; `conn` is then needed only for
    `expand`."""
    if raw is not None and statements is not None and snapshot is not None:
        current = await _current_rows_raw(raw, statements, snapshot, table, changes)
    else:
        assert conn is not None
        current = await _current_rows(conn, table, changes)
    rows = {uid: {**table.row_json(row), "org": str(row["org_uid"])}
            for uid, row in current.items()}
    if expand and snapshot is not None:
        assert conn is not None
        await expand_for_operator(conn, snapshot, table, list(rows.values()), expand)
    render = _event if render is None else render
    out: list[Frame] = []
    for change in changes:
        data = render(table, change, rows.get(change.row_uid))
        if data is not None:
            out.append(Frame(change.pos, data, change.at))
    return out


def _event(table: CompiledTable, change: Change, row: dict[str, Any] | None) -> bytes | None:
    org = str(change.org_uid)
    if change.op in RESYNC_REASONS:
        return frame(change.pos, {"reason": RESYNC_REASONS[change.op], "table": table.name,
                                  "org": org}, "resync")
    if change.op == DELETE:
        return frame(change.pos, {"op": "delete", "table": table.name,
                                  "rowUid": str(change.row_uid), "org": org})
    if row is None:  # deleted since: its delete follows in the log
        return None
    return frame(change.pos, {"op": change.op, "table": table.name, "row": row})


def _reread(table: CompiledTable, uids: list[Any]) -> Any:
    """The changed rows as they stand (live rows only)."""
    wanted = bindparam("uids", value=uids, type_=ARRAY(UUID(as_uuid=True)))
    return select(*table.table.c).where(and_(table.table.c.uid == func.any(wanted),
                                             table.live()))


def _uids(changes: Sequence[Change]) -> list[Any]:
    return list({c.row_uid for c in changes if c.op not in (DELETE, BULK, SCHEMA) and c.row_uid})


async def _current_rows(conn: AsyncConnection, table: CompiledTable,
                        changes: Sequence[Change]) -> dict[Any, Any]:
    uids = _uids(changes)
    if not uids:
        return {}
    return {r["uid"]: r for r in (await conn.execute(_reread(table, uids))).mappings()}


async def _current_rows_raw(raw: asyncpg.Connection, statements: StatementCache,
                            snapshot: AppSnapshot, table: CompiledTable,
                            changes: Sequence[Change]) -> dict[Any, Any]:
    uids = _uids(changes)
    if not uids:
        return {}
    sql, args = statements.sql_and_args(
        snapshot.version, Shaped(("operator", table.name), {"uids": uids},
                                 lambda: _reread(table, uids), own_binds=False))
    # The text names the app and its catalog version, as the judge's (realtime/judge.py):
    # asyncpg keeps prepared statements by their text, and a table's columns change only
    # with the version.
    rows = await raw.fetch(f"/* operator {snapshot.uid} v{snapshot.version} */ {sql}", *args)
    return {r["uid"]: r for r in rows}
