"""The operator's feed (contract section 2a): every org's changes of a table, unredacted.

No row policy, no redaction and no operation switch applies: inserted and updated rows are
re-read as they stand (live rows only, as the operator's row list shows them) and carry their
`org`; every delete and bulk change is sent, with the `org` it happened in. One statement per
chunk of changes, whatever the number of operator subscribers: they all share the frames.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.db.changelog import BULK, DELETE, SCHEMA
from authoric.plan.request import ExpandPaths
from authoric.realtime.expansion import expand_for_operator
from authoric.realtime.judge import Frame, frame
from authoric.realtime.source import RESYNC_REASONS, Change

# An event's bytes for the operator: (table, change, the row as it stands with its `org`, or
# None) -> bytes, or None: not sent.
OperatorRender = Callable[[CompiledTable, Change, dict[str, Any] | None], bytes | None]


async def judge_for_operator(conn: AsyncConnection, table: CompiledTable,
                             changes: Sequence[Change],
                             render: OperatorRender | None = None,
                             snapshot: AppSnapshot | None = None,
                             expand: ExpandPaths = ()) -> list[Frame]:
    """The operator's frames for `changes` (one table, ascending positions); `render` makes
    each event's bytes (default: the SSE frame; webhooks render their body). With `expand`
    (and the `snapshot` the table is of), each row's references are read as the operator
    reads them: one more statement per expanded table and level, never one per row."""
    rows = {uid: {**table.row_json(row), "org": str(row["org_uid"])}
            for uid, row in (await _current_rows(conn, table, changes)).items()}
    if expand and snapshot is not None:
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


async def _current_rows(conn: AsyncConnection, table: CompiledTable,
                        changes: Sequence[Change]) -> dict[Any, Any]:
    uids = list({c.row_uid for c in changes if c.op not in (DELETE, BULK, SCHEMA) and c.row_uid})
    if not uids:
        return {}
    wanted = bindparam("uids", value=uids, type_=ARRAY(UUID(as_uuid=True)))
    statement = select(*table.table.c).where(and_(table.table.c.uid == func.any(wanted),
                                                  table.live()))
    return {r["uid"]: r for r in (await conn.execute(statement)).mappings()}
