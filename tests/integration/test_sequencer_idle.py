"""The sequencer waits to be woken instead of polling: an idle server barely touches its
database, and writes made through one replica (whichever of the two leads) still reach a
subscriber on the other, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.api.test_health import own_database  # noqa: F401  (fixture: a database of our own)
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

WIDE = 60.0
WINDOW = 20.0  # seconds of idleness counted
# Idle, a server runs about 2.5 transactions a second (relay and leader safety polls); the
# busy-polling sequencer ran about 200. The bound sits far from both.
MAX_IDLE_TRANSACTIONS_PER_SECOND = 20


async def _transactions(url: str, name: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", name))
    finally:
        await conn.close()


def _settled(url: str, name: str) -> int:
    """The transaction count once a one-second sample stays under the idle allowance."""
    sample = 1.0  # seconds per poll of the statistics
    deadline = time.monotonic() + WIDE
    last = asyncio.run(_transactions(url, name))
    while time.monotonic() < deadline:
        time.sleep(sample)
        now = asyncio.run(_transactions(url, name))
        if now - last < MAX_IDLE_TRANSACTIONS_PER_SECOND:
            return now
        last = now
    raise AssertionError(f"the server never went quiet within {WIDE} s")


@pytest.fixture
def idle_server(own_database: tuple[str, str], tmp_path: Path) -> Iterator[ServerProcess]:  # noqa: F811
    proc = start_server(own_database[0], tmp_path)
    yield proc
    proc.stop()


def test_an_idle_server_runs_a_handful_of_transactions_a_second_not_hundreds(
        idle_server: ServerProcess, own_database: tuple[str, str], database_url: str) -> None:  # noqa: F811
    name = own_database[1]
    # Startup's own work (migrations check, first passes) is not idleness: wait until one
    # second passes quietly, however long a busy machine takes to get there.
    before = _settled(database_url, name)
    time.sleep(WINDOW)
    after = asyncio.run(_transactions(database_url, name))
    # Statistics reach pg_stat_database up to a few seconds late: the margin covers that.
    assert after - before < MAX_IDLE_TRANSACTIONS_PER_SECOND * WINDOW, after - before


def test_writes_through_one_replica_reach_a_subscriber_on_the_other_in_order(
        database_url: str, tmp_path: Path) -> None:
    shared = {"AUTHORIC_JWT_SECRET": "replicas-share-this-signing-key-0123456789"}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = start_server(database_url, tmp_path / "a", **shared)
    second = start_server(database_url, tmp_path / "b", **shared)
    try:
        with httpx.Client(base_url=first.url, timeout=30) as client:
            world = AppWorld.create(first, client)
            world.table("notes", [{"name": "body", "type": "text"}])
            world.role("clerk", ["notes:*"])
            member = world.caller(world.org("A"), ["clerk"])
            with SSEClient(first.url, f"{world.rows('notes')}/subscribe", member.token) as feed, \
                    httpx.Client(base_url=second.url, timeout=30) as other:
                feed.wait_connected(WIDE)
                member.client = other
                uids = [expect(member.post(world.rows("notes"), json={"body": str(i)}), 201)["uid"]
                        for i in range(5)]
                frames = [feed.wait_for_change(uid, "insert", WIDE) for uid in uids]
                assert [f.pos for f in frames] == sorted(f.pos for f in frames)
    finally:
        first.stop()
        second.stop()
