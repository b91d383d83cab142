"""A webhook's deliveries for a batch of changes, judged by the feed's judge.

A webhook with a `role` receives what a member of the change's org holding that role would
receive on its stream: each org is one read class of that role (no user attributes, so a
row policy over `$principal.uid` sees nothing), judged by `realtime.judge.judge_orgs` exactly
as a stream's class is (row policy, redaction, both permissions and table operations, deletes
judged as the row stood, `expand`). Without a role it receives the operator's view
(`realtime.operator`, section 2a: every row, unredacted, with its `org`), its `expand` read
as the operator reads the referenced tables.

Each event is rendered straight into its delivery body, once per delivery pass. A retry in a
later pass judges the change again (contract section 8: re-read at delivery), so its body
shows the row as it stands then, under the same `webhook-id` (the position).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.catalog.types import rfc3339
from authoric.db.changelog import DELETE
from authoric.plan.request import ExpandPaths, parse_expand
from authoric.policy.principal import Principal
from authoric.realtime.judge import Connect, Memo, ReadClass, judge_orgs
from authoric.realtime.operator import judge_for_operator
from authoric.realtime.source import RESYNC_REASONS, Change
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
class Judging:
    """What judging keeps between a webhook's batches: per table, the judge's memo, valid
    for one snapshot version (dropped when the app's version moves)."""

    version: int = -1
    memos: dict[str, Memo] = field(default_factory=dict)

    def memo(self, snapshot: AppSnapshot, table: str) -> Memo:
        if snapshot.version != self.version:
            self.version, self.memos = snapshot.version, {}
        return self.memos.setdefault(table, Memo())


def audience_of(row: Any, app_name: str) -> Audience:
    return Audience(row["app_uid"], app_name, tuple(row["tables"]), frozenset(row["ops"]),
                    row["org_uid"], row["role"], parse_expand(",".join(row["expand"]) or None))


def wanted(audience: Audience, change: Change) -> bool:
    """Whether the webhook asks for this change at all (before judging)."""
    return (change.table in audience.tables
            and (audience.org_uid is None or change.org_uid == audience.org_uid)
            and (change.op in RESYNC_REASONS or change.op in audience.ops))


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


async def deliveries(connect: Connect, raw: asyncpg.Connection | None, snapshot: AppSnapshot,
                     audience: Audience, changes: Sequence[Change],
                     judging: Judging) -> list[Delivery]:
    """The deliveries for `changes` (ascending positions), in position order: one statement
    per table and org of the batch, whatever the number of its changes. `raw` (an asyncpg
    connection of the request path's pool): a role's judging runs there as SQL text compiled
    once per shape, as the hub's does (realtime/judge.py); `connect` gives a SQLAlchemy
    connection for the rest, asked for only when needed."""
    by_table: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        if wanted(audience, change) and change.table in snapshot.tables:
            by_table[change.table].append(change)
    out: list[Delivery] = []
    for name, own in by_table.items():
        table = snapshot.tables[name]
        if audience.role is None:
            frames = await judge_for_operator(
                await connect() if raw is None or audience.expand else None, table, own,
                lambda t, c, row: _render(audience, t, c, row, True),
                snapshot, audience.expand, raw, judging.memo(snapshot, name).statements)
        else:
            frames = await _as_role(connect, raw, snapshot, table, audience, own, judging)
        out += [Delivery(f.pos, f.data) for f in frames]
    out.sort(key=lambda d: d.pos)
    return out


async def _as_role(connect: Connect, raw: asyncpg.Connection | None, snapshot: AppSnapshot,
                   table: CompiledTable, audience: Audience, changes: Sequence[Change],
                   judging: Judging) -> list[Any]:
    role = audience.role
    assert role is not None
    classes: dict[Any, list[ReadClass]] = {}
    for org in {c.org_uid for c in changes}:
        principal = Principal(audience.app_uid, None, org, None, (role,))
        key: Hashable = ("webhook", org, role, audience.expand)
        classes[org] = [ReadClass(key, principal, audience.expand)]
    judged = await judge_orgs(connect, snapshot, table, classes, changes,
                              judging.memo(snapshot, table.name), raw,
                              render=lambda t, cls, c, row, seen: _render(audience, t, c, row,
                                                                          seen))
    return [f for frames in judged.values() for f in frames]
