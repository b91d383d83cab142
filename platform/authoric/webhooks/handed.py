"""What the relay handed on lately: the log's newest entries, kept so a webhook that is caught
up takes its changes from memory instead of reading the log again.

The relay hands its sink every entry in position order, each batch saying the position it
follows on from (`after`: every entry in (after, last] is in the batch; realtime/source.py).
`Handed` keeps an unbroken run of such batches, at most `LIMIT` entries: the newest of the
log, from `start` (exclusive) to `end`. A webhook whose cursor is at or past `start` finds
there every entry after its cursor that the log holds up to `end`, exactly what a read of the
log by position (`Source.entries`) would give it. A batch that does not follow on from `end`
(this process just started) starts the run again, and so does the sink's saying it is empty
(nobody here listens, so the relay may skip entries without handing them on: `clear`). A
cursor before `start` (a webhook that fell behind, was paused, or is replayed) reads the log
as before, and so does one with an entry after it older than half the log's retention: the
log's horizon then decides whether retention removed it, exactly as without this memory.

At 200 writes/s over 100 webhooks, the two statements a caught-up webhook's pass saved (the
entries and the log's bounds) were half of its database round trips
(docs/benchmarks-realtime.md, "Webhooks").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from authoric.realtime.source import Change

LIMIT = 20_000  # entries kept: at 500 writes/s, 40 s of the log


@dataclass
class Handed:
    """An unbroken run of the log's newest entries: every entry in (`start`, `end`]."""

    limit: int = LIMIT
    start: int = -1  # -1: nothing kept yet
    end: int = -1
    _changes: list[Change] = field(default_factory=list)
    _positions: list[int] = field(default_factory=list)

    def add(self, changes: Sequence[Change], after: int) -> None:
        """A batch the relay handed on; `after`: the position it follows on from (-1:
        unknown: the run starts again at the batch's end)."""
        if not changes:
            return
        last = changes[-1].pos
        if after < 0:
            self._changes, self._positions, self.start, self.end = [], [], last, last
            return
        if after != self.end:
            self._changes, self._positions, self.start = [], [], after
        self._changes.extend(changes)
        self._positions.extend(c.pos for c in changes)
        self.end = last
        excess = len(self._changes) - self.limit
        if excess > self.limit // 4:  # cut in steps: cutting a list's front copies the rest
            self.start = self._positions[excess - 1]
            del self._changes[:excess], self._positions[:excess]

    def clear(self) -> None:
        """Forget the run: the relay may skip entries from here (its sink said it was
        empty)."""
        self._changes, self._positions, self.start, self.end = [], [], -1, -1

    def after(self, cursor: int, scope: Callable[[Change], bool], limit: int,
              written_since: float) -> tuple[list[Change], int] | None:
        """The entries after `cursor` that `scope` takes, at most `limit`, and the position up
        to which they are all of them (`end`, or the last taken when `limit` cut them short);
        None when the run does not reach back to `cursor`, or when an entry after it was
        written before `written_since` (epoch seconds): read the log instead, whose horizon
        says whether retention has removed it (a webhook that kept failing, or stayed paused,
        past the log's retention then gets its `backfill_expired` resync, as the contract
        has it, not entries the log no longer holds)."""
        if self.start < 0 or cursor < self.start:
            return None
        taken: list[Change] = []
        for change in self._changes[bisect.bisect_right(self._positions, cursor):]:
            if change.at < written_since:
                return None
            if scope(change):
                taken.append(change)
                if len(taken) == limit:
                    return taken, change.pos
        return taken, self.end
