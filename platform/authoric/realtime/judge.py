"""Judging a batch of changes for many read classes at once.

Each class's governed clause comes from the plan layer (`plan.governed_rows`), the same
clause a GET of the row runs, so the feed and REST cannot drift apart.

One SQL statement per org of the batch: for each read class of that org, a branch re-reads
the org's inserted and updated rows through that class's governed read (org, live rows, row
policy), and evaluates the same row policy over the old images of deleted rows. Each (event,
class) is then encoded to an SSE frame exactly once; subscribers of the class share the bytes.

The cost follows the classes a change involves (its org's), not the classes that exist: a
change is only ever looked at with its own org's classes, and each org's statement has a
shape that repeats from batch to batch (the same classes, with or without rows to re-read or
deletes to judge), so SQLAlchemy compiles it once and reuses it. One statement for the
whole batch, with a branch per class of every org in it, changed shape with every batch and
was compiled anew each time: with 150 classes that cost most of the feed's CPU.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Integer, and_, bindparam, func, literal, select, text, union_all
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import util as sql_util
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import AuthoricError
from authoric.plan.access import operation_enabled
from authoric.plan.plan import governed_rows
from authoric.plan.request import ExpandPaths
from authoric.policy.decision import Decision
from authoric.policy.principal import Principal
from authoric.realtime.expansion import expand_for_classes
from authoric.realtime.source import BULK, DELETE, RESYNC_REASONS, SCHEMA, Change


@dataclass(frozen=True)
class ReadClass:
    key: Hashable
    principal: Principal  # any member of the class: they are indistinguishable here
    expand: ExpandPaths = ()  # `?expand=` of its streams (part of `key`)


@dataclass(frozen=True)
class Frame:
    pos: int
    data: bytes
    at: float = 0.0  # when its change was written (the delivery-latency histogram)


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
                classes: Sequence[ReadClass], changes: Sequence[Change],
                memo: dict[Hashable, Decision | None] | None = None) -> dict[Hashable, list[Frame]]:
    """Frames per class for `changes` (all of one table, ascending positions).

    Only classes of the orgs the changes belong to are judged. `memo` keeps decisions
    between batches; the caller clears it when the app's version moves.
    """
    memo = {} if memo is None else memo
    out: dict[Hashable, list[Frame]] = {c.key: [] for c in classes}
    by_org: dict[Any, list[Change]] = defaultdict(list)
    for change in changes:
        by_org[change.org_uid].append(change)
    classes_of: dict[Any, list[ReadClass]] = defaultdict(list)
    for cls in classes:
        if cls.principal.org_uid in by_org:
            classes_of[cls.principal.org_uid].append(cls)
    for org, involved in classes_of.items():
        for cls in involved:
            if cls.key not in memo:
                memo[cls.key] = subscriber_decision(snapshot, table, cls.principal)
        live = [c for c in involved if memo[c.key] is not None]
        if not live:
            continue
        own = by_org[org]
        visible, gone = await _visibility(conn, table, live, memo, own)
        rows = await _rendered(conn, snapshot, table, live, memo, visible)
        for i, cls in enumerate(live):
            frames = out[cls.key]
            for change in own:
                data = _event(table, cls, change, rows[i].get(change.row_uid),
                              (i, change.pos) in gone)
                if data is not None:
                    frames.append(Frame(change.pos, data, change.at))
    return out


async def _rendered(conn: AsyncConnection, snapshot: AppSnapshot, table: CompiledTable,
                    classes: Sequence[ReadClass], decisions: dict[Hashable, Decision | None],
                    visible: dict[tuple[int, Any], Any]) -> list[dict[Any, dict[str, Any]]]:
    """Per class, its visible rows by uid as it reads them (redacted), with their expansion."""
    rows: list[dict[Any, dict[str, Any]]] = [{} for _ in classes]
    for (i, uid), row in visible.items():
        decision = decisions[classes[i].key]
        assert decision is not None
        rows[i][uid] = table.row_json(row, decision.redacted)
    await expand_for_classes(conn, snapshot, table, [
        (cls.principal, cls.expand, list(rows[i].values())) for i, cls in enumerate(classes)])
    return rows


def _event(table: CompiledTable, cls: ReadClass, change: Change,
           row: dict[str, Any] | None, delete_visible: bool) -> bytes | None:
    if change.op in RESYNC_REASONS:
        if change.org_uid != cls.principal.org_uid:
            return None
        return frame(change.pos, {"reason": RESYNC_REASONS[change.op], "table": table.name},
                     "resync")
    if change.op == DELETE:
        if not delete_visible:
            return None
        return frame(change.pos, {"op": "delete", "table": table.name, "rowUid": str(change.row_uid)})
    if row is None:
        return None
    return frame(change.pos, {"op": change.op, "table": table.name, "row": row})


async def _visibility(conn: AsyncConnection, table: CompiledTable, classes: Sequence[ReadClass],
                      decisions: dict[Hashable, Decision | None], changes: Sequence[Change],
                      ) -> tuple[dict[tuple[int, Any], Any], set[tuple[int, int]]]:
    """One statement: current rows visible per class, and deletes visible per class."""
    # Per org: the rows to re-read and the old images to judge. Each branch binds its org's
    # uids as ONE array parameter, so the statement's parameter count grows with classes,
    # never with classes x rows (PostgreSQL stops at 32,767 parameters).
    uids: dict[Any, list[Any]] = defaultdict(list)
    deletes: dict[Any, list[Change]] = defaultdict(list)
    for c in changes:
        if c.op == DELETE and c.old_row is not None:
            deletes[c.org_uid].append(c)
        elif c.op not in (DELETE, BULK, SCHEMA) and c.row_uid and c.row_uid not in uids[c.org_uid]:
            uids[c.org_uid].append(c.row_uid)
    branches = []
    for i, cls in enumerate(classes):
        org = cls.principal.org_uid
        decision = decisions[cls.key]
        assert decision is not None
        where = governed_rows(table, decision, cls.principal)
        if uids.get(org):
            wanted = bindparam(f"u{i}", value=uids[org], type_=ARRAY(UUID(as_uuid=True)))
            branches.append(select(literal(i, Integer).label("k"), literal(0).label("dpos"),
                                   *table.table.c)
                            .where(and_(table.table.c.uid == func.any(wanted), where)))
        if deletes.get(org):
            branches.append(_deleted_branch(table, i, deletes[org], where))
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
    old = _old_images(table, i, deletes)
    adapted = sql_util.ClauseAdapter(old).traverse(where)
    return (select(literal(i, Integer).label("k"), old.c.dpos, *[old.c[c.name] for c in table.table.c])
            .where(adapted))


def _old_images(table: CompiledTable, i: int, deletes: Sequence[Change]) -> Any:
    """A derived table `old` with the table's columns (typed), one row per deleted image."""
    t = table.table
    picked = ", ".join(f'(r)."{c.name}"' for c in t.c)  # names come from the catalog only
    sql = text(
        f"SELECT d.pos AS dpos, {picked} "
        f"FROM jsonb_to_recordset(:images{i}) AS d(pos bigint, img jsonb), "
        f'LATERAL jsonb_populate_record(NULL::"{t.schema}"."{t.name}", d.img) AS r'
    ).bindparams(bindparam(f"images{i}", type_=JSONB, value=[
        {"pos": d.pos, "img": d.old_row} for d in deletes]))
    return sql.columns(literal(0, BigInteger).label("dpos"), *t.c).subquery(f"old{i}")
