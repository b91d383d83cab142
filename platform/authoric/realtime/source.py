"""The seam between the stream transport and where changes come from (ADR-0045's `Source`).

The transport (`stream.py`, `hub.py`, `judge.py`: frames, resume, pings, overflow, reauth,
judging) consumes a `Source` and knows nothing of how a source stores its changes. A source
promises two things:
- `entries(...)` and `bounds()`: what was changed, by position, for a resume
  (`Last-Event-ID`), with the head and the retention horizon;
- once started, it hands its `Sink` (the hub) every later change in ascending positions, and
  a position it handed on is never followed by a lower one: a client that has seen position
  P has seen, or been judged for, every position below P that will ever exist.

The platform's change log (`changes/outbox.py`) is the default source. SQL capture (tables
with `captureSqlWrites`, `changes/capture.py`) writes into that same log from inside the
database, so captured and platform writes share one order of positions.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from authoric.db.changelog import BULK, SCHEMA

# A position as text (a client's Last-Event-ID, a head a NOTIFY names): ASCII digits only, at
# most 19 (a bigint); "+5", "1_0", "٣" or "²" are not positions, though int() or isdigit() take some.
POSITION = re.compile(r"[0-9]{1,19}")
# The entries that stand for many rows, and the `resync` reason each one sends.
RESYNC_REASONS = {BULK: "bulk_change", SCHEMA: "schema_change"}


@dataclass(frozen=True)
class Change:
    """One change to one row (or, for `bulk`, to many rows of one org) of an app's table."""

    pos: int
    app_uid: uuid.UUID
    table: str
    op: str
    row_uid: uuid.UUID | None
    org_uid: uuid.UUID
    old_row: dict[str, Any] | None  # a delete's row as it stood, for judging
    at: float = 0.0  # when it was written (epoch seconds), for the delivery-latency histogram
    # The app's version as of the read that found this change (None: not read with it, or
    # the app is gone): the hub judges on it instead of asking again.
    version: int | None = None


class Sink(Protocol):
    """What a source feeds: the hub."""

    def empty(self) -> bool:
        """No stream is registered: changes up to the head may be skipped, not read."""
        ...

    async def dispatch(self, changes: Sequence[Change], read_at: float, after: int = -1) -> None:
        """Fan out one batch, ascending positions; `read_at` is when the source read it;
        `after`: the position it follows on from, every entry in (after, its last] being in
        it (-1: not said)."""
        ...

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        """Roles, members or keys of these apps (None: of any app, as after a reconnect)
        changed (a policy NOTIFY, from any process): streams re-read who they serve now,
        not at their org's next change."""
        ...


class Source(Protocol):
    @property
    def position(self) -> int:
        """The last position handed to the sink (-1: not started)."""
        ...

    def start(self, sink: Sink) -> None:
        """Begin handing changes after the current head to `sink`."""
        ...

    async def stop(self) -> None:
        ...

    def listening(self) -> bool:
        """Changes reach the sink now (readiness)."""
        ...

    async def bounds(self, conn: asyncpg.Connection | None = None) -> tuple[int, int]:
        """(head, horizon): the highest position, and the highest one retention removed.
        `conn`: read there (a caller that holds a connection: the webhook worker); else on
        a connection of the source's own."""
        ...

    async def entries(self, app_uid: uuid.UUID, tables: Sequence[str], org_uid: uuid.UUID | None,
                      after: int, upto: int, limit: int,
                      conn: asyncpg.Connection | None = None) -> list[Change]:
        """Changes of `tables` in (after, upto], of one org (None: every org), at most `limit`
        (`conn` as for `bounds`)."""
        ...
