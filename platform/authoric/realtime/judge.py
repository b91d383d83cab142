"""Judging a batch of changes for many read classes at once.

One SQL statement per batch: for each class, a branch re-reads the batch's inserted and
updated rows through that class's governed read (org, live rows, row policy), and evaluates
the same row policy over the old images of deleted rows. Each (event, class) is then encoded
to an SSE frame exactly once; subscribers of the class share the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Integer, and_, bindparam, literal, select, text, union_all
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import util as sql_util
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.changes.log import BULK, DELETE
from authoric.changes.reader import Change
from authoric.errors import AuthoricError
from authoric.policy.decision import Decision
from authoric.policy.principal import Principal
from authoric.records.gate import operation_enabled


@dataclass(frozen=True)
class ReadClass:
    key: Hashable
    principal: Principal  # any member of the class: they are indistinguishable here


@dataclass(frozen=True)
class Frame:
    pos: int
    data: bytes


def frame(pos: int | None, data: dict[str, Any], event: str | None = None) -> bytes:
    lines = []
    if event:
        lines.append(f"event: {event}")
    if pos is not None:
        lines.append(f"id: {pos}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def subscriber_decision(snapshot: AppSnapshot, table: CompiledTable,
                        principal: Principal) -> Decision | None:
    """The read decision for a subscriber: needs list and read on, read_list and read granted."""
    from authoric.policy.decision import decide

    if not (operation_enabled(table, "read_list") and operation_enabled(table, "read")):
        return None
    try:
        if not decide(snapshot, principal, table, "read_list").allowed:
            return None
        decision = decide(snapshot, principal, table, "read")
    except AuthoricError:  # a broken policy: fail closed, send nothing
        return None
    return decision if decision.allowed else None


async def judge(conn: AsyncConnection, snapshot: AppSnapshot, table: CompiledTable,
                classes: Sequence[ReadClass], changes: Sequence[Change]) -> dict[Hashable, list[Frame]]:
    """Frames per class for `changes` (all of one table, ascending positions)."""
    decisions = {c.key: subscriber_decision(snapshot, table, c.principal) for c in classes}
    out: dict[Hashable, list[Frame]] = {c.key: [] for c in classes}
    live = [c for c in classes if decisions[c.key] is not None]
    visible, gone = await _visibility(conn, table, live, decisions, changes) if live else ({}, set())
    index = {c.key: i for i, c in enumerate(live)}
    for change in changes:
        for cls in live:
            i = index[cls.key]
            decision = decisions[cls.key]
            assert decision is not None
            data = _event(table, decision, cls, change, visible.get((i, change.row_uid)),
                          (i, change.pos) in gone)
            if data is not None:
                out[cls.key].append(Frame(change.pos, data))
    return out


def _event(table: CompiledTable, decision: Decision, cls: ReadClass, change: Change,
           row: Any, delete_visible: bool) -> bytes | None:
    if change.op == BULK:
        if change.org_uid != cls.principal.org_uid:
            return None
        return frame(change.pos, {"reason": "bulk_change"}, "resync")
    if change.op == DELETE:
        if not delete_visible:
            return None
        return frame(change.pos, {"op": "delete", "table": table.name, "rowUid": str(change.row_uid)})
    if row is None:
        return None
    return frame(change.pos, {"op": change.op, "table": table.name,
                              "row": table.row_json(row, decision.redacted)})


async def _visibility(conn: AsyncConnection, table: CompiledTable, classes: Sequence[ReadClass],
                      decisions: dict[Hashable, Decision | None], changes: Sequence[Change],
                      ) -> tuple[dict[tuple[int, Any], Any], set[tuple[int, int]]]:
    """One statement: current rows visible per class, and deletes visible per class."""
    uids = sorted({c.row_uid for c in changes if c.op not in (DELETE, BULK) and c.row_uid},
                  key=str)
    deletes = [c for c in changes if c.op == DELETE and c.old_row is not None]
    orgs = {c.org_uid for c in changes}
    branches = []
    for i, cls in enumerate(classes):
        if cls.principal.org_uid not in orgs:
            continue
        decision = decisions[cls.key]
        assert decision is not None
        where = decision.rows(table, cls.principal)
        if uids:
            branches.append(select(literal(i, Integer).label("k"), literal(0).label("dpos"),
                                   *table.table.c)
                            .where(and_(table.table.c.uid.in_(uids), where)))
        if deletes:
            branches.append(_deleted_branch(table, i, deletes, where))
    if not branches:
        return {}, set()
    rows = (await conn.execute(union_all(*branches))).mappings().all()
    visible: dict[tuple[int, Any], Any] = {}
    gone: set[tuple[int, int]] = set()
    for row in rows:
        if row["dpos"]:
            gone.add((row["k"], row["dpos"]))
        else:
            visible[(row["k"], row["uid"])] = row
    return visible, gone


def _deleted_branch(table: CompiledTable, i: int, deletes: Sequence[Change],
                    where: ColumnElement[bool]) -> Any:
    """Evaluate the class's `where` over the stored old images, as rows of the table's type."""
    old = _old_images(table, deletes)
    adapted = sql_util.ClauseAdapter(old).traverse(where)
    return (select(literal(i, Integer).label("k"), old.c.dpos, *[old.c[c.name] for c in table.table.c])
            .where(adapted))


def _old_images(table: CompiledTable, deletes: Sequence[Change]) -> Any:
    """A derived table `old` with the table's columns (typed), one row per deleted image."""
    t = table.table
    picked = ", ".join(f'(r)."{c.name}"' for c in t.c)  # names come from the catalog only
    sql = text(
        f"SELECT d.pos AS dpos, {picked} "
        "FROM jsonb_to_recordset(:images) AS d(pos bigint, img jsonb), "
        f'LATERAL jsonb_populate_record(NULL::"{t.schema}"."{t.name}", d.img) AS r'
    ).bindparams(bindparam("images", type_=JSONB, value=[
        {"pos": d.pos, "img": d.old_row} for d in deletes]))
    return sql.columns(literal(0, BigInteger).label("dpos"), *t.c).subquery("old")
