"""A webhook's deliveries for a batch of changes, judged by the feed's judge.

A webhook with a `role` receives what a member of the change's org holding that role would
receive on its stream: each org is one read class of that role (no user attributes, so a
row policy over `$principal.uid` sees nothing), judged by `realtime.judge.judge_orgs` exactly
as a stream's class is (row policy, redaction, both permissions and table operations, deletes
judged as the row stood, `expand`). Without a role it receives the operator's view
(`realtime.operator`, section 2a: every row, unredacted, with its `org`), its `expand` read
as the operator reads the referenced tables.

Where a stream of this process is in the same read class (the same org, roles, `expand`, and
the same values of the principal attributes the policies use), the webhook takes the verdicts
the hub's judge has just reached for that stream instead of re-reading the rows itself
(realtime/verdicts.py): one re-read per read class per batch, shared. Webhooks of the same
role and `expand` share theirs the same way. An org whose changes nobody of its class has
judged in the last moment is re-read here, as it is with no stream.

Each event is rendered straight into its delivery body, once per delivery pass. A retry in a
later pass judges the change again (contract section 8: re-read at delivery; a verdict is
reused for 2 s at most, and a retry waits 5 s at least), so its body shows the row as it
stands then, under the same `webhook-id` (the position).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.catalog.types import rfc3339
from authoric.db.changelog import DELETE
from authoric.plan.request import ExpandPaths, parse_expand
from authoric.policy.principal import Principal
from authoric.realtime.classes import class_key
from authoric.realtime.judge import Connect, Frame, Memo, ReadClass, judge_orgs
from authoric.realtime.operator import judge_for_operator
from authoric.realtime.source import RESYNC_REASONS, Change
from authoric.realtime.verdicts import Verdicts
from authoric.wire import json_bytes

EXPIRED = "backfill_expired"


@dataclass(frozen=True)
class Audience:
    """Who a webhook's events are judged as, and which of them it wants."""

    app_uid: uuid.UUID
    app_name: str
    tables: tuple[str, ...]
    ops: frozenset[str]
    org_uid: uuid.UUID | None
    role: str | None
    expand: ExpandPaths


@dataclass(frozen=True)
class Delivery:
    pos: int
    body: bytes


@dataclass(eq=False)
class Memos:
    """One app's judge memos, per table, valid for one snapshot version (dropped when the
    app's version moves): shared by every webhook of the app this process delivers, so a
    statement is compiled, and a read class's decision reached, once per app, not once per
    webhook (100 webhooks starting together each compiled the same statements)."""

    version: int = -1
    tables: dict[str, Memo] = field(default_factory=dict)

    def memo(self, snapshot: AppSnapshot, table: str) -> Memo:
        if snapshot.version != self.version:
            self.version, self.tables = snapshot.version, {}
        return self.tables.setdefault(table, Memo())


@dataclass(eq=False)
class Judging:
    """What one webhook's judging uses between its batches: its app's memos (shared), and
    the changes judged since the worker last looked (metrics): taken from the verdicts of a
    stream or another webhook of the same read class, and re-read by the webhook itself."""

    memos: Memos = field(default_factory=Memos)
    shared: int = 0
    own: int = 0

    def memo(self, snapshot: AppSnapshot, table: str) -> Memo:
        return self.memos.memo(snapshot, table)


def audience_of(row: Any, app_name: str) -> Audience:
    return Audience(row["app_uid"], app_name, tuple(row["tables"]), frozenset(row["ops"]),
                    row["org_uid"], row["role"], parse_expand(",".join(row["expand"]) or None))


def in_scope(audience: Audience, change: Change) -> bool:
    """Whether the change is of the webhook's tables and org: what a read of the log for it
    (`Source.entries`) returns, whatever the operation. A pass moves the cursor past each of
    them, wanted or not, so a webhook that asks for deletes only does not fall behind the
    log's retention while its tables change."""
    return (change.table in audience.tables
            and (audience.org_uid is None or change.org_uid == audience.org_uid))


def wanted(audience: Audience, change: Change) -> bool:
    """Whether the webhook asks for this change at all (before judging)."""
    return in_scope(audience, change) and (change.op in RESYNC_REASONS
                                           or change.op in audience.ops)


def body(audience: Audience, table: str, change: Change, **event: Any) -> bytes:
    """The delivery body (contract section 8)."""
    return json_bytes({"app": audience.app_name, "table": table, "org": str(change.org_uid),
                       "position": str(change.pos),
                       "timestamp": rfc3339(dt.datetime.fromtimestamp(change.at, dt.UTC)),
                       **event})


def expired(audience: Audience, pos: int, at: float) -> Delivery:
    """The `resync` that says entries after the cursor were removed by retention."""
    return Delivery(pos, json_bytes({"type": "resync", "app": audience.app_name, "table": None,
                                     "org": None, "position": str(pos),
                                     "timestamp": rfc3339(dt.datetime.fromtimestamp(at, dt.UTC)),
                                     "reason": EXPIRED}))


def _render(audience: Audience, table: CompiledTable, change: Change,
            row: dict[str, Any] | None, delete_visible: bool) -> bytes | None:
    if change.op in RESYNC_REASONS:
        return body(audience, table.name, change, type="resync",
                    reason=RESYNC_REASONS[change.op])
    if change.op == DELETE:
        if not delete_visible:
            return None
        return body(audience, table.name, change, type="delete", rowUid=str(change.row_uid))
    if row is None:  # not visible to the role, or deleted since (its delete follows)
        return None
    return body(audience, table.name, change, type=change.op, row=row)


def read_class(snapshot: AppSnapshot, table: str, audience: Audience, role: str,
               org: uuid.UUID) -> ReadClass:
    """The read class a role's webhook is judged as in `org`: a member holding `role` there,
    with no user attributes, keyed as a stream's class is (realtime/classes.py)."""
    principal = Principal(audience.app_uid, None, org, None, (role,))
    return ReadClass(class_key(snapshot, table, principal, audience.expand), principal,
                     audience.expand)


def want_verdicts(snapshot: AppSnapshot, audience: Audience, verdicts: Verdicts) -> None:
    """Ask the hub to keep its verdicts for the read classes of a webhook of one org and role
    before the webhook has judged anything: 100 webhooks started together otherwise each
    re-read their first batch on their own, on the worker's four connections, and that queue
    was the first second's lag (docs/benchmarks-realtime.md, "Webhooks"). A webhook of every
    org asks per org as it judges (`_as_role`)."""
    if audience.role is None or audience.org_uid is None:
        return
    for table in audience.tables:
        if table in snapshot.tables:
            cls = read_class(snapshot, table, audience, audience.role, audience.org_uid)
            verdicts.want((snapshot.uid, snapshot.version, table, cls.key))


# The worker's asyncpg connection, taken from its pool when a statement is to run (None: no
# pool; the statements then run on `connect`'s SQLAlchemy connection).
RawConnect = Callable[[], Awaitable[asyncpg.Connection | None]]


async def deliveries(connect: Connect, raw_connect: RawConnect, snapshot: AppSnapshot,
                     audience: Audience, changes: Sequence[Change], judging: Judging,
                     verdicts: Verdicts | None = None) -> list[Delivery]:
    """The deliveries for `changes` (ascending positions), in position order: one statement
    per table and org of the batch, whatever the number of its changes. `raw_connect` gives
    an asyncpg connection of the worker's pool, asked for only when a statement is to run
    (not when every org's verdicts are reused): the judging runs there as SQL text compiled
    once per shape, as the hub's does (realtime/judge.py); `connect` gives a SQLAlchemy
    connection for the rest, asked for only when needed. `verdicts`: the hub's, reused for
    the orgs a stream of the same read class has just been judged for."""
    by_table: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        if wanted(audience, change) and change.table in snapshot.tables:
            by_table[change.table].append(change)
    out: list[Delivery] = []
    for name, own in by_table.items():
        table = snapshot.tables[name]
        if audience.role is None:
            raw = await raw_connect()
            frames = await judge_for_operator(
                await connect() if raw is None or audience.expand else None, table, own,
                lambda t, c, row: _render(audience, t, c, row, True),
                snapshot, audience.expand, raw, judging.memo(snapshot, name).statements)
        else:
            frames = await _as_role(connect, raw_connect, snapshot, table, audience, own,
                                    judging, verdicts)
        out += [Delivery(f.pos, f.data) for f in frames]
    out.sort(key=lambda d: d.pos)
    return out


async def _as_role(connect: Connect, raw_connect: RawConnect, snapshot: AppSnapshot,
                   table: CompiledTable, audience: Audience, changes: Sequence[Change],
                   judging: Judging, verdicts: Verdicts | None) -> list[Frame]:
    """The role's frames for one table's changes: per org, from the fresh verdicts of a stream
    or webhook of the same read class when they cover them all, else judged here (one
    statement per org), and kept for the others of the class."""
    role = audience.role
    assert role is not None
    by_org: dict[uuid.UUID, list[Change]] = defaultdict(list)
    for change in changes:
        by_org[change.org_uid].append(change)
    frames: list[Frame] = []
    classes: dict[Any, list[ReadClass]] = {}
    for org, own in by_org.items():
        cls = read_class(snapshot, table.name, audience, role, org)
        found = None
        if verdicts is not None:
            scope = (snapshot.uid, snapshot.version, table.name, cls.key)
            verdicts.want(scope)
            found = verdicts.reused(scope, own)
        if found is None:
            classes[org] = [cls]
            judging.own += len(own)
            continue
        judging.shared += len(own)
        for change, verdict in zip(own, found, strict=True):
            data = _render(audience, table, change, verdict.row, verdict.seen)
            if data is not None:
                frames.append(Frame(change.pos, data, change.at))
    if classes:
        judged = await judge_orgs(connect, snapshot, table, classes, changes,
                                  judging.memo(snapshot, table.name), await raw_connect(),
                                  render=lambda t, cls, c, row, seen: _render(audience, t, c,
                                                                              row, seen),
                                  keep=verdicts)
        frames += [f for own_frames in judged.values() for f in own_frames]
    return frames
