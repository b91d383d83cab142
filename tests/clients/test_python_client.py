"""The Python client (`authoric-client`) against a real server: an app developer signs in,
reads and writes rows, hears about changes, and gets the server's refusals as AuthoricError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from authoric_client import AsyncClient, AuthoricError, Client, Event
from tests.clients.python_client_world import Shop, shop
from tests.scenario import AppWorld
from tests.servers import ServerProcess
from tests.waiting import wait_until


@pytest.fixture
def acme(world: AppWorld) -> Shop:
    return shop(world)


@pytest.fixture
def db(server: ServerProcess, acme: Shop) -> Iterator[Client]:
    with Client(server.url, acme.world.name) as client:
        client.auth.sign_in(acme.email, acme.password)
        yield client


def _ops(events: list[Event[dict[str, object]]]) -> list[str]:
    return [e.op for e in events]


def test_member_creates_reads_lists_updates_and_deletes_a_row(db: Client) -> None:
    invoices = db.table("invoices")
    row = invoices.create({"number": "A-1", "amount": "10.00", "status": "draft"})
    assert row["number"] == "A-1" and row["amount"] == "10.00" and row["vendor_uid"] is None
    assert invoices.get(row["uid"]) == row
    changed = invoices.update(row["uid"], {"status": "paid"})
    assert changed["status"] == "paid" and changed["updatedAt"] >= row["updatedAt"]
    page = invoices.list(filter={"status": "paid"}, order="-createdAt", limit=10)
    assert [r["uid"] for r in page.items] == [row["uid"]] and page.next is None
    invoices.delete(row["uid"])
    with pytest.raises(AuthoricError) as gone:
        invoices.get(row["uid"])
    assert (gone.value.status, gone.value.code) == (404, "NOT_FOUND")


def test_member_pages_through_a_list_with_the_next_cursor(db: Client) -> None:
    invoices = db.table("invoices")
    made = [invoices.create({"number": f"P-{i}", "seq": i})["uid"] for i in range(5)]
    first = invoices.list(order="seq", limit=3)
    second = invoices.list(order="seq", limit=3, after=first.next)
    assert [r["uid"] for r in first.items + second.items] == made and second.next is None


def test_member_gets_a_reference_expanded_on_read_list_and_writes_and_counts_what_a_filter_matches(
        db: Client) -> None:
    invoices = db.table("invoices")
    acme = db.table("vendors").create({"name": "Acme"})
    made = invoices.create({"number": "E-1", "status": "open", "seq": 1,
                            "vendor_uid": acme["uid"]}, expand=["vendor"])
    assert made["expand"] == {"vendor": acme}
    assert invoices.update(made["uid"], {"seq": 2}, expand=["vendor"])["expand"]["vendor"] == acme
    assert invoices.get(made["uid"], expand=["vendor"])["expand"]["vendor"] == acme
    assert "expand" not in invoices.get(made["uid"])
    for i in range(3, 7):
        invoices.create({"number": f"E-{i}", "status": "open" if i % 2 else "closed", "seq": i})
    page = invoices.list(filter={"status": "open"}, order="seq", limit=2, expand=["vendor"],
                         count=True)
    assert [(r["number"], r["expand"]["vendor"]) for r in page.items] == [("E-1", acme), ("E-3", None)]
    assert page.total == 3  # every matching row, not the page's two
    rest = invoices.list(filter={"status": "open"}, order="seq", limit=2, after=page.next,
                         count="exact")
    assert ([r["number"] for r in rest.items], rest.total) == (["E-5"], 3)
    assert invoices.list(count=True).total == 5
    assert invoices.list(filter={"seq": {"gt": 100}}, count=True).total == 0
    assert invoices.list().total is None
    with pytest.raises(AuthoricError) as bad:
        invoices.list(expand=["number"])
    assert (bad.value.status, bad.value.code) == (400, "BAD_REQUEST")


def test_an_async_member_gets_the_same_expansion_and_count(server: ServerProcess,
                                                            acme: Shop) -> None:
    async def run() -> None:
        async with AsyncClient(server.url, acme.world.name) as client:
            await client.auth.sign_in(acme.email, acme.password)
            vendor = await client.table("vendors").create({"name": "Initech"})
            invoices = client.table("invoices")
            await invoices.create({"number": "A-1", "vendor_uid": vendor["uid"]})
            page = await invoices.list(expand=["vendor"], count=True)
            assert [r["expand"]["vendor"]["name"] for r in page.items] == ["Initech"]
            assert page.total == 1

    asyncio.run(run())


def test_refusals_raise_authoric_error_with_the_contracts_status_code_and_details(
        db: Client) -> None:
    invoices = db.table("invoices")
    with pytest.raises(AuthoricError) as bad:
        invoices.create({"nope": 1})
    assert (bad.value.status, bad.value.code) == (422, "VALIDATION_FAILED")
    assert {"column": "nope", "message": "unknown column"} in bad.value.details["errors"]
    invoices.create({"number": "U-1"})
    with pytest.raises(AuthoricError) as taken:
        invoices.create({"number": "U-1"})
    assert (taken.value.status, taken.value.code) == (409, "CONFLICT")
    with pytest.raises(AuthoricError) as unknown:
        invoices.list(filter={"status": {"almost": "x"}})
    assert (unknown.value.status, unknown.value.code) == (400, "BAD_REQUEST")
    with pytest.raises(AuthoricError) as missing:
        db.table("no_such_table").list()
    assert missing.value.code == "NOT_FOUND"


def test_a_wrong_password_is_401_unauthenticated_and_no_session_is_kept(
        server: ServerProcess, acme: Shop) -> None:
    with Client(server.url, acme.world.name) as client:
        with pytest.raises(AuthoricError) as refused:
            client.auth.sign_in(acme.email, "wrong")
        assert (refused.value.status, refused.value.code) == (401, "UNAUTHENTICATED")
        with pytest.raises(AuthoricError) as anonymous:
            client.table("invoices").list()
        assert anonymous.value.code == "UNAUTHENTICATED"


def test_signing_out_revokes_the_refresh_token(server: ServerProcess, acme: Shop,
                                               http: httpx.Client) -> None:
    with Client(server.url, acme.world.name) as client:
        pair = client.auth.sign_in(acme.email, acme.password)
        client.auth.sign_out()
    again = http.post(f"/{acme.world.name}/auth/refresh",
                      json={"refresh_token": pair["refresh_token"]})
    assert again.status_code == 401


def test_bulk_writes_return_counts_and_refuse_an_empty_filter_before_sending(db: Client) -> None:
    invoices = db.table("invoices")
    for i in range(3):
        invoices.create({"number": f"B-{i}", "status": "draft"})
    assert invoices.update_where({"status": "draft"}, {"status": "sent"}) == 3
    assert invoices.delete_where({"status": "sent"}) == 3
    with pytest.raises(AuthoricError) as refused:
        invoices.delete_where({})
    assert (refused.value.status, refused.value.code) == (400, "BAD_REQUEST")
    assert invoices.list().items == []


def test_csv_import_counts_rows_and_a_bad_line_writes_nothing(db: Client) -> None:
    invoices = db.table("invoices")
    assert invoices.import_csv("number,amount\nC-1,1.50\nC-2,2\n") == 2
    with pytest.raises(AuthoricError) as bad:
        invoices.import_csv("number,amount\nC-3,1\nC-4,not a number\n")
    assert bad.value.code == "VALIDATION_FAILED"
    assert bad.value.details["rows"][0]["line"] == 3
    assert sorted(r["number"] for r in invoices.list().items) == ["C-1", "C-2"]


def test_a_subscriber_hears_inserts_updates_deletes_and_a_bulk_resync(db: Client) -> None:
    invoices = db.table("invoices")
    with invoices.subscribe() as sub:
        events = [sub.next(60)]
        assert events[0].op == "connected" and sub.status == "live"
        # Each row is re-read when its event is delivered: wait for each before the next write.
        row = invoices.create({"number": "S-1", "status": "draft"})
        events.append(sub.next(60))
        invoices.update(row["uid"], {"status": "paid"})
        events.append(sub.next(60))
        invoices.delete(row["uid"])
        events.append(sub.next(60))
        invoices.create({"number": "S-2", "status": "draft"})
        events.append(sub.next(60))
        invoices.update_where({"status": "draft"}, {"status": "void"})
        events.append(sub.next(60))
    assert _ops(events) == ["connected", "insert", "update", "delete", "insert", "resync"]
    assert events[1].row is not None and events[1].row["uid"] == row["uid"]
    assert events[2].row is not None and events[2].row["status"] == "paid"
    assert events[3].row_uid == row["uid"] and events[3].row is None
    assert events[5].reason == "bulk_change" and events[5].table == "invoices"
    ids = [int(e.id) for e in events[1:] if e.id is not None]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == 5
    assert sub.status == "closed"


def test_a_subscriber_hears_each_status_from_connecting_on_the_first_connection(
        db: Client) -> None:
    heard: list[str] = []
    with db.table("invoices").subscribe(on_status=heard.append) as sub:
        assert sub.next(60).op == "connected"
        assert heard == ["connecting", "live"]
    assert heard == ["connecting", "live", "closed"]


def test_a_subscriber_resumes_from_last_event_id_and_misses_nothing(db: Client) -> None:
    invoices = db.table("invoices")
    with invoices.subscribe() as sub:
        assert sub.next(60).op == "connected"
        invoices.create({"number": "R-1"})
        assert sub.next(60).op == "insert"
        position = sub.last_event_id
    written = [invoices.create({"number": f"R-{i}"})["uid"] for i in range(2, 5)]
    with invoices.subscribe(last_event_id=position) as resumed:
        heard = [resumed.next(60) for _ in range(4)]
    inserts = [e.row["uid"] for e in heard if e.op == "insert" and e.row is not None]
    assert heard[0].op == "connected" and inserts == written


def test_one_stream_for_two_tables_names_each_events_table(db: Client) -> None:
    with db.subscribe(["invoices", "vendors"]) as sub:
        connected = sub.next(60)
        assert connected.op == "connected" and connected.tables == ["invoices", "vendors"]
        vendor = db.table("vendors").create({"name": "Acme"})
        db.table("invoices").create({"number": "M-1", "vendor_uid": vendor["uid"]})
        first, second = sub.next(60), sub.next(60)
    assert (first.table, first.op) == ("vendors", "insert")
    assert (second.table, second.op) == ("invoices", "insert")
    assert second.row is not None and second.row["vendor_uid"] == vendor["uid"]


def test_a_stream_the_member_may_not_read_ends_with_its_403(server: ServerProcess,
                                                            acme: Shop) -> None:
    world = acme.world
    world.role("vendors_only", ["vendors:*"])
    user = world.user()
    world.member(acme.org, user["uid"], ["vendors_only"])
    with Client(server.url, world.name) as client:
        client.auth.sign_in(user["email"], user["password"])
        with client.table("invoices").subscribe() as sub, pytest.raises(AuthoricError) as refused:
            sub.next(60)
    assert (refused.value.status, refused.value.code) == (403, "FORBIDDEN")


async def test_the_async_client_has_the_same_surface(server: ServerProcess, acme: Shop) -> None:
    async with AsyncClient(server.url, acme.world.name) as client:
        await client.auth.sign_in(acme.email, acme.password, org=acme.org)
        invoices = client.table("invoices")
        async with invoices.subscribe() as sub:
            heard = [await asyncio.wait_for(anext(sub), 60)]
            row = await invoices.create({"number": "AS-1", "seq": 1})
            heard.append(await asyncio.wait_for(anext(sub), 60))
            assert (await invoices.get(row["uid"]))["seq"] == 1
            await invoices.update(row["uid"], {"seq": 2})
            heard.append(await asyncio.wait_for(anext(sub), 60))
            assert [r["seq"] for r in (await invoices.list()).items] == [2]
            await invoices.delete(row["uid"])
            heard.append(await asyncio.wait_for(anext(sub), 60))
        assert [e.op for e in heard] == ["connected", "insert", "update", "delete"]
        with pytest.raises(AuthoricError) as gone:
            await invoices.get(row["uid"])
        assert gone.value.status == 404
        live = invoices.live_query(order="-seq", limit=2)
        assert await live.ready() == []
        for seq in (5, 9, 7):
            await invoices.create({"number": f"AS-{seq}", "seq": seq})
        async with asyncio.timeout(60):
            while [r["seq"] for r in live.rows] != [9, 7]:
                await asyncio.sleep(0.02)
        await live.close()


def test_wait_until_fails_loudly_when_the_condition_never_holds() -> None:
    with pytest.raises(AssertionError):
        wait_until(lambda: False, "nothing", timeout=0.1)
