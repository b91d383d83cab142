"""What the feed's judge decided per read class and change, kept for a moment so that a
webhook judged as the same read class in this process reuses it instead of re-reading.

A webhook with a `role` is judged as a read class of the change's org (webhooks/events.py),
keyed as a stream's class is (realtime/classes.py): a member's stream with the same key reads
exactly what the webhook reads. So when the hub has just judged a batch for that class, the
webhook's own re-read of the same rows would only repeat it (contract section 8: "what a
member of the event's org holding `role` would receive on its stream").

- The hub records verdicts only for the classes a webhook of this process asked for
  (`want`); with no webhook, recording costs one dictionary lookup per class and batch.
- A verdict is reused only on the catalog version it was judged on, and only while fresh
  (`FRESH` seconds): a first delivery right after the stream's frame is judged as the
  stream's was, and a retry (at least 5 s later, webhooks/backoff.py) re-reads at delivery.
- A webhook reuses an org's verdicts only when every change of its batch in that org has
  one; otherwise it re-reads that org's changes itself, as without any stream.
- At most `LIMIT` verdicts are kept, the oldest dropped first, and a class no webhook asked
  for in `ASKED` seconds is no longer recorded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from authoric.realtime.source import Change

FRESH = 2.0  # seconds a verdict stays reusable (retries wait 5 s at least)
ASKED = 300.0  # seconds a class stays recorded after a webhook last judged as it
LIMIT = 50_000  # verdicts kept at most (each holds a reference to a row already rendered)

Scope = tuple[uuid.UUID, int, str, Hashable]  # app, catalog version, table, read class key


@dataclass(frozen=True)
class Verdict:
    """One change as one read class judged it."""

    row: dict[str, Any] | None  # the row as the class reads it (None: not visible to it)
    seen: bool  # a delete: whether the class could read the row as it stood
    at: float  # when it was judged (`Verdicts.now`)


class Verdicts:
    """The hub's recent verdicts for the classes webhooks asked for (one per process)."""

    def __init__(self, now: Callable[[], float] = time.monotonic, limit: int = LIMIT) -> None:
        self.now = now
        self.limit = limit
        self._wanted: dict[Scope, float] = {}  # scope -> when a webhook last asked for it
        self._kept: dict[tuple[Scope, int], Verdict] = {}  # (scope, position) -> verdict

    def want(self, scope: Scope) -> None:
        """A webhook judges as this class: record the hub's verdicts for it."""
        now = self._wanted[scope] = self.now()
        if len(self._wanted) > self.limit:  # classes of versions long gone: forget them
            self._wanted = {s: at for s, at in self._wanted.items() if now - at <= ASKED}

    def wanted(self, scope: Scope) -> bool:
        asked = self._wanted.get(scope)
        if asked is None:
            return False
        if self.now() - asked > ASKED:
            del self._wanted[scope]
            return False
        return True

    def keep(self, scope: Scope, change: Change, row: dict[str, Any] | None,
             seen: bool) -> None:
        """Record how the class judged `change` (the hub, right after judging it)."""
        self._kept[(scope, change.pos)] = Verdict(row, seen, self.now())
        while len(self._kept) > self.limit:
            del self._kept[next(iter(self._kept))]

    def reused(self, scope: Scope, changes: Sequence[Change]) -> list[Verdict] | None:
        """The class's fresh verdicts for every one of `changes`, in their order, or None when
        any is missing or stale (the caller then judges them all itself)."""
        now = self.now()
        found = []
        for change in changes:
            verdict = self._kept.get((scope, change.pos))
            if verdict is None or now - verdict.at > FRESH:
                return None
            found.append(verdict)
        return found
