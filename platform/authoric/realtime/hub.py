"""Subscribers of this process, grouped by (app, table) and read class, and the fan-out.

A subscriber follows a set of one or more tables of one app (a per-table stream is a set of
one). It is registered under each of its tables with a read class per table, so fan-out stays
per (table, read class): a subscriber of ten tables costs what ten single-table subscribers
do in judge statements. The operator's feed (section 2a) is one more class, `OPERATOR`.

The source (realtime/source.py) hands the hub batches of changes in position order. For each app with
subscribers, the hub makes sure its view of the app is current (roles, members and tables
are re-read when the app's version moved), judges each table's part of the batch once per
read class, and hands the frames to each subscriber in position order across its tables:
written straight to the connection of a stream that waits idle (`Subscriber.direct`), else
put in its bounded queue. A full queue closes that stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg
from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot, SnapshotCache
from authoric.db import tables as t
from authoric.errors import NotFound
from authoric.plan.guard import StaleFacts
from authoric.plan.request import ExpandPaths
from authoric.plan.runner import CONNECTION_LOST, prepared_on_old_tables
from authoric.policy.principal import Principal
from authoric.realtime.classes import class_key
from authoric.realtime.judge import Frame, Memo, ReadClass, frame, judge_orgs
from authoric.realtime.kept import KeptConnection
from authoric.realtime.operator import judge_for_operator
from authoric.realtime.source import Change
from authoric.realtime.verdicts import Verdicts

log = logging.getLogger("authoric.hub")
JUDGE_BATCH = 500  # changes judged per statement
CLOSE = Frame(-1, b"")  # sentinel: the stream must end (overflow, membership or table gone)
# A revoked API key's streams are told why before they end (section 3b).
REVOKED = Frame(-1, frame(None, {"reason": "revoked"}, "reauth"))
OPERATOR: Hashable = ("operator",)  # the read class of the admin feed: every org, no policy
VERSION = "SELECT version FROM authoric.apps WHERE uid = $1"
REPLANS = 4  # judgements of one chunk planned again when the catalog moves under them
RETRIES = 2  # judge statements retried on another pool connection when one was found dead


@dataclass(eq=False, slots=True)
class Subscriber:
    """One open stream: an app, its tables, who reads (None: the operator), and its mailbox.

    The mailbox holds the frames delivered and not yet taken by the stream, at most `limit`
    (0: no bound); one more ends the stream with `overflow`. It is a deque made at the first
    delivery and dropped when the stream takes it, plus one future while the stream waits:
    an idle stream holds neither (an asyncio.Queue holds four deques, ~3 KiB, per stream).
    The stream's next ping or expiry is one timer, kept across deliveries until it rings or
    the deadline moves (not one timer armed and cancelled per delivery).
    """

    app_uid: uuid.UUID
    tables: tuple[str, ...]
    principal: Principal | None
    limit: int
    keys: dict[str, Hashable] = field(default_factory=dict)  # read class per table
    expand: ExpandPaths = ()  # `?expand=` of a per-table stream
    closed: bool = False
    reason: str = ""
    # Set by the stream's response (http/subscribe.py): writes frames to the connection from
    # the hub's turn, or says False (nothing written) when they must wait in the queue. Used
    # only while the stream's task waits with nothing queued, so everything before them has
    # been written: the order on the wire is the order offered. The frames come with their
    # class's `Run` when the hub offers them to a whole class.
    direct: Callable[[Sequence[Frame], Run | None], bool] | None = None
    _items: deque[Frame] | None = field(default=None, init=False, repr=False)
    _waiter: asyncio.Future[None] | None = field(default=None, init=False, repr=False)
    _timer: asyncio.TimerHandle | None = field(default=None, init=False, repr=False)
    _until: float = field(default=0.0, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)

    def offer(self, frames: Sequence[Frame], run: Run | None = None) -> None:
        """Deliver `frames` (in position order): written at once by `direct` when the stream
        waits idle and its writer can write without waiting, else queued for the stream's task
        (one past `limit` ends the stream with `overflow`). `run`: the class's, when these
        are the frames every stream of a read class is offered."""
        if self.closed:
            return
        items = self._items
        if items is None:
            waiter, direct = self._waiter, self.direct
            if (direct is not None and waiter is not None and not waiter.done()
                    and self._written(direct, frames, run)):
                return
            items = self._items = deque()
        for item in frames:
            if self.limit and len(items) >= self.limit:
                self.close("overflow")
                return
            items.append(item)
        self._wake()

    def _written(self, direct: Callable[[Sequence[Frame], Run | None], bool],
                 frames: Sequence[Frame], run: Run | None) -> bool:
        """Whether `direct` wrote the frames. One that raises has neither written nor counted
        them (a write that fails ends its stream there: http/subscribe.py), so they go to the
        stream's task, and so do this stream's from now on; no other stream is touched (an
        error out of here would end every stream of the table)."""
        try:
            return direct(frames, run)
        except Exception:
            log.exception("writing frames directly failed; this stream's go through its task")
            self.direct = None
            return False

    def close(self, reason: str, last: Frame = CLOSE) -> None:
        """End the stream: drop what is queued and leave only the close sentinel (`last`: one
        that carries a final frame, such as `REVOKED`)."""
        if self.closed:
            return
        self.closed, self.reason = True, reason
        self._items = deque((last,))
        self._wake()

    async def wait(self, until: float) -> None:
        """Until a frame is queued, or `time.time()` reaches `until` (whichever comes first)."""
        if self._items:
            return
        # Asked for once per stream: on Python 3.11 asking for the running loop is a getpid()
        # system call, and this runs once per delivery.
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self._timer is None or self._until != until:
            # A timer that wakes whichever wait is on, not asyncio.timeout: no Timeout object,
            # no TimeoutError raised per ping, and a cancel (disconnect, shutdown) is never
            # swallowed. Waits until the same deadline share it.
            if self._timer is not None:
                self._timer.cancel()
            self._until = until
            self._timer = loop.call_later(until - time.time(), self._ring)
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def stop_timer(self) -> None:
        """The stream has ended: no more wake-ups."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ring(self) -> None:
        self._timer = None
        self._wake()

    def take(self) -> deque[Frame] | None:
        """Every frame queued, in order (None: none), leaving the mailbox empty."""
        items, self._items = self._items, None
        return items

    def _wake(self) -> None:
        if self._waiter is not None:
            _resolve(self._waiter)


@dataclass(eq=False, slots=True)
class Run:
    """One read class's frames from one judging, offered to every stream of the class.

    The streams of a class receive the same frames, so their direct writers
    (http/subscribe.py, `DirectFrames`) frame them as one chunk once for all of them (the
    first one does, and sets `tally`), count the streams they reached, and the hub tallies
    them once after offering them to the whole class (`settle`). A delivery is then a check
    and a socket write. A stream that has some of the frames already (its replay overlapped
    them) packs its own, as a lone stream does."""

    frames: Sequence[Frame]
    body: bytes = b""  # the frames' bytes, joined
    chunk: bytes = b""  # `body` framed as one HTTP chunk
    reached: int = 0  # streams it was written to directly
    tally: Callable[[Run], None] | None = None

    def settle(self) -> None:
        """Tally the streams it reached (after it was offered to the whole class)."""
        if self.reached and self.tally is not None:
            self.tally(self)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _group(table: str, subs: set[Subscriber]) -> _Group:
    classes: dict[Hashable, ReadClass] = {}
    members: dict[Hashable, list[Subscriber]] = defaultdict(list)
    for sub in subs:
        key = sub.keys[table]
        if key is not OPERATOR:
            assert sub.principal is not None
            classes.setdefault(key, ReadClass(key, sub.principal, sub.expand))
        members[key].append(sub)
    by_org: dict[uuid.UUID, list[ReadClass]] = defaultdict(list)
    for cls in classes.values():
        by_org[cls.principal.org_uid].append(cls)
    return _Group(dict(by_org), dict(members))


def _heard_here(view: _AppView, change: Change) -> bool:
    """Whether a stream of this process may receive `change`: one following its table in its
    org, or the operator's feed of its table.

    A change of another org is nobody's here, so it costs nothing: no pooled connection, no
    version check, no pass. With streams routed by org (serving/handoff.py) that is most changes
    in every worker but one. Roles, members and tables are still re-read before any change
    of a stream's own org is judged for it, so a stream learns of a revoked membership or a
    dropped table at the next change it could have received, as before."""
    subs = view.subscribers.get(change.table)
    if not subs:
        return False
    group = _table_group(view, change.table, subs)
    return change.org_uid in group.classes or OPERATOR in group.members


def _table_group(view: _AppView, table: str, subs: set[Subscriber]) -> _Group:
    """The table's read classes and their subscribers, grouped once until a stream comes,
    goes or changes class (`subs`: the table's subscribers, not empty)."""
    group = view.groups.get(table)
    if group is None:
        group = view.groups[table] = _group(table, subs)
    return group


def read_class(snapshot: AppSnapshot, table: str, sub: Subscriber) -> Hashable:
    if sub.principal is None:
        return OPERATOR
    return class_key(snapshot, table, sub.principal, sub.expand)


@dataclass(slots=True)
class _Group:
    """A table's read classes by org, and each class's subscribers."""

    classes: dict[uuid.UUID, list[ReadClass]]
    members: dict[Hashable, list[Subscriber]]


@dataclass
class _AppView:
    version: int = -1
    subscribers: dict[str, set[Subscriber]] = field(default_factory=lambda: defaultdict(set))
    # Per table: the judge's decisions and compiled statements, valid for `snapshot` only.
    memos: dict[str, Memo] = field(default_factory=lambda: defaultdict(Memo))
    snapshot: AppSnapshot | None = None  # the snapshot `memos` were built on
    # Per table: its read classes and their subscribers, kept until a subscriber comes, goes
    # or changes class, so a batch does not walk every subscriber to regroup them.
    groups: dict[str, _Group] = field(default_factory=dict)


class _Connections:
    """A batch's database connections: the request pool's asyncpg connection (autocommit: a
    statement costs one round trip, no BEGIN or ROLLBACK) for the version check and the judge,
    and a SQLAlchemy connection only when something needs one (a snapshot load, the roles'
    re-read, `?expand=`). The pool connection is the hub's kept one when passes follow closely
    (realtime/kept.py). Without a pool (tests that build a hub alone) everything runs on the
    SQLAlchemy connection, as before the pool was used."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.raw: asyncpg.Connection | None = None
        self.sa: AsyncConnection | None = None
        self.faulted = False  # a table of the pass failed: its connection is not kept
        # Made with the SQLAlchemy connection, which most passes never need.
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> _Connections:
        if self.hub.kept is not None:
            self.raw = await self.hub.kept.take()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            raw, self.raw = self.raw, None
            if raw is not None and self.hub.kept is not None:
                await self.hub.kept.give(raw, clean=exc_type is None and not self.faulted)
        finally:
            if self._stack is not None:
                await self._stack.aclose()

    async def _release(self) -> None:
        raw, self.raw = self.raw, None
        if raw is not None and self.hub.pool is not None:
            await self.hub.pool.release(raw)

    async def replace(self) -> None:
        """Another pool connection, after this one was found dead (nothing pings the pool's
        connections: after a PostgreSQL restart the first statement on each one fails)."""
        assert self.hub.pool is not None
        with contextlib.suppress(*CONNECTION_LOST):
            await self._release()
        self.raw = await self.hub.pool.acquire()

    async def connect(self) -> AsyncConnection:
        if self.sa is None:
            self._stack = self._stack or contextlib.AsyncExitStack()
            self.sa = await self._stack.enter_async_context(self.hub.engine.connect())
        return self.sa

    async def version(self, app_uid: uuid.UUID) -> int | None:
        if self.raw is not None:
            try:
                value = await self.raw.fetchval(VERSION, app_uid)
            except CONNECTION_LOST:
                await self.replace()
                value = await self.raw.fetchval(VERSION, app_uid)
        else:
            value = await (await self.connect()).scalar(
                select(t.apps.c.version).where(t.apps.c.uid == app_uid))
        return None if value is None else int(value)

    async def failed(self) -> None:
        """After a failed table: leave no transaction open on the SQLAlchemy connection, and
        give the pool connection back to the pool at the end of the pass, not keep it."""
        self.faulted = True
        if self.sa is not None and self.sa.in_transaction():
            await self.sa.rollback()


class Hub:
    def __init__(self, engine: AsyncEngine, snapshots: SnapshotCache,
                 pool: asyncpg.Pool | None = None) -> None:
        self.engine, self.snapshots = engine, snapshots
        # The request path's pool (plan/runner.py), where the judge runs; app.py sets it.
        self.kept: KeptConnection | None = None
        self.pool = pool
        self._apps: dict[uuid.UUID, _AppView] = {}
        self.statements = 0  # judge statements issued, for benchmarks
        # Called with (stage, seconds) per change fanned out here: `read` (written → read by
        # the source), `judge` (read → judged); the metrics set it (observability/metrics.py).
        self.observe_stage: Callable[[str, float], None] | None = None
        # Told which apps' roles, members or keys changed (`policy_changed`).
        self.policy_listeners: list[Callable[[set[uuid.UUID] | None], None]] = []
        # Where the judge records its verdicts for the read classes this process's webhooks
        # judge as (realtime/verdicts.py); app.py shares it with the webhook worker.
        self.verdicts: Verdicts | None = None

    @property
    def pool(self) -> asyncpg.Pool | None:
        return self._pool

    @pool.setter
    def pool(self, pool: asyncpg.Pool | None) -> None:
        # Passes take their connection through `kept` (realtime/kept.py), which keeps one
        # between passes that follow closely.
        self._pool = pool
        self.kept = None if pool is None else KeptConnection(pool)

    async def close(self) -> None:
        """Give back the pool connection kept between passes (after the source has stopped,
        before the pool closes)."""
        if self.kept is not None:
            await self.kept.close()

    def add(self, sub: Subscriber, snapshot: AppSnapshot) -> None:
        sub.keys = {name: read_class(snapshot, name, sub) for name in sub.tables}
        view = self._apps.setdefault(sub.app_uid, _AppView(version=snapshot.version))
        if view.version != snapshot.version:
            view.version = -1  # views disagree: the next fan-out re-reads roles and members
        for name in sub.tables:
            view.subscribers[name].add(sub)
        view.groups.clear()

    def remove(self, sub: Subscriber) -> None:
        """Unregister `sub` (idempotent)."""
        view = self._apps.get(sub.app_uid)
        if view is None:
            return
        view.groups.clear()
        for name in sub.tables:
            subs = view.subscribers.get(name)
            if subs is not None and sub in subs:
                subs.discard(sub)
                if not subs:
                    del view.subscribers[name]
        if not view.subscribers:
            del self._apps[sub.app_uid]

    def empty(self) -> bool:
        """No stream of this process is registered."""
        return not self._apps

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        """Roles, members or keys of these apps changed somewhere: tell the listeners (the
        API key cache; None: every app), and have the apps' streams re-read their principals
        now (a version that did not move costs one read of it), so a removed
        member's or a revoked key's streams end without waiting for their org's next change."""
        for listener in self.policy_listeners:
            listener(app_uids)
        for app_uid in set(self._apps) if app_uids is None else app_uids:
            if app_uid not in self._apps:
                continue
            try:
                async with _Connections(self) as conns:
                    await self._current(conns, app_uid)
            except Exception:
                # Fail closed, as a failed fan-out does: the app's streams end and resume.
                log.exception("re-reading the principals of %s failed", app_uid)
                self._close_app(app_uid, "error")

    def count(self) -> int:
        """Open streams of this process."""
        return len({s for v in self._apps.values() for g in v.subscribers.values() for s in g})

    async def dispatch(self, changes: Sequence[Change], read_at: float = 0.0,
                       after: int = -1) -> None:
        """Fan out one batch (ascending positions) to this process's subscribers."""
        grouped: dict[uuid.UUID, dict[str, list[Change]]] = defaultdict(lambda: defaultdict(list))
        for change in changes:
            view = self._apps.get(change.app_uid)
            if view is not None and _heard_here(view, change):
                grouped[change.app_uid][change.table].append(change)
        observe = self.observe_stage
        if observe is not None and read_at:
            for by_table in grouped.values():
                for batch in by_table.values():
                    for change in batch:
                        observe("read", read_at - change.at)
        for app_uid, by_table in grouped.items():
            try:
                await self._dispatch_app(app_uid, by_table, read_at)
            except Exception:
                # Fail closed: subscribers we could not judge are disconnected; they resume.
                log.exception("fan-out failed for %s", app_uid)
                view = self._apps.get(app_uid, _AppView())
                for sub in {s for t in by_table for s in view.subscribers.get(t, ())}:
                    sub.close("error")

    async def _dispatch_app(self, app_uid: uuid.UUID, by_table: dict[str, list[Change]],
                            read_at: float = 0.0) -> None:
        # Subscribers of several tables get their frames after every table of the batch is
        # judged, merged by position; the others as soon as their table is judged.
        pending: dict[Subscriber, list[list[Frame]]] = defaultdict(list)
        # The version the source read with the batch (reader.changes_after), if it did.
        versions = [c.version for batch in by_table.values() for c in batch]
        known = None if None in versions else max(v for v in versions if v is not None)
        async with _Connections(self) as conns:
            snapshot = await self._current(conns, app_uid, known)
            if snapshot is None:
                return
            for table, batch in by_table.items():
                try:
                    snapshot = await self._dispatch_table(conns, snapshot, table, batch,
                                                          pending, read_at)
                except Exception:
                    # Fail closed: subscribers we could not judge are disconnected; they resume.
                    log.exception("fan-out failed for %s/%s", app_uid, table)
                    for sub in list(self._apps.get(app_uid, _AppView()).subscribers.get(table, ())):
                        sub.close("error")
                    await conns.failed()
        for sub, lists in pending.items():
            sub.offer(list(heapq.merge(*lists, key=lambda f: f.pos)))

    async def _current(self, conns: _Connections, app_uid: uuid.UUID,
                       known: int | None = None) -> AppSnapshot | None:
        """The app's snapshot, with subscribers' roles re-read if its version moved.

        `known`: the version read in the same statement as the batch's changes, so every
        change to roles, members or tables committed before any of them is in it; without
        it, or when a request has already loaded a later one, the version is read here."""
        snapshot = self.snapshots.cached(app_uid)
        version = known
        if version is None or (snapshot is not None and snapshot.version > version):
            version = await conns.version(app_uid)
        view = self._apps.get(app_uid)
        if view is None:
            return None
        if version is None:
            self._close_app(app_uid, "app_deleted")
            return None
        if snapshot is None or snapshot.version != version:
            snapshot = await self.snapshots.get(await conns.connect(), app_uid, version)
        if view.version != version:
            await self._refresh(await conns.connect(), app_uid, snapshot)
            view.version = version
        if view.snapshot is not snapshot:
            # Decisions hold SQL built on one snapshot's tables. Two loads of the same version
            # (a request's and ours, racing) give two snapshots whose tables are different
            # objects: a decision from one inside a statement on the other names the table
            # twice. So the memo lives exactly as long as the snapshot it was built on.
            view.snapshot = snapshot
            view.memos.clear()
        return snapshot

    async def _dispatch_table(self, conns: _Connections, snapshot: AppSnapshot, table: str,
                              batch: list[Change],
                              pending: dict[Subscriber, list[list[Frame]]],
                              read_at: float = 0.0) -> AppSnapshot:
        """Judge and offer `batch`, chunk by chunk; the snapshot it was judged on (a later one
        than `snapshot` when the catalog moved meanwhile)."""
        for start in range(0, len(batch), JUDGE_BATCH):
            chunk = batch[start:start + JUDGE_BATCH]
            judged = await self._judged(conns, snapshot, table, chunk)
            if judged is None:
                return snapshot
            snapshot, members, frames = judged
            if self.observe_stage is not None and read_at:
                took = time.time() - read_at
                for _ in chunk:
                    self.observe_stage("judge", took)
            for key, items in frames.items():
                if not items:
                    continue
                run = Run(items)
                for sub in members.get(key, ()):
                    if len(sub.tables) > 1:
                        pending[sub].append(items)
                        continue
                    sub.offer(items, run)
                run.settle()
            if start + JUDGE_BATCH < len(batch):
                await asyncio.sleep(0)  # let streams drain their queues between chunks
        return snapshot

    async def _judged(self, conns: _Connections, snapshot: AppSnapshot, table: str,
                      chunk: list[Change],
                      ) -> tuple[AppSnapshot, dict[Hashable, list[Subscriber]],
                                 dict[Hashable, list[Frame]]] | None:
        """The chunk's frames per class, judged on the app's current catalog: the judge's
        statements are planned for `snapshot` and run only at its version (plan.guard); when
        the catalog moved (a rename, a swap, a retype committed meanwhile), the guard fails
        or the statement does (a column it names is gone), and the chunk is judged again on
        the new snapshot. None: nobody to judge for (the table or its subscribers gone)."""
        for attempt in range(REPLANS):
            view = self._apps.get(snapshot.uid)
            if view is None or not view.subscribers.get(table):
                return None
            subs = view.subscribers[table]
            try:
                compiled = snapshot.table(table)
            except NotFound:
                for sub in list(subs):
                    sub.close("table_dropped")
                return None
            group = _table_group(view, table, subs)
            try:
                frames = await self.judge(conns, snapshot, compiled, group.classes, chunk,
                                          view.memos[table],
                                          operator=OPERATOR in group.members)
                return snapshot, group.members, frames
            except Exception as error:
                if attempt + 1 == REPLANS:
                    raise
                await conns.failed()  # no transaction left aborted on the SQLAlchemy side
                version = await conns.version(snapshot.uid)
                if (not isinstance(error, StaleFacts) and not prepared_on_old_tables(error)
                        and version == snapshot.version):
                    raise  # the catalog did not move: a real failure
                current = await self._current(conns, snapshot.uid, version)
                if current is None:
                    return None
                snapshot = current
        raise AssertionError("unreachable")

    async def judge(self, conns: _Connections, snapshot: AppSnapshot, table: CompiledTable,
                    classes: dict[uuid.UUID, list[ReadClass]], changes: Sequence[Change],
                    memo: Memo, *, operator: bool) -> dict[Hashable, list[Frame]]:
        """Frames per read class for one table's chunk: one statement per org of the chunk for
        its members' classes, one for the operator's feed when it has subscribers."""
        frames: dict[Hashable, list[Frame]] = {}
        if classes:
            for attempt in range(1 + RETRIES):
                try:
                    frames = await judge_orgs(conns.connect, snapshot, table, classes, changes,
                                              memo, conns.raw, keep=self.verdicts)
                    break
                except CONNECTION_LOST:
                    # A read, so it may run again, as REST's reads do (plan/runner.py).
                    if conns.raw is None or attempt == RETRIES:
                        raise
                    await conns.replace()
            self.statements += memo.sent
            memo.sent = 0
        if operator:
            self.statements += 1
            frames[OPERATOR] = await judge_for_operator(await conns.connect(), table, changes)
        return frames

    async def _refresh(self, conn: Any, app_uid: uuid.UUID, snapshot: AppSnapshot) -> None:
        """Re-read roles of every member's subscriber of the app (one query); drop revoked ones."""
        view = self._apps[app_uid]
        subs = {s for group in view.subscribers.values() for s in group if s.principal is not None}
        view.groups.clear()
        if not subs:
            return
        g = t.grantees()
        rows = await conn.execute(select(g.c.org_uid, g.c.user_uid, g.c.uid, g.c.roles).where(
            and_(g.c.app_uid == app_uid,
                 g.c.user_uid.in_({s.principal.user_uid for s in subs if s.principal}))))
        held = {(r.org_uid, r.user_uid): (r.uid, tuple(r.roles)) for r in rows}
        for sub in subs:
            assert sub.principal is not None
            membership, current = held.get((sub.principal.org_uid, sub.principal.user_uid),
                                           (None, None))
            if current is None:
                if sub.principal.api_key:
                    sub.close("key_revoked", REVOKED)
                else:
                    sub.close("membership_revoked")
                self.remove(sub)
                continue
            if sub.principal.membership not in (None, membership):
                # The token's membership has a new uid: a password reset ended every token
                # issued before it, this stream's too. Its holder signs in again.
                sub.close("token_revoked", REVOKED)
                self.remove(sub)
                continue
            sub.principal = replace(sub.principal, roles=current)
            sub.keys = {name: read_class(snapshot, name, sub) for name in sub.tables}

    def _close_app(self, app_uid: uuid.UUID, reason: str) -> None:
        view = self._apps.pop(app_uid, None)
        for sub in {s for group in (view.subscribers.values() if view else ()) for s in group}:
            sub.close(reason)

