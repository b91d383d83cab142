"""A sequencer leader whose connection stalls (changes/sequencer.py, db/dedicated.py).

A proxy or a NAT can freeze a connection while its TCP stays open: no error, no close, no
reply. When that connection is the sequencer leader's, nothing is stamped (so nothing is
delivered, by any process) for as long as its backend lives and holds the advisory lock.

In process, on a real PostgreSQL: two sequencers on a database of their own, the first
reaching it through the chaos run's proxy (bench/chaos.py). Callers: a writer committing a
change-log row as the write services do, in the process of the second sequencer, which
nudges it after the commit. The first leads; then its path to the database freezes for good
(its connection frozen, new connections refused). The bounds are injected smaller than in
production (stall bound 1 s, idle limit 3 s, safety poll 0.5 s) so the test runs in seconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import asyncpg
from bench.chaos import Proxy, upstream
from sqlalchemy.engine import make_url

from authoric.changes.sequencer import LOCK_KEY, Sequencer
from authoric.db.dedicated import STALL
from authoric.db.engine import libpq_url
from authoric.settings import Settings
from tests.api.test_health import own_database  # noqa: F401  (fixture: a database of our own)

WIDE = 60.0
# Who holds the leader lock in this test's database: pg_locks lists the whole cluster's, and
# servers of other tests lead in databases of their own.
HOLDER = ("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = $1 "
          "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
BOUNDS = {"safety_poll": 0.5, "stall": 1.0, "idle_limit": 3.0}


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WIDE
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_change_committed_after_the_leaders_connection_froze_is_stamped_by_the_other(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    url = libpq_url(own_database[0])
    proxy = Proxy(upstream(url))
    await proxy.start()
    frozen = Sequencer(Settings(), proxy.url(url), **BOUNDS)
    other = Sequencer(Settings(), url, **BOUNDS)
    writer = await asyncpg.connect(url)
    try:
        frozen.start()
        await until(lambda: frozen.leader, "the proxied sequencer never took the lead")
        other.start()
        await until(lambda: other.connected, "the second sequencer never connected")
        links = proxy.leader_links()
        assert len(links) == 1

        links[0].flowing.clear()  # never thawed
        assert proxy.server is not None
        proxy.server.close()  # and its reconnects are refused: the leader's network is gone

        change = await writer.fetchval(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "VALUES ($1, 'notes', 'insert', $2, $3) RETURNING id",
            uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
        other.nudge()  # after the commit, as the write services do

        deadline = time.monotonic() + WIDE
        while await writer.fetchval("SELECT pos FROM authoric.changes WHERE id = $1",
                                    change) is None:
            assert time.monotonic() < deadline, (
                f"never stamped: leader {frozen.leader} (stalls {frozen.stalls}) / "
                f"{other.leader}")
            await asyncio.sleep(0.1)
        assert other.leader  # stamped by the other one: the frozen one has no connection
        await until(lambda: frozen.stalls >= 1 and not frozen.connected,
                    "the frozen leader never gave up its connection")
    finally:
        await frozen.stop()
        await other.stop()
        await writer.close()
        await proxy.stop()


async def test_a_frozen_leader_is_ended_and_replaced_by_a_follower_within_seconds(
        own_database: tuple[str, str]) -> None:  # noqa: F811
    """Production bounds (stall 10 s, idle limit 20 s): neither of them acts in time here; the
    follower sees the leader's backend silent past LEADER_SILENCE (3 s), ends it and leads."""
    url = libpq_url(own_database[0])
    proxy = Proxy(upstream(url))
    await proxy.start()
    frozen = Sequencer(Settings(), proxy.url(url))
    other = Sequencer(Settings(), url)
    writer = await asyncpg.connect(url)
    try:
        frozen.start()
        await until(lambda: frozen.leader, "the proxied sequencer never took the lead")
        other.start()
        await until(lambda: other.connected, "the second sequencer never connected")
        holder = await writer.fetchval(
            HOLDER, LOCK_KEY)
        proxy.leader_links()[0].flowing.clear()  # frozen, TCP left open, never thawed
        frozen_at = time.monotonic()
        change = await writer.fetchval(
            "INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid) "
            "VALUES ($1, 'notes', 'insert', $2, $3) RETURNING id",
            uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
        other.nudge()
        deadline = time.monotonic() + WIDE
        while await writer.fetchval("SELECT pos FROM authoric.changes WHERE id = $1",
                                    change) is None:
            assert time.monotonic() < deadline, "never stamped"
            await asyncio.sleep(0.05)
        took = time.monotonic() - frozen_at
        print(f"frozen leader replaced after {took:.2f} s")
        # (>= 1: a second look 50 ms later may find the ended backend still shutting down.)
        assert other.leader and other.unseated >= 1
        # Before PostgreSQL's idle limit or our stall bound could have acted: the takeover did.
        assert took < STALL
        async def ended() -> bool:
            return not await writer.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", holder)

        deadline = time.monotonic() + WIDE
        while not await ended():  # the frozen session was ended, its lock with it
            assert time.monotonic() < deadline, "the frozen leader's session lives on"
            await asyncio.sleep(0.05)
    finally:
        await frozen.stop()
        await other.stop()
        await writer.close()
        await proxy.stop()


async def test_a_follower_never_ends_a_silent_leader_of_another_database_on_the_cluster(
        own_database: tuple[str, str], database_url: str) -> None:  # noqa: F811
    """Two deployments share one PostgreSQL: each leads in a database of its own. A follower
    of ours ends only our silent leader, never the other deployment's, silent as it is."""
    url = libpq_url(own_database[0])
    neighbour = f"authoric_neighbour_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(libpq_url(database_url))
    await admin.execute(f'CREATE DATABASE "{neighbour}"')
    theirs = await asyncpg.connect(libpq_url(
        make_url(database_url).set(database=neighbour).render_as_string(hide_password=False)))
    ours = await asyncpg.connect(url)
    follower = Sequencer(Settings(), url, **BOUNDS)
    try:
        for holder in (theirs, ours):  # both lead, then fall silent
            assert await holder.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY)
        their_pid = theirs.get_server_pid()
        follower.leader_silence = 0.5
        follower.start()
        await until(lambda: follower.leader, "our silent leader was never replaced")
        assert follower.unseated == 1
        # The neighbour's session is alive and still holds its lock.
        assert await theirs.fetchval("SELECT 1") == 1
        assert await theirs.fetchval(HOLDER, LOCK_KEY) == their_pid
    finally:
        await follower.stop()
        await theirs.close()
        if not ours.is_closed():
            await ours.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{neighbour}"')
        await admin.close()
