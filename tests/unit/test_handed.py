"""The relay's recent batches as a webhook's pass finds them (webhooks/handed.py): a pass
takes from memory exactly what a read of the log after its cursor would give, or is told to
read the log."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from authoric.realtime.source import Change
from authoric.settings import Settings
from authoric.webhooks.handed import Handed
from authoric.webhooks.worker import Deliverer, Tee

APP = uuid.uuid4()
HERE, THERE = uuid.uuid4(), uuid.uuid4()
ANY_AGE = 0.0  # `written_since`: every entry is recent enough
WRITTEN = 1_000_000.0  # when the entries below were written (epoch seconds)


def entries(*positions: int, org: uuid.UUID = HERE, at: float = WRITTEN) -> list[Change]:
    return [Change(p, APP, "invoices", "insert", uuid.uuid4(), org, None, at)
            for p in positions]


def here(change: Change) -> bool:
    return change.org_uid == HERE


def positions(found: tuple[list[Change], int] | None) -> tuple[list[int], int] | None:
    return None if found is None else ([c.pos for c in found[0]], found[1])


def test_a_caught_up_webhook_finds_every_entry_after_its_cursor_up_to_the_last_handed() -> None:
    handed = Handed()
    handed.add(entries(11, 12), after=10)
    handed.add(entries(13) + entries(14, org=THERE) + entries(16), after=12)
    assert positions(handed.after(10, here, 100, ANY_AGE)) == ([11, 12, 13, 16], 16)
    assert positions(handed.after(13, here, 100, ANY_AGE)) == ([16], 16)
    assert positions(handed.after(16, here, 100, ANY_AGE)) == ([], 16)


def test_a_cursor_before_what_was_kept_is_told_to_read_the_log() -> None:
    handed = Handed()
    assert handed.after(0, here, 100, ANY_AGE) is None  # nothing handed yet
    handed.add(entries(11, 12), after=10)
    assert handed.after(9, here, 100, ANY_AGE) is None


def test_a_batch_that_does_not_follow_on_starts_the_run_again() -> None:
    handed = Handed()
    handed.add(entries(11, 12), after=10)
    handed.add(entries(21), after=20)  # 13-20 skipped while nobody listened
    assert handed.after(12, here, 100, ANY_AGE) is None
    assert positions(handed.after(20, here, 100, ANY_AGE)) == ([21], 21)


def test_a_batch_whose_start_is_not_said_keeps_nothing_before_its_end() -> None:
    handed = Handed()
    handed.add(entries(11, 12), after=10)
    handed.add(entries(13, 14), after=-1)
    assert handed.after(12, here, 100, ANY_AGE) is None
    assert positions(handed.after(14, here, 100, ANY_AGE)) == ([], 14)
    handed.add(entries(15), after=14)
    assert positions(handed.after(14, here, 100, ANY_AGE)) == ([15], 15)


def test_a_limit_cuts_the_entries_short_and_says_where() -> None:
    handed = Handed()
    handed.add(entries(*range(1, 11)), after=0)
    assert positions(handed.after(0, here, 3, ANY_AGE)) == ([1, 2, 3], 3)


def test_the_oldest_entries_are_let_go_past_the_limit_and_a_cursor_there_reads_the_log() -> None:
    handed = Handed(limit=8)
    for start in range(0, 40, 4):
        handed.add(entries(*range(start + 1, start + 5)), after=start)
    assert handed.start > 0 and handed.end == 40
    assert handed.after(0, here, 100, ANY_AGE) is None
    found = positions(handed.after(handed.start, here, 100, ANY_AGE))
    assert found == (list(range(handed.start + 1, 41)), 40)


def test_a_cursor_followed_by_an_entry_written_too_long_ago_is_told_to_read_the_log() -> None:
    # Retention may have removed it: the log's horizon decides (a resync), not this memory.
    handed = Handed()
    handed.add(entries(11, at=WRITTEN - 100) + entries(12, 13), after=10)
    assert handed.after(10, here, 100, WRITTEN - 50) is None
    assert positions(handed.after(11, here, 100, WRITTEN - 50)) == ([12, 13], 13)


def test_forgetting_the_run_sends_every_cursor_to_the_log() -> None:
    handed = Handed()
    handed.add(entries(11, 12), after=10)
    handed.clear()
    assert handed.after(10, here, 100, ANY_AGE) is None
    handed.add(entries(14), after=13)  # the relay skipped 13 meanwhile
    assert handed.after(12, here, 100, ANY_AGE) is None


class Nobody:
    """A hub with no stream open."""

    def empty(self) -> bool:
        return True

    async def dispatch(self, changes: Sequence[Change], read_at: float, after: int = -1) -> None:
        pass

    async def policy_changed(self, app_uids: set[uuid.UUID] | None) -> None:
        pass


def test_a_relay_told_that_nobody_listens_leaves_the_webhooks_nothing_to_take_from_memory() -> None:
    # Told so, the relay may skip entries without handing them on; a webhook claimed right
    # after must then read them from the log, not find the run unbroken and miss them.
    deliverer = Deliverer(Settings(), cast(Any, None), cast(Any, None), cast(Any, None))
    tee = Tee(Nobody(), deliverer)
    deliverer.heard(entries(11, 12), after=10)
    assert deliverer.handed.after(10, here, 100, ANY_AGE) is not None
    assert tee.empty()
    assert deliverer.handed.after(10, here, 100, ANY_AGE) is None
