"""The server-side SDK against the test database, next to a running server.

Callers: a background job acting as the app in one org (`as_app`), a script acting as an
app user (`as_user`) with that user's roles, row policies and redaction, and raw `sql()`.
Subscribers are HTTP clients of the running server: SDK writes reach them through the
change log, stamped by that server's sequencer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from authoric.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    TableLocked,
    Unauthenticated,
    ValidationFailed,
)
from authoric.records.conflicts import HiddenConflict
from authoric.sdk import Authoric
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess
from tests.sse import SSEClient, db_value


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
async def sdk(database_url: str) -> AsyncIterator[Authoric]:
    client = await Authoric.connect(database_url)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def shop(world: AppWorld) -> AppWorld:
    """Vendors and invoices in orgs A and B. `clerk` may do everything; `auditor` reads
    invoices that are not drafts, with `amount` redacted; `writer` may only create."""
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True}])
    world.table("invoices", [
        {"name": "number", "type": "text", "required": True, "unique": True},
        {"name": "status", "type": "text", "default": "draft"},
        {"name": "amount", "type": "numeric"},
        {"name": "vendor", "type": "reference", "references": "vendors"},
    ])
    world.role("clerk", ["invoices:*", "vendors:*"])
    world.role("auditor", ["invoices:read_list", "invoices:read"],
               row_policies={"invoices": {"status": {"ne": "draft"}}},
               redact={"invoices": ["amount"]})
    world.role("writer", ["invoices:create"])
    world.org("A")
    world.org("B")
    return world


def _feed(world: AppWorld, caller: Caller, table: str = "invoices") -> SSEClient:
    feed = SSEClient(world.server.url, f"{world.rows(table)}/subscribe", caller.token)
    feed.wait_connected()
    return feed


def _app_uid(world: AppWorld) -> uuid.UUID:
    return uuid.UUID(expect(world.admin.get(f"/admin/apps/{world.name}"), 200)["uid"])


def _log_count(database_url: str, world: AppWorld) -> int:
    return int(db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1",
                        _app_uid(world)))


async def _wait(feed: SSEClient, predicate: Any, timeout: float = 20) -> Any:
    return await asyncio.to_thread(feed.wait_for, predicate, timeout)


async def _chunks(data: bytes, size: int = 7) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


# as_app -----------------------------------------------------------------------------------

async def test_job_acting_as_the_app_writes_and_every_write_reaches_a_subscriber_of_its_org(
        shop: AppWorld, sdk: Authoric) -> None:
    clerk_a = shop.caller(shop.orgs["A"], ["clerk"])
    clerk_b = shop.caller(shop.orgs["B"], ["clerk"])
    with _feed(shop, clerk_a) as feed_a, _feed(shop, clerk_b) as feed_b:
        async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
            row = await s.create("invoices", {"number": "S-1", "amount": "12.50"})
            assert (row["number"], row["status"], row["amount"]) == ("S-1", "draft", "12.50")
            inserted = await _wait(feed_a, lambda f: f.is_change and f.op == "insert")
            assert inserted.data["row"] == row
            updated = await s.update("invoices", row["uid"], {"status": "approved"})
            frame = await _wait(feed_a, lambda f: f.is_change and f.op == "update")
            assert frame.data["row"] == updated and frame.pos > inserted.pos
            await s.delete("invoices", row["uid"])
            frame = await _wait(feed_a, lambda f: f.is_change and f.op == "delete")
            assert frame.data == {"op": "delete", "table": "invoices", "rowUid": row["uid"]}
            assert await s.import_csv("invoices", _chunks(b"number,amount\nI-1,1\nI-2,2\n")) == 2
            await _wait(feed_a, lambda f: f.is_change and f.op == "insert"
                        and f.data["row"]["number"] == "I-2")
            assert await s.bulk_update("invoices", {"status": "draft"}, {"status": "sent"}) == 2
            await _wait(feed_a, lambda f: f.event == "resync")
            assert await s.bulk_delete("invoices", {"status": "sent"}) == 2
            await asyncio.to_thread(feed_a.wait_until, lambda frames: sum(
                1 for f in frames if f.event == "resync") == 2)
        marker = expect(clerk_b.post(shop.rows("invoices"), json={"number": "B-m"}), 201)
        await asyncio.to_thread(feed_b.wait_for_change, marker["uid"], "insert")
        events_a = [f for f in feed_a.events() if f.event != "connected"]
        events_b = [f for f in feed_b.events() if f.event != "connected"]
    assert [f.op or f.event for f in events_a] == [
        "insert", "update", "delete", "insert", "insert", "resync", "resync"]
    assert [f.row_uid for f in events_b] == [marker["uid"]]


async def test_job_acting_as_the_app_is_confined_to_its_org(shop: AppWorld, sdk: Authoric) -> None:
    clerk_b = shop.caller(shop.orgs["B"], ["clerk"])
    theirs = expect(clerk_b.post(shop.rows("invoices"), json={"number": "B-1", "status": "open"}), 201)
    their_vendor = expect(clerk_b.post(shop.rows("vendors"), json={"name": "B Paper"}), 201)
    async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
        mine = await s.create("invoices", {"number": "A-1", "status": "open"})
        listed = await s.list("invoices")
        assert [r["uid"] for r in listed["items"]] == [mine["uid"]]
        with pytest.raises(NotFound):
            await s.read("invoices", theirs["uid"])
        with pytest.raises(NotFound):
            await s.update("invoices", theirs["uid"], {"status": "hijacked"})
        with pytest.raises(NotFound):
            await s.delete("invoices", theirs["uid"])
        assert await s.bulk_update("invoices", {"status": "open"}, {"status": "closed"}) == 1
        with pytest.raises(Conflict):
            await s.create("invoices", {"number": "A-2", "vendor_uid": their_vendor["uid"]})
        # Uniqueness is per org: B's number is free in A.
        await s.create("invoices", {"number": "B-1"})
        exported = b"".join([chunk async for chunk in s.export_csv("invoices")]).decode()
        assert "A-1" in exported and theirs["uid"] not in exported
        assert await s.bulk_delete("invoices", {"number": {"like": "%"}}) == 2
    assert expect(clerk_b.get(f"{shop.rows('invoices')}/{theirs['uid']}"), 200)["status"] == "open"


async def test_job_acting_as_the_app_gets_the_contract_errors(shop: AppWorld, sdk: Authoric) -> None:
    async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
        await s.create("invoices", {"number": "A-1"})
        with pytest.raises(Conflict):
            await s.create("invoices", {"number": "A-1"})
        with pytest.raises(ValidationFailed):
            await s.create("invoices", {"number": "A-2", "amount": "lots"})
        with pytest.raises(ValidationFailed):
            await s.create("invoices", {"number": "A-3", "uid": str(uuid.uuid4())})
        with pytest.raises(BadRequest):
            await s.list("invoices", {"nope": {"eq": 1}})
        with pytest.raises(BadRequest):
            await s.bulk_delete("invoices", {})
        with pytest.raises(NotFound):
            await s.list("nope")
        with pytest.raises(ValidationFailed) as refused:
            await s.import_csv("invoices", _chunks(b"number,amount\nA-9,1\nA-10,x\n"))
        assert refused.value.details["rows"] == [
            {"line": 3, "column": "amount", "message": refused.value.details["rows"][0]["message"]}]
        assert [r["number"] for r in (await s.list("invoices"))["items"]] == ["A-1"]
    # Operation switches govern the generic API: the app's own jobs still write; a user does not.
    expect(shop.admin.patch(f"{shop.base}/tables/invoices", json={"operations": {"create": False}}), 200)
    async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
        await s.create("invoices", {"number": "A-4"})
    clerk = shop.user()
    shop.member(shop.orgs["A"], clerk["uid"], ["clerk"])
    async with sdk.as_user(shop.name, clerk["uid"], shop.orgs["A"]) as s:
        with pytest.raises(TableLocked):
            await s.create("invoices", {"number": "A-5"})
        with pytest.raises(TableLocked):
            await s.import_csv("invoices", _chunks(b"number\nA-6\n"))
    with pytest.raises(NotFound):
        async with sdk.as_app("no_such_app", shop.orgs["A"]):
            pass
    with pytest.raises(NotFound):
        async with sdk.as_app(shop.name, str(uuid.uuid4())):
            pass
    with pytest.raises(NotFound):
        async with sdk.as_app(shop.name, "not-a-uuid"):
            pass


# as_user ----------------------------------------------------------------------------------

async def test_script_acting_as_a_user_gets_that_users_policy_and_redaction(
        shop: AppWorld, sdk: Authoric) -> None:
    clerk = shop.caller(shop.orgs["A"], ["clerk"])
    for number, status in [("D-1", "draft"), ("P-1", "paid"), ("P-2", "approved")]:
        expect(clerk.post(shop.rows("invoices"), json={"number": number, "status": status,
                                                       "amount": "5.00"}), 201)
    auditor = shop.user()
    shop.member(shop.orgs["A"], auditor["uid"], ["auditor"])
    over_http = shop.login(auditor, shop.orgs["A"])
    async with sdk.as_user(shop.name, auditor["uid"], shop.orgs["A"]) as s:
        listed = (await s.list("invoices"))["items"]
        assert listed == expect(over_http.get(shop.rows("invoices")), 200)["items"]
        assert [(r["number"], r["amount"]) for r in listed] == [("P-1", "[redacted]"),
                                                                ("P-2", "[redacted]")]
        draft = expect(clerk.get(shop.rows("invoices"), params={"number": "D-1"}), 200)["items"][0]
        with pytest.raises(NotFound):
            await s.read("invoices", draft["uid"])
        with pytest.raises(Forbidden):
            await s.create("invoices", {"number": "X-1"})
        with pytest.raises(Forbidden):
            await s.bulk_delete("invoices", {"status": "paid"})
        exported = b"".join([c async for c in s.export_csv("invoices")]).decode()
        assert "[redacted]" in exported and "5.00" not in exported and "D-1" not in exported
        # Roles are looked up per call: a change made over HTTP applies to the next one.
        shop.member(shop.orgs["A"], auditor["uid"], ["clerk"])
        assert len((await s.list("invoices"))["items"]) == 3
        expect(shop.admin.delete(f"{shop.base}/orgs/{shop.orgs['A']}/members/{auditor['uid']}"), 204)
        with pytest.raises(Unauthenticated):
            await s.list("invoices")


async def test_script_acting_as_a_user_writes_within_their_row_policy_and_subscribers_hear(
        shop: AppWorld, sdk: Authoric) -> None:
    shop.role("opener", ["invoices:*"], row_policies={"invoices": {"status": {"eq": "open"}}})
    opener = shop.user()
    shop.member(shop.orgs["A"], opener["uid"], ["opener"])
    clerk = shop.caller(shop.orgs["A"], ["clerk"])
    with _feed(shop, clerk) as feed:
        async with sdk.as_user(shop.name, opener["uid"], shop.orgs["A"]) as s:
            row = await s.create("invoices", {"number": "O-1", "status": "open"})
            frame = await asyncio.to_thread(feed.wait_for_change, row["uid"], "insert")
            assert frame.data["row"]["number"] == "O-1"
            with pytest.raises(Forbidden):
                await s.create("invoices", {"number": "O-2", "status": "closed"})
            with pytest.raises(Forbidden):
                await s.update("invoices", row["uid"], {"status": "closed"})
            with pytest.raises(Forbidden):
                await s.bulk_update("invoices", {"status": "open"}, {"status": "closed"})
            with pytest.raises(Forbidden):
                await s.import_csv("invoices", _chunks(b"number,status\nO-3,open\nO-4,closed\n"))
    listed = expect(clerk.get(shop.rows("invoices")), 200)["items"]
    assert [(r["number"], r["status"]) for r in listed] == [("O-1", "open")]


async def test_a_writer_who_may_not_read_gets_the_uid_alone(shop: AppWorld, sdk: Authoric) -> None:
    writer = shop.user()
    shop.member(shop.orgs["A"], writer["uid"], ["writer"])
    async with sdk.as_user(shop.name, writer["uid"], shop.orgs["A"]) as s:
        row = await s.create("invoices", {"number": "W-1"})
        assert set(row) == {"uid"}
        with pytest.raises(Forbidden):
            await s.list("invoices")


async def test_a_writer_colliding_with_a_row_they_may_not_read_gets_the_hidden_conflict(
        shop: AppWorld, sdk: Authoric) -> None:
    # The write fails inside its transaction; the pipeline explains the conflict on a second
    # transaction of the same session, as it does for a REST member.
    writer = shop.user()
    shop.member(shop.orgs["A"], writer["uid"], ["writer"])
    clerk = shop.caller(shop.orgs["A"], ["clerk"])
    expect(clerk.post(shop.rows("invoices"), json={"number": "H-1"}), 201)
    async with sdk.as_user(shop.name, writer["uid"], shop.orgs["A"]) as s:
        with pytest.raises(HiddenConflict):
            await s.create("invoices", {"number": "H-1"})
        assert set(await s.create("invoices", {"number": "H-2"})) == {"uid"}
    numbers = [r["number"] for r in expect(clerk.get(shop.rows("invoices")), 200)["items"]]
    assert sorted(numbers) == ["H-1", "H-2"]


async def test_as_user_refuses_unknown_users_and_users_outside_the_org(
        shop: AppWorld, sdk: Authoric) -> None:
    stranger = shop.user()
    shop.member(shop.orgs["B"], stranger["uid"], ["clerk"])
    with pytest.raises(NotFound):
        async with sdk.as_user(shop.name, str(uuid.uuid4()), shop.orgs["A"]):
            pass
    async with sdk.as_user(shop.name, stranger["uid"], shop.orgs["A"]) as s:
        with pytest.raises(Unauthenticated):
            await s.list("invoices")
    async with sdk.as_user(shop.name, stranger["uid"], shop.orgs["B"]) as s:
        assert (await s.list("invoices"))["items"] == []
    other = AppWorld.create(shop.server, shop.admin.client)
    with pytest.raises(NotFound):  # a user of another app
        async with sdk.as_user(other.name, stranger["uid"], shop.orgs["A"]):
            pass


# sql() ------------------------------------------------------------------------------------

async def test_raw_sql_writes_produce_no_event_and_no_log_entry(
        shop: AppWorld, sdk: Authoric, database_url: str) -> None:
    clerk = shop.caller(shop.orgs["A"], ["clerk"])
    schema = f"app_{_app_uid(shop).hex}"
    before = _log_count(database_url, shop)
    with _feed(shop, clerk) as feed:
        async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
            inserted = await s.sql(
                f'INSERT INTO "{schema}"."invoices" (uid, org_uid, number) '
                "VALUES (:uid, :org, 'RAW-1') RETURNING uid",
                {"uid": uuid.uuid4(), "org": uuid.UUID(shop.orgs["A"])})
            assert len(inserted) == 1
            assert await s.sql(f'UPDATE "{schema}"."invoices" SET status = \'x\'') == []
            assert _log_count(database_url, shop) == before
            marker = await s.create("invoices", {"number": "M-1"})
        await asyncio.to_thread(feed.wait_for_change, marker["uid"], "insert")
        changes = feed.changes()
    assert [f.row_uid for f in changes] == [marker["uid"]]
    numbers = [r["number"] for r in expect(clerk.get(shop.rows("invoices")), 200)["items"]]
    assert sorted(numbers) == ["M-1", "RAW-1"]
    assert _log_count(database_url, shop) == before + 1


async def test_concurrent_sessions_share_one_sdk(shop: AppWorld, sdk: Authoric) -> None:
    async def one(i: int) -> dict[str, Any]:
        async with sdk.as_app(shop.name, shop.orgs["A" if i % 2 else "B"]) as s:
            return await s.create("invoices", {"number": f"C-{i}"})

    rows = await asyncio.gather(*(one(i) for i in range(20)))
    assert len({r["uid"] for r in rows}) == 20
    async with sdk.as_app(shop.name, shop.orgs["A"]) as s:
        assert len((await s.list("invoices"))["items"]) == 10


async def test_a_job_naming_an_org_by_a_name_two_orgs_share_is_refused_and_given_the_uid_works(
        shop: AppWorld, sdk: Authoric) -> None:
    """Orgs users create may share a name: a name that is not one org's is 409, never a guess."""
    expect(shop.admin.patch(shop.base, json={"settings": {"orgCreation": "users"}}), 200)
    made = [expect(shop.login(shop.user()).post(f"/{shop.name}/orgs", json={"name": "Twin"}),
                   201)["org"]["uid"] for _ in range(2)]
    with pytest.raises(Conflict):
        async with sdk.as_app(shop.name, "Twin") as s:
            await s.list("invoices")
    async with sdk.as_app(shop.name, made[0]) as s:
        assert (await s.list("invoices"))["items"] == []
