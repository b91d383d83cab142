"""The hub keeps its pool connection between fan-out passes that follow closely, and never
keeps it where a request could need it (realtime/kept.py), on a real asyncpg pool."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.catalog.snapshot import SnapshotCache
from authoric.db.engine import async_url, libpq_url
from authoric.plan.runner import open_pool
from authoric.realtime.hub import Hub, _Connections
from authoric.realtime.kept import KeptConnection

WIDE = 30.0  # seconds to wait for a condition on a slow box


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WIDE):
        while not check():
            await asyncio.sleep(0.005)


def lost(conn: Any) -> bool:
    """Whether the pool has seen `conn` closed (it then detaches the connection's proxy)."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True


async def kept_after_a_pass(pool: Any) -> tuple[KeptConnection, Any]:
    """A hub's kept connection after one clean pass (kept, unless the pool forbids it), and
    the connection that pass ran on."""
    kept = KeptConnection(pool, hold=60, clock=Clock())
    conn = await kept.take()
    await kept.give(conn, clean=True)
    return kept, conn


async def killed(pool: Any, conn: Any) -> int:
    """End `conn`'s backend as a restart would, and wait until the pool has seen it; its pid."""
    pid: int = conn.get_server_pid()
    async with pool.acquire() as other:
        await other.execute("SELECT pg_terminate_backend($1)", pid)
    await until(lambda: lost(conn))
    return pid


async def next_pass_runs_on_another(kept: KeptConnection, pid: int) -> None:
    fresh = await kept.take()
    assert fresh.get_server_pid() != pid
    assert await fresh.fetchval("SELECT 1") == 1
    await kept.give(fresh, clean=False)


def with_pool(database_url: str, size: int,
              body: Callable[[Any], Awaitable[None]]) -> None:
    async def main() -> None:
        pool = await open_pool(libpq_url(database_url), size, {})
        try:
            await body(pool)
        finally:
            await asyncio.wait_for(pool.close(), WIDE)

    asyncio.run(main())


def test_passes_that_follow_closely_run_on_one_connection_which_goes_back_once_they_stop(
        database_url: str) -> None:
    async def body(pool: Any) -> None:
        clock = Clock()
        kept = KeptConnection(pool, hold=0.02, clock=clock)
        first = await kept.take()
        await first.execute("SELECT 1")
        await kept.give(first, clean=True)
        assert kept.holding()
        # The hub's next pass, before `hold` has passed on its clock: the same connection,
        # however often the timer rings meanwhile.
        await asyncio.sleep(0.1)
        second = await kept.take()
        assert second is first
        await kept.give(second, clean=True)
        await asyncio.sleep(0.1)
        assert kept.holding(), "passes still follow closely by the hub's clock"
        clock.now += 1
        await until(lambda: not kept.holding() and pool.get_idle_size() == pool.get_size())
        await kept.close()

    with_pool(database_url, 4, body)


def test_a_failed_pass_gives_its_connection_back_to_the_pool_at_once(database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept = KeptConnection(pool, hold=60, clock=Clock())
        conn = await kept.take()
        await kept.give(conn, clean=False)
        assert not kept.holding()
        assert pool.get_idle_size() == pool.get_size()

    with_pool(database_url, 4, body)


def test_the_last_connection_a_request_could_get_is_never_kept(database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept, _ = await kept_after_a_pass(pool)
        assert not kept.holding()
        # A request gets it without waiting for the hold to end.
        request = await asyncio.wait_for(pool.acquire(), WIDE)
        assert await request.fetchval("SELECT 1") == 1
        await pool.release(request)

    with_pool(database_url, 1, body)


def test_whether_a_request_would_wait_agrees_with_the_pools_own_counts_at_every_fill(
        database_url: str) -> None:
    """The kept connection asks asyncpg's queue of free slots (one look) instead of walking
    every slot through the public counts: both must say the same, with slots connected,
    lent out or never yet connected."""
    async def body(pool: Any) -> None:
        kept = KeptConnection(pool, hold=60, clock=Clock())

        def by_counts() -> bool:
            return pool.get_idle_size() == 0 and pool.get_size() >= pool.get_max_size()

        lent = []
        for _ in range(pool.get_max_size()):
            assert kept._exhausted() is by_counts() is False
            lent.append(await asyncio.wait_for(pool.acquire(), WIDE))
        assert kept._exhausted() is by_counts() is True
        await pool.release(lent.pop())
        assert kept._exhausted() is by_counts() is False
        for conn in lent:
            await pool.release(conn)

    with_pool(database_url, 3, body)


def test_a_connection_postgresql_closed_is_never_kept(database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept = KeptConnection(pool, hold=60, clock=Clock())
        conn = await kept.take()
        pid = await killed(pool, conn)
        await kept.give(conn, clean=True)
        assert not kept.holding()
        await next_pass_runs_on_another(kept, pid)

    with_pool(database_url, 4, body)


def test_a_kept_connection_postgresql_closed_meanwhile_is_replaced_at_the_next_pass(
        database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept, conn = await kept_after_a_pass(pool)
        assert kept.holding()
        pid = await killed(pool, conn)
        await next_pass_runs_on_another(kept, pid)

    with_pool(database_url, 4, body)


def test_a_kept_connection_whose_protocol_failed_goes_back_so_its_slot_is_not_lost(
        database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept, conn = await kept_after_a_pass(pool)
        # What asyncpg does on a protocol error: the transport is aborted, and the pool's
        # slot stays taken until someone releases the connection.
        conn._con._protocol.abort()
        await until(lambda: lost(conn))
        fresh = await kept.take()
        assert await fresh.fetchval("SELECT 1") == 1
        await kept.give(fresh, clean=False)
        await kept.close()
        await until(lambda: pool.get_idle_size() == pool.get_size())

    with_pool(database_url, 4, body)


def test_a_pass_that_finds_the_pool_exhausted_queues_behind_the_waiting_requests(
        database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept, first = await kept_after_a_pass(pool)
        kept_pid = first.get_server_pid()
        assert kept.holding()
        busy = await pool.acquire()  # a request holds the pool's other connection
        waiting = asyncio.ensure_future(pool.acquire())  # and another waits for one
        await asyncio.sleep(0.05)
        assert not waiting.done()
        next_pass = asyncio.ensure_future(kept.take())
        served = await asyncio.wait_for(waiting, WIDE)
        assert served.get_server_pid() == kept_pid, "the waiting request gets the kept one"
        assert not next_pass.done(), "the pass queues behind the requests"
        await pool.release(busy)
        conn = await asyncio.wait_for(next_pass, WIDE)
        assert await conn.fetchval("SELECT 1") == 1
        await pool.release(served)
        await kept.give(conn, clean=False)

    with_pool(database_url, 2, body)


def test_the_hub_keeps_its_connection_after_a_clean_pass_and_not_after_a_failed_table(
        database_url: str) -> None:
    async def body(pool: Any) -> None:
        engine = create_async_engine(async_url(database_url))
        hub = Hub(engine, SnapshotCache(), pool)
        try:
            assert hub.kept is not None
            async with _Connections(hub) as conns:
                assert conns.raw is not None
                kept_raw = conns.raw
            assert hub.kept.holding()
            async with _Connections(hub) as conns:
                assert conns.raw is kept_raw
                await conns.failed()
            assert not hub.kept.holding()
            await hub.close()
            async with _Connections(hub):
                pass
            assert not hub.kept.holding(), "nothing is kept once the hub has closed"
            assert pool.get_idle_size() == pool.get_size()
        finally:
            await engine.dispose()

    with_pool(database_url, 4, body)


def test_closing_gives_back_the_kept_connection_so_the_pool_can_close(database_url: str) -> None:
    async def body(pool: Any) -> None:
        kept, _ = await kept_after_a_pass(pool)
        assert kept.holding()
        await kept.close()
        assert not kept.holding()
        assert pool.get_idle_size() == pool.get_size()

    with_pool(database_url, 4, body)
