"""Sessions through the Python client: refreshing once for every caller, so the refresh
token's family survives; a stream told to `reauth` refreshes and resumes without a gap.

Token expiry is moved with the server's test clock (AUTHORIC_TEST_CLOCK_FILE), and the client's
own clock is injected: nothing sleeps through a token's life.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from authoric_client import AsyncClient, AuthoricError, Client
from tests.api.test_sessions import clocked_server  # noqa: F401 (a server on the test clock)
from tests.clients.python_client_world import Shop, shop
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess
from tests.waiting import wait_until

TTL = 60


@dataclass
class Clocked:
    server: ServerProcess
    world: AppWorld
    acme: Shop
    clock_file: Path

    def advance(self, seconds: float) -> None:
        """Move the server's clock: its tokens age by `seconds` at once."""
        self.clock_file.write_text(str(float(self.clock_file.read_text()) + seconds))


@pytest.fixture
def clocked(clocked_server: tuple[ServerProcess, Path]) -> Iterator[Clocked]:  # noqa: F811
    proc, clock_file = clocked_server
    clock_file.write_text("0")
    with httpx.Client(base_url=proc.url, timeout=30) as http:
        world = AppWorld.create(proc, http)
        expect(world.admin.patch(world.base, json={"settings": {"accessTokenTtl": TTL}}), 200)
        yield Clocked(proc, world, shop(world), clock_file)


class FakeClock:
    """The client's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_many_async_calls_just_after_expiry_refresh_once_and_the_family_survives(
        clocked: Clocked) -> None:
    async with AsyncClient(clocked.server.url, clocked.world.name) as db:
        await db.auth.sign_in(clocked.acme.email, clocked.acme.password)
        invoices = db.table("invoices")
        await invoices.create({"number": "T-1"})
        clocked.advance(TTL + 1)  # every call now meets 401 TOKEN_EXPIRED first
        pages = await asyncio.gather(*(invoices.list() for _ in range(20)))
        assert all(len(page.items) == 1 for page in pages)
        assert db.auth.refreshes == 1
        clocked.advance(TTL + 1)  # the refreshed family still refreshes: nobody reused a token
        await asyncio.gather(*(invoices.create({"number": f"T-{i}"}) for i in range(2, 12)))
        assert db.auth.refreshes == 2
        assert len((await invoices.list()).items) == 11


def test_many_threads_sharing_a_blocking_client_refresh_once(clocked: Clocked) -> None:
    with Client(clocked.server.url, clocked.world.name) as db:
        db.auth.sign_in(clocked.acme.email, clocked.acme.password)
        invoices = db.table("invoices")
        clocked.advance(TTL + 1)
        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(lambda i: invoices.create({"number": f"X-{i}"}), range(16)))
        assert len({row["uid"] for row in made}) == 16
        assert db.auth.refreshes == 1
        db.auth.sign_out()


async def test_a_token_in_the_last_tenth_of_its_life_is_refreshed_before_the_call(
        clocked: Clocked) -> None:
    clock = FakeClock()
    async with AsyncClient(clocked.server.url, clocked.world.name, clock=clock) as db:
        await db.auth.sign_in(clocked.acme.email, clocked.acme.password)
        before = db.auth.tokens
        clock.now += TTL * 0.85
        await db.table("invoices").list()
        assert db.auth.refreshes == 0 and db.auth.tokens == before
        clock.now += TTL * 0.06  # 91% of its life: refreshed first, never refused
        await asyncio.gather(*(db.table("invoices").list() for _ in range(10)))
        assert db.auth.refreshes == 1 and db.auth.tokens != before


async def test_a_revoked_family_raises_unauthenticated_and_forgets_the_session(
        clocked: Clocked) -> None:
    async with AsyncClient(clocked.server.url, clocked.world.name) as db:
        pair = await db.auth.sign_in(clocked.acme.email, clocked.acme.password)
        stolen = httpx.post(f"{clocked.server.url}/{clocked.world.name}/auth/refresh",
                            json={"refresh_token": pair["refresh_token"]})
        assert stolen.status_code == 200  # someone else spent the refresh token
        clocked.advance(TTL + 1)
        with pytest.raises(AuthoricError) as refused:
            await db.table("invoices").list()
        assert (refused.value.status, refused.value.code) == (401, "UNAUTHENTICATED")
        assert db.auth.tokens is None


def test_a_stream_told_to_reauth_refreshes_and_resumes_without_missing_a_write(
        clocked: Clocked) -> None:
    """The one test that lets real time pass: the server ends a stream at the token's real
    expiry. The token is issued 50 s "old" (the server's clock moved back), so it lives 10 s;
    nothing here asserts how soon after that the reauth comes."""
    writer_email, writer_password = clocked.acme.member()
    clock = FakeClock()  # the subscriber's client never refreshes by itself
    with Client(clocked.server.url, clocked.world.name, clock=clock) as db, \
            Client(clocked.server.url, clocked.world.name) as writer:
        writer.auth.sign_in(writer_email, writer_password)
        clocked.advance(-(TTL - 10))
        db.auth.sign_in(clocked.acme.email, clocked.acme.password)
        clocked.advance(TTL - 10)  # refreshed tokens live their whole 60 s
        written: list[str] = []
        heard: list[str] = []
        with db.table("invoices").subscribe() as sub:
            assert sub.next(60).op == "connected"
            while sub.connections < 2:  # write until the stream has been reopened
                written.append(writer.table("invoices").create({"number": f"W-{len(written)}"})["uid"])
                event = sub.next(60)
                if event.op == "insert" and event.row is not None:
                    heard.append(event.row["uid"])
            for _ in range(3):  # and while it resumes
                written.append(writer.table("invoices").create({"number": f"W-{len(written)}"})["uid"])
            wait_until(lambda: _drain(sub, heard) and len(heard) >= len(written), "every write")
        assert heard == written
        assert db.auth.refreshes == 1


def _drain(sub: object, heard: list[str]) -> bool:
    from authoric_client import Subscription

    assert isinstance(sub, Subscription)
    try:
        event = sub.next(0.5)
    except TimeoutError:
        return True
    if event.op == "insert" and event.row is not None:
        heard.append(event.row["uid"])
    return True
