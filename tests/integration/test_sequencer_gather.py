"""An operator's `AUTHORIC_FEED_GATHER_MS` (changes/sequencer.py), on a real PostgreSQL.

The operator trades latency for feed CPU: the sequencer's leader, woken by a commit, waits that
long before stamping, and what is committed meanwhile shares its stamping pass and its one
NOTIFY, so every process fans the changes out in one pass. Callers: a writer committing
change-log rows as the write services do, and nudging the sequencer after each commit, as a
commit in the leader's own process does.

Nothing depends on how fast the box is. The gathering's wait is injected and held open by the
test until both commits are in. The leader is woken first by a nudge alone, so the pass it
makes on taking the lead is over before anything is committed. Its safety poll is an hour
away and its connection has no idle limit, so no pass runs except the one after the
gathering.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg

from authoric.changes.sequencer import CHANNEL, Sequencer
from authoric.db.engine import libpq_url
from authoric.settings import Settings
from tests.api.test_health import own_database  # noqa: F401  (fixture: a database of our own)
from tests.integration.test_sequencer_stall import WIDE, until

INSERT = ("INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
          "VALUES ($1, 'notes', 'insert', $2, $3)")


async def test_two_commits_made_while_the_leader_gathers_for_the_operators_time_share_one_notify(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    url = libpq_url(own_database[0])
    asked: list[float] = []
    gathering, released = asyncio.Event(), asyncio.Event()

    async def held_sleep(seconds: float) -> None:
        asked.append(seconds)
        gathering.set()
        await released.wait()

    # No safety poll and no idle limit within the test's reach: the only pass is the gathered one.
    sequencer = Sequencer(Settings(feed_gather_ms=40), url, safety_poll=3600, idle_limit=None,
                          sleep=held_sleep)
    heard: list[str] = []
    listener = await asyncpg.connect(url)
    writer = await asyncpg.connect(url)
    try:
        await listener.add_listener(CHANNEL, lambda *args: heard.append(args[3]))
        sequencer.start()
        await until(lambda: sequencer.leader, "the sequencer never took the lead")
        app, org = uuid.uuid4(), uuid.uuid4()
        first, second = uuid.uuid4(), uuid.uuid4()

        sequencer.nudge()
        await asyncio.wait_for(gathering.wait(), WIDE)  # the leader is gathering
        for row in (first, second):
            await writer.execute(INSERT, app, row, org)
            sequencer.nudge()
        released.set()

        await until(lambda: bool(heard), "nothing was stamped")
        unstamped = await writer.fetchval("SELECT count(*) FROM authoric.changes WHERE pos IS NULL")
    finally:
        released.set()
        await sequencer.stop()
        await listener.close()
        await writer.close()

    assert asked[0] == 0.04  # the operator's 40 ms, not the default 5
    assert unstamped == 0
    [announced] = heard  # one stamping pass, one NOTIFY
    entries = json.loads(announced)["entries"]
    assert [uuid.UUID(entry[4]) for entry in entries] == [first, second]
