"""Subscribers of this process, grouped by (app, table) and read class, and the fan-out.

The relay hands the hub batches of changes in position order. For each (app, table) with
subscribers, the hub makes sure its view of the app is current (roles, members and tables
are re-read when the app's version moved), judges the batch once per read class, and copies
the frames into each subscriber's bounded queue. A full queue closes that stream.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.changes.reader import Change
from authoric.db import tables as t
from authoric.errors import NotFound
from authoric.policy.principal import Principal
from authoric.realtime.classes import class_key
from authoric.realtime.judge import Frame, ReadClass, judge

log = logging.getLogger("authoric.hub")
JUDGE_BATCH = 500  # changes judged per statement
CLOSE = Frame(-1, b"")  # sentinel: the stream must end (overflow, membership or table gone)


@dataclass(eq=False)
class Subscriber:
    app_uid: uuid.UUID
    table: str
    principal: Principal
    queue: asyncio.Queue[Frame]
    key: Hashable = None
    closed: bool = False
    reason: str = ""

    def offer(self, item: Frame) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.close("overflow")

    def close(self, reason: str) -> None:
        """End the stream: drop what is queued and leave only the close sentinel."""
        if self.closed:
            return
        self.closed, self.reason = True, reason
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(CLOSE)


@dataclass
class _AppView:
    version: int = -1
    subscribers: dict[str, set[Subscriber]] = field(default_factory=lambda: defaultdict(set))
    # Decisions per (table, read class), valid for `version` only.
    decisions: dict[str, dict[Hashable, Any]] = field(default_factory=lambda: defaultdict(dict))


class Hub:
    def __init__(self, engine: AsyncEngine, snapshots: SnapshotCache) -> None:
        self.engine, self.snapshots = engine, snapshots
        self._apps: dict[uuid.UUID, _AppView] = {}
        self.statements = 0  # judge statements issued, for benchmarks

    def add(self, sub: Subscriber, snapshot: AppSnapshot) -> None:
        sub.key = class_key(snapshot, sub.table, sub.principal)
        view = self._apps.setdefault(sub.app_uid, _AppView(version=snapshot.version))
        if view.version != snapshot.version:
            view.version = -1  # views disagree: the next fan-out re-reads roles and members
        view.subscribers[sub.table].add(sub)

    def remove(self, sub: Subscriber) -> None:
        view = self._apps.get(sub.app_uid)
        if view is None:
            return
        subs = view.subscribers.get(sub.table)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del view.subscribers[sub.table]
        if not view.subscribers:
            del self._apps[sub.app_uid]

    def count(self) -> int:
        return sum(len(s) for v in self._apps.values() for s in v.subscribers.values())

    async def dispatch(self, changes: Sequence[Change]) -> None:
        """Fan out one batch (ascending positions) to this process's subscribers."""
        grouped: dict[tuple[uuid.UUID, str], list[Change]] = defaultdict(list)
        for change in changes:
            view = self._apps.get(change.app_uid)
            if view is not None and change.table in view.subscribers:
                grouped[(change.app_uid, change.table)].append(change)
        for (app_uid, table), batch in grouped.items():
            try:
                await self._dispatch_table(app_uid, table, batch)
            except Exception:
                # Fail closed: subscribers we could not judge are disconnected; they resume.
                log.exception("fan-out failed for %s/%s", app_uid, table)
                for sub in list(self._apps.get(app_uid, _AppView()).subscribers.get(table, ())):
                    sub.close("error")

    async def _dispatch_table(self, app_uid: uuid.UUID, table: str, batch: list[Change]) -> None:
        async with self.engine.connect() as conn:
            version = await conn.scalar(select(t.apps.c.version).where(t.apps.c.uid == app_uid))
            view = self._apps.get(app_uid)
            if view is None:
                return
            if version is None:
                self._close_app(app_uid, "app_deleted")
                return
            snapshot = await self.snapshots.get(conn, app_uid, version)
            if view.version != version:
                await self._refresh(conn, app_uid, snapshot)
                view.version = version
                view.decisions.clear()
            subs = list(view.subscribers.get(table, ()))
            if not subs:
                return
            try:
                compiled = snapshot.table(table)
            except NotFound:
                for sub in subs:
                    sub.close("table_dropped")
                return
            classes: dict[Hashable, ReadClass] = {}
            members: dict[Hashable, list[Subscriber]] = defaultdict(list)
            for sub in subs:
                classes.setdefault(sub.key, ReadClass(sub.key, sub.principal))
                members[sub.key].append(sub)
            memo = view.decisions[table]
            for start in range(0, len(batch), JUDGE_BATCH):
                self.statements += 1
                frames = await judge(conn, snapshot, compiled, list(classes.values()),
                                     batch[start:start + JUDGE_BATCH], memo)
                for key, items in frames.items():
                    for sub in members[key]:
                        for item in items:
                            sub.offer(item)
                await asyncio.sleep(0)  # let streams drain their queues between chunks

    async def _refresh(self, conn: Any, app_uid: uuid.UUID, snapshot: AppSnapshot) -> None:
        """Re-read roles of every subscriber of the app (one query); drop revoked ones."""
        view = self._apps[app_uid]
        subs = [s for group in view.subscribers.values() for s in group]
        m = t.members
        rows = await conn.execute(select(m.c.org_uid, m.c.user_uid, m.c.roles).where(and_(
            m.c.app_uid == app_uid, m.c.user_uid.in_({s.principal.user_uid for s in subs}))))
        roles = {(r.org_uid, r.user_uid): tuple(r.roles) for r in rows}
        for sub in subs:
            current = roles.get((sub.principal.org_uid, sub.principal.user_uid))
            if current is None:
                sub.close("membership_revoked")
                self.remove(sub)
                continue
            sub.principal = replace(sub.principal, roles=current)
            sub.key = class_key(snapshot, sub.table, sub.principal)

    def _close_app(self, app_uid: uuid.UUID, reason: str) -> None:
        view = self._apps.pop(app_uid, None)
        for group in (view.subscribers.values() if view else ()):
            for sub in group:
                sub.close(reason)
