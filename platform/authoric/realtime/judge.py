"""Judging a batch of changes for many read classes at once.

Each class's governed clause comes from the plan layer (`plan.governed_rows`), the same
clause a GET of the row runs, so the feed and REST cannot drift apart.

One SQL statement per org of the batch: it re-reads the org's inserted and updated rows once,
each with a flag per read class of that org saying whether the class's governed read (org,
live rows, row policy) returns it, and evaluates each class's row policy over the old images
of deleted rows. Each event is then encoded to an SSE frame once per distinct rendering of
it (classes that redact alike share one, when none of the org's classes uses `?expand=`);
subscribers of a class share the bytes.

The cost follows the classes a change involves (its org's), not the classes that exist: a
change is only ever looked at with its own org's classes, and each org's statement has a
shape that repeats from batch to batch (the same classes, with or without rows to re-read or
deletes to judge), so it is compiled once and reused. One statement for the whole batch,
with a branch per class of every org in it, changed shape with every batch and was compiled
anew each time: with 150 classes that cost most of the feed's CPU.

The hub goes further (`judge_orgs` with `raw`): it keeps each org statement's SQL text in its
`Memo` and runs it on the request path's pool, as REST's reads run, so a batch builds no
statement, makes no cache key and opens no transaction; it only fills the uids and images.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from sqlalchemy import (
    BigInteger,
    Boolean,
    Integer,
    and_,
    bindparam,
    cast,
    func,
    literal,
    null,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import util as sql_util
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.db.changelog import BULK, DELETE, SCHEMA
from authoric.db.sql import Sql, joined, quoted, statement
from authoric.errors import AuthoricError
from authoric.plan.access import operation_enabled
from authoric.plan.binds import Shaped
from authoric.plan.guard import Guard, guarded_branches
from authoric.plan.plan import governed_rows
from authoric.plan.request import ExpandPaths
from authoric.plan.runner import StatementCache
from authoric.policy.decision import Decision
from authoric.policy.principal import Principal
from authoric.realtime.expansion import expand_for_classes
from authoric.realtime.source import RESYNC_REASONS, Change
from authoric.realtime.verdicts import Verdicts
from authoric.wire import json_bytes


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
    """One SSE frame. The JSON has no raw line break to split it (JSON escapes them)."""
    head = (f"event: {event}\n" if event else "") + (f"id: {pos}\n" if pos is not None else "")
    return b"%sdata: %s\n\n" % (head.encode(), json_bytes(data))


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


@dataclass(eq=False)
class Memo:
    """What the judge keeps between batches of one table, valid for one snapshot (the caller
    drops it when the app's version moves): each class's decision, and each org statement's
    SQL text, compiled once by the request path's StatementCache (plan/runner.py)."""

    decisions: dict[Hashable, Decision | None] = field(default_factory=dict)
    statements: StatementCache = field(default_factory=StatementCache)
    sent: int = 0  # org statements sent since the caller last looked (benchmarks)


UIDS, IMAGES = "uids", "images"
K, DPOS, SEES = "_k", "_dpos", "_sees"  # no column is named so (names start with a letter)


async def judge(conn: AsyncConnection, snapshot: AppSnapshot, table: CompiledTable,
                classes: Sequence[ReadClass], changes: Sequence[Change],
                memo: Memo | None = None) -> dict[Hashable, list[Frame]]:
    """Frames per class for `changes` (all of one table, ascending positions).

    Only classes of the orgs the changes belong to are judged. `memo` keeps decisions
    between batches; the caller drops it when the app's version moves.
    """
    by_org: dict[Any, list[ReadClass]] = defaultdict(list)
    for cls in classes:
        by_org[cls.principal.org_uid].append(cls)

    async def connect() -> AsyncConnection:
        return conn

    return await judge_orgs(connect, snapshot, table, by_org, changes, memo)


Connect = Callable[[], Awaitable[AsyncConnection]]


async def judge_orgs(connect: Connect, snapshot: AppSnapshot, table: CompiledTable,
                     classes: Mapping[Any, Sequence[ReadClass]], changes: Sequence[Change],
                     memo: Memo | None = None, raw: asyncpg.Connection | None = None,
                     render: Render | None = None,
                     keep: Verdicts | None = None) -> dict[Hashable, list[Frame]]:
    """`judge`, with the classes already grouped by org (the hub keeps that grouping), so a
    batch only ever looks at the classes of its own orgs.

    `connect` gives a SQLAlchemy connection, asked for only when one is needed (no `raw`, or
    `?expand=`). `raw`: an asyncpg connection of the request path's pool (plan/runner.py: autocommit, JSON
    as Python values). Each org statement then runs there as SQL text compiled once per shape
    (`memo`), with no BEGIN or ROLLBACK and no statement built per batch; without it, the
    statement is built and run through SQLAlchemy. The SQL is the same either way.
    The result has an entry only for the classes of the batch's orgs.
    `render` makes each event's bytes (default: the SSE frame; webhooks render their body).
    `keep` (the hub's): where each class a webhook asked for records its verdicts, which
    that webhook then reuses instead of re-reading (realtime/verdicts.py).
    """
    render = _event if render is None else render
    memo = Memo() if memo is None else memo
    decisions = memo.decisions
    out: dict[Hashable, list[Frame]] = {}
    by_org: dict[Any, list[Change]] = defaultdict(list)
    for change in changes:
        by_org[change.org_uid].append(change)
    for org, own in by_org.items():
        involved = classes.get(org)
        if not involved:
            continue
        for cls in involved:
            if cls.key not in decisions:
                decisions[cls.key] = subscriber_decision(snapshot, table, cls.principal)
        live = [c for c in involved if decisions[c.key] is not None]
        for cls in involved:
            out[cls.key] = []
        if not live:
            continue
        visible, gone = await _visibility(connect, snapshot, table, live, memo, own, raw)
        rows = await _rendered(connect, snapshot, table, live, decisions, visible)
        # Classes that read a row alike share its rendering (_rendered), and then its frame:
        # an event is encoded once per distinct rendering, not once per class. Deletes and
        # resyncs depend only on the change and on whether the class may hear of it (every
        # class here is of the same org).
        encoded: dict[tuple[int, int, bool], Frame | None] = {}
        for i, cls in enumerate(live):
            frames = out[cls.key]
            scope = (snapshot.uid, snapshot.version, table.name, cls.key)
            kept = keep if keep is not None and keep.wanted(scope) else None
            for change in own:
                row = rows[i].get(change.row_uid)
                seen = (i, change.pos) in gone
                if kept is not None:
                    kept.keep(scope, change, row, seen)
                key = (change.pos, id(row), seen)
                if key in encoded:
                    made = encoded[key]
                else:
                    data = render(table, cls, change, row, seen)
                    made = encoded[key] = None if data is None else Frame(change.pos, data,
                                                                          change.at)
                if made is not None:
                    frames.append(made)
    return out


async def _rendered(connect: Connect, snapshot: AppSnapshot, table: CompiledTable,
                    classes: Sequence[ReadClass], decisions: dict[Hashable, Decision | None],
                    visible: dict[tuple[int, Any], Any]) -> list[dict[Any, dict[str, Any]]]:
    """Per class, its visible rows by uid as it reads them (redacted), with their expansion."""
    rows: list[dict[Any, dict[str, Any]]] = [{} for _ in classes]
    expanded = any(cls.expand for cls in classes)
    # A row is rendered once per redaction, and classes that redact alike share the dict
    # (judge_orgs then encodes it once). Not with `?expand=`: expansion adds to each class's
    # dicts, so each class gets its own. When the classes redact in more than one way, the
    # row's values are rendered once, unredacted, and each redaction masks a copy.
    shared: dict[tuple[Any, frozenset[str], int], dict[str, Any]] = {}
    plain: dict[Any, dict[str, Any]] | None = None
    if not expanded and len({_redacted(decisions, cls) for cls in classes}) > 1:
        plain = {}
    for (i, uid), row in visible.items():
        redacted = _redacted(decisions, classes[i])
        key = (uid, redacted, i if expanded else -1)
        shown = shared.get(key)
        if shown is None:
            if plain is None:
                shown = table.row_json(row, redacted)
            else:
                whole = plain.get(uid)
                if whole is None:
                    whole = plain[uid] = table.row_json(row)
                shown = table.redact(whole, redacted)
            shared[key] = shown
        rows[i][uid] = shown
    if not expanded:
        return rows
    await expand_for_classes(await connect(), snapshot, table, [
        (cls.principal, cls.expand, list(rows[i].values())) for i, cls in enumerate(classes)])
    return rows


def _redacted(decisions: dict[Hashable, Decision | None], cls: ReadClass) -> frozenset[str]:
    decision = decisions[cls.key]
    assert decision is not None  # only classes that may read are judged
    return decision.redacted


# An event's bytes for one class: (table, class, change, its row as the class reads it or
# None, whether the class could read a deleted row as it stood) -> bytes, or None: not sent.
Render = Callable[[CompiledTable, ReadClass, Change, dict[str, Any] | None, bool], bytes | None]


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


async def _visibility(connect: Connect, snapshot: AppSnapshot, table: CompiledTable,
                      classes: Sequence[ReadClass], memo: Memo, changes: Sequence[Change],
                      raw: asyncpg.Connection | None,
                      ) -> tuple[dict[tuple[int, Any], Any], set[tuple[int, int]]]:
    """One statement for one org's changes: its rows visible per class, and its deletes
    visible per class (`classes` are all of that org)."""
    # The rows to re-read and the old images to judge. Each branch binds them as ONE
    # parameter, so the statement's parameter count grows with classes, never with
    # classes x rows (PostgreSQL stops at 32,767 parameters).
    uids: list[Any] = []
    seen: set[Any] = set()
    deletes: list[Change] = []
    for c in changes:
        if c.op == DELETE and c.old_row is not None:
            deletes.append(c)
        elif c.op not in (DELETE, BULK, SCHEMA) and c.row_uid and c.row_uid not in seen:
            seen.add(c.row_uid)
            uids.append(c.row_uid)
    if not uids and not deletes:
        return {}, set()
    images = [{"pos": d.pos, "img": d.old_row} for d in deletes] if deletes else None
    memo.sent += 1
    # Planned for the snapshot's catalog, run only at its version: a rename or swap
    # committed since would otherwise read another column under a judged name.
    guard = Guard.for_catalog(snapshot.uid, snapshot.version)
    if raw is None:
        statement = _statement(table, classes, memo.decisions, uids, images, guard)
        rows: Sequence[Any] = (await (await connect()).execute(statement)).mappings().all()
    else:
        sql, args = memo.statements.sql_and_args(
            snapshot.version, _shaped(table, classes, memo.decisions, uids, images, guard))
        # The text names the app and its catalog version: asyncpg keeps a connection's
        # prepared statements by their text, and PostgreSQL does not re-plan a prepared
        # `jsonb_populate_record(NULL::<table>, ...)` when the table's row type changes (a
        # column's new type, or the table dropped and made again fails it: "function in FROM
        # has unsupported return type"). Every such change bumps the version.
        rows = await raw.fetch(f"/* feed {snapshot.uid} v{snapshot.version} */ {sql}", *args)
    visible: dict[tuple[int, Any], Any] = {}
    gone: set[tuple[int, int]] = set()
    for row in guard.check(rows):  # StaleFacts when the catalog moved: the hub judges again
        if row[DPOS]:
            gone.add((row[K], row[DPOS]))
            continue
        for i, sees in enumerate(row[SEES]):
            if sees:
                visible[(i, row["uid"])] = row
    return visible, gone


def _statement(table: CompiledTable, classes: Sequence[ReadClass],
               decisions: Mapping[Hashable, Decision | None], uids: list[Any],
               images: list[dict[str, Any]] | None, guard: Guard) -> Any:
    """The org statement: `uids` re-read once, each row with a flag per class (one array)
    saying whether that class's governed read returns it, and per class a branch judging the old
    `images` with the same clause. Its text depends only on the classes and on which of the
    two it has (the uids and each class's images are one parameter each).

    One read with a flag per class, not a branch per class: with a branch per class, a row
    every class may read was read, returned and decoded once per class (3 times for the 3
    classes of a change in bench.fanout), and the uids were bound once per class."""
    wheres = []
    for cls in classes:
        decision = decisions[cls.key]
        assert decision is not None
        wheres.append(governed_rows(table, decision, cls.principal))
    branches = []
    if uids:
        wanted = bindparam(UIDS, value=uids, type_=ARRAY(UUID(as_uuid=True)))
        # One array of flags, not a column per class: PostgreSQL takes at most 1,664 columns,
        # and a per-user policy makes a class per subscribing user. A NULL flag (a policy
        # over a NULL value) reads as "not visible", as it does in a GET's WHERE.
        branches.append(select(literal(-1, Integer).label(K), literal(0).label(DPOS),
                               postgresql.array[Any](wheres, type_=Boolean).label(SEES),
                               *table.table.c)
                        .where(and_(table.table.c.uid == func.any(wanted), or_(*wheres))))
    if images is not None:
        branches += [_deleted_branch(table, i, images, where) for i, where in enumerate(wheres)]
    return guarded_branches(guard, branches)


def _shaped(table: CompiledTable, classes: Sequence[ReadClass],
            decisions: Mapping[Hashable, Decision | None], uids: list[Any],
            images: list[dict[str, Any]] | None, guard: Guard) -> Shaped:
    """The org statement by shape: its text depends only on the classes (whose org and
    policy values are its constants) and on which of uids and images it has; those fill
    one parameter for the uids and one per class for the images."""
    params: dict[str, Any] = guard.params()
    if uids:
        params[UIDS] = uids
    if images is not None:
        for i in range(len(classes)):
            params[f"{IMAGES}{i}"] = images
    return Shaped((tuple(cls.key for cls in classes), bool(uids), images is not None), params,
                  lambda: _statement(table, classes, decisions, uids, images, guard),
                  own_binds=False)


def _deleted_branch(table: CompiledTable, i: int, images: list[dict[str, Any]],
                    where: ColumnElement[bool]) -> Any:
    """Evaluate the class's `where` over the stored old images, as rows of the table's type
    (with no flags: only the re-read fills them)."""
    old = _old_images(table, i, images)
    adapted = sql_util.ClauseAdapter(old).traverse(where)
    return (select(literal(i, Integer).label(K), old.c[DPOS],
                   cast(null(), ARRAY(Boolean)).label(SEES),
                   *[old.c[c.name] for c in table.table.c])
            .where(adapted))


def _old_images(table: CompiledTable, i: int, images: list[dict[str, Any]]) -> Any:
    """A derived table `old` with the table's columns (typed), one row per deleted image."""
    t = table.table
    picked = joined([Sql(f"(r).{quoted(c.name)}") for c in t.c])
    sql = statement(
        "SELECT d.pos AS {pos}, {picked} "
        "FROM jsonb_to_recordset({images}) AS d(pos bigint, img jsonb), "
        "LATERAL jsonb_populate_record(NULL::{table}, d.img) AS r",
        pos=DPOS, picked=picked, images=Sql(f":{IMAGES}{i}"), table=(str(t.schema), t.name),
    ).bindparams(bindparam(f"{IMAGES}{i}", type_=JSONB, value=images))
    return sql.columns(literal(0, BigInteger).label(DPOS), *t.c).subquery(f"old{i}")
