"""The outbox's live half, the relay: one dedicated LISTEN connection per process (never
from the pool) that feeds the fan-out by position: from the log, or from what a NOTIFY
carried when that provably follows on from the last position handed on (below).

A lost notification, a killed listener connection or a PostgreSQL restart costs latency,
never events: after any reconnect the relay catches up from the last position it handed
to the hub, and it also polls once a second in case a notification went missing.

A connection can also stall without failing: a proxy or a NAT that stops forwarding keeps the
TCP connection open, so no error and no close ever arrive, and notifications simply stop.
The once-a-second read doubles as a heartbeat: every statement on the listener connection
runs under the dedicated workers' stall bound (db/dedicated.py: no answer within 10 s ends
the connection), and the relay reconnects and catches up as after any other loss
(bench/chaos.py freezes it through a proxy).

A process with no open stream reads nothing: the sequencer's NOTIFY names the head it just
stamped, and the relay moves its position there. Those entries were stamped before anyone
here subscribed, so they were nobody's to receive, exactly as if they had been read and
handed to an empty hub. A stream that wants them asks for them with `Last-Event-ID`, and
replay reads them from the log. Under write load without subscribers this spares every
worker a log read per stamped batch.

A process with streams open does not read the log either, as long as the NOTIFYs carry the
entries: the sequencer's NOTIFY holds what it stamped (entries as the log read gives them,
app version included) and `after`, the head before them. When `after` is exactly this
relay's position, those entries are everything between it and the new head, in order, and
they are fanned out as read. Anything else (a NOTIFY missed, one too long to carry its
entries, a leader that announced only its head, the safety poll, a policy change) reads the
log, as before. A NOTIFY spared each process a round trip per stamped batch: with two
workers, two of the few statements a change costs (bench.fanout, docs/realtime.md).

Only our own role's NOTIFYs count. PostgreSQL lets anyone who may connect NOTIFY on any
channel, a service writing captured tables under a role of its own included; a payload shaped
as the sequencer's would otherwise put entries of its choosing into every stream, or move the
position past entries nobody then receives. So what a NOTIFY carries or announces is used only
once its sender's backend is known to run as this connection's role (`_vouch`: looked up in
`pg_stat_activity`, kept `VOUCHED` seconds, since backend pids are reused); any other wakes
the relay, which then reads the log. A role that may write the log itself gains nothing here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import asyncpg

from authoric.changes import reader
from authoric.changes.sequencer import CHANNEL
from authoric.db.dedicated import IDLE_LIMIT, STALL, DedicatedWorker, Wakeup
from authoric.realtime.source import POSITION, Change, Sink

POLICY_CHANNEL = "authoric_policy"
SAFETY_POLL = 1.0
LINGER = 0.05  # seconds: the longest wait after a pass during which a NOTIFY arrived
APP_NAME = "authoric-relay"  # how operators (and fault tests) find the listener connection
BATCH = 2000
CARRIED_LIMIT = 1000  # NOTIFYs with entries kept between passes; past it, the log is read
VOUCHED = 10.0  # seconds a sender's backend counts as our role's before it is looked up again
OUR_ROLES = "SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND usename = current_user"


class Carried(NamedTuple):
    """The entries one NOTIFY carried: the positions in (after, head]."""

    after: int
    head: int
    entries: Sequence[Change]
    sender: int = 0  # the backend pid that sent it


def carried(payload: str) -> Carried | None:
    """The entries a sequencer's NOTIFY carries (None: it announced only its head)."""
    if not payload.startswith("{"):
        return None
    note = json.loads(payload)
    return Carried(int(note["after"]), int(note["head"]), [_entry(e) for e in note["entries"]])


def heard(payload: str) -> tuple[int, Carried | None]:
    """What a NOTIFY on our channel says: the head it announces (-1: none) and the entries it
    carries. Anyone who may connect can send one (module docstring), so nothing in it may
    raise here: what is not the sequencer's shape announces and carries nothing, and only
    wakes the relay."""
    try:
        note = carried(payload)
    except (ValueError, KeyError, TypeError, RecursionError):
        return -1, None
    if note is not None:
        return note.head, note
    return (int(payload) if POSITION.fullmatch(payload) else -1), None


def _entry(e: list[Any]) -> Change:
    pos, app, table, op, row, org, old, at, version = e
    return Change(pos, uuid.UUID(app), table, op, None if row is None else uuid.UUID(row),
                  uuid.UUID(org), old, at, version)


class Relay(DedicatedWorker):
    app_name = APP_NAME

    def __init__(self, dsn: str, hub: Sink, batch: int = BATCH, *, stall: float = STALL,
                 idle_limit: float | None = IDLE_LIMIT) -> None:
        super().__init__(dsn, stall=stall, idle_limit=idle_limit)
        self.hub, self.batch = hub, batch
        self.position = -1  # last position handed to the hub (-1: not started)
        self.announced = -1  # the highest head the sequencer's NOTIFYs have named
        self.reads = 0  # log reads issued, and
        self.skips = 0  # moves to an announced head without reading (tests, benchmarks)
        self.carries = 0  # batches fanned out as NOTIFYs carried them, unread (the same)
        self.connected = asyncio.Event()
        self._wake = Wakeup()
        self.conn: asyncpg.Connection | None = None
        self._spoke = 0.0  # monotonic time of the last statement on the listener connection
        self._carried: list[Carried] = []  # NOTIFYs' entries not yet fanned out, in order
        self._policy: set[uuid.UUID] = set()  # apps whose roles, members or keys changed
        self._policy_lost = False  # policy NOTIFYs may have been missed (a new connection)
        self._heads: dict[int, int] = {}  # per sender pid, the highest head not yet vouched for
        self._vouched: dict[int, float] = {}  # our role's backend pids: when looked up

    def _notified(self, _conn: object, pid: int, channel: str, payload: str) -> None:
        if channel == CHANNEL:
            head, note = heard(payload)
            if head >= 0:
                self._heads[pid] = max(self._heads.get(pid, -1), head)
            if note is not None and len(self._carried) < CARRIED_LIMIT:
                self._carried.append(note._replace(sender=pid))
        elif channel == POLICY_CHANNEL:
            # Anyone may send one (module docstring): it only makes the hub re-read its
            # subscribers' memberships and keys, which is always safe.
            with contextlib.suppress(ValueError):
                self._policy.add(uuid.UUID(payload))
        self._wake.set()

    async def _vouch(self, conn: asyncpg.Connection) -> None:
        """Take in what NOTIFYs announced and carried since the last pass, from our role's
        backends only (module docstring); the rest is dropped, and the log read covers it."""
        heads, self._heads = self._heads, {}
        if not heads:
            return
        now = time.monotonic()
        unknown = [pid for pid in heads if now - self._vouched.get(pid, -VOUCHED) >= VOUCHED]
        if unknown:
            async with self.answered(conn):
                ours = await conn.fetch(OUR_ROLES, unknown)
            self._spoke = now = time.monotonic()
            self._vouched = {p: t for p, t in self._vouched.items() if now - t < VOUCHED}
            self._vouched.update((row["pid"], now) for row in ours)
        vouched = self._vouched
        for pid, head in heads.items():
            if pid in vouched:
                self.announced = max(self.announced, head)
        # Entries from a sender not vouched for are dropped, even one that arrived during the
        # lookup: the log read covers them. (Heads that arrived meanwhile wait in `_heads`.)
        self._carried = [n for n in self._carried if n.sender in vouched]

    def _take_carried(self) -> list[Change] | None:
        """The entries NOTIFYs carried right after `position`, up to the announced head, at
        most a batch; None when they do not account for every position up to it (the log is
        read instead). What is left waits for the next pass."""
        notes, self._carried = self._carried, []
        position, out = self.position, list[Change]()
        for i, note in enumerate(notes):
            if note.head <= position:
                continue  # read from the log already
            if note.after != position or len(out) >= self.batch:
                self._carried = notes[i:]
                break
            out.extend(note.entries)
            position = note.head
        if not out or (position < self.announced and not self._carried):
            return None
        return out

    def _more_carried(self) -> bool:
        """NOTIFYs carried entries past `position` that this pass left for the next."""
        return bool(self._carried) and self._carried[-1].head > self.position

    async def session(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        async with self.answered(conn):
            await conn.add_listener(CHANNEL, self._notified)
            await conn.add_listener(POLICY_CHANNEL, self._notified)
            if self.position < 0:
                self.position = await reader.head(conn)
        # Policy NOTIFYs sent while no connection listened are lost: every app's streams
        # re-read their principals once the relay listens again (None: every app).
        self._policy_lost = True
        self.connected.set()
        await self._follow(conn)

    def closed(self) -> None:
        self.connected.clear()
        self.conn = None

    async def _follow(self, conn: asyncpg.Connection) -> None:
        while True:
            # From here the flag means "a NOTIFY arrived during this pass". Left set by the one
            # that woke the pass, it sent every pass into the linger, and one that no NOTIFY
            # followed then read the log for nothing.
            self._wake.clear()
            if self._policy_lost:
                self._policy_lost, self._policy = False, set()
                await self.hub.policy_changed(None)
            elif self._policy:
                apps, self._policy = self._policy, set()
                await self.hub.policy_changed(apps)
            await self._vouch(conn)
            # No await between the check and the move: a stream registering with the hub
            # is either seen here (and the entries are read for it) or registers after.
            # Past a second of silence, the log is read even when NOTIFYs carried the
            # entries: it is the safety poll (a NOTIFY lost) and the heartbeat that keeps
            # the connection within the idle and stall bounds.
            quiet = time.monotonic() - self._spoke > SAFETY_POLL
            empty = self.hub.empty()
            carried = None if empty or quiet else self._take_carried()
            if empty and self.announced > self.position:
                self.position = self.announced
                self.skips += 1
                self._carried.clear()
                changes = []
                if quiet:
                    # Skipping says nothing to PostgreSQL, and under back-to-back NOTIFYs
                    # nothing else does: past the idle bound (db/dedicated.py) it would end
                    # this connection. One round trip a second keeps it, as the poll does.
                    async with self.answered(conn):
                        await conn.execute("SELECT 1")
                    self._spoke = time.monotonic()
            elif carried is not None:
                changes = carried
                self.carries += 1
            else:
                async with self.answered(conn):
                    changes = await reader.changes_after(conn, self.position, self.batch)
                self.reads += 1
                self._spoke = time.monotonic()
            if changes:
                await self.hub.dispatch(changes, time.time(), self.position)
                self.position = changes[-1].pos  # a carried batch ends at its head
                if len(changes) == self.batch or self._more_carried():
                    continue
            if conn.is_closed():
                raise asyncpg.InterfaceError("listener connection closed")
            # A NOTIFY that landed during this pass may name entries the read did not see yet.
            # Under load the next NOTIFY follows within milliseconds, and reading after it
            # fans out both batches in one pass (a pass per NOTIFY cost 5-12% more CPU per
            # delivery in bench.fanout); when writes stop, LINGER bounds how long those
            # entries wait.
            timeout = LINGER if self._wake.is_set() else SAFETY_POLL
            self._wake.clear()
            await self._wake.wait(timeout)
